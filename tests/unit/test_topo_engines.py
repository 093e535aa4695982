"""Engine choice, the native engine's configuration and the netem engine's placement."""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from swell.errors import EnvironmentProblem, SwellError
from swell.topologies import linkemu
from swell.topologies.addressing import plan_addresses
from swell.topologies.engines import EngineFacts, NetemEngine, choose_engine, native_config
from swell.topologies.layout import EDGE, SIDES, Layout, check_names
from swell.topologies.modelnet import draw_links, group_links, read_net_samples
from swell.topologies.spec import ModelDraw, spec_from_dict
from swell.topologies.topology import resolve_host_links

SPEC = spec_from_dict({
    "bottleneck": {"rate_mbps": 50, "delay_ms": 10, "queue_bytes": 60_000,
                   "reverse": {"rate_mbps": 5, "delay_ms": 3, "queue_packets": 20}},
    "clients": {"count": 5, "namespaces": 2,
                "access": [{"delay_ms": d, "rate_mbps": 10} for d in (1, 2, 3, 4, 5)]},
    "servers": {"count": 2, "access": {"delay_ms": 7, "loss": 0.01}},
})


def laid_out(prefix="sw1a2b", kernel_forwarding=False):
    """The names build_layout gives, without creating anything."""
    plan = plan_addresses(SPEC)
    lay = Layout(prefix, plan, kernel_forwarding)
    for port, side in enumerate(SIDES):
        edge = lay.name(EDGE[side])
        lay.core_port[side], lay.edge_uplink[side] = f"{prefix}-r-eth{port}", f"{edge}-eth0"
        for k, node in enumerate(plan.side_nodes(side), start=1):
            lay.host_intf[node.suffix] = f"{lay.name(node.suffix)}-eth0"
            lay.edge_intf[node.suffix] = f"{edge}-eth{k}"
    for i, name in enumerate([*lay.core_port.values(), *lay.edge_uplink.values()]):
        lay.macs[name] = f"02:00:00:00:00:{i:02x}"
    return lay


@pytest.mark.parametrize(
    ("requested", "facts", "expected"),
    [
        ("auto", EngineFacts(True, True, True), "netem"),
        ("auto", EngineFacts(False, True, True), "native"),
        ("auto", EngineFacts(True, False, True), "native"),
        ("native", EngineFacts(True, True, True), "native"),
        ("netem", EngineFacts(True, True, False, "not built"), "netem"),
    ],
)
def test_choose_engine(requested, facts, expected):
    assert choose_engine(requested, facts) == expected


def test_choose_engine_refuses_what_is_missing():
    with pytest.raises(EnvironmentProblem, match="sch_netem"):
        choose_engine("netem", EngineFacts(False, True, True))
    with pytest.raises(EnvironmentProblem, match="not built"):
        choose_engine("native", EngineFacts(True, True, False, "not built"))
    with pytest.raises(EnvironmentProblem, match="no shaping engine"):
        choose_engine("auto", EngineFacts(False, True, False, "no root"))
    with pytest.raises(SwellError, match="unknown engine"):
        choose_engine("dummynet", EngineFacts(True, True, True))


def test_native_config_from_layout(tmp_path):
    lay = laid_out()
    hosts = resolve_host_links(SPEC, lay.plan)
    caps = {"forward": tmp_path / "f.pcap", "reverse": tmp_path / "r.pcap"}
    cfg = native_config(lay, hosts, SPEC, tmp_path, caps)
    assert isinstance(cfg, linkemu.EngineConfig) and cfg.name == "sw1a2b"
    left, right = cfg.ports
    assert (left.name, left.ifname, left.netns) == ("left", "sw1a2b-r-eth0",
                                                    "/var/run/netns/sw1a2b-r")
    assert left.peer_mac == lay.macs["sw1a2b-el-eth0"]
    assert left.gateway_ips == (str(lay.plan.transit["left"].core_ip),)
    assert {(r.prefix, r.port) for r in cfg.routes} == {("10.77.0.0/17", "left"),
                                                       ("10.77.128.0/17", "right")}
    by_ip = {h.ip: h for h in cfg.hosts}
    assert len(by_ip) == 7  # background hosts only; foreground hosts are unshaped
    first = by_ip[str(lay.plan.bg_hosts("left")[0])]
    assert first.up == first.down and first.up.delay_us == 1000 and first.up.rate_bps == 10e6
    server = by_ip[str(lay.plan.bg_hosts("right")[1])]
    assert server.up.loss.kind == "bernoulli" and server.up.loss.p == 0.01
    pipes = {(a, b): p for a, b, p in cfg.port_pipes}
    assert pipes["left", "right"].rate_bps == 50e6 and pipes["left", "right"].queue_bytes == 60000
    assert pipes["right", "left"].delay_us == 3000 and pipes["right", "left"].queue_packets == 20
    assert set(cfg.captures) == {("left", "right", str(caps["forward"])),
                                 ("right", "left", str(caps["reverse"]))}
    assert cfg.to_json()["hosts"][0]["up"]["delay_us"] == 1000


def test_netem_placement():
    lay = laid_out(kernel_forwarding=True)
    hosts = resolve_host_links(SPEC, lay.plan)
    batches = NetemEngine().batches(lay, hosts, SPEC)
    core = [" ".join(c) for c in batches["r"]]
    assert any("dev sw1a2b-r-eth1 parent 1: classid 1:1 htb rate 50000000bit" in c for c in core)
    assert any("dev sw1a2b-r-eth0 parent 1: classid 1:1 htb rate 5000000bit" in c for c in core)
    # up: host namespace egress by source; down: edge egress towards it by destination
    c0 = [" ".join(c) for c in batches["c0"]]
    assert sum("flowid" in c for c in c0) == 3 and all("sw1a2b-c0-eth0" in c for c in c0)
    el = [" ".join(c) for c in batches["el"]]
    assert sum("match ip dst" in c and "flowid" in c for c in el) == 5
    assert "fc0" not in batches and "s0" in batches and "er" in batches


def test_interface_names_fit():
    check_names("sw1a2b", laid_out().plan)
    many = spec_from_dict({"bottleneck": {"rate_mbps": 1},
                           "clients": {"count": 64, "namespaces": 64, "access": {}}})
    check_names("sw1a2b", plan_addresses(many))


def write_model(path, n=50, equal=True):
    rng = np.random.default_rng(0)
    arrays = {
        "net/client/delay_ms": rng.uniform(1, 100, n),
        "net/client/capacity_bps": rng.uniform(1e6, 1e8, n if equal else n + 3),
        "net/client/loss": rng.uniform(0, 0.05, n),
        "app/web/reqSize": np.arange(5),
    }
    path.mkdir(parents=True, exist_ok=True)
    np.savez(path / "arrays.npz", **arrays)
    return arrays


def test_model_draw_is_seeded_and_joint(tmp_path):
    arrays = write_model(tmp_path / "m")
    samples = read_net_samples(tmp_path / "m", "client")
    assert samples.rate_mbps.max() <= 100
    draw = ModelDraw(path=tmp_path / "m", side="client", max_rate_mbps=50)
    a, b = draw_links(samples, draw, 200, seed=3), draw_links(samples, draw, 200, seed=3)
    assert a == b and a != draw_links(samples, draw, 200, seed=4)
    pairs = {(round(d, 3), round(r / 1e6, 9)) for d, r in
             zip(arrays["net/client/delay_ms"], arrays["net/client/capacity_bps"], strict=True)}
    for link in a:
        assert link.rate_mbps <= 50
        if link.rate_mbps < 50:  # uncapped: the delay and capacity come from one observed host
            assert (link.delay_ms, round(link.rate_mbps, 9)) in pairs
    assert len({link.delay_ms for link in a}) > 20


def test_model_errors(tmp_path):
    write_model(tmp_path / "m")
    with pytest.raises(SwellError, match="no net/server/delay"):
        read_net_samples(tmp_path / "m", "server")
    with pytest.raises(SwellError, match="cannot read model arrays"):
        read_net_samples(tmp_path / "nothing", "client")


def test_drawn_links_are_checked_by_the_spec(tmp_path):
    path = tmp_path / "m"
    path.mkdir()
    np.savez(path / "arrays.npz", **{"net/client/delay_ms": np.array([5.0, 20_000.0])})
    samples = read_net_samples(path, "client")
    draw = ModelDraw(path=path, side="client")
    with pytest.raises(SwellError, match=r"/m: drawn access link \d+: delay_ms: Input should be"):
        draw_links(samples, draw, 50, seed=1)


def test_group_links_explicit_and_model(tmp_path):
    write_model(tmp_path / "m")
    s = spec_from_dict({"bottleneck": {"rate_mbps": 1},
                        "clients": {"count": 30, "model": {"path": str(tmp_path / "m"),
                                                           "side": "client"}},
                        "servers": {"count": 3, "access": {"delay_ms": 2}}})
    links = group_links(s.clients, "client", s.seed)
    assert len(links) == 30 and all(link.queue_packets == 100 for link in links)
    assert group_links(s.servers, "server", 1) == [s.servers.access] * 3
    hosts = resolve_host_links(s, plan_addresses(s))
    assert [ip for ip, _ in hosts["left"]][:2] == [ipaddress.IPv4Address("10.77.0.2"),
                                                   ipaddress.IPv4Address("10.77.0.3")]


@pytest.mark.parametrize(
    ("requested", "facts", "ok"),
    [("auto", EngineFacts(True, True, True), True),  # auto picks native for the tap
     ("native", EngineFacts(True, True, True), True),
     ("netem", EngineFacts(True, True, True), False),
     ("auto", EngineFacts(True, True, False, "no AF_PACKET"), False)],
)
def test_capture_beside_the_clients_needs_the_native_engine(tmp_path, monkeypatch, requested,
                                                            facts, ok):
    """netem shapes an uplink on the host's own interface, before any tap: refused before
    anything is built; auto takes the native engine when it can."""
    from swell.topologies.topology import Topology

    spec = spec_from_dict({**SPEC.model_dump(mode="json"), "capture": {"clients": True}})
    topo = Topology(spec, engine=requested, facts=facts, state_root=tmp_path,
                    capture_dir=tmp_path / "cap")
    assert_native_or_refused(topo, monkeypatch, tmp_path, ok,
                             "capture.clients.*native engine")


def assert_native_or_refused(topo, monkeypatch, tmp_path, ok: bool, refusal: str) -> None:
    """``topo.up()`` chooses the native engine (``ok``; stopped before anything is built)
    or is refused with ``refusal`` before any state is written."""
    if ok:
        picked = []

        def stop_here(name):  # the engine chosen; nothing is built
            picked.append(name)
            raise RuntimeError("stop")

        monkeypatch.setattr("swell.topologies.topology.make_engine", stop_here)
        with pytest.raises(RuntimeError, match="stop"):
            topo.up()
        assert picked == ["native"]
    else:
        with pytest.raises(SwellError, match=refusal):
            topo.up()
        assert list(tmp_path.iterdir()) == []  # refused before any state was written


@pytest.mark.parametrize(
    ("requested", "facts", "ok"),
    [("auto", EngineFacts(True, True, True), True),  # auto picks native: it pairs
     ("netem", EngineFacts(True, True, True), False),
     ("auto", EngineFacts(True, True, False, "no AF_PACKET"), False)],
)
def test_pairing_needs_the_native_engine(tmp_path, monkeypatch, requested, facts, ok):
    """A link that pairs packets (``pairing``) is the native engine's alone: auto takes it,
    netem is refused before anything is built, and netem's arguments refuse it too."""
    from swell.topologies.netem import netem_args
    from swell.topologies.topology import Topology

    data = SPEC.model_dump(mode="json")
    data["clients"] = {**data["clients"], "access": {"rate_mbps": 10, "pairing": 0.2}}
    spec = spec_from_dict(data)
    topo = Topology(spec, engine=requested, facts=facts, state_root=tmp_path)
    assert_native_or_refused(topo, monkeypatch, tmp_path, ok, "pairing")
    with pytest.raises(SwellError, match="only the native engine"):
        netem_args(spec.clients.access)
    assert "pairing" not in " ".join(netem_args(spec.servers.access))


def test_drawn_links_take_the_draws_pairing(tmp_path):
    write_model(tmp_path / "m")
    draw = ModelDraw(path=tmp_path / "m", side="client", pairing=0.15)
    links = draw_links(read_net_samples(draw.path, "client"), draw, 8, seed=3)
    assert {link.pairing for link in links} == {0.15}
    plain = draw_links(read_net_samples(draw.path, "client"), draw.model_copy(
        update={"pairing": 0.0}), 8, seed=3)
    assert [link.model_copy(update={"pairing": 0.0}) for link in links] == plain
    with pytest.raises(ValueError, match="pairing"):
        ModelDraw(path=tmp_path / "m", side="client", pairing=1.5)
