"""Layout steps without machines: what is rendered, what a machine's state leaves to do.

The machine's state is read from the same text iproute2, sysctl and ethtool print (the
lines below are their output, as captured on a laid-out edge machine and router); a
machine where everything is in place gets no command, one where nothing is gets every
step, grouped, with the undo of each (previous sysctl values, the offloads that were on).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from swell.errors import SwellError
from swell.topologies.addressing import plan_addresses
from swell.topologies.spec import spec_from_dict
from swell.topologies.testbed import host_vars, load_hosts, plan_testbed
from swell.topologies.testbed_host import resolve_ifaces
from swell.topologies.testbed_steps import MachineState, batches, pending
from swell.topologies.topology import resolve_host_links

from .test_testbed_render import HOSTS, SPEC

ETHTOOL_ON = """Features for exp0:
tcp-segmentation-offload: on
\ttx-tcp-segmentation: on
generic-segmentation-offload: on
generic-receive-offload: off
large-receive-offload: off [fixed]
"""
ETHTOOL_OFF = ETHTOOL_ON.replace(": on", ": off")


class Captured(MachineState):
    """A machine's state from captured command output (argv joined -> stdout)."""

    def __init__(self, outputs: dict[str, str], netns: set[str] = frozenset()) -> None:
        super().__init__()
        self.outputs, self.netns = outputs, set(netns)

    def _read(self, what, netns, key, argv):
        return self.outputs.get(" ".join(argv))


def _vars(tmp_path, **groups):
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(HOSTS))
    hf = load_hosts(path)
    spec = spec_from_dict({**SPEC, **groups})
    links = resolve_host_links(spec, plan_addresses(spec))
    plan = plan_testbed(spec, {k: list(v) for k, v in links.items()}, hf, "swl0001",
                        congestion_control="reno")
    return host_vars(plan, hf)


def test_an_edge_machine_with_nothing_laid_out_gets_every_step(tmp_path):
    v = _vars(tmp_path)["s0"]["swell_host"]
    state = Captured({"ip -o link show": "3: eth1@if4: <BROADCAST,MULTICAST> mtu 1500\n",
                      "ethtool -k eth1": ETHTOOL_ON, "ip -o addr show": "",
                      "sysctl -n net.ipv4.tcp_congestion_control": "cubic\n",
                      "sysctl -n net.ipv4.tcp_tw_reuse": "2\n"})
    todo = pending(v["steps"], state)
    assert len(todo) == len(v["steps"]) == 1 + 1 + 2 + 1 + 1 + 2  # up, /30, 2 aliases, ...
    items = batches(todo)
    assert [i["argv"] for i in items] == [
        ["ip", "-batch", "-"], ["ethtool", "-K", "eth1", "tso", "off", "gso", "off"],
        ["sysctl", "-qw", "net.ipv4.tcp_congestion_control=reno", "net.ipv4.tcp_tw_reuse=1"]]
    lines = items[0]["stdin"].splitlines()
    assert lines[0] == "link set dev eth1 up" and lines[1].startswith("addr add 172.30.")
    assert lines[-1].startswith("route add 10.78.0.0/16 via 172.30.") and " src " in lines[-1]
    undo = [s["undo"] for s in todo if s["undo"]]
    assert ["ethtool", "-K", "eth1", "tso", "on", "gso", "on"] in undo  # gro was off
    assert ["sysctl", "-qw", "net.ipv4.tcp_congestion_control=cubic"] in undo
    assert ["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=2"] in undo
    assert sum(u[:3] == ["ip", "addr", "del"] for u in undo) == 3


def test_an_edge_machine_laid_out_gets_nothing(tmp_path):
    v = _vars(tmp_path)["s0"]["swell_host"]
    addrs = "".join(f"3: eth1    inet {s['check']['addr']} scope global eth1\\ ok\n"
                    for s in v["steps"] if "addr" in s["check"])
    route = next(s for s in v["steps"] if "route" in s["check"])
    state = Captured({
        "ip -o link show": "3: eth1@if4: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500\n",
        "ethtool -k eth1": ETHTOOL_OFF, "ip -o addr show": addrs,
        "ip route show table all": f"{' '.join(route['args'][2:])}\n"
                                   "local 172.30.0.10 dev eth1 table local proto kernel\n",
        "sysctl -n net.ipv4.tcp_congestion_control": "reno\n",
        "sysctl -n net.ipv4.tcp_tw_reuse": "1\n"})
    assert pending(v["steps"], state) == []
    # another gateway for the experiment's network is not this layout's route
    state.outputs["ip route show table all"] = "10.78.0.0/16 via 172.30.9.9 dev eth1\n"
    state._cache.clear()
    assert [s["what"] for s in pending(v["steps"], state)] == [route["what"]]


def test_quickack_aliases_get_a_table_and_a_rule_each(tmp_path):
    """A group's quick-ack hosts (swell.topologies.quickack) on the machine that carries
    them: the experiment's route with quickack in table 7703, one rule per alias and
    port (each checked and undone by its own preference), the same hosts as locally."""
    from swell.topologies.quickack import chosen_hosts

    clients = {**SPEC["clients"], "quickack": [{"port": 443, "share": 0.6}]}
    servers = {**SPEC["servers"], "quickack": [{"port": 443, "share": 1.0}]}
    hv = _vars(tmp_path, clients=clients, servers=servers)
    rules = {m: [s["args"] for s in hv[m]["swell_host"]["steps"] if s["args"][0] == "rule"]
             for m in ("c0", "c1", "s0", "fc")}
    assert [r[5] for r in rules["s0"]] == ["10.78.128.2", "10.78.128.3"]
    assert all(r[6:10] == ["ipproto", "tcp", "sport", "443"] for r in rules["s0"])
    assert rules["fc"] == []
    chosen = {r[5] for m in ("c0", "c1") for r in rules[m]}
    spec = spec_from_dict({**SPEC, "clients": clients})
    hosts = [str(h) for h in plan_addresses(spec).bg_hosts("left")]
    assert chosen == set(chosen_hosts(hosts, 0.6, 3, 443, "left")) and len(chosen) == 3
    steps = hv["s0"]["swell_host"]["steps"]
    route = next(s for s in steps if s["check"].get("table") == "7703")
    assert route["args"][-2:] == ["quickack", "1"]
    prefs = [s["check"]["rule"] for s in steps if "rule" in s["check"]]
    assert prefs == ["7800", "7801"]
    assert [s["undo"] for s in steps if "rule" in s["check"]] == [
        ["ip", "rule", "del", "pref", p] for p in prefs]
    # laid out but for the second rule: only that rule is left to do
    state = Captured({"ip rule show": "0:\tfrom all lookup local\n7800:\tfrom 10.78.128.2 "
                                      "ipproto tcp sport 443 lookup 7703\n",
                      "ip route show table all": f"{' '.join(route['args'][2:])}\n"})
    todo = [s["what"] for s in pending(steps, state)
            if "rule" in s["check"] or s["check"].get("table")]
    assert todo == ["rule 7801: 10.78.128.3 ACKs every segment (sport 443)"]


def test_the_router_builds_its_core_first_and_shapes_only_with_netem(tmp_path):
    v = _vars(tmp_path)["core"]["swell_host"]
    empty = Captured({f"ethtool -k eth{i}": ETHTOOL_OFF for i in range(1, 6)} |
                     {"sysctl -n net.ipv4.ip_forward": "0\n",
                      "sysctl -n net/ipv4/conf/all/rp_filter": "2\n"})
    native = [s for s in v["steps"] if s.get("engine") in (None, "native")]
    items = batches(pending(native, empty))
    assert [i["argv"] for i in items[:3]] == [
        ["ip", "netns", "add", "swl0001-core"], ["ip", "-batch", "-"],
        ["ip", "-n", "swl0001-core", "-batch", "-"]]
    assert "stdin" not in items[0]  # alone, its own command (see router_steps)
    assert items[1]["stdin"].startswith("link add swl0001l ")
    assert not any(i["argv"][0] == "tc" for i in items)
    sysctl = next(i for i in items if "sysctl" in i["argv"])
    assert "net.ipv4.ip_forward=1" in sysctl["argv"] and \
        "net/ipv4/conf/swl0001l/rp_filter=0" in sysctl["argv"]
    undo = [s["undo"] for s in pending(native, empty) if s["undo"]]
    assert undo[0] == ["ip", "netns", "del", "swl0001-core"]
    assert ["sysctl", "-qw", "net/ipv4/conf/all/rp_filter=2"] in undo
    assert not any("swl0001l" in json.dumps(u) for u in undo)  # deleted with the prefix
    netem = [s for s in v["steps"] if s.get("engine") in (None, "netem")]
    tc = [i for i in batches(pending(netem, empty)) if i["argv"][0] == "tc"]
    assert [i["argv"] for i in tc] == [["tc", "-batch", "-"],
                                       ["tc", "-n", "swl0001-core", "-batch", "-"]]
    assert tc[0]["stdin"].startswith("qdisc replace dev swl0001l root handle 1: htb")
    # a device whose qdiscs are all there is left alone; one missing a leaf is rebuilt
    shaped = [s for s in netem if s["tool"] == "tc"]
    dev = shaped[0]["check"]["qdiscs"]
    have = "".join(f"qdisc {kind} {handle} root refcnt 2\n"
                   for handle, kind in shaped[0]["check"]["want"])
    empty.outputs[f"tc qdisc show dev {dev}"] = have
    assert dev not in json.dumps([s["check"] for s in pending(shaped, empty)])
    empty.outputs[f"tc qdisc show dev {dev}"] = have.splitlines(keepends=True)[0]
    empty._cache.clear()
    assert pending(shaped, empty)[0]["check"]["qdiscs"] == dev


def test_an_interface_given_by_mac_is_found_on_the_machine(tmp_path):
    """A hosts file from a manifest names interfaces by MAC address: the machine's own
    name for it replaces the address everywhere in its plan (here, this host's)."""
    dev = next(d for d in sorted(Path("/sys/class/net").iterdir())
               if d.name != "lo" and (d / "address").read_text().strip() != "00:00:00:00:00:00")
    mac = (dev / "address").read_text().strip().upper()
    v = _vars(tmp_path)["s0"]["swell_host"]
    v = json.loads(json.dumps(v).replace('"eth1"', f'"{mac}"').replace(" eth1", f" {mac}"))
    got = resolve_ifaces(v)
    assert got["iface"] == dev.name and mac not in json.dumps(got)
    assert ["link", "set", "dev", dev.name, "up"] == got["steps"][0]["args"]
    v["iface"] = "02:00:00:00:00:00"
    with pytest.raises(SwellError, match="no interface with MAC address 02:00:00:00:00:00"):
        resolve_ifaces(v)
