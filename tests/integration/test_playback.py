"""UPB, TPB and tcpreplay through a veth pair between two test namespaces.

Sender namespace ``a`` (10.9.0.1, the trace's server side) and receiver
namespace ``b`` (10.9.0.2, the client side). Arrivals are captured in ``b``
with tcpdump (nanosecond timestamps) and compared per packet against the
trace's schedule. The responsiveness test routes a -- r -- b, puts an htb bottleneck on
``r``'s way to ``b`` with a competing iperf3 bulk transfer through it, and
measures what each playback offers at the bottleneck's input.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dpkt
import numpy as np
import pytest

from swell.analysis.compare import compare_energy, halves_floor
from swell.analysis.energy import energy_plot
from swell.extract.reader import addr_to_str, read_all
from swell.generators.base import Netns, Proc, run_generator
from swell.generators.cbr import read_ditg_log
from swell.generators.playback import (
    DITG_MIN_PAYLOAD,
    PlaybackConfig,
    PlaybackGenerator,
)
from swell.generators.replay import Inject, ReplayConfig, ReplayGenerator

TRACE = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
A_IP, B_IP = "10.9.0.1", "10.9.0.2"

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("ITGSend", "ITGRecv", "tcpdump", "tcpreplay")),
    reason="needs d-itg, tcpdump and tcpreplay")


def pair(netns) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    a, b = netns.add("a"), netns.add("b")
    netns.veth(a, "va", b, "vb")
    netns.run(a, "ip", "addr", "add", f"{A_IP}/24", "dev", "va")
    netns.run(b, "ip", "addr", "add", f"{B_IP}/24", "dev", "vb")
    return a, b


def mac(netns, ns: str, ifname: str) -> str:  # type: ignore[no-untyped-def]
    return netns.run(ns, "cat", f"/sys/class/net/{ifname}/address").stdout.strip()


@contextmanager
def capture(ns: str, ifname: str, path: Path, bpf: str) -> Iterator[None]:
    """tcpdump of inbound packets, ns timestamps; waits until it listens, stops cleanly."""
    proc = Proc("tcpdump", Netns(ns), ["tcpdump", "-i", ifname, "-Q", "in", "-U", "-w",
                                       str(path), "--time-stamp-precision=nano", bpf])
    deadline = time.monotonic() + 15
    while not any("listening on" in ln for ln in proc.stderr_tail):
        assert proc.alive() and time.monotonic() < deadline, proc.error_text()
        time.sleep(0.05)  # tcpdump reports readiness only on stderr
    try:
        yield
    finally:
        settle(path)
        proc.stop()


def settle(path: Path, quiet_s: float = 0.6, limit_s: float = 15.0) -> None:
    """Wait until a -U capture file stops growing: tcpdump has read what the kernel holds
    (on a loaded machine it lags; SIGTERM would drop what it has not read yet)."""
    deadline, last, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)


def playback(tmp: Path, a: str, b: str, proto: str, start: float,
             dur: float) -> PlaybackGenerator:
    cfg = PlaybackConfig(trace=TRACE, out_dir=tmp, dst=B_IP, sender=Netns(a),
                         receiver=Netns(b), proto=proto, start_s=start, duration_s=dur)
    return PlaybackGenerator(cfg)


def test_upb_timing_sizes_and_energy(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = pair(netns)
    gen = playback(tmp_path, a, b, "udp", 3.0, 10.0)
    with capture(b, "vb", tmp_path / "rx.pcap", "udp and dst port 9700"):
        res = run_generator(gen)
    sched = gen.legs[0].sched
    assert res.summary["legs"]["server"]["received"] >= 0.998 * len(sched)
    seq, ts_ns, ip_len = ditg_arrivals(tmp_path / "rx.pcap")  # seq numbers D-ITG's, from 0
    missing = len(sched) - seq.size
    assert missing <= 0.002 * len(sched) and np.all(np.diff(seq) > 0)
    want_len = np.maximum(sched.ip_len, DITG_MIN_PAYLOAD["udp"] + 28)
    assert np.array_equal(ip_len, want_len[seq])
    t = (ts_ns - ts_ns[0]).astype(np.float64) / 1e9
    want = sched.t_s[seq] - sched.t_s[seq[0]]
    consecutive = np.diff(seq) == 1
    idt_err = np.abs(np.diff(t) - np.diff(want))[consecutive]
    p99 = float(np.percentile(idt_err, 99)) * 1e3
    drift = float(np.abs(t - want).max()) * 1e3
    print(f"UPB: {seq.size} packets captured of {len(sched)}, inter-arrival error p99 "
          f"{p99:.3f} ms, max offset {drift:.2f} ms, D-ITG {res.summary['legs']['server']}")
    assert p99 <= 1.0
    # energy plot of bytes per 0.5 ms bin: octave 1 is 1 ms
    bin_s = 0.0005
    n = int(sched.duration_s / bin_s) + 1
    orig = np.bincount((sched.t_s / bin_s).astype(int), weights=want_len, minlength=n)[:n]
    gen_x = np.bincount((t / bin_s).astype(int), weights=ip_len, minlength=n)[:n]
    cmp = compare_energy(energy_plot(orig, bin_s), energy_plot(gen_x, bin_s))
    cmp = cmp.with_floor(halves_floor(orig, bin_s))
    judged = np.isfinite(cmp.floor) & np.isfinite(cmp.diff)
    print("octave diff floor:", [(r["octave"], round(r["diff"], 3), round(r.get("floor", 0), 3))
                                 for r in cmp.rows()])
    assert judged.sum() >= 8
    assert cmp.passed[judged].all()


def ditg_arrivals(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Captured D-ITG UDP packets: sequence number (from 0), time (ns), IP length."""
    rows = []
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):  # a nanosecond capture: ts is exact to ~100 ns
            ip = dpkt.ethernet.Ethernet(buf).data
            seq = int.from_bytes(bytes(ip.data.data[4:8]), "big") - 1
            rows.append((seq, round(float(ts) * 1e9), ip.len))
    a = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return a[:, 0], a[:, 1], a[:, 2]


def tcp_stream_bytes(rx) -> int:  # type: ignore[no-untyped-def]
    """Distinct payload bytes of one direction of one TCP connection (retransmissions once)."""
    data = rx.payload_len > 0
    seq = rx.seq[data].astype(np.int64)
    rel = (seq - seq[0]) % (1 << 32)
    return int((rel + rx.payload_len[data]).max() - rel.min())


def test_tpb_carries_the_bytes_in_order(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = pair(netns)
    gen = playback(tmp_path, a, b, "tcp", 3.5, 3.5)
    with capture(b, "vb", tmp_path / "rx.pcap", "tcp and port 9700"):
        res = run_generator(gen)
    leg = gen.legs[0]
    summary = res.summary["legs"]["server"]
    sizes = gen.leg_sizes(leg)
    log = read_ditg_log(tmp_path / "server.itglog", tmp_path / "server.txt")
    order = np.argsort(log["seq"])
    # every message arrives, in order, with the trace's payload size (D-ITG pads < 24 bytes)
    assert np.array_equal(log["seq"][order], np.arange(1, len(sizes) + 1))
    assert np.array_equal(log["size"][order], np.maximum(sizes, DITG_MIN_PAYLOAD["tcp"]))
    rx = read_all(tmp_path / "rx.pcap")
    data = rx.payload_len > 0
    assert tcp_stream_bytes(rx) == summary["expected_bytes"]
    assert len({(int(s), int(d)) for s, d in zip(rx.sport[data], rx.dport[data],
                                                 strict=True)}) == 1  # one connection
    print(f"TPB: {summary}")
    assert summary["padded"] <= 0.01 * len(sizes)
    assert summary["offset_p99_ms"] <= 1.0  # writes follow the schedule
    assert summary["arrival_offset_p99_ms"] <= 20.0  # unshaped path: no lag builds up


def test_tcpreplay_rewrites_into_the_topology(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = pair(netns)
    for ns in (a, b):  # the hosts' own stacks stay silent (no RSTs to replayed segments)
        netns.run(ns, "iptables", "-A", "OUTPUT", "-j", "DROP")
    ma, mb = mac(netns, a, "va"), mac(netns, b, "vb")
    cfg = ReplayConfig(trace=TRACE, out_dir=tmp_path, clients=[A_IP], servers=[B_IP],
                       client_inject=Inject(Netns(a), "va", ma, mb),
                       server_inject=Inject(Netns(b), "vb", mb, ma), start_s=3.0,
                       duration_s=3.0)
    with capture(b, "vb", tmp_path / "at_b.pcap", "ip"), \
            capture(a, "va", tmp_path / "at_a.pcap", "ip"):
        res = run_generator(ReplayGenerator(cfg))
    counts = res.summary["counts"]
    assert res.summary["c2s"]["sent"] == counts["c2s"] > 100
    assert res.summary["s2c"]["sent"] == counts["s2c"] > 100
    for name, where, src, dst in (("c2s", "at_b", A_IP, B_IP), ("s2c", "at_a", B_IP, A_IP)):
        pk = read_all(tmp_path / f"{where}.pcap")
        print(f"tcpreplay {name}: {counts[name]} sent, {len(pk)} captured")
        # a burst can overflow the receiving veth's backlog on a loaded machine
        assert counts[name] >= len(pk) >= 0.98 * counts[name]
        assert {addr_to_str(int(h), int(lo)) for h, lo in zip(pk.saddr_hi, pk.saddr_lo,
                                                              strict=True)} == {src}
        assert {addr_to_str(int(h), int(lo)) for h, lo in zip(pk.daddr_hi, pk.daddr_lo,
                                                              strict=True)} == {dst}
        assert_checksums(tmp_path / f"{where}.pcap")


def assert_checksums(path: Path) -> None:
    with open(path, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            got = ip.sum
            ip.sum = 0
            assert dpkt.ip.IP(bytes(ip)).sum == got


def routed(netns) -> tuple[str, str, str, str]:  # type: ignore[no-untyped-def]
    """a -- r -- b: r forwards; returns the namespaces and b's address."""
    a, r, b = netns.add("a"), netns.add("r"), netns.add("b")
    netns.veth(a, "va", r, "ra")
    netns.veth(r, "rb", b, "vb")
    for ns, ifname, addr in ((a, "va", "10.9.0.1/24"), (r, "ra", "10.9.0.254/24"),
                             (r, "rb", "10.9.1.254/24"), (b, "vb", "10.9.1.2/24")):
        netns.run(ns, "ip", "addr", "add", addr, "dev", ifname)
    netns.run(a, "ip", "route", "add", "default", "via", "10.9.0.254")
    netns.run(b, "ip", "route", "add", "default", "via", "10.9.1.254")
    netns.run(r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    return a, r, b, "10.9.1.2"


@contextmanager
def bottleneck(netns, r: str, a: str, b: str, dst: str,  # type: ignore[no-untyped-def]
               bulk_s: float | None) -> Iterator[None]:
    """htb 8 Mbit/s (200 kB drop-tail) on r->b, optionally two iperf3 bulk TCP flows a->b."""
    netns.run(r, "tc", "qdisc", "add", "dev", "rb", "root", "handle", "1:", "htb", "default", "1")
    netns.run(r, "tc", "class", "add", "dev", "rb", "parent", "1:", "classid", "1:1", "htb",
              "rate", "8mbit", "ceil", "8mbit")
    netns.run(r, "tc", "qdisc", "add", "dev", "rb", "parent", "1:1", "bfifo", "limit", "200000")
    procs: list[Proc] = []
    try:
        if bulk_s is not None:
            procs.append(Proc("iperf3 -s", Netns(b), ["iperf3", "-s", "-1", "--forceflush",
                                                      "-B", dst]))
            procs[0].wait_line(lambda ln: "listening" in ln, 10)
            procs.append(Proc("iperf3 -c", Netns(a), ["iperf3", "-c", dst, "--forceflush",
                                                      "-P", "2", "-t", str(bulk_s)]))
            procs[1].wait_line(lambda ln: "connected" in ln, 10)
            time.sleep(1.0)  # let the bulk flow reach its steady state first
        yield
    finally:
        for proc in reversed(procs):
            proc.stop()
        netns.run(r, "tc", "qdisc", "del", "dev", "rb", "root")


def share_by(path: Path, proto: str, sched_s: float, total: int) -> float:
    """Share of the flow's bytes that passed a capture point by the schedule's end (+0.3 s)."""
    pk = read_all(path)
    pk = pk.select(pk.payload_len > 0)
    t = (pk.ts_ns - pk.ts_ns.min()).astype(np.float64) / 1e9
    early = pk.select(t <= sched_s + 0.3)
    if proto == "tcp":
        return tcp_stream_bytes(early) / total
    return float(early.payload_len.sum()) / total


def test_udp_playback_is_not_responsive_tcp_is(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What each playback offers to the bottleneck (r's ingress) and gets through (b)."""
    if shutil.which("iperf3") is None:
        pytest.skip("needs iperf3")
    a, r, b, dst = routed(netns)
    offered, delivered = {}, {}
    for proto, bulk in (("udp", True), ("tcp", True), ("tcp", False)):
        out = tmp_path / f"{proto}{bulk}"
        cfg = PlaybackConfig(trace=TRACE, out_dir=out, dst=dst, sender=Netns(a),
                             receiver=Netns(b), proto=proto, start_s=3.5, duration_s=3.5)
        gen = PlaybackGenerator(cfg)
        out.mkdir(parents=True)
        bpf = f"{proto} and dst port 9700"
        with bottleneck(netns, r, a, b, dst, 7 if bulk else None), \
                capture(r, "ra", out / "in.pcap", bpf), capture(b, "vb", out / "out.pcap", bpf):
            run_generator(gen)
        total = int(np.maximum(gen.leg_sizes(gen.legs[0]), DITG_MIN_PAYLOAD[proto]).sum())
        dur = gen.legs[0].sched.duration_s
        name = f"{proto}{' + bulk' if bulk else ''}"
        offered[name] = round(share_by(out / "in.pcap", proto, dur, total), 3)
        delivered[name] = round(share_by(out / "out.pcap", proto, dur, total), 3)
    print(f"share of the trace's bytes on schedule at an 8 Mbit/s bottleneck: offered "
          f"{offered}, delivered {delivered}")
    assert offered["udp + bulk"] >= 0.97  # UDP keeps sending at the trace's rate
    assert delivered["tcp"] >= 0.9  # alone, TCP keeps up with the schedule
    assert delivered["tcp + bulk"] <= 0.8  # beside a bulk flow it backs off and falls behind
