"""Responsiveness (issue 5): a Swing background backs off for a bulk TCP transfer, CBR UDP does not.

One dumbbell (native engine; 10 Mbit/s, 5 ms each way, a 250-packet drop-tail
queue) carries two backgrounds at once on separate emulated hosts, both in
the server -> client direction (the bottleneck's reverse capture):

* Swing (``swell-gen`` from a schedule): one session per second, each one TCP
  connection of 40 request/response exchanges (300 B requests, 10-20 kB
  responses, 0.1 s think time), about 5 Mbit/s alone. Each exchange costs
  a round trip or two, so the sessions are paced by the RTT as real
  request/response traffic is; ~7 sessions are active at any time, which
  keeps the 1 s rate steady (4.7-5.4 Mbit/s) for window means. Arrivals are
  open loop (Swing's session process), so throughput can only fall while
  sessions are slowed, not forever: the bulk phase is shorter than the time
  the slowed sessions take to pile up to the old rate;
* CBR over UDP at 2.5 Mbit/s (``swell-gen`` paced sender), open loop.

An iperf3 bulk download (foreground server -> foreground client, CUBIC)
starts at ``BULK_START`` and stops ``BULK_LEN`` seconds later. It fills the
bottleneck queue (300 ms at 10 Mbit/s), every Swing exchange waits behind it,
and the Swing sessions slow down: Swing's throughput falls. When the bulk
stops, the backlog drains and Swing returns to (or above) its earlier rate.
CBR keeps its rate (only the few packets that find the queue full are lost).

Throughput is measured from the bottleneck capture with the foreground hosts'
packets excluded, per background by address, as means over windows that
skip the transitions (before [8, 20) s, during [22, 40) s, after [44, 56) s).
Measured here (4 runs, 1 s series printed with ``-s``): Swing ~5.0 Mbit/s
alone, during/before 0.63-0.68 (it drops to ~2 Mbit/s, then climbs as the
slowed sessions pile up), after/before 1.43-1.48 (the backlog drains);
CBR during/before 0.99-1.00. Asserted: Swing during < 0.75 x before, after
> 0.85 x before and > 1.3 x during; CBR within 10% of its rate and during,
after > 0.9 x before. About 60 s.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from swell.analysis.bottleneck import (
    load_bottleneck,
    only_hosts,
    rate_series,
    window_mean,
    without_hosts,
)
from swell.experiments.tcpsettings import set_tcp
from swell.generators.base import Generator
from swell.generators.cbr import CbrConfig, CbrGenerator
from swell.generators.schedule import Conn, Rre, Schedule, Session, write_schedule
from swell.generators.swing import PlaceHosts, SwingConfig, SwingGenerator
from swell.topologies.placement import host_place as place_of
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology

BULK_START, BULK_LEN, RUN_S = 20.0, 20.0, 56.0
WINDOWS = {"before": (8.0, 20.0), "during": (22.0, 40.0), "after": (44.0, 56.0)}
CBR_BPS = 2.5e6

TOPO = {
    "network": "10.81.0.0/16",
    "bottleneck": {"rate_mbps": 10, "delay_ms": 5, "queue_packets": 250},
    "clients": {"count": 21, "access": {"delay_ms": 2}},
    "servers": {"count": 6, "access": {"delay_ms": 2}},
    "foreground": {"clients": 1, "servers": 1},
    "engine": "native",
    "seed": 1,
}


def swing_schedule(clients: list[str], servers: list[str], duration_s: float) -> Schedule:
    """Steady request/response sessions, one per second, sizes jittered by a seeded rng."""
    rng = np.random.default_rng(3)
    sessions = []
    for i, t in enumerate(np.arange(0.0, duration_s, 1.0)):
        pairs = tuple((300, int(rng.integers(10_000, 20_001)), 0.1) for _ in range(40))
        conn = Conn(f"{servers[i % len(servers)]}:8080", "tcp", "web-tcp", 0.0, pairs)
        sessions.append(Session(i, float(t), clients[i % len(clients)], (Rre(0.0, (conn,)),)))
    return Schedule(3, duration_s, sessions)


def backgrounds(topo: Topology, out: Path) -> tuple[SwingGenerator, CbrGenerator]:
    sw_clients, sw_servers = topo.clients[1:], topo.servers[1:]
    sched = swing_schedule([h.ip for h in sw_clients], [h.ip for h in sw_servers], RUN_S)
    path = write_schedule(out / "schedule.jsonl", sched)
    swing = SwingGenerator(SwingConfig(
        schedule=path, out_dir=out / "swing",
        server=place_of(topo, sw_servers[0]), client=place_of(topo, sw_clients[0]),
        server_groups=[PlaceHosts(place_of(topo, sw_servers[0]), [h.ip for h in sw_servers])],
        client_groups=[PlaceHosts(place_of(topo, sw_clients[0]), [h.ip for h in sw_clients])],
        duration_s=RUN_S + 2))
    rx, tx = topo.clients[0], topo.servers[0]
    cbr = CbrGenerator(CbrConfig(dst=rx.ip, src=tx.ip, rate_bps=CBR_BPS, out_dir=out / "cbr",
                                 size=1400, duration_s=RUN_S + 2, server=place_of(topo, rx),
                                 client=place_of(topo, tx)))
    return swing, cbr


def start(gens: list[Generator]) -> None:
    for g in gens:
        g.check()
        g.start_server()
        g.wait_ready(15)
    for g in gens:
        g.start_client()


def bulk_download(topo: Topology, t0: float) -> None:
    """iperf3 from the foreground server to the foreground client in [BULK_START, +BULK_LEN)."""
    cli, srv = topo.fg_clients[0], topo.fg_servers[0]
    topo.popen_in(srv, ["iperf3", "-s", "-1", "-B", srv.ip], stdout=subprocess.DEVNULL)
    time.sleep(max(0.0, t0 + BULK_START - time.monotonic()))
    res = topo.run_in(cli, ["iperf3", "-c", srv.ip, "-B", cli.ip, "-R", "-t", str(BULK_LEN),
                            "-C", "cubic"], check=False, timeout=BULK_LEN + 20)
    assert res.returncode == 0, res.stderr


def run_experiment(out: Path) -> dict[str, Any]:
    spec = spec_from_dict(TOPO, "responsiveness topology")
    with Topology(spec, capture_dir=out / "capture") as topo:
        set_tcp(topo, "reno")  # as swell run does by default (the host's may be bbr)
        swing, cbr = backgrounds(topo, out)
        try:
            start([swing, cbr])
            t0_ns, t0 = time.time_ns(), time.monotonic()
            bulk_download(topo, t0)
            time.sleep(max(0.0, t0 + RUN_S + 0.5 - time.monotonic()))
        finally:
            swing.stop()
            cbr.stop()
        fg = [h.ip for h in topo.fg_clients + topo.fg_servers]
        cbr_hosts = [topo.clients[0].ip, topo.servers[0].ip]
    s2c = without_hosts(load_bottleneck(out / "capture")["s2c"], fg)
    end_ns = t0_ns + int(RUN_S * 1e9)
    sw = rate_series(without_hosts(s2c, cbr_hosts), 1.0, t0_ns, end_ns)
    cb = rate_series(only_hosts(s2c, cbr_hosts), 1.0, t0_ns, end_ns)
    means = {name: {w: window_mean(series, 1.0, a, b) for w, (a, b) in WINDOWS.items()}
             for name, series in (("swing", sw), ("cbr", cb))}
    return {"means": means, "swing_series": sw, "cbr_series": cb}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    res = run_experiment(tmp_path_factory.mktemp("responsiveness"))
    m = res["means"]
    print("\nmeans (Mbit/s): " + "; ".join(
        f"{name} " + ", ".join(f"{w} {v / 1e6:.2f}" for w, v in ws.items())
        for name, ws in m.items()))
    print("swing 1 s series (Mbit/s):", np.round(res["swing_series"] / 1e6, 1).tolist())
    return m


def test_swing_background_falls_under_bulk_tcp_and_recovers(measured: dict[str, Any]) -> None:
    sw = measured["swing"]
    assert sw["before"] > 3e6, "the Swing background alone must be a substantial share"
    assert sw["during"] < 0.75 * sw["before"], sw
    assert sw["after"] > 0.85 * sw["before"], sw
    assert sw["after"] > 1.3 * sw["during"], sw


def test_cbr_udp_background_does_not_fall(measured: dict[str, Any]) -> None:
    cb = measured["cbr"]
    assert abs(cb["before"] - CBR_BPS) < 0.1 * CBR_BPS, cb
    assert cb["during"] > 0.9 * cb["before"], cb
    assert cb["after"] > 0.9 * cb["before"], cb
