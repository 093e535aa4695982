"""Swing generator end to end, in a namespace of its own (its loopback gives
127.0.0.0/8 addresses without setup and ports nobody else uses)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import dpkt
import pytest

from swell.errors import SwellError
from swell.generators.base import Netns, run_generator
from swell.generators.schedule import Conn, Rre, Schedule, Session, write_schedule
from swell.generators.swing import (
    PlaceHosts,
    SwingConfig,
    SwingGenerator,
    load_records,
    verify_records,
)
from swell.native import native_artifact

REPO = Path(__file__).resolve().parents[2]


def tcp(server: str, offset: float, pairs: list[tuple[int, int, float]]) -> Conn:
    return Conn(server, "tcp", "web-tcp", offset, tuple(pairs))


def udp(server: str, offset: float, pairs: list[tuple[int, int, float]]) -> Conn:
    return Conn(server, "udp", "dns-udp", offset, tuple(pairs))


def run_swing(ns: str, sched: Schedule, tmp: Path, **kw: float) -> tuple[SwingGenerator, list]:
    path = write_schedule(tmp / "sched.jsonl", sched)
    gen = SwingGenerator(SwingConfig(path, tmp / "out", server=Netns(ns), client=Netns(ns),
                                     interval_ms=100))
    res = run_generator(gen, **kw)
    assert res.summary["client"]["final"] is True
    return gen, load_records(res.files["records"])


def test_bytes_match_schedule_exactly(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    s1, s2 = "127.0.2.1:7001", "127.0.2.2:7001"
    sessions = [
        Session(0, 0.0, "127.0.1.1", (
            Rre(0.0, (tcp(s1, 0.0, [(100, 100_000, 0.0), (300, 3_000_000, 0.0)]),
                      udp(s1, 0.0, [(24, 300, 0.0), (3000, 5000, 0.0)]),
                      tcp(s2, 0.01, [(8, 0, 0.0), (8, 10, 0.0)]))),
            Rre(0.05, (tcp(s2, 0.0, [(70_000, 1, 0.0)]),)))),
        Session(1, 0.02, "127.0.1.2", (Rre(0.0, (udp(s2, 0.0, [(5000, 20_000, 0.0)]),)),)),
    ] + [Session(i, 0.03 + i * 0.002, f"127.0.1.{3 + i % 50}",
                 (Rre(0.0, (tcp(s1 if i % 2 else s2, 0.0, [(200 + i, 1000 * i, 0.0)]),)),))
         for i in range(2, 200)]
    gen, records = run_swing(ns, Schedule(7, 5.0, sessions), tmp_path)
    assert verify_records(gen.sched, records) == []
    assert len(records) == len(gen.sched.conns())
    assert {r["proto"] for r in records} == {"tcp", "udp"}


def test_think_times_and_gaps_are_honoured(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    srv = "127.0.2.1:7002"
    sess = Session(0, 0.0, "127.0.1.1", (
        Rre(0.0, (tcp(srv, 0.0, [(100, 1000, 0.2), (100, 1000, 0.0)]),
                  tcp(srv, 0.1, [(100, 1000, 0.0)]),
                  udp(srv, 0.25, [(100, 1000, 0.1), (100, 100, 0.0)]))),
        Rre(0.3, (tcp(srv, 0.0, [(100, 1000, 0.0)]),))))
    gen, records = run_swing(ns, Schedule(1, 5.0, [sess]), tmp_path)
    assert verify_records(gen.sched, records) == []
    by = {(r["rre"], r["conn"]): r for r in records}
    tol = 0.03
    assert abs(by[0, 1]["start"] - by[0, 0]["start"] - 0.1) < tol  # interConn
    assert abs(by[0, 2]["start"] - by[0, 0]["start"] - 0.25) < tol
    assert 0.2 <= by[0, 0]["end"] - by[0, 0]["start"] < 0.2 + tol  # reqThink
    assert 0.1 <= by[0, 2]["end"] - by[0, 2]["start"] < 0.1 + tol
    rre0_end = max(r["end"] for k, r in by.items() if k[0] == 0)
    assert 0.3 <= by[1, 0]["start"] - rre0_end < 0.3 + tol  # think time between RREs


def test_server_waits_are_honoured(netns, tmp_path: Path) -> None:
    """A pair's server wait holds its response back by that long after the request
    (the trace's server latency), in order behind a response still waiting; pairs
    without a wait on the same server are answered at once."""
    ns = netns.add("gen")
    srv = "127.0.2.1:7003"
    waited = Conn(srv, "tcp", "web-tcp", 0.0, ((100, 1000, 0.0), (12, 5000, 0.0)), (0.3, 0.2))
    plain = Conn(srv, "tcp", "web-tcp", 0.0, ((100, 1000, 0.0), (100, 1000, 0.0)))
    sessions = [Session(0, 0.0, "127.0.1.1", (Rre(0.0, (waited,)),)),
                Session(1, 0.0, "127.0.1.2", (Rre(0.0, (plain,)),))]
    gen, records = run_swing(ns, Schedule(1, 5.0, sessions), tmp_path)
    assert verify_records(gen.sched, records) == []
    by = {r["session"]: r for r in records}
    took = by[0]["end"] - by[0]["start"]
    assert 0.5 <= took < 0.5 + 0.05, took  # both waits, one after the other
    assert by[1]["end"] - by[1]["start"] < 0.05  # no wait: loopback round trips only
    first = json.loads((tmp_path / "sched.jsonl").read_text().splitlines()[1])
    assert first["rres"][0]["conns"][0]["pairs"] == [[100, 1000, 0.0, 0.3], [12, 5000, 0.0, 0.2]]


def test_anchored_requests_leave_at_their_time(netns, tmp_path: Path) -> None:
    """A request with an anchor (``at``) leaves at that time from its connection's start
    instead of its think time after the previous response; at once when the response
    ends after it (a server wait here)."""
    ns = netns.add("gen")
    srv = "127.0.2.1:7004"
    two = ((100, 1000, 0.6), (100, 1000, 0.0))
    early = Conn(srv, "tcp", "web-tcp", 0.0, two, at=(-1.0, 0.3))  # 0.3 s, not 0.6 think
    passed = Conn(srv, "tcp", "web-tcp", 0.0, ((100, 1000, 0.0), (100, 1000, 0.0)),
                  at=(-1.0, 0.0))  # already due when the first response ends
    late = Conn(srv, "tcp", "web-tcp", 0.0, ((100, 1000, 0.6), (100, 1000, 0.0)), (0.2, 0.0),
                at=(-1.0, 0.1))  # the response ends at 0.2 s: then at once, not 0.6 later
    plain = Conn(srv, "tcp", "web-tcp", 0.0, two)  # no anchor: the think time
    sessions = [Session(i, 0.0, f"127.0.1.{i + 1}", (Rre(0.0, (c,)),))
                for i, c in enumerate((early, passed, late, plain))]
    gen, records = run_swing(ns, Schedule(1, 5.0, sessions), tmp_path)
    assert verify_records(gen.sched, records) == []
    took = {r["session"]: r["end"] - r["start"] for r in records}
    tol = 0.03
    assert 0.3 <= took[0] < 0.3 + tol, took
    assert took[1] < tol, took
    assert 0.2 <= took[2] < 0.2 + tol, took
    assert 0.6 <= took[3] < 0.6 + tol, took
    first = json.loads((tmp_path / "sched.jsonl").read_text().splitlines()[1])
    assert first["rres"][0]["conns"][0]["at"] == [-1.0, 0.3]


def _udp_to(pcap: Path, port: int) -> list[tuple[float, str, int]]:
    """(time, source address, UDP payload bytes) of the datagrams to ``port``."""
    out = []
    with pcap.open("rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.udp.UDP) \
                    and ip.data.dport == port:
                out.append((float(ts), ".".join(map(str, ip.src)), len(ip.data.data)))
    return out


def test_paced_udp_requests_leave_as_their_datagrams(netns, tmp_path: Path) -> None:
    """A UDP request with a ``pace`` leaves as that many datagrams of about equal size,
    the first at once and the rest evenly over its span; a count a request cannot have
    is raised to what 1,472-byte datagrams need; without a pace, one write as before."""
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump missing (apt-get install tcpdump)")
    ns = netns.add("gen")
    srv = "127.0.2.1:7006"
    paced = Conn(srv, "udp", "other-udp", 0.0, ((1000, 100, 0.0), (3000, 100, 0.0)),
                 pace=((4, 0.3), (2, 0.0)))
    whole = Conn(srv, "udp", "other-udp", 0.0, ((1000, 100, 0.0),))
    sessions = [Session(0, 0.0, "127.0.1.1", (Rre(0.0, (paced,)),)),
                Session(1, 0.0, "127.0.1.2", (Rre(0.0, (whole,)),))]
    pcap = tmp_path / "lo.pcap"
    dump = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", "lo", "-U",
                             "--immediate-mode", "-w", str(pcap), "udp port 7006"],
                            stderr=subprocess.PIPE, text=True)
    try:
        assert dump.stderr is not None and "listening" in dump.stderr.readline()
        gen, records = run_swing(ns, Schedule(1, 5.0, sessions), tmp_path)
        time.sleep(0.2)
    finally:
        dump.terminate()
        dump.wait(timeout=10)
    assert verify_records(gen.sched, records) == []
    dgrams = _udp_to(pcap, 7006)
    first = [d for d in dgrams if d[1] == "127.0.1.1"]
    assert [n for _, _, n in first] == [250] * 4 + [1000] * 3
    gaps = [b[0] - a[0] for a, b in zip(first[:4], first[1:4], strict=False)]
    assert all(0.09 < g < 0.13 for g in gaps), gaps  # 0.3 s over four datagrams
    assert first[6][0] - first[4][0] < 0.02  # no span: at once
    assert [n for _, src, n in dgrams if src == "127.0.1.2"] == [1000]
    took = {r["session"]: r["end"] - r["start"] for r in records}
    assert took[0] >= 0.3 and took[1] < 0.05, took
    line = json.loads((tmp_path / "sched.jsonl").read_text().splitlines()[1])
    assert line["rres"][0]["conns"][0]["pace"] == [[4, 0.3], [2, 0.0]]


def test_sigterm_stops_cleanly_and_cuts_open_connections(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    sessions = [Session(i, i * 0.01, "127.0.1.1",
                        (Rre(0.0, (tcp("127.0.2.1:7003", 0.0, [(100, 100, 30.0), (8, 8, 0.0)]),)),))
                for i in range(20)]
    gen, records = run_swing(ns, Schedule(1, 60.0, sessions), tmp_path, duration_s=1.0)
    assert all(p.popen.returncode is not None for p in gen.procs)
    assert len(records) == 20
    assert {r["error"] for r in records} == {"cut"}
    assert all(r["tx"] == 100 and r["rx"] == 100 for r in records)


def test_zero_sessions_and_unknown_fields_are_clear_errors(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"format":"swell-schedule","version":1,"seed":1,"sessions":0,'
                     '"duration_s":1}\n')
    with pytest.raises(SwellError, match="zero sessions"):
        SwingGenerator(SwingConfig(empty, tmp_path / "o"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format":"swell-schedule","version":1,"seed":1,"sessions":1,'
                   '"duration_s":1}\n{"id":0,"t":0,"client":"127.0.0.1","colour":1,"rres":[]}\n')
    with pytest.raises(SwellError, match="unknown field"):
        SwingGenerator(SwingConfig(bad, tmp_path / "o"))
    for path, msg in ((empty, "zero sessions"), (bad, "unknown field `colour`")):
        res = netns.run(ns, str(native_artifact("swell-gen")), "run", "--schedule", str(path),
                        "--records", str(tmp_path / "r.jsonl"), check=False)
        assert res.returncode == 2 and msg in res.stderr
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    assert pids.strip() == ""


def test_schedule_from_a_real_model(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    model = tmp_path / "model"
    subprocess.run([str(REPO / ".venv/bin/swell"), "extract", str(REPO / "data/pcap/example.pcap"),
                    "-o", str(model)], check=True, capture_output=True,
                   env={"SWELL_QUIET": "1", "PATH": "/usr/bin:/bin"})
    model_zero = tmp_path / "model0"
    subprocess.run([str(REPO / ".venv/bin/swell"), "model", "variant", str(model), "-o",
                    str(model_zero), "--zero-think"], check=True, capture_output=True,
                   env={"SWELL_QUIET": "1", "PATH": "/usr/bin:/bin"})
    sched_path = tmp_path / "s.jsonl"
    clients = ",".join(f"127.0.1.{i}" for i in range(1, 9))
    servers = ",".join(f"127.0.2.{i}" for i in range(1, 5))
    subprocess.run([str(REPO / ".venv/bin/swell"), "gen", "schedule", str(model_zero), "-o",
                    str(sched_path), "--clients", clients, "--servers", servers, "--duration",
                    "2", "--scale", "20", "--seed", "5"], check=True, capture_output=True)
    gen = SwingGenerator(SwingConfig(sched_path, tmp_path / "out", server=Netns(ns),
                                     client=Netns(ns)))
    res = run_generator(gen, duration_s=5.0)
    records = load_records(res.files["records"])
    done = [r for r in records if r["ok"]]
    assert len(done) >= 200 and {r["error"] for r in records} <= {"", "cut"}
    assert all((r["tx"], r["rx"]) == (r["exp_tx"], r["exp_rx"]) for r in done)
    assert {r["app"] for r in done} >= {"dns-udp"}


def test_cli_runs_a_schedule_between_namespaces(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    sessions = [Session(i, i * 0.01, f"127.0.1.{1 + i % 2}", (Rre(0.0, (
        tcp("127.0.2.1:7004", 0.0, [(100, 5000, 0.0)]),
        udp("127.0.2.1:7004", 0.0, [(50, 500, 0.0)]))),)) for i in range(30)]
    path = write_schedule(tmp_path / "s.jsonl", Schedule(1, 1.0, sessions))
    res = subprocess.run([str(REPO / ".venv/bin/swell"), "gen", "swing", "--schedule", str(path),
                          "--client-group", f"{ns}=127.0.1.1", "--client-group",
                          f"{ns}=127.0.1.2", "--dst-ns", ns, "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=60,
                         env={"SWELL_QUIET": "1", "PATH": "/usr/sbin:/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["mismatches"] == 0 and summary["client"]["conns_ok"] == 60
    assert summary["runners"] == 2


def test_several_places_per_side(netns, tmp_path: Path) -> None:
    ns = netns.add("gen")
    clients, servers = ["127.0.1.1", "127.0.1.2"], ["127.0.2.1", "127.0.2.2"]
    sessions = [Session(i, i * 0.005, clients[i % 2], (Rre(0.0, (
        tcp(f"{servers[i // 2 % 2]}:7005", 0.0, [(100 + i, 2000 + i, 0.0)]),
        udp(f"{servers[(i // 2 + 1) % 2]}:7005", 0.0, [(30, 40 + i, 0.0)]))),))
        for i in range(40)]
    path = write_schedule(tmp_path / "s.jsonl", Schedule(3, 1.0, sessions))
    cfg = SwingConfig(path, tmp_path / "out", interval_ms=100,
                      server_groups=[PlaceHosts(Netns(ns), [a]) for a in servers],
                      client_groups=[PlaceHosts(Netns(ns), [a]) for a in clients])
    gen = SwingGenerator(cfg)
    res = run_generator(gen)
    assert res.summary["runners"] == 2 and len(gen.servers) == 2
    assert res.summary["client"]["conns_ok"] == 80 and res.summary["client"]["final"]
    assert res.summary["server"]["accepted"] == 40 + 3  # + readiness probes: 2 + 1
    assert verify_records(gen.sched, load_records(res.files["records"])) == []
    with pytest.raises(SwellError, match="no server group"):
        SwingGenerator(SwingConfig(path, tmp_path / "o2", server_groups=cfg.server_groups[:1]))
