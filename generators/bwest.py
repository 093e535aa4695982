"""Bandwidth estimators as foregrounds: ``slops``, ``chirp``, ``pathload``, ``pathchirp``.

An estimator probes the path from the foreground server to the foreground
client (the direction of the background's downloads and of CBR/Poisson) and
reports the available bandwidth over time; its results are judged against the
truth per 1 s bin from the bottleneck capture (:mod:`swell.analysis.bwest`).

* ``slops`` and ``chirp`` are swell's own estimators of the two methods. The
  packets are sent and stamped by ``swell-probe`` (µs departures by
  busy-waiting; the kernel stamps each departure and arrival): ``swell-probe send`` on the server
  takes one train per command on stdin, ``swell-probe recv`` on the client
  prints every arrival. A thread of :class:`ProbeGenerator` closes the loop:
  it asks for trains, reads their arrivals and runs the estimator
  (:class:`SlopsLoop`: pathload's fleets and iterative search, one low-high
  range per search; :class:`ChirpLoop`: one estimate per chirp, smoothed over
  the last ``smooth`` chirps). A search that has not converged after
  ``timeout_s`` is recorded as a timeout (with its range so far), not a crash.
* ``pathload`` and ``pathchirp`` run the real tools when they are on PATH
  (:mod:`swell.generators.bwest_tools`); they are not packaged, so a missing
  one is exit 3 saying how to build it.

Every estimate carries its probing span (wall clock) and the probe bytes it
cost; :meth:`EstimatorKind.result` adds the truth, the error and per-run
summaries. The report draws estimate against truth and a Fig. 12-style bar
chart (:mod:`swell.generators.bwest_report`).
"""

from __future__ import annotations

import json
import math
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from swell.analysis import bwest as est
from swell.errors import SwellError
from swell.fsutil import write_text
from swell.generators.base import Generator, GenResult, Proc, Tool
from swell.generators.kind import KindResult, KindSpec, ReportPart, RunContext, TrafficKind, Window
from swell.inet import require_ipv4
from swell.native import native_artifact
from swell.placement import Endpoint, PathFacts, Place
from swell.steal import steal_ns

UDP_IP_OVERHEAD = 28  # IPv4 + UDP headers: the link engine's rate counts IP bytes
RT_PRIORITY = 5  # swell-probe's sender under SCHED_FIFO: below swell-link's 10
RT_SPIN_US = 50  # a real-time sender sleeps until this long before each departure


class EstimatorSpec(KindSpec):
    """Options shared by every estimator."""

    min_mbps: float | None = Field(None, ge=0, description="lowest probing rate "
                                   "(default: 10% of the bottleneck)")
    max_mbps: float | None = Field(None, gt=0, description="highest probing rate "
                                   "(default: 1.2x the bottleneck (slops), 1.5x (chirp))")
    timeout_s: float = Field(30.0, gt=0, description="an estimate not done by then is a "
                             "timeout")
    port: int = Field(9876, ge=1024, le=65535)


class ProbeSpec(EstimatorSpec):
    """Options of swell's own estimators (swell-probe's sender)."""

    realtime: bool = Field(True, description="run the sender under SCHED_FIFO (root), below "
                           "the link engine, spinning only the last 50 us before each "
                           "departure: never descheduled mid-train (under CBR 25 on 50 no "
                           "chirp was held and SLoPS's ranges stayed within 6%, where an "
                           "ordinary sender's were up to 14% off: docs/bwest.md)")
    spin_us: int | None = Field(None, ge=0, le=10_000, description="the sender sleeps until "
                                "this long before each departure and busy-polls the rest "
                                f"(default: 300 us, {RT_SPIN_US} us with realtime, which "
                                "leaves the core to the background between departures)")


class SlopsSpec(ProbeSpec):
    """SLoPS (pathload's method): periodic streams, OWD trends, iterative search."""

    kind: Literal["slops"] = "slops"
    resolution_mbps: float | None = Field(None, gt=0, description="stop when the range is "
                                          "this narrow (default: 4% of max_mbps)")
    streams: int = Field(12, ge=3, description="streams per fleet")
    packets: int = Field(100, ge=16, description="packets per stream")
    fraction: float = Field(0.7, gt=0.5, le=1.0, description="share of streams that decides")
    stream_gap_ms: float = Field(10.0, ge=0, description="idle time after each stream")


class ChirpSpec(ProbeSpec):
    """Chirps (pathChirp's method): exponentially spaced trains, excursion analysis."""

    kind: Literal["chirp"] = "chirp"
    packet_bytes: int = Field(1000, ge=64, le=1500, description="IP bytes per probe packet")
    spread: float = Field(1.1, gt=1.0, le=2.0, description="gap ratio within a chirp "
                          "(pathChirp: 1.2)")
    chirps_per_s: float = Field(5.0, gt=0)
    smooth: int = Field(11, ge=1, description="chirps averaged per reported estimate")
    decrease: float = Field(4.0, gt=1.0, description="excursion end: fall back within 1/F "
                            "(pathChirp's 1.5 reads CBR/Poisson of large packets 20-50% high, "
                            "in an ideal FIFO as on swell-link; 4 reads them within 10%: "
                            "docs/bwest.md)")
    busy: int = Field(5, ge=2, description="shortest excursion (packets) that counts")
    noise_us: float = Field(10.0, ge=0, description="delay noise floor: no rise beyond it "
                            "three packets on ends an excursion")
    noise_gap: float = Field(0.03, ge=0, lt=1, description="the floor grows to this "
                             "fraction of the gap after an excursion's first packet (a "
                             "link engine wakes later after longer sleeps; docs/bwest.md)")
    noise_max_us: float = Field(50.0, ge=0, description="the floor's ceiling")
    onset: float = Field(0.01, ge=0, lt=1, description="a rise below this fraction of the "
                         "gap does not start the last excursion (stamp noise)")
    min_span: float = Field(2.0, ge=1.0, description="a chirp whose sender was held up "
                            "mid-chirp is analysed at its actual send gaps; it is usable "
                            "when the part after the hold that holds the crossing starts "
                            "this factor below it (docs/bwest.md)")
    max_breaks: int = Field(1, ge=0, description="a chirp whose sender was held up more "
                            "often than this mid-chirp is discarded (on this host chirps "
                            "held twice or more read -27% to +46% off: docs/bwest.md)")


class PathloadSpec(EstimatorSpec):
    """The real pathload (pathload_snd/pathload_rcv on PATH)."""

    kind: Literal["pathload"] = "pathload"
    resolution_mbps: float | None = Field(None, gt=0)


class PathchirpSpec(EstimatorSpec):
    """The real pathChirp (pathchirp_snd/pathchirp_rcv on PATH)."""

    kind: Literal["pathchirp"] = "pathchirp"
    packet_bytes: int = Field(1000, ge=40, le=8200)
    spread: float = Field(1.2, gt=1.0)
    average_mbps: float = Field(1.0, gt=0, description="average probing rate")
    smooth: int = Field(11, ge=1)


def rate_range(spec: EstimatorSpec, path: PathFacts, default_max: float) -> tuple[float, float]:
    """The probing range in bit/s (defaults from the reverse bottleneck's capacity)."""
    cap = path.reverse_mbps
    lo = spec.min_mbps if spec.min_mbps is not None else (0.1 * cap if cap else 1.0)
    hi = spec.max_mbps if spec.max_mbps is not None else (default_max * cap if cap else 100.0)
    return lo * 1e6, hi * 1e6


def check_range(kind: str, spec: EstimatorSpec, path: PathFacts) -> list[str]:
    """A probing range that starts at or above the bottleneck cannot find A: an error."""
    cap = path.reverse_mbps
    if spec.min_mbps is not None and spec.max_mbps is not None and \
            spec.min_mbps >= spec.max_mbps:
        raise SwellError(kind, f"min_mbps {spec.min_mbps:g} must be below max_mbps "
                         f"{spec.max_mbps:g}")
    if cap is not None and spec.min_mbps is not None and spec.min_mbps >= cap:
        raise SwellError(kind, f"probing range starts at {spec.min_mbps:g} Mbit/s, at or above "
                         f"the {cap:g} Mbit/s bottleneck: the available bandwidth is below it")
    if cap is None:
        return [f"{kind}: the bottleneck is unshaped; give min_mbps and max_mbps"]
    return []


# --------------------------------------------------------------------------- probe processes


class Sender:
    """``swell-probe send`` with a command pipe on stdin (one train per command)."""

    def __init__(self, place: Place, argv: list[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.popen = place.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True, bufsize=1)
        self.err: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.err.append(line.strip())

    def ask(self, command: str, want: Callable[[str], bool], timeout: float) -> str:
        assert self.popen.stdin is not None
        if command:
            self.popen.stdin.write(command + "\n")
            self.popen.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise SwellError("swell-probe send", f"no answer within {timeout:g} s") from None
            if line is None:
                self.popen.wait()
                raise SwellError("swell-probe send", f"exited: {' | '.join(self.err[-3:])}")
            if want(line):
                return line

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                assert self.popen.stdin is not None
                self.popen.stdin.write("quit\n")
                self.popen.stdin.close()
                self.popen.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.popen.kill()
                self.popen.wait()


@dataclass
class Train:
    """One train's arrivals: seq -> (tx_ns, rx_ns), and the kernel's transmit stamps.

    ``kernel_tx`` holds, per seq, the sender kernel's software transmit stamp (0 where
    none came). :meth:`arrays` uses them as the departures when every packet of the
    train has one, else the stamps the packets carry (read by the sender before its
    send call, so a sender preempted between the two shows as queueing): one source
    per train, never a mix (the two differ by the system call's few microseconds)."""

    sent: int
    first_tx: int
    last_tx: int
    arrivals: dict[int, tuple[int, int]] = field(default_factory=dict)
    kernel_tx: list[int] = field(default_factory=list)

    @property
    def kernel_stamped(self) -> bool:
        return len(self.kernel_tx) == self.sent and all(k > 0 for k in self.kernel_tx)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        seqs = sorted(self.arrivals)  # the receiver keeps seq < sent
        if self.kernel_stamped:
            tx = np.array([self.kernel_tx[s] for s in seqs], np.int64)
        else:
            tx = np.array([self.arrivals[s][0] for s in seqs], np.int64)
        rx = np.array([self.arrivals[s][1] for s in seqs], np.int64)
        return np.array(seqs, np.int64), tx, rx


class Prober:
    """Sends trains and gathers their arrivals (the sender's and receiver's processes)."""

    def __init__(self, sender: Sender, receiver: Proc, settle_s: float) -> None:
        self.sender, self.receiver = sender, receiver
        self.settle_s = settle_s  # how long after the last departure arrivals may come
        self.pending: dict[int, dict[int, tuple[int, int]]] = {}
        self.next_id = 1
        self.bytes_sent = 0
        self.trains = self.kernel_stamped = 0

    def _drain(self) -> None:
        for line in self.receiver.drain():
            f = line.split()
            if len(f) == 6 and f[0] == "P":
                self.pending.setdefault(int(f[1]), {})[int(f[2])] = (int(f[3]), int(f[4]))

    def train(self, ip_bytes: int, gaps_ns: np.ndarray) -> Train:
        tid = self.next_id
        self.next_id += 1
        duration = float(np.sum(gaps_ns)) / 1e9
        line = self.sender.ask(f"train {tid} {ip_bytes - UDP_IP_OVERHEAD} "
                               + " ".join(str(int(g)) for g in gaps_ns),
                               lambda s: s.startswith(f"sent {tid} "), 5.0 + 2 * duration)
        _, _, n, first, last, *kernel = line.split()
        self.bytes_sent += int(n) * ip_bytes
        t = Train(int(n), int(first), int(last), kernel_tx=[int(k) for k in kernel])
        self.trains += 1
        self.kernel_stamped += t.kernel_stamped
        deadline = time.monotonic() + self.settle_s
        while True:
            self._drain()
            got = self.pending.get(tid, {})
            if len(got) >= t.sent or time.monotonic() >= deadline:
                break
            time.sleep(0.002)  # arrivals are stamped by the kernel; this only paces reading
        t.arrivals = self.pending.pop(tid, {})
        return t


# --------------------------------------------------------------------------- estimator loops


class SlopsLoop:
    """pathload's method: fleets of periodic streams, iterative search per estimate."""

    RETRIES = 2  # a fleet with too few usable streams is sent again (pathload: the same)

    def __init__(self, spec: SlopsSpec, lo_bps: float, hi_bps: float,
                 capacity_bps: float | None = None) -> None:
        self.spec = spec
        self.lo, self.hi = lo_bps, hi_bps
        self.capacity = capacity_bps or hi_bps
        self.resolution = (spec.resolution_mbps * 1e6 if spec.resolution_mbps
                           else 0.04 * hi_bps)

    def fleet(self, prober: Prober, rate: float, stop: threading.Event
              ) -> tuple[est.Verdict, float, str]:
        """One fleet at ``rate``: its verdict, the rate actually sent, its trends.

        Each stream's usable sub-streams are judged (:func:`est.stream_trends`);
        a fleet with fewer judged entries than half its streams is sent again,
        and after ``RETRIES`` it is grey."""
        size = est.slops_packet_size(rate)
        gap = int(round(size * 8 / rate * 1e9))
        min_rx_gap = 0.5 * size * 8 / self.capacity * 1e9  # half a serialisation time
        trends: list[est.Trend] = []
        rates: list[float] = []
        for _ in range(1 + self.RETRIES):
            trends, rates = [], []
            for _ in range(self.spec.streams):
                if stop.is_set():
                    break
                t = prober.train(size, np.full(self.spec.packets - 1, gap, np.int64))
                seqs, tx, rx = t.arrays()
                trends += est.stream_trends(seqs, tx, rx, t.sent, gap, min_rx_gap)
                r = est.sent_rate(seqs, tx, size)
                if math.isfinite(r):
                    rates.append(r)
                time.sleep(self.spec.stream_gap_ms / 1e3)  # idle time between streams
            if len(trends) >= self.spec.streams / 2 or stop.is_set():
                break
        actual = float(np.mean(rates)) if rates else rate
        verdict = (est.fleet_verdict(trends, self.spec.fraction)
                   if len(trends) >= self.spec.streams / 2 else "grey")
        return verdict, actual, "".join(trends)

    def run(self, prober: Prober, stop: threading.Event, record: Callable[[dict], None]
            ) -> None:
        while not stop.is_set():
            t0, b0 = time.time(), prober.bytes_sent
            search = est.SlopsSearch(self.lo, self.hi, self.resolution)
            timeout = False
            log: list[list[Any]] = []
            while (rate := search.next_rate()) is not None and not stop.is_set():
                if time.time() - t0 > self.spec.timeout_s:
                    timeout = True
                    break
                verdict, actual, trends = self.fleet(prober, rate, stop)
                # pathload moves the search by the rate actually sent (inside the range)
                used = actual if search.rmin < actual < search.rmax else rate
                search.update(used, verdict)
                log.append([round(rate / 1e6, 2), round(actual / 1e6, 2), verdict, trends])
            if stop.is_set() and not timeout:
                return  # a search cut short by the end of the run is no estimate
            low, high = search.range()
            record({"t_start": t0, "t_end": time.time(), "low_mbps": low / 1e6,
                    "high_mbps": high / 1e6, "estimate_mbps": (low + high) / 2e6,
                    "probe_bytes": prober.bytes_sent - b0, "fleets": log,
                    "timeout": timeout})


def chirp_value(s: ChirpSpec, received: int, sent: int, tx: np.ndarray, rx: np.ndarray,
                stolen_ns: int = 0) -> tuple[float, int, str]:
    """One chirp's reading (bit/s; NaN when discarded), its breaks, and why discarded.

    A chirp with a loss is discarded. One whose sender was held up mid-chirp
    (swell-probe then re-anchors: one long gap, the planned gaps after it) is
    analysed at the gaps it was actually sent with; :func:`est.chirp_reading`
    discards it only when the part after the hold cannot show where the queue
    starts to build (``min_span``). One held more than ``max_breaks`` times is
    discarded: through an ideal FIFO such chirps read as well as undisturbed ones,
    but on this host a sender held twice in a chirp's ~20 ms marks a host busy
    enough to disturb the other stamps too (in 11 test runs, chirps held twice or
    more read -27% to +46% off the run's unheld ones, those held once -9% to +2%:
    docs/bwest.md). So is one during which the hypervisor held this machine's CPUs
    (steal): the hold lands in the stamps as a delay no queue caused."""
    if received != sent:
        return math.nan, 0, "loss"
    if stolen_ns > 0:
        return math.nan, 0, f"the hypervisor held the host's CPUs ({stolen_ns / 1e6:.0f} ms steal)"
    r = est.chirp_reading(tx, rx, s.packet_bytes, s.decrease, s.busy, s.noise_us * 1e3, s.onset,
                          s.min_span, s.noise_gap, s.noise_max_us * 1e3)
    if r.breaks > s.max_breaks and math.isfinite(r.estimate):
        return math.nan, r.breaks, (f"the sender was held up {r.breaks} times mid-chirp "
                                    f"(max_breaks {s.max_breaks})")
    return r.estimate, r.breaks, r.reason


class ChirpLoop:
    """pathChirp's method: one estimate per chirp, smoothed over ``smooth`` chirps."""

    def __init__(self, spec: ChirpSpec, lo_bps: float, hi_bps: float, seed: int) -> None:
        self.spec = spec
        self.lo, self.hi = lo_bps, hi_bps
        self.rng = np.random.default_rng(seed)
        self.chirps: list[dict[str, Any]] = []
        # every chirp's stamps as received (sequence numbers, kernel send and receive
        # stamps, ns), written to ``chirps.jsonl`` in the run directory: the raw data a
        # reading can be re-derived from (analysis.bwest.chirp_reading)
        self.raw: list[dict[str, Any]] = []

    def run(self, prober: Prober, stop: threading.Event, record: Callable[[dict], None]
            ) -> None:
        s = self.spec
        batch: list[dict[str, Any]] = []
        t_last_ok = time.time()
        while not stop.is_set():
            tick = time.monotonic()
            gaps = est.chirp_gaps(self.lo, self.hi, s.packet_bytes, s.spread,
                                  float(self.rng.random()))
            b0 = prober.bytes_sent
            st0 = steal_ns()
            t = prober.train(s.packet_bytes, gaps)
            stolen = steal_ns() - st0
            seqs, tx, rx = t.arrays()
            value, breaks, why = chirp_value(s, seqs.size, t.sent, tx, rx, stolen)
            chirp = {"t": t.first_tx / 1e9, "t_end": t.last_tx / 1e9,
                     "estimate_mbps": value / 1e6, "bytes": prober.bytes_sent - b0,
                     "breaks": breaks, "discarded": why, "steal_ms": stolen / 1e6}
            self.chirps.append(chirp)
            self.raw.append({"t": chirp["t"], "ip_bytes": s.packet_bytes, "sent": t.sent,
                             "seq": seqs.tolist(), "tx_ns": tx.tolist(), "rx_ns": rx.tolist()})
            batch.append(chirp)
            # An estimate is the mean of ``smooth`` usable chirps (a batch of discarded
            # ones only costs time): 3 good chirps of 8 once read 114.6 on idle 100.
            vals = [c["estimate_mbps"] for c in batch if math.isfinite(c["estimate_mbps"])]
            if len(vals) >= s.smooth:
                t_last_ok = time.time()
                v = float(np.mean(vals))
                record({"t_start": batch[0]["t"], "t_end": batch[-1]["t_end"],
                        "low_mbps": v, "high_mbps": v, "estimate_mbps": v,
                        "probe_bytes": sum(c["bytes"] for c in batch), "chirps": len(vals),
                        "held_chirps": sum(c["breaks"] > 0 for c in batch
                                           if math.isfinite(c["estimate_mbps"])),
                        "discarded_chirps": len(batch) - len(vals), "timeout": False})
                batch = []
            if time.time() - t_last_ok > s.timeout_s:
                record({"t_start": t_last_ok, "t_end": time.time(), "low_mbps": None,
                        "high_mbps": None, "estimate_mbps": None,
                        "probe_bytes": sum(c["bytes"] for c in batch), "timeout": True})
                t_last_ok = time.time()
                batch = []
            left = 1.0 / s.chirps_per_s - (time.monotonic() - tick)
            if left > 0:
                stop.wait(left)


def sender_options(rt_priority: int | None, spin_us: int | None) -> list[str]:
    """swell-probe send's scheduling options: a real-time sender spins only the last
    RT_SPIN_US before each departure unless told otherwise; an ordinary one keeps the
    program's default (300 us) unless told otherwise."""
    opts = ["--rt-priority", str(rt_priority)] if rt_priority else []
    spin = spin_us if spin_us is not None else RT_SPIN_US if rt_priority else None
    return opts + (["--spin-us", str(spin)] if spin is not None else [])


class ProbeGenerator(Generator):
    """swell-probe's receiver on the client, its sender on the server, a loop between."""

    name = "probe"

    def __init__(self, kind: str, loop: SlopsLoop | ChirpLoop, server: Endpoint,
                 client: Endpoint, port: int, settle_s: float, out: Path,
                 rt_priority: int | None = None, spin_us: int | None = None) -> None:
        super().__init__()
        self.rt_priority = rt_priority
        self.spin_us = spin_us
        self.kind, self.loop = kind, loop
        self.server, self.client, self.port = server, client, port
        self.settle_s = settle_s
        self.out = out
        self.sender: Sender | None = None
        self.prober: Prober | None = None
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.estimates: list[dict[str, Any]] = []
        self.error: str | None = None

    def check(self) -> None:
        native_artifact("swell-probe")

    def start_server(self) -> None:
        exe = str(native_artifact("swell-probe"))
        recv = self.spawn("swell-probe recv", self.client.place,
                          [exe, "recv", "--bind", f"{self.client.ip}:{self.port}"])
        recv.wait_line(lambda s: s == "ready", 10.0)
        self.sender = Sender(self.server.place, [exe, "send", "--dst",
                                                 f"{self.client.ip}:{self.port}",
                                                 "--src", self.server.ip,
                                                 *sender_options(self.rt_priority,
                                                                 self.spin_us)])
        self.sender.ask("", lambda s: s == "ready", 10.0)
        self.prober = Prober(self.sender, recv, self.settle_s)

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Pings through the network until the receiver echoes one (never a sleep)."""
        assert self.sender is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sender.ask("ping", lambda s: s in ("pong", "noreply"), 5.0) == "pong":
                return
        raise SwellError(self.kind, f"no echo from {self.client.ip}:{self.port} "
                         f"after {timeout:g} s")

    def _run(self) -> None:
        assert self.prober is not None
        try:
            self.loop.run(self.prober, self.stop_event, self.estimates.append)
        except SwellError as exc:
            self.error = str(exc)

    def start_client(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def stop(self) -> None:
        self.stop_event.set()
        try:
            if self.thread is not None:
                self.thread.join(timeout=30)
        finally:
            if self.sender is not None:
                self.sender.stop()
            super().stop()

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        if self.error is not None:
            raise SwellError(self.kind, self.error)
        summary: dict[str, Any] = {
            "estimates": self.estimates, "probe_bytes": self.prober.bytes_sent
            if self.prober else 0, "server_ip": self.server.ip, "client_ip": self.client.ip}
        if self.prober:
            summary["trains"] = self.prober.trains
            summary["kernel_stamped_trains"] = self.prober.kernel_stamped
        if isinstance(self.loop, ChirpLoop):
            summary["chirps"] = self.loop.chirps
            write_text(self.out / "chirps.jsonl",
                       "".join(json.dumps(r) + "\n" for r in self.loop.raw))
        return GenResult(self.name, {}, summary, {"capture_dir": self.out.parent / "capture"})


# --------------------------------------------------------------------------- the kinds


class EstimatorKind(TrafficKind):
    """What every estimator kind shares: range checks, truth, error, report."""

    role = "foreground"
    default_max: ClassVar[float] = 1.0

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.capacity_mbps: float | None = None

    def check_path(self, path: PathFacts) -> list[str]:
        assert isinstance(self.spec, EstimatorSpec)
        if path.family == 6:
            raise SwellError(self.name, "cannot run over IPv6: swell-probe's receiver, "
                             "pathload and pathChirp speak IPv4 only")
        self.capacity_mbps = path.reverse_mbps
        return check_range(self.name, self.spec, path)

    def endpoints(self, ctx: RunContext) -> tuple[Endpoint, Endpoint]:
        pl = ctx.placement
        if not pl.fg_servers or not pl.fg_clients:
            raise SwellError(self.name, "needs a foreground client and server in the topology")
        self.capacity_mbps = pl.path.reverse_mbps
        require_ipv4(self.name, [pl.fg_servers[0].ip, pl.fg_clients[0].ip],
                     "swell-probe's receiver, pathload and pathChirp speak IPv4 only")
        return pl.fg_servers[0], pl.fg_clients[0]

    def settle_s(self, ctx: RunContext, server: Endpoint, client: Endpoint) -> float:
        return 0.25 + ctx.placement.rtt_ms(server, client) / 1e3

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        if gen is None:
            return KindResult(self.name)
        from swell.generators.bwest_report import judge

        metrics, problems = judge(gen, window, self.capacity_mbps)
        return KindResult(self.name, metrics, problems=problems)

    @classmethod
    def report(cls, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
        from swell.generators.bwest_report import report

        return report(cls.name, groups, out)


class SlopsKind(EstimatorKind):
    """SLoPS: pathload's method with swell-probe's streams."""

    name = "slops"
    Spec = SlopsSpec
    native = ("swell-probe",)

    def build(self, ctx: RunContext) -> Generator:
        assert isinstance(self.spec, SlopsSpec)
        server, client = self.endpoints(ctx)
        lo, hi = rate_range(self.spec, ctx.placement.path, 1.2)
        cap = ctx.placement.path.reverse_mbps
        loop = SlopsLoop(self.spec, lo, hi, cap * 1e6 if cap else None)
        return ProbeGenerator(self.name, loop, server, client, self.spec.port,
                              self.settle_s(ctx, server, client), ctx.out_dir,
                              RT_PRIORITY if self.spec.realtime else None, self.spec.spin_us)


class ChirpKind(EstimatorKind):
    """Chirps: pathChirp's method with swell-probe's chirps."""

    name = "chirp"
    Spec = ChirpSpec
    native = ("swell-probe",)

    def build(self, ctx: RunContext) -> Generator:
        assert isinstance(self.spec, ChirpSpec)
        server, client = self.endpoints(ctx)
        lo, hi = rate_range(self.spec, ctx.placement.path, 1.5)
        return ProbeGenerator(self.name, ChirpLoop(self.spec, lo, hi, ctx.seed), server, client,
                              self.spec.port, self.settle_s(ctx, server, client), ctx.out_dir,
                              RT_PRIORITY if self.spec.realtime else None, self.spec.spin_us)


UNPACKAGED = "build it from its public source, see docs/bwest.md"


class PathloadKind(EstimatorKind):
    """The real pathload 1.3.x, one measurement after another."""

    name = "pathload"
    Spec = PathloadSpec
    tools = (Tool("pathload_snd", None, UNPACKAGED), Tool("pathload_rcv", None, UNPACKAGED))

    def build(self, ctx: RunContext) -> Generator:
        from swell.generators.bwest_tools import PathloadGenerator

        assert isinstance(self.spec, PathloadSpec)
        server, client = self.endpoints(ctx)
        return PathloadGenerator(self.spec, server, client, ctx.out_dir)


class PathchirpKind(EstimatorKind):
    """The real pathChirp 2.3.x, its smoothed estimates."""

    name = "pathchirp"
    Spec = PathchirpSpec
    tools = (Tool("pathchirp_snd", None, UNPACKAGED), Tool("pathchirp_rcv", None, UNPACKAGED))

    def build(self, ctx: RunContext) -> Generator:
        from swell.generators.bwest_tools import PathchirpGenerator

        assert isinstance(self.spec, PathchirpSpec)
        server, client = self.endpoints(ctx)
        lo, hi = rate_range(self.spec, ctx.placement.path, 1.5)
        return PathchirpGenerator(self.spec, server, client, ctx.out_dir, ctx.duration_s,
                                  lo, hi)
