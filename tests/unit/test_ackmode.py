"""Who acknowledged every segment (swell.extract.ackmode), on a crafted trace where it
is known, against the per-port table of swell.analysis.acks on the same packets, and
on the real campus-like capture the model keeps it for."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from swell.analysis.acks import measure
from swell.extract.pipeline import extract_model

SERVER = "10.0.1.1"
MSS = 1000


def _conn(pkts: list, client: str, cport: int, port: int, t: float, rsp_segs: int,
          client_every: int, req_segs: int = 1, server_every: int = 2) -> None:
    """One connection: handshake, ``req_segs`` request segments (the server ACKs every
    ``server_every``-th), ``rsp_segs`` response segments (the client ACKs every
    ``client_every``-th), FINs both ways and the last ACK."""
    def pkt(src: str, dst: str, sp: int, dp: int, flags: str, payload: int = 0) -> None:
        nonlocal t
        p = Ether() / IP(src=src, dst=dst) / TCP(sport=sp, dport=dp, flags=flags, seq=1,
                                                  ack=1)
        if payload:
            p = p / (b"x" * payload)
        p.time = t
        t += 0.001
        pkts.append(p)

    up = (client, SERVER, cport, port)
    down = (SERVER, client, port, cport)
    pkt(*up, "S")
    pkt(*down, "SA")
    pkt(*up, "A")
    for k in range(1, req_segs + 1):
        pkt(*up, "PA", MSS)
        if k % server_every == 0 or k == req_segs:
            pkt(*down, "A")
    for k in range(1, rsp_segs + 1):
        pkt(*down, "PA", MSS)
        if k % client_every == 0 or k == rsp_segs:
            pkt(*up, "A")
    pkt(*up, "FA")
    pkt(*down, "FA")
    pkt(*up, "A")


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pkts: list = []
    # HTTPS: a client that ACKs every segment, one that ACKs every second, one that
    # got too few segments to judge; the server ACKs every segment of one upload
    _conn(pkts, "10.0.0.2", 40001, 443, 0.0, 30, 1)
    _conn(pkts, "10.0.0.3", 40002, 443, 1.0, 30, 2)
    _conn(pkts, "10.0.0.4", 40003, 443, 2.0, 4, 1)
    _conn(pkts, "10.0.0.5", 40004, 443, 3.0, 1, 1, req_segs=20, server_every=1)
    # HTTP: two clients delaying every second ACK, over two connections each
    for i, host in enumerate(("10.0.0.6", "10.0.0.7")):
        for j in range(2):
            _conn(pkts, host, 41000 + 2 * i + j, 80, 4.0 + 2 * i + j, 12, 2)
    path = tmp_path_factory.mktemp("acks") / "crafted.pcap"
    wrpcap(str(path), pkts)
    return path


def test_shares_are_the_crafted_ones(crafted: Path) -> None:
    apps = extract_model(crafted).meta["apps"]
    https, http = apps["https-tcp"]["acks"], apps["http-tcp"]["acks"]
    assert https["client"]["hosts_judged"] == 2  # 10.0.0.4 got 4 segments: not judged
    assert https["client"]["every_segment_share"] == 0.5
    assert https["server"]["hosts_judged"] == 1  # only the server of the upload
    assert https["server"]["every_segment_share"] == 1.0
    assert http["client"]["hosts_judged"] == 2  # 24 segments each over two connections
    assert http["client"]["every_segment_share"] == 0.0
    assert http["server"]["hosts_judged"] == 0
    assert http["server"]["every_segment_share"] is None
    # 8 pure ACKs (6 of the data, the handshake's, the last) per 12 segments
    assert http["client"]["acks_per_segment"] == pytest.approx(2 * 2 * 8 / 48, abs=1e-4)


def test_agrees_with_the_packet_count(crafted: Path) -> None:
    """The table's counts (packets less data, SYN and FIN) give the hosts and shares
    that counting the pure ACKs packet by packet gives."""
    apps = extract_model(crafted).meta["apps"]
    rows = {r["port"]: r for r in measure([str(crafted)], by_port=2)["by_port"]}
    for app, port in (("https-tcp", "443"), ("http-tcp", "80")):
        for side, d in (("client", "s2c"), ("server", "c2s")):
            mine, ref = apps[app]["acks"][side], rows[port][d]
            assert mine["hosts_judged"] == ref["receivers_judged"], (app, side)
            assert mine["every_segment_share"] == ref["receivers_every_segment"], (app, side)
            assert mine["acks_per_segment"] == pytest.approx(ref["acks_per_data_segment"],
                                                             abs=1e-3), (app, side)


def test_swing_asks_the_topology_for_them(crafted: Path, tmp_path: Path) -> None:
    """The Swing kind asks for the model's shares per port and side (``acks: model``,
    the default), nothing with ``acks: stack``; the topology spec gets them unless the
    experiment gave its own list."""
    from pydantic import TypeAdapter

    from swell.experiments.schema import BackgroundSpec, ExperimentTopology
    from swell.experiments.topology_plan import topology_for
    from swell.extract.model import save_model
    from swell.generators import registry
    from swell.topologies.spec import spec_from_dict

    model = save_model(extract_model(crafted), tmp_path / "model")
    adapter: TypeAdapter = TypeAdapter(BackgroundSpec)

    def needs(**opts: str):
        kind = registry.make("background", adapter.validate_python(
            {"kind": "swing", "model": str(model), **opts}))
        kind.model = model  # as prepare() sets it
        return kind.needs()

    got = needs()
    assert got.clients.quickack == ((443, 0.5),)  # HTTP's clients delayed theirs
    assert got.servers.quickack == ((443, 1.0),)
    off = needs(acks="stack")
    assert off.clients.quickack == () and off.servers.quickack == ()
    topo = ExperimentTopology.model_validate({"bottleneck": {"rate_mbps": 20}})
    spec = topology_for(topo, got)
    assert spec["clients"]["quickack"] == [{"port": 443, "share": 0.5}]
    assert spec["servers"]["quickack"] == [{"port": 443, "share": 1.0}]
    spec_from_dict(spec)
    own = ExperimentTopology.model_validate(
        {"bottleneck": {"rate_mbps": 20}, "clients": {"quickack": [{"port": 80, "share": 1}]}})
    assert topology_for(own, got)["clients"]["quickack"] == [{"port": 80, "share": 1.0}]
