"""An IPv6 dumbbell on swell-link: per-host delays, a rate-limited transfer, its capture.

The address plan is a unique local /48 (``fd00:5e11::/48``): every namespace
a /64, addresses added with ``nodad`` so they are usable at once. The test
checks what an experiment relies on: each host's round trip is its rendered
access links plus the bottleneck (two hosts in one namespace with different
delays), a TCP transfer runs at the bottleneck's rate (iperf3 over IPv6), and
the bottleneck capture (written by swell-link) is IPv6 only, split by
direction and host, and analysed into per-direction throughput by the same
functions the experiments use (``swell.analysis.bottleneck``).
"""

from __future__ import annotations

import ipaddress
import json
import random
import re
import statistics
import subprocess
import time

import numpy as np

from swell.analysis.bottleneck import load_bottleneck, only_hosts, rate_series
from swell.placement import Endpoint
from swell.topologies.placement import placement_of
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import EmulatedHost, Topology

_TIME = re.compile(r"time=([0-9.]+) ms")
NETWORK = "fd00:5e11::/48"
RATE_MBPS = 20.0

SPEC6 = {
    "network": NETWORK,
    "bottleneck": {"rate_mbps": RATE_MBPS, "delay_ms": 5, "queue_packets": 100,
                   "reverse": {"rate_mbps": 100, "delay_ms": 3, "queue_packets": 200}},
    "clients": {"count": 3, "namespaces": 2,
                "access": [{"delay_ms": 1}, {"delay_ms": 4}, {"delay_ms": 2, "rate_mbps": 100}]},
    "servers": {"count": 2, "access": [{"delay_ms": 0.5}, {"delay_ms": 3}]},
    "foreground": {"clients": 1, "servers": 1},
}


def ping6_median(topo: Topology, a: EmulatedHost, b: EmulatedHost, count: int = 15) -> float:
    out = topo.run_in(a, ["ping", "-6", "-n", "-c", str(count), "-i", "0.01", "-W", "2",
                          "-I", a.ip, b.ip], check=False, timeout=60).stdout
    rtts = [float(m) for m in _TIME.findall(out)]
    assert len(rtts) >= count - 1, f"{a.ip} -> {b.ip}: {len(rtts)}/{count} replies: {out}"
    return statistics.median(rtts[1:])


def iperf3_tcp(topo: Topology, client: EmulatedHost, server: EmulatedHost,
               seconds: float) -> dict:
    srv = topo.popen_in(server, ["iperf3", "-s", "-1", "--forceflush", "-B", server.ip,
                                 "-p", "5310"], stdout=subprocess.PIPE, text=True)
    while "listening" not in (line := srv.stdout.readline()):
        assert line, "iperf3 server exited"
    out = topo.run_in(client, ["iperf3", "-6", "-c", server.ip, "-B", client.ip, "-p", "5310",
                               "-t", str(seconds), "-J"], timeout=60).stdout
    srv.wait(timeout=20)
    return json.loads(out)


def test_ipv6_dumbbell_on_swell_link(tmp_path):
    spec = spec_from_dict(SPEC6)
    with Topology(spec, engine="native", capture_dir=tmp_path) as topo:
        assert topo.engine_name == "native" and topo.plan.version == 6
        c0, c1, c2 = topo.clients
        s0, s1 = topo.servers
        assert c0.namespace == c1.namespace  # two delays in one namespace
        # what traffic kinds see: IPv6 endpoints, ready to bind
        place = placement_of(topo)
        assert place.family == 6
        assert all(isinstance(e, Endpoint) and e.family == 6 and e.url_host == f"[{e.ip}]"
                   for e in (*place.bg_clients, *place.bg_servers, *place.fg_clients))
        assert topo.host(c0.ip.replace("::", ":0:0:0:0:0:")) is c0  # any spelling
        # per-host round trips: rendered access links + bottleneck, and nothing more
        for a, b in ((c0, s0), (c1, s0), (c0, s1), (topo.fg_clients[0], s1),
                     (c2, topo.fg_servers[0])):
            expected = topo.expected_rtt_ms(a, b)
            median = ping6_median(topo, a, b)
            print(f"{a.ip} -> {b.ip}: median RTT {median:.3f} ms, configured {expected:.3f}")
            assert expected - 0.05 <= median <= expected + 1.0, (a.ip, b.ip, median, expected)
        # a TCP transfer from the unconstrained client: the bottleneck sets its rate
        res = iperf3_tcp(topo, c2, s0, seconds=3)
        mbps = res["end"]["sum_received"]["bits_per_second"] / 1e6
        # the serialiser counts IP packets: payload 1500 - 40 (IPv6) - 32 (TCP + timestamps)
        goodput = RATE_MBPS * 1428 / 1500
        print(f"TCP over IPv6 through {RATE_MBPS} Mbit/s: {mbps:.2f} Mbit/s "
              f"(at most {goodput:.2f} of payload)")
        assert 0.85 * goodput <= mbps <= 1.01 * goodput, mbps
        stats = topo.stats()
    ports = stats["ports"]
    assert ports["left"]["rx_ipv6"] > 0 and ports["left"]["rx_ipv4"] == 0, ports["left"]
    assert ports["left"]["no_route"] == 0 and ports["right"]["no_route"] == 0
    assert topo.report["problems"] == []
    assert all(c["dropped"] == 0 for c in topo.report["captures"])
    # the capture: IPv6 only, each direction from its own half of the plan
    dirs = load_bottleneck(tmp_path)
    halves = topo.plan.halves
    for name, src_half in (("c2s", halves["left"]), ("s2c", halves["right"])):
        p = dirs[name]
        src = [ipaddress.IPv6Address(int(h) << 64 | int(lo))
               for h, lo in zip(p.saddr_hi, p.saddr_lo, strict=True)]
        assert all(a in src_half for a in src), name
    # per-direction throughput of the transfer, from the capture
    fwd, rev = only_hosts(dirs["c2s"], [c2.ip]), only_hosts(dirs["s2c"], [c2.ip])
    t0 = int(fwd.ts_ns.min())
    fwd_rate = rate_series(fwd, 0.5, t0, t0 + 3 * 10**9)
    rev_rate = rate_series(rev, 0.5, t0, t0 + 3 * 10**9)
    steady = float(np.mean(fwd_rate[1:])) / 1e6  # after the first half second (slow start)
    frame_rate = RATE_MBPS * 1514 / 1500  # the capture counts frames, the link IP packets
    print(f"capture, c2 forward: {steady:.2f} Mbit/s of frames (link {frame_rate:.2f}); "
          f"reverse (ACKs) {np.mean(rev_rate[1:]) / 1e6:.3f} Mbit/s")
    assert 0.9 * frame_rate <= steady <= 1.02 * frame_rate, fwd_rate
    assert 0 < np.mean(rev_rate[1:]) < 0.1 * np.mean(fwd_rate[1:])


def test_thousand_ipv6_hosts_up_down_and_sample_rtts():
    """1,050 IPv6 hosts: addresses usable at once (nodad), static NDP entries, swell-link."""
    spec = spec_from_dict({
        "network": "fd00:77::/48",
        "bottleneck": {"rate_mbps": 100, "delay_ms": 4, "queue_packets": 500},
        "clients": {"count": 1000, "namespaces": 4,
                    "access": [{"delay_ms": 1 + (i % 10), "rate_mbps": 10} for i in range(1000)]},
        "servers": {"count": 50, "namespaces": 2, "access": {"delay_ms": 1.5}},
        "foreground": {"clients": 0, "servers": 0},
    })
    t0 = time.monotonic()
    with Topology(spec, engine="native") as topo:
        up_s = time.monotonic() - t0
        rnd = random.Random(6)
        for a in rnd.sample(topo.clients, 5):
            b = rnd.choice(topo.servers)
            expected = topo.expected_rtt_ms(a, b)
            median = ping6_median(topo, a, b, count=8)
            assert expected - 0.05 <= median <= expected + 1.0, (a.ip, b.ip, median, expected)
        t1 = time.monotonic()
    down_s = time.monotonic() - t1
    print(f"1050 IPv6 hosts: up {up_s:.2f} s, down {down_s:.2f} s")
    assert topo.report["problems"] == []
    assert up_s < 30 and down_s < 15
