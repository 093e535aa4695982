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
from swell.errors import SwellError
from swell.extract.reader import addr_to_str, read_all
from swell.generators.base import Netns, Proc, run_generator
from swell.generators.cbr import read_ditg_log
from swell.generators.playback import (
    DITG_MIN_PAYLOAD,
    PlaybackConfig,
    PlaybackGenerator,
)
from swell.generators.replay import Inject, ReplayConfig, ReplayGenerator
from swell.steal import steal_ns

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
def capture(ns: str, ifname: str, path: Path, bpf: str, count: int | None = None,
            fin: bool = False) -> Iterator[None]:
    """tcpdump of inbound packets, ns timestamps; waits until it listens, stops cleanly.

    tcpdump lags on a loaded machine, so before stopping it: with ``count`` (the packets
    expected) wait for it to exit by itself; with ``fin`` wait until a TCP FIN is in the
    file; always wait until the file stops growing."""
    argv = ["tcpdump", "-i", ifname, "-Q", "in", "-U", "-w", str(path),
            "--time-stamp-precision=nano"] + (["-c", str(count)] if count else []) + [bpf]
    proc = Proc("tcpdump", Netns(ns), argv)
    deadline = time.monotonic() + 15
    while not any("listening on" in ln for ln in proc.stderr_tail):
        assert proc.alive() and time.monotonic() < deadline, proc.error_text()
        time.sleep(0.05)  # tcpdump reports readiness only on stderr
    try:
        yield
    finally:
        deadline = time.monotonic() + 15
        while count and proc.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        while fin and not has_fin(path) and time.monotonic() < deadline:
            time.sleep(0.1)
        settle(path)
        proc.stop()


def has_fin(path: Path) -> bool:
    try:
        return bool((read_all(path).tcp_flags & 1).any())
    except SwellError:  # not written yet
        return False


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
    with capture(b, "vb", tmp_path / "rx.pcap", "udp and dst port 9700",
                 len(gen.legs[0].sched)):
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


def _tpb_once(a: str, b: str, out: Path) -> dict:
    """One TPB run with every exactness check; returns its summary (whose timing is
    judged by ``on_time``, the only criterion re-measured)."""
    out.mkdir(parents=True, exist_ok=True)
    gen = playback(out, a, b, "tcp", 3.5, 3.5)
    with capture(b, "vb", out / "rx.pcap", "tcp and port 9700", fin=True):
        res = run_generator(gen)
    leg = gen.legs[0]
    summary = res.summary["legs"]["server"]
    sizes = gen.leg_sizes(leg)
    log = read_ditg_log(out / "server.itglog", out / "server.txt")
    order = np.argsort(log["seq"])
    # every message arrives, in order, with the trace's payload size (D-ITG pads < 24 bytes)
    assert np.array_equal(log["seq"][order], np.arange(1, len(sizes) + 1))
    assert np.array_equal(log["size"][order], np.maximum(sizes, DITG_MIN_PAYLOAD["tcp"]))
    rx = read_all(out / "rx.pcap")
    data = rx.payload_len > 0
    assert tcp_stream_bytes(rx) == summary["expected_bytes"]
    assert len({(int(s), int(d)) for s, d in zip(rx.sport[data], rx.dport[data],
                                                 strict=True)}) == 1  # one connection
    print(f"TPB: {summary}")
    assert summary["padded"] <= 0.01 * len(sizes)
    return summary


def on_time(summary: dict, steal_ms: float) -> bool:
    """Writes follow the schedule (a write may wait briefly for the window) and, the path
    being unshaped, no lag builds up: p99 offset within 5 ms plus half the CPU time the
    hypervisor took from this 2-core machine during the try. D-ITG never catches up after
    a hold, so a held sender ends behind by the holds (CI at dd52075: offsets 5-11 ms
    with 40-120 ms of steal; here 14-17 ms with 150-170 ms). A sender that falls behind
    steadily (an ordinary process sleeping late: 593 ms after 15.6 s; a window that stays
    closed) fails."""
    return (summary["arrival_offset_p99_ms"] <= 100.0
            and summary["offset_p99_ms"] <= 5.0 + steal_ms / 2)


def test_tpb_carries_the_bytes_in_order(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """One re-measurement if the write timing misses (a stall of the shared machine must
    not fail a correct sender); two misses fail. Bytes, order, sizes and the single
    connection are checked every time."""
    a, b = pair(netns)
    for attempt in ("try1", "try2"):
        s0 = steal_ns()
        summary = _tpb_once(a, b, tmp_path / attempt)
        steal = (steal_ns() - s0) / 1e6
        if on_time(summary, steal):
            break
        print(f"TPB timing missed ({attempt}; hypervisor steal {steal:.0f} ms)")
    assert on_time(summary, steal), (f"offsets p99 {summary['offset_p99_ms']:.1f} ms, "
                                     f"arrivals {summary['arrival_offset_p99_ms']:.1f} ms, "
                                     f"lag {summary['lag_ms']:.1f} ms, steal {steal:.0f} ms")


def test_tcpreplay_rewrites_into_the_topology(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = pair(netns)
    for ns in (a, b):  # the hosts' own stacks stay silent (no RSTs to replayed segments)
        netns.run(ns, "iptables", "-A", "OUTPUT", "-j", "DROP")
    ma, mb = mac(netns, a, "va"), mac(netns, b, "vb")
    cfg = ReplayConfig(trace=TRACE, out_dir=tmp_path, clients=[A_IP], servers=[B_IP],
                       client_inject=Inject(Netns(a), "va", ma, mb),
                       server_inject=Inject(Netns(b), "vb", mb, ma), start_s=3.0,
                       duration_s=3.0)
    gen = ReplayGenerator(cfg)
    counts = gen.prepare().counts  # split and rewrite first: the counts bound the captures
    with capture(b, "vb", tmp_path / "at_b.pcap", "ip", counts["c2s"]), \
            capture(a, "va", tmp_path / "at_a.pcap", "ip", counts["s2c"]):
        res = run_generator(gen)
    assert res.summary["c2s"]["sent"] == counts["c2s"] > 100
    assert res.summary["s2c"]["sent"] == counts["s2c"] > 100
    for name, where, src, dst in (("c2s", "at_b", A_IP, B_IP), ("s2c", "at_a", B_IP, A_IP)):
        pk = read_all(tmp_path / f"{where}.pcap")
        print(f"tcpreplay {name}: {counts[name]} sent, {len(pk)} captured")
        assert len(pk) == counts[name]
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
    """htb 6 Mbit/s (200 kB drop-tail) on r->b, optionally four iperf3 bulk TCP flows a->b."""
    netns.run(r, "tc", "qdisc", "add", "dev", "rb", "root", "handle", "1:", "htb", "default", "1")
    netns.run(r, "tc", "class", "add", "dev", "rb", "parent", "1:", "classid", "1:1", "htb",
              "rate", "6mbit", "ceil", "6mbit")
    netns.run(r, "tc", "qdisc", "add", "dev", "rb", "parent", "1:1", "bfifo", "limit", "200000")
    procs: list[Proc] = []
    try:
        if bulk_s is not None:
            procs.append(Proc("iperf3 -s", Netns(b), ["iperf3", "-s", "-1", "--forceflush",
                                                      "-B", dst]))
            procs[0].wait_line(lambda ln: "listening" in ln, 10)
            procs.append(Proc("iperf3 -c", Netns(a), ["iperf3", "-c", dst, "--forceflush",
                                                      "-P", "4", "-t", str(bulk_s)]))
            procs[1].wait_line(lambda ln: "connected" in ln, 10)
            time.sleep(1.0)  # let the bulk flow reach its steady state first
        yield
    finally:
        for proc in reversed(procs):
            proc.stop()
        netns.run(r, "tc", "qdisc", "del", "dev", "rb", "root")


def lateness_s(path: Path, proto: str, sched_t: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per scheduled message: when the flow's bytes up to its end had passed the capture
    point, minus its scheduled time (both from the flow's first packet)."""
    pk = read_all(path)
    pk = pk.select(pk.payload_len > 0)
    t = (pk.ts_ns - pk.ts_ns.min()).astype(np.float64) / 1e9
    if proto == "tcp":  # highest sequence byte seen so far (retransmissions count once)
        rel = (pk.seq.astype(np.int64) - int(pk.seq[0])) % (1 << 32)
        through = np.maximum.accumulate(rel + pk.payload_len) - rel.min()
    else:
        through = np.cumsum(pk.payload_len.astype(np.int64))
    idx = np.minimum(np.searchsorted(through, np.cumsum(sizes)), t.size - 1)
    return t[idx] - sched_t


def test_udp_playback_is_not_responsive_tcp_is(netns, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """How late each playback offers its bytes to a shared bottleneck (measured at r)."""
    if shutil.which("iperf3") is None:
        pytest.skip("needs iperf3")
    a, r, b, dst = routed(netns)
    late_ms, steal_ms = {}, 0.0
    for proto, bulk in (("udp", True), ("tcp", True), ("tcp", False)):
        out = tmp_path / f"{proto}{bulk}"
        cfg = PlaybackConfig(trace=TRACE, out_dir=out, dst=dst, sender=Netns(a),
                             receiver=Netns(b), proto=proto, start_s=3.0, duration_s=10.0)
        gen = PlaybackGenerator(cfg)  # 2.7 Mbit/s on average, 9.5 Mbit/s in its busiest second
        out.mkdir(parents=True)
        s0 = steal_ns()
        with bottleneck(netns, r, a, b, dst, 12 if bulk else None), \
                capture(r, "ra", out / "in.pcap", f"{proto} and dst port 9700"):
            run_generator(gen)
        if proto == "udp":
            steal_ms = (steal_ns() - s0) / 1e6
        sizes = np.maximum(gen.leg_sizes(gen.legs[0]), DITG_MIN_PAYLOAD[proto])
        late = lateness_s(out / "in.pcap", proto, gen.legs[0].sched.t_s, sizes)
        late_ms[f"{proto}{' + bulk' if bulk else ''}"] = np.round(
            np.percentile(late, [50, 90]) * 1e3, 1).tolist()
    print(f"lateness p50/p90 (ms) at a 6 Mbit/s bottleneck's input: {late_ms}; "
          f"hypervisor steal during the UDP try {steal_ms:.0f} ms")
    # UDP keeps sending on the trace's schedule: its median lateness stays in
    # milliseconds (3-4 ms typically, 7.7 ms seen on a busy 2-core machine; p90
    # leaves room for that CPU), where TCP beside the bulk flows is >= 300 ms late.
    # D-ITG never catches up after the host holds it, so every hold the hypervisor
    # takes adds to the lateness of what follows: allowed on top, as in the TPB test,
    # half the steal during the try (summed over both CPUs; CI at f545b7c: 20.2 and
    # 27.3 ms medians on a host with about 90 ms of steal per 5 s)
    assert late_ms["udp + bulk"][0] <= 20.0 + steal_ms / 2, (late_ms, steal_ms)
    assert late_ms["udp + bulk"][1] <= 100.0 + steal_ms / 2, (late_ms, steal_ms)
    # TCP backs off beside the bulk flows: far later than the same TCP playback alone
    assert late_ms["tcp + bulk"][0] >= max(300.0, 4 * late_ms["tcp"][0])
