"""tcpdump as a started-and-ready process that stops without losing packets.

Used for every capture swell takes with tcpdump: the bottleneck taps of the
netem engine (:mod:`swell.topologies.capture`) and the foreground client's
own capture (:mod:`swell.generators.web`). The process runs in a
:class:`~swell.placement.Place`; :meth:`Tcpdump.start` returns once tcpdump
says it is listening (a probe, never a sleep); :meth:`Tcpdump.stop` sends
SIGINT (tcpdump flushes its buffer and prints its counters; a SIGKILL would
lose what is still buffered) and parses the counters, so a caller can tell
a complete capture from one that dropped packets.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from swell.errors import SwellError
from swell.placement import Place

BUFFER_KIB = 65536
_COUNTERS = {
    "captured": re.compile(r"(\d+) packets? captured"),
    "received": re.compile(r"(\d+) packets? received by filter"),
    "dropped_kernel": re.compile(r"(\d+) packets? dropped by kernel"),
    "dropped_interface": re.compile(r"(\d+) packets? dropped by interface"),
}


def parse_counters(stderr: str) -> dict[str, int]:
    """tcpdump's exit report as numbers (missing counters are absent)."""
    out = {}
    for key, pattern in _COUNTERS.items():
        match = pattern.search(stderr)
        if match:
            out[key] = int(match.group(1))
    return out


def tcpdump_argv(dev: str, path: Path, snaplen: int, direction: str | None = None,
                 bpf: str | None = None) -> list[str]:
    """tcpdump writing nanosecond stamps to ``path``, unbuffered, with a large kernel buffer."""
    argv = ["tcpdump", "-i", dev]
    if direction:
        argv += ["-Q", direction]
    argv += ["-n", "-s", str(snaplen), "-B", str(BUFFER_KIB), "--immediate-mode",
             "--time-stamp-precision=nano", "-w", str(path)]
    return argv + ([bpf] if bpf else [])


@dataclass(frozen=True)
class CaptureCounts:
    written: int
    dropped: int
    detail: dict[str, int]


class Tcpdump:
    """One tcpdump process in a place."""

    def __init__(self, place: Place, argv: list[str], label: str) -> None:
        self.place = place
        self.argv = argv
        self.label = label
        self.proc: subprocess.Popen[bytes] | None = None
        self._err = b""

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until tcpdump says it is listening (probe, no sleep)."""
        self.proc = subprocess.Popen(self.place.argv(self.argv), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        while b"listening on" not in self._err:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stderr], [], [], max(left, 0.0))
            chunk = os.read(self.proc.stderr.fileno(), 4096) if ready else b""
            if not chunk:
                self.proc.kill()
                self.proc.wait()
                msg = self._err.decode(errors="replace").strip() or "no output"
                raise SwellError(self.label, f"did not start: {msg}")
            self._err += chunk

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def stop(self, timeout: float = 10.0) -> CaptureCounts:
        """SIGINT (tcpdump flushes and prints its counters), then parse them."""
        if self.proc is None:
            raise SwellError(self.label, "capture was not started")
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.proc = None
        counters = parse_counters((self._err + err).decode(errors="replace"))
        if "captured" not in counters:
            raise SwellError(self.label, "tcpdump printed no counters; the capture may be cut")
        dropped = counters.get("dropped_kernel", 0) + counters.get("dropped_interface", 0)
        return CaptureCounts(counters["captured"], dropped, counters)
