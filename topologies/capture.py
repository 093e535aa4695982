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
  from its exit report. On an IPv6 plan it leaves out IPv6 multicast
  (``not ip6 multicast``): the core router's own MLD reports, which leave by
  the same interface but are not traffic that crossed the bottleneck (the
  native engine never routes them either).

Either way :class:`CaptureReport` says how many frames were written and how
many were dropped; :func:`problems` turns non-zero drops into messages so a
run never loses packets silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.placement import Via
from swell.tcpdump import BUFFER_KIB, Tcpdump, parse_counters, tcpdump_argv
from swell.topologies.layout import Layout, in_ns

DIRECTIONS = ("forward", "reverse")
EGRESS_SIDE = {"forward": "right", "reverse": "left"}  # core port a direction leaves by
TCPDUMP_BUFFER_KIB = BUFFER_KIB


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


def client_capture_paths(capture_dir: Path, nodes: list[str]) -> dict[tuple[str, str], Path]:
    """(node, direction) -> pcap beside the background clients (``CaptureSpec.clients``)."""
    return {(n, d): capture_dir / f"clients-{n}-{d}.pcap" for n in nodes for d in DIRECTIONS}


def parse_tcpdump_counters(stderr: str) -> dict[str, int]:
    """tcpdump's exit report as numbers (missing counters are absent)."""
    return parse_counters(stderr)


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
        queue: str = "out",
    ) -> None:
        """By default the core router's egress for ``direction``; ``node``/``dev`` override,
        ``queue`` is tcpdump's ``-Q`` (``in`` for what a host receives)."""
        self.direction = direction
        self.path = path
        self.dev = dev or layout.core_port[EGRESS_SIDE[direction]]
        place = Via(tuple(in_ns(layout.pid(node), [])), label=node)
        bpf = "not ip6 multicast" if layout.plan.version == 6 else None
        self._tcpdump = Tcpdump(place, tcpdump_argv(self.dev, path, snaplen, queue, bpf),
                                f"tcpdump on {self.dev}")

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until tcpdump says it is listening (probe, no sleep)."""
        self._tcpdump.start(timeout)

    @property
    def pid(self) -> int | None:
        return self._tcpdump.pid

    def stop(self, timeout: float = 10.0) -> CaptureReport:
        """SIGINT (tcpdump flushes and prints its counters), then parse them."""
        counts = self._tcpdump.stop(timeout)
        return CaptureReport(self.direction, str(self.path), counts.written, counts.dropped,
                             "tcpdump", counts.detail)


def client_captures(layout: Layout, paths: dict[tuple[str, str], Path],
                    snaplen: int) -> list[TcpdumpCapture]:
    """tcpdump on each background client namespace's interface: ``forward`` is what its
    hosts send (``-Q out``), ``reverse`` what they receive (``-Q in``)."""
    return [TcpdumpCapture(layout, f"clients {node} {d}", path, snaplen, node=node,
                           dev=layout.host_intf[node],
                           queue="out" if d == "forward" else "in")
            for (node, d), path in paths.items()]
