"""The IPv6 address plan, its layout commands and both engines' IPv6 forms (no root)."""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from swell.analysis.bottleneck import only_hosts, touches_hosts, without_hosts
from swell.analysis.timeseries import (
    address_directions,
    load_packets,
    make_packets,
    syn_directions,
)
from swell.errors import SwellError
from swell.placement import Endpoint, Local, Placement
from swell.topologies import linkemu, netem
from swell.topologies.addressing import check_plan, plan_addresses
from swell.topologies.engines import NetemEngine, native_config
from swell.topologies.layout import EDGE, SIDES, Layout, sysctls_for
from swell.topologies.spec import LinkDir, spec_from_dict
from swell.topologies.topology import resolve_host_links
from tests.conftest import SHARED_DATA

V6 = ipaddress.IPv6Network
A6 = ipaddress.IPv6Address


def spec6(network="fd00:5e11::/48", **kw):
    base = {
        "network": network,
        "bottleneck": {"rate_mbps": 20, "delay_ms": 10},
        "clients": {"count": 5, "namespaces": 2, "access": {"delay_ms": 2, "rate_mbps": 10}},
        "servers": {"count": 3, "access": {"delay_ms": 4}},
        "foreground": {"clients": 1, "servers": 1},
    }
    return spec_from_dict({**base, **kw})


def test_spec_takes_an_ipv6_unique_local_network():
    s = spec6()
    assert s.network == V6("fd00:5e11::/48") and s.network.version == 6
    # the JSON round trip (experiment results, state.json) gives the same spec
    assert spec_from_dict(s.model_dump(mode="json")).network == s.network
    # IPv4 stays the default
    assert spec_from_dict({"bottleneck": {"rate_mbps": 1}}).network.version == 4


@pytest.mark.parametrize(
    ("network", "message"),
    [
        ("2001:4860::/48", "not inside the unique local range fc00::/7"),
        ("fd00:5e11::/64", "too small: give at least a /60"),
        ("fd00:5e11::1/48", "not an IPv6 network"),
        ("fd00:zz::/48", "not an IPv6 network"),
    ],
)
def test_spec_rejects_bad_ipv6_networks(network, message):
    with pytest.raises(SwellError, match=message):
        spec6(network)


def test_plan_gives_each_namespace_a_64_and_each_side_a_transit_64():
    plan = plan_addresses(spec6())
    assert plan.version == 6
    assert plan.halves == {"left": V6("fd00:5e11::/49"), "right": V6("fd00:5e11:0:8000::/49")}
    subnets = {n.suffix: n.subnet for n in plan.nodes}
    assert subnets == {
        "c0": V6("fd00:5e11::/64"),
        "c1": V6("fd00:5e11:0:1::/64"),
        "fc0": V6("fd00:5e11:0:2::/64"),
        "s0": V6("fd00:5e11:0:8000::/64"),
        "fs0": V6("fd00:5e11:0:8001::/64"),
    }
    c0 = plan.nodes[0]
    assert c0.gateway == A6("fd00:5e11::1")
    assert c0.hosts == (A6("fd00:5e11::2"), A6("fd00:5e11::3"), A6("fd00:5e11::4"))
    assert plan.nodes[1].first_index == 3  # the second block of clients starts at host 3
    left, right = plan.transit["left"], plan.transit["right"]
    assert left.subnet == V6("fd00:5e11:0:7fff::/64")  # the last /64 of the left half
    assert (left.edge_ip, left.core_ip) == (A6("fd00:5e11:0:7fff::1"), A6("fd00:5e11:0:7fff::2"))
    assert right.subnet == V6("fd00:5e11:0:ffff::/64")
    assert [str(h) for h in plan.bg_hosts("right")] == [
        "fd00:5e11:0:8000::2", "fd00:5e11:0:8000::3", "fd00:5e11:0:8000::4"]


def test_largest_spec_fits_a_56_and_not_a_60():
    big = {"count": 4096, "namespaces": 64, "access": {}}
    fg = {"clients": 10, "servers": 10}
    plan = plan_addresses(spec6("fd00:1:2:300::/56", clients=big, servers=big, foreground=fg))
    check_plan(plan)
    hosts = [h for n in plan.nodes for h in n.hosts]
    assert len(hosts) == len(set(hosts)) == 2 * 4096 + 20
    assert all(n.subnet.prefixlen == 64 and n.subnet.subnet_of(plan.network) for n in plan.nodes)
    with pytest.raises(SwellError, match="no room"):
        plan_addresses(spec6("fd00:1:2:30::/60", clients=big, servers=big, foreground=fg))


def test_ipv4_plan_is_unchanged():
    s = spec_from_dict({"network": "10.1.0.0/16", "bottleneck": {"rate_mbps": 1},
                        "clients": {"count": 5, "namespaces": 2, "access": {}}})
    plan = plan_addresses(s)
    assert plan.version == 4
    assert [str(n.subnet) for n in plan.nodes] == [
        "10.1.0.0/29", "10.1.0.8/29", "10.1.0.16/30", "10.1.128.0/30"]
    assert str(plan.transit["left"].subnet) == "10.1.127.252/30"
    assert str(plan.transit["right"].core_ip) == "10.1.255.254"


def test_sysctls_turn_ipv6_off_then_on_without_address_generation():
    ifs = ["sw1a2b-c0-eth0"]
    keys = [k for k, _ in sysctls_for(6, True, ifs)]
    values = dict(sysctls_for(6, True, ifs))
    # off first (drops the link-local addresses made when Mininet set the links up) ...
    assert keys.index("net.ipv6.conf.all.disable_ipv6") < keys.index(
        "net.ipv6.conf.sw1a2b-c0-eth0.addr_gen_mode")
    # ... and on last, so no interface generates an address or runs DAD
    assert keys[-1] == "net.ipv6.conf.all.disable_ipv6" and values[keys[-1]] == "0"
    assert values["net.ipv6.conf.sw1a2b-c0-eth0.addr_gen_mode"] == "1"
    assert values["net.ipv6.conf.default.accept_dad"] == "0"
    assert values["net.ipv6.conf.all.forwarding"] == "1"
    # the native engine's core (no forwarding) keeps IPv6 off, as does an IPv4 plan
    for off in (sysctls_for(6, False, ifs), sysctls_for(4, True, ifs)):
        assert dict(off)["net.ipv6.conf.all.disable_ipv6"] == "1"
        assert not any("addr_gen_mode" in k for k, _ in off)
    assert dict(sysctls_for(6, False, ifs))["net.ipv4.ip_forward"] == "0"
    # emulated hosts reuse TIME_WAIT ports (many users behind one address); routers do not
    assert dict(sysctls_for(4, True, ifs, host=True))["net.ipv4.tcp_tw_reuse"] == "1"
    assert "net.ipv4.tcp_tw_reuse" not in dict(sysctls_for(4, True, ifs))


def test_netem_access_filters_match_ipv6_addresses():
    net = V6("fd00:5e11:0:8000::/64")
    hosts = [(A6("fd00:5e11:0:8000::2"), LinkDir(rate_mbps=10, delay_ms=5)),
             (A6("fd00:5e11:0:8000::1ff"), LinkDir())]
    up = [" ".join(c) for c in netem.access_cmds("x", hosts, "src", net)]
    assert up[1] == "filter add dev x parent 1: prio 1 handle 100: protocol ipv6 u32 divisor 256"
    assert up[2] == ("filter add dev x parent 1: prio 1 protocol ipv6 u32 ht 800:: match ip6 "
                     "src fd00:5e11:0:8000::/64 hashkey mask 0x000000ff at 20 link 100:")
    assert up[5] == ("filter add dev x parent 1: prio 1 protocol ipv6 u32 ht 100:2: match ip6 "
                     "src fd00:5e11:0:8000::2/128 flowid 1:2")
    assert up[8].endswith("ht 100:ff: match ip6 src fd00:5e11:0:8000::1ff/128 flowid 1:3")
    down = netem.to_batch(netem.access_cmds("x", hosts, "dst", net))
    assert "match ip6 dst fd00:5e11:0:8000::/64 hashkey mask 0x000000ff at 36 link 100:" in down
    with pytest.raises(ValueError, match="not in"):
        netem.access_cmds("x", [(A6("fd00:5e11::2"), LinkDir())], "dst", net)


def laid_out6(kernel_forwarding):
    plan = plan_addresses(spec6())
    lay = Layout("sw1a2b", plan, kernel_forwarding)
    for port, side in enumerate(SIDES):
        edge = lay.name(EDGE[side])
        lay.core_port[side], lay.edge_uplink[side] = f"sw1a2b-r-eth{port}", f"{edge}-eth0"
        for k, node in enumerate(plan.side_nodes(side), start=1):
            lay.host_intf[node.suffix] = f"{lay.name(node.suffix)}-eth0"
            lay.edge_intf[node.suffix] = f"{edge}-eth{k}"
    for i, name in enumerate([*lay.core_port.values(), *lay.edge_uplink.values()]):
        lay.macs[name] = f"02:00:00:00:00:{i:02x}"
    return lay


def test_both_engines_take_an_ipv6_layout(tmp_path):
    s = spec6()
    lay = laid_out6(kernel_forwarding=False)
    hosts = resolve_host_links(s, lay.plan)
    cfg = native_config(lay, hosts, s, tmp_path, {"forward": tmp_path / "f.pcap"})
    assert {(r.prefix, r.port) for r in cfg.routes} == {
        ("fd00:5e11::/49", "left"), ("fd00:5e11:0:8000::/49", "right")}
    assert all(p.gateway_ips == () for p in cfg.ports)  # no ARP to answer
    assert {h.ip for h in cfg.hosts} >= {"fd00:5e11::2", "fd00:5e11:0:8000::4"}
    again = linkemu.EngineConfig.from_json(cfg.to_json())
    assert again == cfg
    with pytest.raises(SwellError, match="not an IPv4 or IPv6 address"):
        linkemu.HostLink("fd00::zz", cfg.hosts[0].up, cfg.hosts[0].down)
    batches = NetemEngine().batches(laid_out6(True), hosts, s)
    text = netem.to_batch(batches["el"])
    assert "match ip6 dst fd00:5e11::/64" in text and "match ip6 dst fd00:5e11:0:1::/64" in text


def test_endpoint_family_and_url_host():
    e6 = Endpoint("fd00:5e11::2", Local(), "c0")
    e4 = Endpoint("10.1.0.2", Local(), "c0")
    assert (e6.family, e6.url_host) == (6, "[fd00:5e11::2]")
    assert (e4.family, e4.url_host) == (4, "10.1.0.2")
    assert Placement(bg_clients=(e6,)).family == 6 and Placement().family == 4


def test_analysis_splits_ipv6_hosts_on_all_128_bits():
    # two hosts on opposite sides share their low word (::2 in two /64s)
    c, s = "fd00:5e11::2", "fd00:5e11:0:8000::2"
    other = "fd00:5e11:0:8000::3"
    p = make_packets(np.arange(4), np.full(4, 100), sport=np.array([40000, 80, 40001, 80]),
                     dport=np.array([80, 40000, 80, 40001]), proto=np.full(4, 6),
                     tcp_flags=np.array([0x02, 0x12, 0x02, 0x12]),
                     saddr=[c, s, c, other], daddr=[s, c, other, c])
    assert touches_hosts(p, [s]).tolist() == [True, True, False, False]
    assert len(only_hosts(p, [other])) == 2 and len(without_hosts(p, [s, other])) == 0
    assert touches_hosts(p, ["10.0.0.2"]).tolist() == [False] * 4  # families never mix
    assert syn_directions(p)["c2s"].tolist() == [True, False, True, False]
    assert address_directions(p, "fd00:5e11::/49")["out"].tolist() == [True, False, True, False]
    with pytest.raises(SwellError, match="not an IP address"):
        touches_hosts(p, ["fd00::zz"])


def test_a_real_ipv6_capture_reads_and_splits():
    """pinterest.pcap (nDPI's test set): 911 IPv6 packets; sizes and the host filter."""
    path = SHARED_DATA / "pcap" / "ndpi" / "pinterest.pcap"
    if not path.is_file():
        pytest.skip(f"shared capture {path} is not on this machine")
    p = load_packets(path)
    assert len(p) == 911
    # frame length = IPv6 payload + 40 + 14: a bare ACK with timestamps is 86 bytes
    assert int(p.size[0]) == 86 and int(p.proto[0]) == 6
    # every packet has the client; one server: tcpdump 'host 64:ff9b::9765:7854' counts 72
    assert touches_hosts(p, ["2a01:cb01:2049:8b07:991d:ec85:28df:f629"]).all()
    server = touches_hosts(p, ["64:ff9b::9765:7854"])
    assert int(server.sum()) == 72
    # the same address spelled out in full selects the same packets
    full = ipaddress.IPv6Address("64:ff9b::9765:7854").exploded
    assert (touches_hosts(p, [full]) == server).all()
    dirs = syn_directions(p)
    assert int(dirs["c2s"].sum()) + int(dirs["s2c"].sum()) == len(p)
