"""One run's traffic from start to stop: a background and a foreground generator.

Every kind is driven the same way, whatever it is (:mod:`swell.generators.kind`):

1. background: ``check``, ``start_server``, ``wait_ready`` (probes), ``start_client``;
2. foreground: ``check``, ``start_server``, ``wait_ready``;
3. the warm-up passes (live counters of the background on the progress line);
4. foreground ``start_client``; the measurement runs until its end, or until a
   foreground that ends by itself (a fixed number of downloads) is done;
5. foreground ``stop`` right at the end (httperf counts what finished before),
   then the background's ``stop``; both always run, also after an error.

The wall-clock times of each step are kept in :attr:`Session.timing`
(``background_start``, ``foreground_start``, ``end``) and define the
measurement :class:`~swell.generators.kind.Window`.
"""

from __future__ import annotations

import time
from typing import Any

from swell.generators.base import Generator, GenResult, live_status
from swell.generators.kind import KindResult, TrafficKind, Window
from swell.progress import Progress

READY_TIMEOUT_S = 15.0
TICK_S = 0.2  # progress display cadence, not a readiness wait


def stop_generators(bg: Generator | None, fg: Generator | None) -> None:
    """The foreground, then the background; the first error is raised after both stopped
    (the local session and a testbed run stop their generators alike)."""
    error: BaseException | None = None
    for gen in (fg, bg):
        if gen is None:
            continue
        try:
            gen.stop()
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the other stop
            error = error or exc
    if error is not None:
        raise error


class Session:
    """Drives a background and a foreground generator (either may be None)."""

    def __init__(self, background: Generator | None, foreground: Generator | None) -> None:
        self.bg = background
        self.fg = foreground
        self.timing: dict[str, float] = {}

    def _tick(self, prog: Progress, elapsed: float) -> None:
        status = ""
        if self.bg is not None:
            self.bg.poll()
            status = live_status(self.bg.counter_lines)
        prog.update(done=elapsed, status=status)
        time.sleep(TICK_S)

    def run(self, warmup_s: float, total_s: float, prog: Progress) -> None:
        """Start, warm up, measure, stop (see the module docstring)."""
        try:
            for gen in (self.bg, self.fg):
                if gen is not None:
                    gen.check()
            if self.bg is not None:
                self.bg.start_server()
                self.bg.wait_ready(READY_TIMEOUT_S)
                self.bg.start_client()
            t0 = time.monotonic()
            self.timing["background_start"] = time.time()
            if self.fg is not None:
                self.fg.start_server()
                self.fg.wait_ready(READY_TIMEOUT_S)
            while time.monotonic() - t0 < warmup_s:
                self._tick(prog, time.monotonic() - t0)
            self.timing["foreground_start"] = time.time()
            if self.fg is not None:
                self.fg.start_client()
            while time.monotonic() - t0 < total_s:
                if self.fg is not None and not self.fg.running():
                    break
                self._tick(prog, time.monotonic() - t0)
            self.timing["end"] = time.time()
            if self.fg is not None:
                self.fg.stop()
        finally:
            self._stop_all()

    def _stop_all(self) -> None:
        """Stop both (foreground first); the first error is raised after both stopped."""
        stop_generators(self.bg, self.fg)

    def window(self) -> Window:
        t = self.timing
        return Window(start=t.get("foreground_start", 0.0), end=t.get("end", 0.0),
                      clients_started=t.get("background_start", 0.0))

    def collect_background(self, warmup_s: float) -> GenResult | None:
        return None if self.bg is None else self.bg.collect(warmup_s)

    def collect_foreground(self) -> GenResult | None:
        return None if self.fg is None else self.fg.collect(0.0)

    def results(self, bg: TrafficKind, fg: TrafficKind, warmup_s: float
                ) -> tuple[KindResult, dict[str, Any] | None]:
        """Both kinds' results over the measurement window; a foreground that ran
        nothing (``build`` gave no generator) has none."""
        window = self.window()
        bg_result = bg.result(self.collect_background(warmup_s), window)
        fg_result = None if self.fg is None else \
            fg.result(self.collect_foreground(), window).to_json()
        return bg_result, fg_result
