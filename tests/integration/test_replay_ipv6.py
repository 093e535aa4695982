"""tcpreplay through an IPv6 dumbbell (native engine), captured at the bottleneck.

An IPv6 capture (nDPI's ``pinterest.pcap`` from the shared data; a small IPv6
trace written here when the shared data is absent) and the bundled IPv4 capture
(translated to IPv6 by the split) are replayed on a ``fd00::/48`` plan; every
packet the bottleneck captures must be IPv6 with the plan's host addresses, and
each direction's replayed packets must cross it.
"""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path

import dpkt
import pytest

from swell.generators.base import run_generator
from swell.generators.replay import replay_between
from swell.topologies.placement import placement_of
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology
from tests.conftest import SHARED_DATA
from tests.unit.test_replay_ipv6 import write_v6_trace

TRACE4 = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
PINTEREST = SHARED_DATA / "pcap" / "ndpi" / "pinterest.pcap"
SPEC = {
    "network": "fd00:5e7b::/48",
    "bottleneck": {"rate_mbps": 100, "delay_ms": 2, "queue_packets": 500,
                   "reverse": {"rate_mbps": 100, "delay_ms": 2, "queue_packets": 500}},
    "clients": {"count": 2, "access": {"delay_ms": 1}},
    "servers": {"count": 1, "access": {"delay_ms": 1}},
}

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("tcpreplay", "tcprewrite", "tcpdump")),
    reason="needs tcpreplay and tcpdump")


def bottleneck_packets(report: dict, direction: str) -> list[tuple[int, str, str]]:  # type: ignore[type-arg]
    """(ethertype, source, destination) of every packet one bottleneck capture holds."""
    rep = next(c for c in report["captures"] if c["direction"] == direction)
    out = []
    with open(rep["path"], "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            out.append((eth.type, str(ipaddress.ip_address(ip.src)),
                        str(ipaddress.ip_address(ip.dst))))
    return out


def test_tcpreplay_over_ipv6(tmp_path: Path) -> None:
    v6_trace, window = (PINTEREST, (3.0, 5.0)) if PINTEREST.exists() else (
        write_v6_trace(tmp_path / "v6.pcap", conns=100), (0.0, 30.0))
    with Topology(spec_from_dict(SPEC), engine="native", capture_dir=tmp_path / "cap") as topo:
        hosts = {h.ip for h in topo.clients + topo.servers}
        pl = placement_of(topo)
        runs = {}
        for name, trace, (start, dur) in (("v6", v6_trace, window),
                                          ("v4", TRACE4, (3.0, 2.0))):
            gen = replay_between(list(pl.bg_clients), list(pl.bg_servers), trace,
                                 tmp_path / name, start_s=start, duration_s=dur)
            runs[name] = run_generator(gen).summary
    fwd = bottleneck_packets(topo.report, "forward")
    rev = bottleneck_packets(topo.report, "reverse")
    print(f"{v6_trace.name}: {runs['v6']['counts']}, example.pcap translated: "
          f"{runs['v4']['counts']}; bottleneck forward {len(fwd)}, reverse {len(rev)}")
    assert all(ipaddress.ip_address(h).version == 6 for h in hosts)
    # every packet at the bottleneck is IPv6 between the plan's hosts
    assert {t for t, _, _ in fwd + rev} == {dpkt.ethernet.ETH_TYPE_IP6}
    assert {a for _, a, _ in fwd + rev} | {b for _, _, b in fwd + rev} <= hosts
    # the trace addresses were mapped onto the hosts (IPv6 ones and mapped IPv4 ones)
    assert set(runs["v6"]["mapping"].values()) <= hosts
    assert all(a.startswith("::ffff:") for a in runs["v4"]["mapping"])
    for name in ("v6", "v4"):
        assert runs[name]["c2s"]["sent"] == runs[name]["counts"]["c2s"] > 50
        assert runs[name]["s2c"]["sent"] == runs[name]["counts"]["s2c"] > 50
    # client->server packets cross forward, server->client reverse (the hosts' own
    # answers to replayed segments, RSTs, cross too: at least, not exactly)
    c2s = sum(r["counts"]["c2s"] for r in runs.values())
    s2c = sum(r["counts"]["s2c"] for r in runs.values())
    assert len(fwd) >= 0.98 * c2s
    assert len(rev) >= 0.98 * s2c
