"""The one interface every generator implements: processes, readiness, counters.

A generator drives programs on two sides of a topology: a *server* side
(listeners, receivers) and a *client* side (session runners, senders). Where a
program runs is a :class:`Place`: this namespace (:class:`Local`), a network
namespace (:class:`Netns`), or anything with a ``popen(argv, **kw)`` such as
a topology node (:class:`Via`). Every process is a :class:`Proc` that reads
its stdout on a thread (readiness lines, JSON counter lines) and is stopped
with SIGTERM, then SIGKILL after a grace period; nothing is ever left
running, even when a step fails (:func:`run_generator` stops in ``finally``).

Lifecycle (``Generator``): ``check()`` (its ``tools``, each a :class:`Tool`
naming its Debian package, and its ``native`` binaries; raises
EnvironmentProblem, exit 3) -> ``start_server()`` -> ``wait_ready()`` (probes the
server from the client side: a real request/response, never a sleep) ->
``start_client()`` -> ``poll()`` live counters while ``running()`` ->
``stop()`` -> ``collect()`` into a :class:`GenResult` (time series and
summary; per-connection records for Swing).

Places (:class:`~swell.placement.Local`, ``Netns``, ``Via``) come from
:mod:`swell.placement`; a topology hands them out, this package never builds
them from a topology. The table of traffic kinds is
:mod:`swell.generators.registry`.
"""

from __future__ import annotations

import collections
import json
import queue
import shutil
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from swell.errors import EnvironmentProblem, SwellError
from swell.native import native_artifact
from swell.placement import Local, Netns, Place, Via
from swell.progress import Progress

__all__ = ["Local", "Netns", "Place", "Via", "Proc", "Generator", "GenResult", "Tool", "require",
           "DITG", "run_generator", "counter_series", "parse_json_lines", "live_status"]


class Proc:
    """A started process whose stdout lines are queued and stderr tail kept."""

    def __init__(self, label: str, place: Place, argv: Sequence[str]) -> None:
        self.label = label
        self.argv = list(argv)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        try:
            self.popen = place.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise EnvironmentProblem(argv[0], f"cannot start: {exc.strerror}") from None
        self._threads = [threading.Thread(target=self._pump, args=(self.popen.stdout, True),
                                          daemon=True),
                         threading.Thread(target=self._pump, args=(self.popen.stderr, False),
                                          daemon=True)]
        for t in self._threads:
            t.start()

    def _pump(self, stream: Any, is_out: bool) -> None:
        for line in stream:
            if is_out:
                self.lines.put(line.rstrip("\n"))
            else:
                self.stderr_tail.append(line.rstrip("\n"))
        if is_out:
            self.lines.put(None)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def error_text(self) -> str:
        tail = " | ".join(self.stderr_tail) or "no message"
        return f"{self.label} exited with status {self.popen.returncode}: {tail}"

    def wait_line(self, pred: Callable[[str], bool], timeout: float) -> str:
        """Block until a stdout line satisfies ``pred`` (raises if the process dies)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SwellError(self.label, f"no ready line within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.popen.wait()
                self._join()
                raise SwellError(self.label, self.error_text())
            if pred(line):
                return line

    def drain(self) -> list[str]:
        out = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return out
            if line is not None:
                out.append(line)

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit status."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._join()
        return int(self.popen.returncode)

    def _join(self) -> None:
        for t in self._threads:
            t.join(timeout=2.0)


@dataclass
class GenResult:
    """What a generator produced: counter series, a summary and its files."""

    name: str
    series: dict[str, np.ndarray]
    summary: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)


def counter_series(lines: list[dict[str, Any]], warmup_s: float = 0.0) -> dict[str, np.ndarray]:
    """Rates from cumulative counter lines: conns/s and Mbit/s per direction."""
    rows = [r for r in lines if "t" in r]
    if not rows:
        return {}
    t = np.array([r["t"] for r in rows], dtype=float)
    out = {"t": t}
    for key in ("sessions_active", "conns_active"):
        if key in rows[0]:
            out[key] = np.array([r[key] for r in rows], dtype=float)
    dt = np.diff(t, prepend=0.0)
    dt[dt <= 0] = np.nan
    for key, name, scale in (("conns_started", "conns_per_s", 1.0),
                             ("tx_bytes", "tx_mbps", 8e-6), ("rx_bytes", "rx_mbps", 8e-6)):
        if key in rows[0]:
            v = np.array([r[key] for r in rows], dtype=float)
            out[name] = np.diff(v, prepend=0.0) * scale / dt
    keep = t >= warmup_s
    return {k: v[keep] for k, v in out.items()}


def parse_json_lines(lines: list[str]) -> list[dict[str, Any]]:
    out = []
    for ln in lines:
        if ln.startswith("{"):
            try:
                out.append(json.loads(ln))
            except json.JSONDecodeError:
                continue
    return out


@dataclass(frozen=True)
class Tool:
    """A program something runs, and the Debian package that has it.

    The one way a kind or a generator declares what it needs (:func:`require`).
    ``program`` is a name on PATH or a path (``/usr/sbin/apache2``). A tool Debian
    does not package has ``package=None`` and ``source`` says where to get it.
    """

    program: str
    package: str | None
    source: str = ""

    def problem(self) -> EnvironmentProblem | None:
        """None when the program is there; else the error that names it and its package."""
        if shutil.which(self.program) is not None:
            return None
        if self.package is not None:
            return EnvironmentProblem(self.program, f"not installed (apt-get install "
                                                    f"{self.package})")
        return EnvironmentProblem(self.program, f"not on PATH (not packaged in Debian: "
                                                f"{self.source})")


def require(tools: Iterable[Tool], alternative: str = "") -> None:
    """Raise :class:`EnvironmentProblem` (exit 3) for the first missing tool:
    ``<program>: not installed (apt-get install <package>)[; <alternative>]``."""
    for tool in tools:
        if (exc := tool.problem()) is not None:
            if alternative:
                raise EnvironmentProblem(exc.where, f"{exc.message}; {alternative}")
            raise exc


DITG = (Tool("ITGSend", "d-itg"), Tool("ITGRecv", "d-itg"), Tool("ITGDec", "d-itg"))


class Generator(ABC):
    """One traffic generator: server side, client side, readiness, counters, results."""

    name: ClassVar[str]
    tools: ClassVar[tuple[Tool, ...]] = ()  # programs it runs (:func:`require`)
    native: ClassVar[tuple[str, ...]] = ("swell-gen",)  # swell's own binaries it runs

    def __init__(self) -> None:
        self.procs: list[Proc] = []
        self.counter_lines: list[dict[str, Any]] = []

    def check(self) -> None:
        """Raise EnvironmentProblem if a needed program is missing (or not built)."""
        for name in self.native:
            native_artifact(name)
        require(self.tools)

    def spawn(self, label: str, place: Place, argv: Sequence[str]) -> Proc:
        proc = Proc(label, place, argv)
        self.procs.append(proc)
        return proc

    @abstractmethod
    def start_server(self) -> None: ...

    @abstractmethod
    def wait_ready(self, timeout: float = 10.0) -> None: ...

    @abstractmethod
    def start_client(self) -> None: ...

    @abstractmethod
    def running(self) -> bool: ...

    def poll(self) -> list[dict[str, Any]]:
        """New counter lines from the client side (cumulative counters)."""
        return []

    def stop(self) -> None:
        """Stop every process this generator started, newest first."""
        for proc in reversed(self.procs):
            proc.stop()

    @abstractmethod
    def collect(self, warmup_s: float = 0.0) -> GenResult: ...


def live_status(rows: list[dict[str, Any]]) -> str:
    """One progress-line status from the last two cumulative counter lines."""
    if len(rows) < 2:
        return ""
    a, b = rows[-2], rows[-1]
    dt = max(b["t"] - a["t"], 1e-9)
    parts = []
    if "sessions_active" in b:
        parts.append(f"sessions {b['sessions_active']}")
    if "conns_started" in b:
        parts.append(f"{(b['conns_started'] - a['conns_started']) / dt:,.0f} conn/s")
    for key, label in (("tx_bytes", "up"), ("rx_bytes", "down")):
        if key in b:
            parts.append(f"{label} {(b[key] - a[key]) * 8e-6 / dt:,.2f} Mbit/s")
    return " ".join(parts)


def run_generator(gen: Generator, duration_s: float | None = None, warmup_s: float = 0.0,
                  ready_timeout: float = 10.0, label: str | None = None) -> GenResult:
    """Run ``gen`` to completion (or ``duration_s``), showing live counters; always stops."""
    gen.check()
    try:
        gen.start_server()
        gen.wait_ready(ready_timeout)
        gen.start_client()
        t0 = time.monotonic()
        with Progress(label or f"gen {gen.name}", total=duration_s, unit="s") as prog:
            while gen.running():
                elapsed = time.monotonic() - t0
                if duration_s is not None and elapsed >= duration_s:
                    break
                gen.poll()
                prog.update(done=elapsed, status=live_status(gen.counter_lines))
                wait_s = 0.2 if duration_s is None else min(0.2, max(duration_s - elapsed, 0.0))
                time.sleep(wait_s)  # display refresh cadence, not a readiness wait
            prog.update(done=time.monotonic() - t0)
    finally:
        gen.stop()
    return gen.collect(warmup_s)
