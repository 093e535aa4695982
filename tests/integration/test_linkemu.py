"""Integration tests of the native link-emulation engine (swell-link), as root.

Each test builds its own small dumbbell with the ``netns`` fixture: namespace
``ha`` holds many addresses 10.1.0.i/16 on one veth, ``hb`` holds 10.2.0.i/16,
and ``rt`` holds the two engine ports (no IPs, no forwarding), so the engine
is the only path. The hosts' default routes go via gateway IPs the engine
answers ARP for. Measurements run inside the namespaces from this process:
sockets are opened after ``setns`` (a socket stays in the namespace it was
made in), iperf3 runs under ``ip netns exec``.

Checked: delay invariant (RTT = 2 x access + 2 x bottleneck), rate (TCP
goodput, UDP overload, queue bound), loss (Bernoulli, Gilbert-Elliott burst
length), per-host links in one namespace, TCP responsiveness and fairness,
oversized frames counted as truncated by the receive ring, and that the
engine process goes away (stop, SIGKILL of its parent).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from swell.native import native_artifact
from swell.steal import steal_ns
from swell.topologies.linkemu import (
    EngineConfig,
    HostLink,
    LinkEngine,
    LossModel,
    PipeSpec,
    PortSpec,
    Route,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")


@pytest.fixture(scope="module", autouse=True)
def _engine_built() -> None:
    try:
        native_artifact("swell-link")
    except Exception as exc:  # visible reason instead of 20 errors
        pytest.skip(f"swell-link not built: {exc}")

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the block (this thread) inside namespace ``name``; sockets made there stay there."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {name}")
        yield
    finally:
        if _libc.setns(home, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back")
        os.close(target)
        os.close(home)


def addr(side: int, i: int) -> str:
    """The i-th host address (from 1) on side 1 (ha) or 2 (hb): 10.side.0.1 onwards."""
    return f"10.{side}.{(i - 1) // 250}.{(i - 1) % 250 + 1}"


class Bed:
    """ha (10.1.0.i/16) -- [pa  rt  pb] -- hb (10.2.0.i/16); the engine owns pa and pb."""

    def __init__(self, netns: Any, n_a: int, n_b: int) -> None:
        self.netns = netns
        self.prefix: str = netns.prefix
        self.a, self.b, self.rt = netns.add("ha"), netns.add("hb"), netns.add("rt")
        for ns in (self.a, self.b, self.rt):
            for key in ("all", "default"):
                netns.run(ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1")
        netns.veth(self.a, "eth0", self.rt, "pa")
        netns.veth(self.b, "eth0", self.rt, "pb")
        for ns, side, n in ((self.a, 1, n_a), (self.b, 2, n_b)):
            lines = [f"address add {addr(side, i)}/16 dev eth0" for i in range(1, n + 1)]
            lines.append(f"route add default via 10.{side}.255.254")
            subprocess.run(["ip", "-n", ns, "-batch", "-"], input="\n".join(lines) + "\n",
                           check=True, text=True, capture_output=True)
        link = json.loads(netns.run(self.a, "ip", "-j", "link", "show", "eth0").stdout)
        self.a_mac: str = link[0]["address"]


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


SO_TIMESTAMPNS = 35


def _echo_request(ident: int, seq: int) -> bytes:
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"swell-probe" * 4
    return hdr[:2] + struct.pack("!H", _checksum(hdr)) + hdr[4:]


def _read_replies(s: socket.socket, ident: int) -> Iterator[tuple[int, int]]:
    """(sequence, kernel receive time in ns) of queued echo replies for ``ident``."""
    with contextlib.suppress(BlockingIOError):
        while True:
            data, anc, _, _ = s.recvmsg(2048, 64)
            ihl = (data[0] & 0x0F) * 4
            typ, _, _, pid, pseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            stamp = next((struct.unpack("qq", d[:16]) for lvl, t, d in anc
                          if lvl == socket.SOL_SOCKET and t == SO_TIMESTAMPNS), None)
            if typ == 0 and pid == ident and stamp is not None:
                yield pseq, stamp[0] * 1_000_000_000 + stamp[1]


def icmp_rtts(bed: Bed, srcs: list[str], dst: str, count: int,
              interval: float) -> dict[str, list[float]]:
    """ICMP echo RTTs (ms) from each source address in ``ha`` to ``dst``, sent together.

    Replies carry the kernel's receive timestamp (SO_TIMESTAMPNS), so the
    probe's own scheduling delay does not count; send times are taken just
    before ``sendto``.
    """
    with in_netns(bed.a):
        socks = [socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                 for _ in srcs]
    for s, src in zip(socks, srcs, strict=True):
        s.bind((src, 0))
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sent: dict[tuple[int, int], int] = {}
    rtts: dict[str, list[float]] = {src: [] for src in srcs}
    ident = {i: (os.getpid() + 97 * i) & 0xFFFF for i in range(len(srcs))}
    start = time.monotonic()
    seq = 0
    deadline = start + count * interval + 2.0
    while time.monotonic() < deadline and sum(map(len, rtts.values())) < count * len(srcs):
        if seq < count and time.monotonic() >= start + seq * interval:
            for i, s in enumerate(socks):
                pkt = _echo_request(ident[i], seq)
                sent[(i, seq)] = time.time_ns()
                s.sendto(pkt, (dst, 0))
            seq += 1
        wait = max(0.0, min(start + seq * interval - time.monotonic(), 0.005))
        ready, _, _ = select.select(socks, [], [], wait if seq < count else 0.05)
        for s in ready:
            i = socks.index(s)
            for pseq, stamp in _read_replies(s, ident[i]):
                if (i, pseq) in sent:
                    rtts[srcs[i]].append((stamp - sent.pop((i, pseq))) / 1e6)
    for s in socks:
        s.close()
    return rtts


def _wait_listening(bed: Bed, port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = bed.netns.run(bed.b, "ss", "-Hltn", f"sport = :{port}").stdout
        if out.strip():
            return
        time.sleep(0.02)
    raise AssertionError(f"iperf3 server on port {port} did not start")


def iperf(bed: Bed, src: str, dst: str, seconds: int, omit: int, port: int = 5201,
          udp_mbit: float | None = None, wait: bool = True,
          probe: Callable[[], Any] | None = None) -> Any:
    """iperf3 from ``src`` (in ha) to ``dst`` (in hb); returns the client's JSON.

    With ``wait=False`` returns a function that waits and returns it; ``probe``
    runs while the flow is on and its result lands in ``["probe"]``.
    """
    # iperf3 at nice -10: on this shared 2-core machine a starved sender idles the link,
    # which would measure the scheduler rather than the emulator
    server = subprocess.Popen(["ip", "netns", "exec", bed.b, "nice", "-n", "-10", "iperf3", "-s",
                               "-1", "-B", dst, "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(bed, port)
    argv = ["ip", "netns", "exec", bed.a, "nice", "-n", "-10", "iperf3", "-c", dst, "-B", src,
            "-p", str(port),
            "-t", str(seconds), "-O", str(omit), "-J", "-i", "1"]
    argv += ["-u", "-b", f"{udp_mbit}M"] if udp_mbit else ["-C", "cubic"]
    client = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)

    def finish(probe_result: Any = None) -> Any:
        out, _ = client.communicate(timeout=seconds + omit + 30)
        server.wait(timeout=10)
        res = json.loads(out)
        assert "error" not in res, res.get("error")
        res["probe"] = probe_result
        return res

    if not wait:
        return finish
    return finish(probe() if probe else None)


def udp_burst_run(bed: Bed, srcs: list[str], dst: str, count: int,
                  pps: float) -> dict[str, set[int]]:
    """Sends ``count`` numbered datagrams from each source; returns the lost numbers."""
    with in_netns(bed.b):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
    rx.bind((dst, 9999))
    rx.setblocking(False)
    with in_netns(bed.a):
        txs = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in srcs]
    for s, src in zip(txs, srcs, strict=True):
        s.bind((src, 0))
    got: list[set[int]] = [set() for _ in srcs]

    def drain() -> None:
        with contextlib.suppress(BlockingIOError):
            while True:
                idx, seq = struct.unpack("!II", rx.recv(64)[:8])
                got[idx].add(seq)

    start = time.monotonic()
    per_round = len(srcs) / pps
    for seq in range(count):
        for idx, s in enumerate(txs):
            s.sendto(struct.pack("!II", idx, seq) + bytes(56), (dst, 9999))
        if seq % 100 == 99:
            drain()
            ahead = start + (seq + 1) * per_round - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        select.select([rx], [], [], 0.05)
        drain()
    for s in [rx, *txs]:
        s.close()
    return {src: set(range(count)) - got[i] for i, src in enumerate(srcs)}


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def config(bed: Bed, tmp_path: Path, hosts: tuple[HostLink, ...] = (),
           bottleneck: PipeSpec | None = None, back: PipeSpec | None = None,
           capture: bool = False, seed: int = 1) -> EngineConfig:
    pipes: tuple[tuple[str, str, PipeSpec], ...] = ()
    if bottleneck is not None:
        pipes = (("left", "right", bottleneck), ("right", "left", back or bottleneck))
    caps = (("left", "right", str(tmp_path / "bneck.pcap")),) if capture else ()
    return EngineConfig(
        name=bed.prefix,
        ports=(PortSpec("left", f"/var/run/netns/{bed.rt}", "pa", peer_mac=bed.a_mac,
                        gateway_ips=("10.1.255.254",)),
               PortSpec("right", f"/var/run/netns/{bed.rt}", "pb",
                        gateway_ips=("10.2.255.254",))),
        routes=(Route("10.1.0.0/16", "left"), Route("10.2.0.0/16", "right")),
        hosts=hosts, port_pipes=pipes, captures=caps, seed=seed,
        stats_path=str(tmp_path / "stats.jsonl"), stats_interval_ms=100,
    )


def symmetric(delay_us: int, rate: float | None = None, **kw: object) -> tuple[PipeSpec, PipeSpec]:
    pipe = PipeSpec(rate_bps=rate, delay_us=delay_us, **kw)  # type: ignore[arg-type]
    return pipe, pipe


def host(ip: str, delay_us: int, rate: float | None = None) -> HostLink:
    up, down = symmetric(delay_us, rate)
    return HostLink(ip, up, down)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


PING_GAP_MS = 5.0


def delay_errors(bed: Bed, access: dict[str, int]) -> dict[str, tuple[float, float, int]]:
    """(median - want, p99 - want, samples over want + 1 ms) in ms of 500 RTT samples
    per host."""
    rtts = icmp_rtts(bed, list(access), "10.2.0.1", count=500, interval=PING_GAP_MS / 1e3)
    errors = {}
    for ip, delay in access.items():
        want = 2 * (delay + 1_000 + 250) / 1000.0
        got = rtts[ip]
        assert len(got) >= 495, f"{ip}: only {len(got)} replies"
        med, p99 = pct(got, 0.5), pct(got, 0.99)
        print(f"{ip}: want {want:.3f} ms median {med:.3f} p99 {p99:.3f} max {max(got):.3f}")
        errors[ip] = (med - want, p99 - want, sum(r > want + 1.0 for r in got))
    return errors


def test_delay_invariant(netns, tmp_path: Path) -> None:
    """RTT = 2 x (access + bottleneck + server access): median within 0.2 ms, p99 within 1 ms.

    Measured up to three times while a run misses (median or tail): on this shared
    2-core machine other work can hold the kernel's deferred packet processing
    (ksoftirqd) for tens of ms, which no emulator can prevent. CI failed this test on
    2026-11-29 on a noisy host, when only the tail was re-measured once (the log
    kept no message). Three misses in a row fail; every attempt's errors are printed.
    The p99 is counted as samples: at most 1% of them (5) more than 1 ms late. A hold of
    the machine by its hypervisor delays the pings sent during it, one per 5 ms gap, so
    an attempt may have one more late sample per 5 ms of steal time the kernel counted
    during it (``swell.steal``; CI on 2026-11-29 missed the p99 by 0.06-0.33 ms on run
    and re-run, medians within 0.07 ms; this host idle: 120 ms of steal in one 2.5 s
    attempt). The median's limit does not move.
    """
    bed = Bed(netns, n_a=4, n_b=1)
    access = {"10.1.0.1": 500, "10.1.0.2": 5_000, "10.1.0.3": 50_000, "10.1.0.4": 200_000}
    hosts = tuple(host(ip, d) for ip, d in access.items()) + (host("10.2.0.1", 250),)
    bneck = PipeSpec(rate_bps=1e9, delay_us=1_000)

    def holds(errs: dict, steal_ms: float) -> bool:
        late_allowed = 5 + steal_ms / PING_GAP_MS
        return all(abs(med) < 0.2 and p99 > -1.0 and late <= late_allowed
                   for med, p99, late in errs.values())

    with LinkEngine(config(bed, tmp_path, hosts, bneck), tmp_path) as eng:
        for attempt in (1, 2, 3):
            s0 = steal_ns()
            errors = delay_errors(bed, access)
            steal_ms = (steal_ns() - s0) / 1e6
            print(f"attempt {attempt}: (median, p99 error ms, late samples) per host {errors}; "
                  f"steal {steal_ms:.0f} ms")
            if holds(errors, steal_ms):
                break
        stats = eng.stats()
    assert holds(errors, steal_ms), (errors, f"steal {steal_ms:.0f} ms")
    assert stats["ports"]["left"]["arp_replies"] >= 1
    assert stats["pipes"]["port:left>right"]["packets"] >= 2000


@pytest.mark.parametrize("mbit", [1, 20, 100, 500])
def test_tcp_goodput_matches_rate(netns, tmp_path: Path, mbit: int) -> None:
    """Goodput in [0.95 R, R] (1448/1500 of R is the TCP/IP ceiling: 0.965 R).

    Up to two re-measurements if a run falls short: at 500 Mbit/s the engine
    (with the receiver's kernel work it carries) fills one of the two shared
    cores, and a sender starved by other work on the other core idles the link.
    """
    bed = Bed(netns, n_a=1, n_b=1)
    rate = mbit * 1e6
    queue = max(30_000, int(rate * 0.1 / 8))  # 100 ms of queue (10 x the base RTT)
    bneck = PipeSpec(rate_bps=rate, delay_us=5_000, queue_bytes=queue)
    with LinkEngine(config(bed, tmp_path, bottleneck=bneck), tmp_path) as eng:
        secs = 6 if mbit == 1 else 4
        for attempt in (1, 2, 3):
            res = iperf(bed, "10.1.0.1", "10.2.0.1", seconds=secs, omit=1)
            goodput = res["end"]["sum_received"]["bits_per_second"]
            print(f"R={mbit} Mbit/s goodput {goodput / 1e6:.2f} Mbit/s ({goodput / rate:.3f} R)"
                  f" attempt {attempt}")
            if goodput >= 0.95 * rate:
                break
        stats = eng.stats()
    assert 0.95 * rate <= goodput <= 1.0 * rate
    peaks = [sample[3] for sample in stats["queue_samples"]["port:left>right"]]
    assert 0 < max(peaks) <= queue


@pytest.mark.parametrize(("threads", "back_us"), [(None, 0), (2, 0), (None, 2_000)])
def test_udp_overload_loses_excess_and_queue_bounds_delay(netns, tmp_path: Path,
                                                          threads: int | None,
                                                          back_us: int) -> None:
    """threads=2: the capture, queue samples and counters also hold per direction.
    back_us > 0: both directions are delayed, so the engine reads arrivals lazily (at
    the next departure, docs/linkemu.md): spacing, queue limit and delay bound must
    not change, since every decision counts from the frame's kernel receive stamp.

    The RTT bound is checked on 100 probes (its p99 is their maximum), so one stall of
    the shared 2-core machine fails it (26.8, 29.7 and 45.3 ms, past the bound's 2 ms of slack,
    in 3 of 57 runs; with the eager engine of 9648bc9 too): one re-measurement, two
    misses fail. Everything else is checked on every run."""
    bed = Bed(netns, n_a=2, n_b=1)
    rate, queue = 10e6, 25_000  # 25 kB at 10 Mbit/s = 20 ms of queueing at most
    bneck = PipeSpec(rate_bps=rate, delay_us=2_000, queue_bytes=queue)
    fast = PipeSpec(delay_us=back_us)
    # RTT bound: 2 ms delay (+ the way back) + 20 ms of full queue + one 1.2 ms packet in
    # service + the probe; 2 ms of slack: the probe stamps its send time in user space
    bound = 2.0 + back_us / 1e3 + queue * 8 / rate * 1e3 + 1.2 + 0.1
    for attempt in (1, 2):
        work = tmp_path / f"try{attempt}"
        work.mkdir()
        p99 = _overload_once(bed, work, bneck, fast, threads, rate, queue, bound)
        if p99 <= bound + 2.0:
            break
        print("RTT bound missed once; measuring again")
    assert p99 <= bound + 2.0


def _overload_once(bed: Bed, work: Path, bneck: PipeSpec, back: PipeSpec,
                   threads: int | None, rate: float, queue: int, bound: float) -> float:
    """One 3 s UDP overload with probes; checks all but the RTT bound, returns the RTT p99."""
    cfg = config(bed, work, bottleneck=bneck, back=back, capture=True)
    with LinkEngine(cfg, work, threads=threads) as eng:
        res = iperf(bed, "10.1.0.1", "10.2.0.1", seconds=3, omit=0, udp_mbit=20,
                    probe=lambda: icmp_rtts(bed, ["10.1.0.2"], "10.2.0.1", count=100,
                                            interval=0.02))
        stats = eng.stop()
    check_capture_spacing(work / "bneck.pcap", stats, rate)
    udp = res["end"]["sum"]
    recv_bps = udp["bytes"] * 8 * (1 - udp["lost_percent"] / 100) / udp["seconds"]
    print(f"UDP offered 20 Mbit/s, delivered {recv_bps / 1e6:.2f}, lost {udp['lost_percent']:.1f}%")
    assert 40 <= udp["lost_percent"] <= 60
    pipe = stats["pipes"]["port:left>right"]
    assert pipe["drops"]["queue"] > 0 and pipe["drops"]["loss"] == 0
    peaks = [sample[3] for sample in stats["queue_samples"]["port:left>right"]]
    assert 20_000 < max(peaks) <= queue, "the queue fills up to, never past, its limit"
    rtts = res["probe"]["10.1.0.2"]
    p99, med = pct(rtts, 0.99), pct(rtts, 0.5)
    print(f"RTT under overload: median {med:.2f} ms p99 {p99:.2f} ms max {max(rtts):.2f} "
          f"(bound {bound:.1f}); peak queue {max(peaks)} B")
    assert med > 15.0, "the queue should fill"
    return p99


def check_capture_spacing(path: Path, stats: dict[str, Any], rate: float) -> None:
    """The bottleneck capture is complete and back-to-back departures are size/R apart."""
    import dpkt

    with path.open("rb") as f:
        recs = [(ts, struct.unpack("!H", buf[16:18])[0]) for ts, buf in dpkt.pcap.Reader(f)]
    cap = stats["captures"][str(path)]
    assert cap["lost"] == 0 and cap["written"] == len(recs)
    pipe = stats["pipes"]["port:left>right"]
    assert len(recs) == pipe["packets"] - pipe["in_flight"]  # all that left the pipe
    errors = []
    for (t0, _), (t1, size) in zip(recs, recs[1:], strict=False):
        want = size * 8 / rate
        if t1 - t0 < 1.5 * want:  # back to back (the queue was not empty)
            errors.append(abs((t1 - t0) - want) * 1e6)
    errors.sort()
    p99 = errors[int(0.99 * len(errors))]
    print(f"capture: {len(recs)} frames, {len(errors)} back-to-back gaps, "
          f"|gap - size/R| p50 {errors[len(errors) // 2]:.2f} us p99 {p99:.2f} us")
    assert len(errors) > 0.9 * len(recs)
    # microsecond stamps: within a tick of size/R (a gap after a brief idle may look
    # back to back, hence p99)
    assert p99 <= 1.5


def test_loss_bernoulli_and_gilbert(netns, tmp_path: Path) -> None:
    bed = Bed(netns, n_a=2, n_b=1)
    bern = PipeSpec(loss=LossModel("bernoulli", p=0.05))
    ge = PipeSpec(loss=LossModel("gilbert", p_gb=0.02, p_bg=0.25, loss_good=0.0, loss_bad=1.0))
    hosts = (HostLink("10.1.0.1", bern, PipeSpec()), HostLink("10.1.0.2", ge, PipeSpec()))
    with LinkEngine(config(bed, tmp_path, hosts, seed=11), tmp_path) as eng:
        got = udp_burst_run(bed, ["10.1.0.1", "10.1.0.2"], "10.2.0.1", count=100_000, pps=40_000)
        stats = eng.stop()
    lost_b = got["10.1.0.1"]
    rate = len(lost_b) / 100_000
    print(f"bernoulli p=0.05: measured {rate:.4f}")
    assert abs(rate - 0.05) <= 0.005
    assert stats["pipes"]["up:10.1.0.1"]["drops"]["loss"] == len(lost_b)
    lost_g = sorted(got["10.1.0.2"])
    bursts = 1 + sum(1 for x, y in zip(lost_g, lost_g[1:], strict=False) if y != x + 1)
    mean = len(lost_g) / bursts
    print(f"gilbert: loss {len(lost_g) / 1e5:.4f} (want {0.02 / 0.27:.4f}), mean burst {mean:.2f}")
    assert abs(mean - 4.0) <= 0.4
    assert abs(len(lost_g) / 1e5 - 0.02 / 0.27) <= 0.1 * 0.02 / 0.27


@pytest.mark.parametrize("threads", [None, 2])
def test_per_host_links_in_one_namespace(netns, tmp_path: Path, threads: int | None) -> None:
    """Also with one thread per direction, forced (the engine picks it by itself
    only for untimed pipes, as in the loss and lifecycle tests)."""
    bed = Bed(netns, n_a=2, n_b=1)
    hosts = (host("10.1.0.1", 5_000, 10e6), host("10.1.0.2", 20_000, 40e6))
    with LinkEngine(config(bed, tmp_path, hosts), tmp_path, threads=threads):
        rtts = icmp_rtts(bed, ["10.1.0.1", "10.1.0.2"], "10.2.0.1", count=50, interval=0.01)
        slow = iperf(bed, "10.1.0.1", "10.2.0.1", seconds=3, omit=1)
        fast = iperf(bed, "10.1.0.2", "10.2.0.1", seconds=3, omit=1)
    med1, med2 = pct(rtts["10.1.0.1"], 0.5), pct(rtts["10.1.0.2"], 0.5)
    g1 = slow["end"]["sum_received"]["bits_per_second"]
    g2 = fast["end"]["sum_received"]["bits_per_second"]
    print(f"host1 RTT {med1:.2f} ms {g1 / 1e6:.2f} Mbit/s; host2 RTT {med2:.2f} ms {g2 / 1e6:.2f}")
    # RTT = 2 x access delay + serialisation of the 84-byte echo packets both ways; the
    # median within 0.2 ms as in the delay test. Forced to a thread per direction (a
    # mode the engine picks by itself only for untimed pipes) each direction's thread
    # sleeps to its next departure and wakes as late as the host lets it: CI on
    # 2026-12-02 read +0.22/+0.17 and +0.20/+0.20 ms, run and re-run, on a busy
    # hypervisor (the engine's own choice passed there), so 0.2 ms per direction
    tol = 0.2 if threads is None else 0.4
    want1, want2 = 10.0 + 2 * 84 * 8 / 10e6 * 1e3, 40.0 + 2 * 84 * 8 / 40e6 * 1e3
    assert abs(med1 - want1) < tol and abs(med2 - want2) < tol, (med1, want1, med2, want2)
    assert 0.93 * 10e6 <= g1 <= 10e6
    assert 0.93 * 40e6 <= g2 <= 40e6


def test_two_flows_share_and_respond(netns, tmp_path: Path) -> None:
    """Flow 1 alone for 3 s, then flow 2 joins for 30 s; fairness over its last 25 s.

    Kept at the issue's 30 s: over 10 s, cubic's convergence on this path read a
    Jain index from 0.82 to 1.0 from run to run.
    """
    bed = Bed(netns, n_a=2, n_b=2)
    rate = 20e6
    bneck = PipeSpec(rate_bps=rate, delay_us=10_000, queue_bytes=50_000)  # 1 BDP
    with LinkEngine(config(bed, tmp_path, bottleneck=bneck), tmp_path):
        first = iperf(bed, "10.1.0.1", "10.2.0.1", seconds=33, omit=0, port=5201, wait=False)
        time.sleep(3.0)  # the second flow's arrival time, not a readiness wait
        second = iperf(bed, "10.1.0.2", "10.2.0.2", seconds=30, omit=0, port=5202)
        first_res = first()
    a = [i["sum"]["bits_per_second"] for i in first_res["intervals"]]
    b = [i["sum"]["bits_per_second"] for i in second["intervals"]]
    alone = max(a[1], a[2])  # after slow start
    shared_a, shared_b = sum(a[8:33]) / 25, sum(b[5:30]) / 25
    index = jain([shared_a, shared_b])
    print(f"flow1 alone {alone / 1e6:.2f}; shared {shared_a / 1e6:.2f} + {shared_b / 1e6:.2f}, "
          f"Jain {index:.3f}")
    assert alone >= 0.9 * rate
    assert shared_a < 0.7 * alone, "the new flow must slow the existing one"
    assert index > 0.9
    assert shared_a + shared_b >= 0.9 * rate


def test_thousand_hosts_keep_their_own_delay(netns, tmp_path: Path) -> None:
    bed = Bed(netns, n_a=1000, n_b=1)
    delays = {addr(1, i): 100 + (i * 37 % 50) * 200 for i in range(1, 1001)}
    hosts = tuple(host(ip, d) for ip, d in delays.items())
    sample = [addr(1, i) for i in (1, 137, 250, 251, 512, 777, 999, 1000)]
    with LinkEngine(config(bed, tmp_path, hosts), tmp_path) as eng:
        rtts = icmp_rtts(bed, sample, "10.2.0.1", count=60, interval=0.005)
        stats = eng.stop()
    assert len(stats["pipes"]) == 2000
    for ip in sample:
        med, want = pct(rtts[ip], 0.5), 2 * delays[ip] / 1000.0
        print(f"{ip}: want {want:.2f} ms median {med:.3f}")
        assert abs(med - want) < 0.2, (ip, want, med)


def test_oversized_frames_are_counted_not_forwarded(netns, tmp_path: Path) -> None:
    """With segmentation offload back on at a host, its TCP sends frames of up to 64 KB:
    the receive ring keeps 2048 bytes of each, and the engine counts them as truncated
    instead of forwarding a cut frame (the handshake's small frames still pass)."""
    bed = Bed(netns, n_a=1, n_b=1)
    netns.run(bed.a, "ethtool", "-K", "eth0", "tso", "on", "gso", "on")
    with LinkEngine(config(bed, tmp_path), tmp_path) as eng:
        with in_netns(bed.b):
            srv = socket.create_server(("10.2.0.1", 5301))
        with in_netns(bed.a):
            cli = socket.create_connection(("10.2.0.1", 5301), timeout=5)
        conn, _ = srv.accept()
        cli.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            cli.send(b"x" * 200_000)
        deadline = time.monotonic() + 5
        while (eng.stats().get("ports", {}).get("left", {}).get("rx_truncated", 0) == 0
               and time.monotonic() < deadline):
            time.sleep(0.05)
        stats = eng.stats()
        for s in (cli, conn, srv):
            s.close()
    left = stats["ports"]["left"]
    assert left["rx_truncated"] >= 1, left
    assert left["rx_ipv4"] >= 2, left  # SYN and ACK of the handshake went through
    assert left["kernel_drops"] == 0, left


def test_engine_gone_after_stop_and_parent_kill(netns, tmp_path: Path) -> None:
    bed = Bed(netns, n_a=1, n_b=1)
    cfg = config(bed, tmp_path)
    eng = LinkEngine(cfg, tmp_path)
    eng.start()
    pid = eng.pid
    assert bed.prefix in Path(f"/proc/{pid}/cmdline").read_text()
    final = eng.stop()
    assert final["final"] is True
    assert not Path(f"/proc/{pid}").exists()
    # a parent (a test runner) that starts an engine and dies by SIGKILL
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_json()))
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(tmp_path / "cfg.json"), str(tmp_path / "sub")],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert Path(f"/proc/{child}").exists()
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists(), "engine outlived its killed parent"


_PARENT = """
import json, sys, time
from pathlib import Path
from swell.topologies.linkemu import EngineConfig, LinkEngine
cfg = EngineConfig.from_json(json.load(open(sys.argv[1])))
Path(sys.argv[2]).mkdir()
eng = LinkEngine(cfg, Path(sys.argv[2]))
eng.start()
print(eng.pid, flush=True)
time.sleep(60)
"""


def test_frames_enter_the_bottleneck_in_time_order(netns, tmp_path: Path) -> None:
    """Two emulated hosts in one namespace send in turns, 10.1.0.1 (an access pipe with
    no delay or rate) right before 10.1.0.2 (no access pipe: it enters the bottleneck
    directly, as a foreground host does), 20 ms apart; the 2 Mbit/s bottleneck must
    serve each pair in the order it was sent. Both frames of a pair are read in one
    pass of the engine (the second arrives microseconds after the first, within the
    engine's wake-up): entering the whole pass before running the access pipe's
    departure put 10.1.0.1's packet behind the later one, the cross traffic behind a
    chirp's dense end that read CBR about 5% high (docs/bwest.md)."""
    bed = Bed(netns, n_a=2, n_b=1)
    bneck = PipeSpec(rate_bps=2e6, delay_us=1_000, queue_bytes=100_000)
    n = 60
    with LinkEngine(config(bed, tmp_path, (host("10.1.0.1", 0),), bottleneck=bneck), tmp_path):
        with in_netns(bed.b):
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            rx.bind(("10.2.0.1", 9000))
            rx.settimeout(2.0)
        with in_netns(bed.a):
            first = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            first.bind(("10.1.0.1", 0))
            second = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            second.bind(("10.1.0.2", 0))
        with rx, first, second:
            dst = ("10.2.0.1", 9000)
            first.sendto(b"warm", dst)  # ARP of the gateway, before the pairs
            time.sleep(0.1)
            for i in range(n):
                first.sendto(b"a%03d" % i + bytes(196), dst)
                second.sendto(b"b%03d" % i + bytes(196), dst)
                time.sleep(0.02)
            got = []
            with contextlib.suppress(TimeoutError):
                while len(got) < 2 * n + 1:
                    got.append(rx.recv(2048)[:4])
    order = [g for g in got if g != b"warm"]
    assert len(order) == 2 * n, f"{len(order)} of {2 * n} datagrams"
    inverted = [i for i in range(n) if order.index(b"a%03d" % i) > order.index(b"b%03d" % i)]
    print(f"{len(inverted)} of {n} pairs served out of send order: {inverted[:10]}")
    assert not inverted


def test_pairing_delivers_queued_packets_together_at_the_rate(netns, tmp_path: Path) -> None:
    """A bottleneck with ``pairing`` 0.3 under one TCP flow: goodput as without it (the
    serialiser still counts every byte), and in the capture a packet queued right behind
    another leaves with it 0.3 / 1.3 of the time (never a third): a zero gap, then two
    packet times to the next one."""
    import dpkt

    bed = Bed(netns, n_a=1, n_b=1)
    rate = 20e6
    bneck = PipeSpec(rate_bps=rate, delay_us=5_000, queue_bytes=250_000, pairing=0.3)
    with LinkEngine(config(bed, tmp_path, bottleneck=bneck, capture=True), tmp_path) as eng:
        res = iperf(bed, "10.1.0.1", "10.2.0.1", seconds=4, omit=1)
        eng.stats()
    goodput = res["end"]["sum_received"]["bits_per_second"]
    with (tmp_path / "bneck.pcap").open("rb") as f:
        recs = [(float(ts), len(buf)) for ts, buf in dpkt.pcap.Reader(f)]
    together = behind = after_pair = 0
    for i, ((t0, _), (t1, size)) in enumerate(zip(recs, recs[1:], strict=False)):
        want = size * 8 / rate
        if size < 1000 or t1 - t0 > 2.5 * want:  # not a full packet queued behind
            continue
        behind += 1
        if t1 - t0 < 2e-6:
            together += 1
            if i + 2 < len(recs) and recs[i + 2][0] - t1 > 1.5 * recs[i + 2][1] * 8 / rate:
                after_pair += 1
    share = together / behind
    print(f"pairing 0.3: goodput {goodput / 1e6:.2f} Mbit/s; {behind} full packets queued "
          f"behind another, {together} left with it ({share:.3f}; 0.3/1.3 = 0.231), "
          f"{after_pair} of those pairs followed by two packet times")
    assert goodput >= 0.93 * rate
    assert behind > 3000 and abs(share - 0.3 / 1.3) < 0.04
    assert after_pair >= 0.9 * together
