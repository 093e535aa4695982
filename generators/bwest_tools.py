"""Adapters for the real estimators: pathload 1.3.x and pathChirp 2.3.x.

Neither is packaged in Debian; ``docs/bwest.md`` says how to build them from
their public sources. swell only runs them and reads their outputs, so a run
with ``foreground: {kind: pathload}`` or ``{kind: pathchirp}`` gives the same
results (estimates with their spans, then truth and error) as swell's own
estimators.

* **pathload**: ``pathload_snd -i`` (persistent) on the foreground server;
  on the client ``pathload_rcv -s SERVER`` one measurement after another for
  the whole run, each parsed from its ``Available bandwidth range : a - b
  (Mbps)`` line (or its ``greater than`` lower bound; ``Avail-bw < minimum
  sending rate`` and a sender that refuses give none). One that runs past
  ``timeout_s`` is killed and recorded as a timeout.
* **pathChirp**: ``pathchirp_snd`` on the server, ``pathchirp_rcv -S SERVER
  -t DURATION`` on the client; it writes its smoothed estimates (``time
  Mbit/s`` lines) to ``<src>_<dst>_<time>.instbw`` in its working directory
  (the foreground's run folder), read after it stops.

Each pathload_rcv's output, finished or killed, is kept with its log of fleets
(``pathload_rcv-NNN.txt`` and ``.log``) and pathChirp's ``.instbw`` stays in
the run folder, so a run's estimates can be re-derived from the tools' own
words. Turning those outputs into estimates is two pure functions,
:func:`pathload_estimate` and :func:`pathchirp_estimates`, tested on outputs
captured from the real tools (``tests/data/bwest_tools/``).

Readiness is the sender's listening socket seen with ``ss`` in its place (a
test connection would start a measurement). Their probe bytes are not
reported by the tools; the truth step counts them in the capture.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_text
from swell.generators.base import Generator, GenResult
from swell.placement import Endpoint, Place

PATHLOAD_TCP_PORT = 55002
PATHCHIRP_PORT = 8365

RANGE_RE = re.compile(r"Available bandwidth range : ([\d.]+) - ([\d.]+) \(Mbps\)")
ABOVE_RE = re.compile(r"(?:Available bandwidth is greater than|Avail-bw >) ([\d.]+) \(Mbps\)")


def parse_pathload(text: str) -> tuple[float | None, float | None]:
    """(low, high) Mbit/s from one pathload_rcv run; (low, None) for an open range."""
    m = RANGE_RE.search(text)
    if m:
        return float(m.group(1)), float(m.group(2))
    m = ABOVE_RE.search(text)
    if m:
        return float(m.group(1)), None
    return None, None


def parse_instbw(text: str) -> list[tuple[float, float]]:
    """(wall-clock time, Mbit/s) pairs from pathChirp's ``.instbw`` file."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2:
            try:
                out.append((float(f[0]), float(f[1])))
            except ValueError:
                continue
    return out


def pathload_estimate(text: str, timed_out: bool, t_start: float, t_end: float
                      ) -> dict[str, Any] | None:
    """The estimate of one pathload_rcv measurement from its output and span (wall clock).

    A measurement killed at ``timeout_s`` is a timeout without a range, whatever it
    printed before; one that ended without a range (``Avail-bw < minimum sending
    rate``, a sender that did not answer) gives no estimate (None). The estimate is
    the range's midpoint, or its lower bound for an open range."""
    low, high = (None, None) if timed_out else parse_pathload(text)
    if low is None and not timed_out:
        return None
    mid = None if low is None else (low if high is None else (low + high) / 2)
    return {"t_start": t_start, "t_end": t_end, "low_mbps": low, "high_mbps": high,
            "estimate_mbps": mid, "probe_bytes": None, "timeout": timed_out}


def pathchirp_estimates(text: str, started: float) -> list[dict[str, Any]]:
    """Estimates from pathChirp's ``.instbw`` text: each spans from the previous one's
    time (the first from ``started``, when pathchirp_rcv was started) to its own."""
    estimates = []
    prev = started
    for t, mbps in parse_instbw(text):
        estimates.append({"t_start": min(prev, t), "t_end": t, "low_mbps": mbps,
                          "high_mbps": mbps, "estimate_mbps": mbps, "probe_bytes": None,
                          "timeout": False})
        prev = t
    return estimates


def wait_listening(place: Place, proto: str, port: int, alive: Any, what: str,
                   timeout: float) -> None:
    """Probe the place's sockets until ``port`` is bound (``ss``; never a fixed sleep)."""
    flag = "-ltnH" if proto == "tcp" else "-lunH"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive.poll() is not None:
            raise SwellError(what, f"exited at start (status {alive.returncode})")
        out = place.run(["ss", flag, "sport", "=", f":{port}"], timeout=5).stdout
        if out.strip():
            return
        time.sleep(0.05)
    raise SwellError(what, f"not listening on {proto} port {port} after {timeout:g} s")


def _stop(p: subprocess.Popen[Any] | None, sig: int = 15) -> None:
    if p is not None and p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class PathloadGenerator(Generator):
    """pathload_snd on the server, pathload_rcv measurements back to back on the client."""

    name = "pathload"

    def __init__(self, spec: Any, server: Endpoint, client: Endpoint, out: Path) -> None:
        super().__init__()
        self.spec, self.server, self.client, self.out = spec, server, client, out
        self.snd: subprocess.Popen[Any] | None = None
        self.rcv: subprocess.Popen[Any] | None = None
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.estimates: list[dict[str, Any]] = []
        self.measurements = 0  # pathload_rcv runs so far (their outputs' numbers)

    def check(self) -> None:
        pass

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.snd = self.server.place.popen(["pathload_snd", "-i", "-q"],
                                           stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, cwd=self.out,
                                           start_new_session=True)

    def wait_ready(self, timeout: float = 10.0) -> None:
        wait_listening(self.server.place, "tcp", PATHLOAD_TCP_PORT, self.snd, "pathload_snd",
                       timeout)

    def _one(self) -> None:
        # its own log per measurement (``-o`` truncates: the next one emptied the log of
        # a measurement killed at its timeout, the one worth reading)
        log = self.out / f"pathload_rcv-{self.measurements + 1:03d}.log"
        argv = ["pathload_rcv", "-s", self.server.ip, "-o", str(log)]
        if self.spec.resolution_mbps:
            argv += ["-w", f"{self.spec.resolution_mbps:g}"]
        t0 = time.time()
        self.rcv = self.client.place.popen(argv, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, cwd=self.out,
                                           start_new_session=True)
        try:
            text, _ = self.rcv.communicate(timeout=self.spec.timeout_s)
            timeout = False
        except subprocess.TimeoutExpired:
            _stop(self.rcv)
            text, _ = self.rcv.communicate()  # what it printed before it was killed
            timeout = True
        self.measurements += 1
        write_text(self.out / f"pathload_rcv-{self.measurements:03d}.txt", text or "")
        if self.stop_event.is_set() and not timeout:
            return  # cut short by the end of the run
        e = pathload_estimate(text or "", timeout, t0, time.time())
        if e is not None:
            self.estimates.append(e)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            n = len(self.estimates)
            self._one()
            if len(self.estimates) == n:  # nothing parsed (e.g. the sender is still busy
                self.stop_event.wait(1.0)  # with a killed measurement): no spawning loop

    def start_client(self) -> None:
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def stop(self) -> None:
        self.stop_event.set()
        _stop(self.rcv)
        if self.thread is not None:
            self.thread.join(timeout=15)
        _stop(self.snd)

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        return GenResult(self.name, {}, {"estimates": self.estimates, "probe_bytes": None,
                                         "server_ip": self.server.ip,
                                         "client_ip": self.client.ip},
                         {"capture_dir": self.out.parent / "capture"})


class PathchirpGenerator(Generator):
    """pathchirp_snd on the server, one pathchirp_rcv for the run on the client."""

    name = "pathchirp"

    def __init__(self, spec: Any, server: Endpoint, client: Endpoint, out: Path,
                 duration_s: float, lo_bps: float, hi_bps: float) -> None:
        super().__init__()
        self.spec, self.server, self.client, self.out = spec, server, client, out
        self.duration_s, self.lo, self.hi = duration_s, lo_bps, hi_bps
        self.snd: subprocess.Popen[Any] | None = None
        self.rcv: subprocess.Popen[Any] | None = None
        self.started = 0.0

    def check(self) -> None:
        pass

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.snd = self.server.place.popen(["pathchirp_snd"], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, cwd=self.out,
                                           start_new_session=True)

    def wait_ready(self, timeout: float = 10.0) -> None:
        wait_listening(self.server.place, "udp", PATHCHIRP_PORT, self.snd, "pathchirp_snd",
                       timeout)

    def start_client(self) -> None:
        s = self.spec
        argv = ["pathchirp_rcv", "-S", self.server.ip, "-t", str(int(self.duration_s) + 1),
                "-l", f"{self.lo / 1e6:g}", "-u", f"{self.hi / 1e6:g}",
                "-p", str(s.packet_bytes), "-s", f"{s.spread:g}", "-a", f"{s.average_mbps:g}",
                "-n", str(s.smooth)]
        self.started = time.time()
        self.rcv = self.client.place.popen(argv, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, cwd=self.out,
                                           start_new_session=True)

    def running(self) -> bool:
        return self.rcv is not None and self.rcv.poll() is None

    def stop(self) -> None:
        _stop(self.rcv, 2)
        _stop(self.snd)

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        files = sorted(self.out.glob("*.instbw"))
        estimates = pathchirp_estimates("".join(f.read_text(errors="replace") for f in files),
                                        self.started)
        return GenResult(self.name, {}, {"estimates": estimates, "probe_bytes": None,
                                         "server_ip": self.server.ip,
                                         "client_ip": self.client.ip},
                         {"capture_dir": self.out.parent / "capture"})
