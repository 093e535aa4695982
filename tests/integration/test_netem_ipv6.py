"""The netem engine on an IPv6 address plan (VM layer: a kernel with sch_netem).

The same dumbbell as an IPv4 one, on ``fd00:5e11::/48``: the access links are
htb classes picked by u32 ``ip6 src``/``ip6 dst`` filters hashed on the last
byte of the address, the bottleneck is htb + netem on the core router, and
tcpdump captures its egress. Functional checks first: every host's traffic
lands in its own netem leaf (the kernel's per-leaf counters), a 5 Mbit/s
access link limits an IPv6 TCP transfer (traffic a filter missed would go
unshaped through htb's direct queue), the capture holds IPv6 packets only and
is split into per-direction throughput by ``swell.analysis.bottleneck``.
Timing as in ``test_netem.py`` (``netem_timing.py``): RTTs against the same
dumbbell's zero-delay cost and per-hop timer lateness, measured in the same
guest, interleaved with the configured setting; every leaf's delay is read
back from the kernel.
"""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from swell.analysis.bottleneck import load_bottleneck, only_hosts, rate_series
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology
from tests.integration import netem_timing as nt
from tests.integration.netem_timing import ping
from tests.integration.test_netem import iperf3_mbps, netem_leaf

pytestmark = pytest.mark.netem


def spec6() -> dict:
    return {
        "network": "fd00:5e11::/48",
        "bottleneck": {"rate_mbps": 50, "delay_ms": 10, "queue_packets": 500,
                       "reverse": {"rate_mbps": 50, "delay_ms": 5, "queue_packets": 500}},
        "clients": {"count": 3, "namespaces": 1, "access": [
            {"delay_ms": 1},
            {"delay_ms": 5},
            {"delay_ms": 1, "rate_mbps": 5, "queue_packets": 30},
        ]},
        "servers": {"count": 1, "access": {"delay_ms": 2}},
        "foreground": {"clients": 0, "servers": 0},
    }


@pytest.mark.slow
def test_ipv6_dumbbell_on_netem(tmp_path):
    with Topology(spec_from_dict(spec6()), engine="netem", capture_dir=tmp_path) as topo:
        assert topo.engine_name == "netem" and topo.plan.version == 6
        c0, c1, c2 = topo.clients
        s0 = topo.servers[0]
        # classification: 40 pings from c1 pass c1's leaves only, both ways
        before = {h.ip: {w: netem_leaf(topo, h, w)["packets"] for w in ("up", "down")}
                  for h in topo.clients}
        assert len(ping(topo, c1, s0, 40, interval=0.005)) >= 39
        for h in topo.clients:
            for way in ("up", "down"):
                moved = netem_leaf(topo, h, way)["packets"] - before[h.ip][way]
                ok = 39 <= moved <= 41 if h is c1 else moved == 0
                assert ok, (h.ip, way, moved)
        # every leaf's delay as the kernel holds it; RTTs against the same dumbbell's
        # zero-delay cost and timer lateness; the 4 ms difference applied once each way
        nt.assert_configured(topo, nt.all_leaves(topo))
        p0, p1 = nt.measure_paths(topo, [(c0, s0), (c1, s0)])
        nt.assert_timing(p0)
        nt.assert_timing(p1)
        nt.assert_difference(p0, p1)
        # the 5 Mbit/s access link holds an IPv6 TCP transfer
        mbps = iperf3_mbps(topo, c2, s0, seconds=3.0)
        print(f"{c2.ip}: 5 Mbit/s access, TCP over IPv6 {mbps:.2f} Mbit/s")
        assert 0.8 * 5 <= mbps <= 1.0 * 5, mbps
    assert topo.report["problems"] == []
    assert all(c["dropped"] == 0 for c in topo.report["captures"])
    # the bottleneck capture: IPv6 only, by direction; the transfer's rate from it
    dirs = load_bottleneck(tmp_path)
    for name, side in (("c2s", "left"), ("s2c", "right")):
        p = dirs[name]
        srcs = {ipaddress.ip_address(int(h) << 64 | int(lo))
                for h, lo in zip(p.saddr_hi, p.saddr_lo, strict=True)}
        assert srcs and all(a.version == 6 and a in topo.plan.halves[side] for a in srcs), srcs
    fwd = only_hosts(dirs["c2s"], [c2.ip])
    t0 = int(fwd.ts_ns.min())
    rates = rate_series(fwd, 0.5, t0, t0 + 3 * 10**9) / 1e6
    steady = float(np.mean(rates[1:]))
    print(f"capture, {c2.ip} forward: {steady:.2f} Mbit/s of frames")
    assert 0.8 * 5 <= steady <= 1.1 * 5 * 1514 / 1500, rates
