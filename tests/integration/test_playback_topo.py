"""tcpreplay and UPB inside a real dumbbell (native engine), captured at the bottleneck."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path

import dpkt
import pytest

from swell.generators.base import run_generator
from swell.generators.playback import playback_between
from swell.generators.replay import replay_between
from swell.topologies.placement import placement_of
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology

TRACE = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
SPEC = {
    "network": "10.78.0.0/16",
    "bottleneck": {"rate_mbps": 100, "delay_ms": 2, "queue_packets": 500,
                   "reverse": {"rate_mbps": 100, "delay_ms": 2, "queue_packets": 500}},
    "clients": {"count": 2, "access": {"delay_ms": 1}},
    "servers": {"count": 1, "access": {"delay_ms": 1}},
}

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("ITGSend", "tcpreplay", "tcprewrite")),
    reason="needs d-itg and tcpreplay")


def bottleneck_packets(report: dict, direction: str) -> list[tuple[str, str, int]]:  # type: ignore[type-arg]
    rep = next(c for c in report["captures"] if c["direction"] == direction)
    with open(rep["path"], "rb") as f:
        out = []
        for _, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            out.append((str(ipaddress.IPv4Address(ip.src)), str(ipaddress.IPv4Address(ip.dst)),
                        int(ip.len)))
        return out


def test_replay_and_upb_cross_the_dumbbell(tmp_path: Path) -> None:
    with Topology(spec_from_dict(SPEC), engine="native", capture_dir=tmp_path / "cap") as topo:
        hosts = {h.ip for h in topo.clients + topo.servers}
        pl = placement_of(topo)
        replay = run_generator(replay_between(list(pl.bg_clients), list(pl.bg_servers), TRACE,
                                              tmp_path / "replay", start_s=3.0, duration_s=2.0))
        upb = playback_between(pl.bg_servers[0], pl.bg_clients[0], TRACE, tmp_path / "upb",
                               start_s=9.0, duration_s=2.0)
        upb_res = run_generator(upb)
    counts = replay.summary["counts"]
    fwd, rev = bottleneck_packets(topo.report, "forward"), bottleneck_packets(topo.report,
                                                                              "reverse")
    print(f"replay {counts}, bottleneck forward {len(fwd)} reverse {len(rev)}, "
          f"UPB {upb_res.summary['legs']['server']}")
    # every packet at the bottleneck carries the topology's addresses
    assert {a for a, _, _ in fwd + rev} | {b for _, b, _ in fwd + rev} <= hosts
    # the replayed client->server packets cross forward, server->client (and UPB) reverse
    assert len(fwd) >= 0.98 * counts["c2s"] and counts["c2s"] > 100
    upb_sent = len(upb.legs[0].sched)
    assert len(rev) >= 0.98 * (counts["s2c"] + upb_sent)
    assert upb_res.summary["legs"]["server"]["received"] >= 0.99 * upb_sent
    upb_len = sorted(n for a, b, n in rev if a == topo.servers[0].ip
                     and b == topo.clients[0].ip)
    assert len(upb_len) >= upb_sent
