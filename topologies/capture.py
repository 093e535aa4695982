"""Capture at the bottleneck: one pcap per direction, exact timestamps, drops reported.

``forward`` is client side -> server side (left -> right), ``reverse`` the
other way. Two ways to capture, chosen by the engine:

* native engine: ``swell-link`` itself writes each frame as it leaves the
  bottleneck pipe, stamped with its scheduled departure time (the exact
  timestamp the emulated link gives it); its stats report frames written and
  frames it could not write (``lost``).
* netem engine: ``tcpdump`` on the core router's egress towards each side
  (``-Q out``; the kernel forwards there, so packets pass the taps; frames
  the native engine sends bypass them), ``--immediate-mode``, a large kernel
  buffer and nanosecond timestamps, stopped with SIGINT (so it flushes), its
  own drop counters ("dropped by kernel", "dropped by interface") parsed
  from its exit report.

Either way :class:`CaptureReport` says how many frames were written and how
many were dropped; :func:`problems` turns non-zero drops into messages so a
run never loses packets silently.
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
from typing import Any

from swell.errors import SwellError
from swell.topologies.layout import Layout, in_ns

DIRECTIONS = ("forward", "reverse")
EGRESS_SIDE = {"forward": "right", "reverse": "left"}  # core port a direction leaves by
TCPDUMP_BUFFER_KIB = 65536
_COUNTERS = {
    "captured": re.compile(r"(\d+) packets? captured"),
    "received": re.compile(r"(\d+) packets? received by filter"),
    "dropped_kernel": re.compile(r"(\d+) packets? dropped by kernel"),
    "dropped_interface": re.compile(r"(\d+) packets? dropped by interface"),
}


@dataclass(frozen=True)
class CaptureReport:
    direction: str
    path: str
    written: int
    dropped: int
    tool: str  # "swell-link" or "tcpdump"
    detail: dict[str, int]


def capture_paths(capture_dir: Path) -> dict[str, Path]:
    return {d: capture_dir / f"bottleneck-{d}.pcap" for d in DIRECTIONS}


def parse_tcpdump_counters(stderr: str) -> dict[str, int]:
    """tcpdump's exit report as numbers (missing counters are absent)."""
    out = {}
    for key, pattern in _COUNTERS.items():
        match = pattern.search(stderr)
        if match:
            out[key] = int(match.group(1))
    return out


def native_reports(stats: dict[str, Any], paths: dict[str, Path]) -> list[CaptureReport]:
    """Reports from swell-link's final stats (``captures``: path -> written/lost)."""
    caps = stats.get("captures", {})
    reports = []
    for direction, path in paths.items():
        entry = caps.get(str(path))
        if entry is None:
            raise SwellError(path, "the engine reported nothing for this capture")
        detail = {k: int(v) for k, v in entry.items() if isinstance(v, int | float)}
        reports.append(
            CaptureReport(
                direction,
                str(path),
                int(entry.get("written", 0)),
                int(entry.get("lost", 0)),
                "swell-link",
                detail,
            )
        )
    return reports


def problems(reports: list[CaptureReport]) -> list[str]:
    out = []
    for r in reports:
        if r.dropped:
            out.append(f"capture {r.direction} ({r.path}) dropped {r.dropped} packets ({r.tool})")
        if not Path(r.path).exists():
            out.append(f"capture {r.direction}: {r.path} is missing")
    return out


class TcpdumpCapture:
    """tcpdump on the core router's egress for one direction."""

    def __init__(
        self,
        layout: Layout,
        direction: str,
        path: Path,
        snaplen: int,
        node: str = "r",
        dev: str | None = None,
    ) -> None:
        """By default the core router's egress for ``direction``; ``node``/``dev`` override."""
        self.direction = direction
        self.path = path
        self.dev = dev or layout.core_port[EGRESS_SIDE[direction]]
        self.argv = in_ns(
            layout.pid(node),
            [
                "tcpdump", "-i", self.dev, "-Q", "out", "-n", "-s", str(snaplen),
                "-B", str(TCPDUMP_BUFFER_KIB), "--immediate-mode",
                "--time-stamp-precision=nano", "-w", str(path),
            ],
        )  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        self._err = b""

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until tcpdump says it is listening (probe, no sleep)."""
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
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
                raise SwellError(f"tcpdump on {self.dev}", f"did not start: {msg}")
            self._err += chunk

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def stop(self, timeout: float = 10.0) -> CaptureReport:
        """SIGINT (tcpdump flushes and prints its counters), then parse them."""
        if self.proc is None:
            raise SwellError(self.path, "capture was not started")
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self.proc = None
        counters = parse_tcpdump_counters((self._err + err).decode(errors="replace"))
        if "captured" not in counters:
            raise SwellError(self.path, "tcpdump printed no counters; the capture may be cut")
        dropped = counters.get("dropped_kernel", 0) + counters.get("dropped_interface", 0)
        return CaptureReport(
            self.direction, str(self.path), counters["captured"], dropped, "tcpdump", counters
        )
