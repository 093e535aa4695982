"""One run's traffic from start to stop: a background and a foreground generator.

Every kind is driven the same way, whatever it is (:mod:`swell.generators.kind`):

1. both kinds' ``check``; both servers' ``start_server``, then both ``wait_ready``
   (probes): the foreground's server is up before the background's clients start,
   so its start-up (Apache under a loaded QEMU guest took seconds) never eats into
   the measurement;
2. background ``start_client``; the warm-up passes (live counters of the
   background on the progress line);
3. foreground ``start_client``; the measurement runs until its end, or until a
   foreground that ends by itself (a fixed number of downloads) is done;
4. foreground ``stop`` right at the end (httperf counts what finished before),
   then the background's ``stop``; both always run, also after an error.

A measurement window shorter than asked (the foreground started late, not one that
ended by itself) is one of the run's problems (:attr:`Session.problems`).

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
SHORT_WINDOW = 0.9  # a measurement window under this share of the asked one is a problem


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
        self.problems: list[str] = []

    def _tick(self, prog: Progress, t0: float, until: float) -> None:
        """Progress and live counters, then sleep a tick, never past ``until`` (seconds
        after ``t0``, the background's start): a step due then starts on time."""
        status = ""
        if self.bg is not None:
            self.bg.poll()
            status = live_status(self.bg.counter_lines)
        elapsed = time.monotonic() - t0
        prog.update(done=elapsed, status=status)
        time.sleep(max(0.0, min(TICK_S, until - elapsed)))

    def run(self, warmup_s: float, total_s: float, prog: Progress) -> None:
        """Start, warm up, measure, stop (see the module docstring)."""
        try:
            gens = [g for g in (self.bg, self.fg) if g is not None]
            for gen in gens:
                gen.check()
            for gen in gens:
                gen.start_server()
            for gen in gens:
                gen.wait_ready(READY_TIMEOUT_S)
            if self.bg is not None:
                self.bg.start_client()
            t0 = time.monotonic()
            self.timing["background_start"] = time.time()
            while time.monotonic() - t0 < warmup_s:
                self._tick(prog, t0, warmup_s)
            self.timing["foreground_start"] = time.time()
            started = time.monotonic() - t0
            if self.fg is not None:
                self.fg.start_client()
            ended_itself = False
            while time.monotonic() - t0 < total_s:
                if self.fg is not None and not self.fg.running():
                    ended_itself = True
                    break
                self._tick(prog, t0, total_s)
            self.timing["end"] = time.time()
            self._check_window(time.monotonic() - t0 - started, total_s - warmup_s,
                               ended_itself)
            if self.fg is not None:
                self.fg.stop()
        finally:
            self._stop_all()

    def _check_window(self, measured_s: float, asked_s: float, ended_itself: bool) -> None:
        """A problem when the measurement ran short of what was asked (a foreground
        that ends by itself, a fixed number of downloads, is not short)."""
        if not ended_itself and asked_s > 0 and measured_s < SHORT_WINDOW * asked_s:
            self.problems.append(
                f"measurement window {measured_s:.2f} s of the asked {asked_s:.2f} s: the "
                "foreground started late (the machine was too busy to keep the run's "
                "schedule)")

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
