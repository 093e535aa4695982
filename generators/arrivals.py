"""Session arrival processes of a Swing schedule: when sessions start, given how many.

The count and the placement of session starts are separate decisions, so a
target load can be met by construction (the count chosen from a byte budget,
:func:`swell.generators.schedule.build_schedule`) whatever the process:

* ``expected(app, duration, scale)``: the mean number of session starts of one
  application in ``[0, duration)`` (a run without a target draws a Poisson count
  with this mean);
* ``place(app, n, start, end, rng)``: ``n`` sorted start times in ``[start, end)``
  (a target is met per segment of the run: warm-up and measurement window).

Processes:

* ``stationary`` (the default for runs longer than the trace): a homogeneous
  Poisson process at the model's mean session rate times the scale; given the
  count, the starts are independent and uniform. No period of any kind.
* ``trace``: the trace's own rate profile (1 s bins of ``sessionStart``), played
  once: only for runs no longer than the trace (the default for those). Repeating
  it would put the trace's length as a period into the run, so a longer run is
  an error naming ``stationary``.
* ``auto``: ``trace`` when the run fits in the trace, else ``stationary``.

A process says whether it has a beginning (``steady``): a run's steady start
(:mod:`swell.generators.steady_start`) runs one without over the lead-in before
0, and precedes one with (``trace``) by its mean rate.

Other processes plug in with :func:`register` and are then selectable by name
(``arrivals:`` of a Swing background); ``mmpp:DIR[@SECONDS]`` is a fitted MMPP
(:mod:`swell.generators.mmpp_arrivals`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from swell.errors import SwellError

if TYPE_CHECKING:
    from swell.generators.schedule import AppSamples


class ArrivalProcess(Protocol):
    name: str
    # no beginning: a run may start in the process's steady state, with the sessions
    # that arrived before it under way (swell.generators.steady_start)
    steady: bool

    def expected(self, app: AppSamples, duration: float, scale: float) -> float:
        """Mean number of session starts in ``[0, duration)``."""

    def place(self, app: AppSamples, n: int, start: float, end: float,
              rng: np.random.Generator) -> np.ndarray:
        """``n`` sorted session start times in ``[start, end)``."""


def trace_rate(app: AppSamples) -> float:
    """The application's mean session rate in the trace (sessions per second)."""
    return app.session_starts.size / max(app.trace_duration_s, 1e-9)


class Stationary:
    """Homogeneous Poisson arrivals at the model's mean rate (times the scale)."""

    name = "stationary"
    steady = True

    def expected(self, app: AppSamples, duration: float, scale: float) -> float:
        return trace_rate(app) * scale * duration

    def place(self, app: AppSamples, n: int, start: float, end: float,
              rng: np.random.Generator) -> np.ndarray:
        return np.sort(rng.uniform(start, end, n))


class TraceShaped:
    """The trace's per-second session profile, once (runs no longer than the trace)."""

    name = "trace"
    steady = False  # begins at 0: a steady start precedes it by its mean rate

    @staticmethod
    def _bins(app: AppSamples, duration: float) -> tuple[np.ndarray, float]:
        span = max(app.trace_duration_s, 1e-9)
        if duration > span * (1 + 1e-9):
            raise SwellError("arrivals", f"trace-shaped arrivals cover {span:.1f} s, the run "
                             f"is {duration:.1f} s: repeating the trace would add a "
                             f"{span:.1f} s period (use arrivals: stationary)")
        nbins = max(1, int(np.ceil(span)))
        counts = np.bincount(np.clip(app.session_starts.astype(int), 0, nbins - 1),
                             minlength=nbins).astype(float)
        width = span / nbins
        edges = np.arange(nbins) * width
        keep = edges < duration
        return counts[keep], width

    def expected(self, app: AppSamples, duration: float, scale: float) -> float:
        counts, width = self._bins(app, duration)
        covered = np.minimum(width, duration - np.arange(counts.size) * width) / width
        return float((counts * covered).sum() * scale)

    def place(self, app: AppSamples, n: int, start: float, end: float,
              rng: np.random.Generator) -> np.ndarray:
        counts, width = self._bins(app, end)
        lo = np.arange(counts.size) * width
        hi = np.minimum(lo + width, end)
        weight = counts * np.clip(hi - np.maximum(lo, start), 0.0, None) / width
        if weight.sum() == 0:
            return Stationary().place(app, n, start, end, rng)
        bins = rng.choice(counts.size, size=n, p=weight / weight.sum())
        return np.sort(rng.uniform(np.maximum(lo[bins], start), hi[bins]))


STATIONARY = Stationary()
PROCESSES: dict[str, ArrivalProcess] = {"stationary": STATIONARY, "trace": TraceShaped()}


def register(process: ArrivalProcess) -> None:
    """Make an arrival process selectable by its name (e.g. a fitted MMPP)."""
    PROCESSES[process.name] = process


def choose(name: str, duration: float, trace_duration: float) -> ArrivalProcess:
    """The process called ``name`` (``auto``: trace-shaped when the run fits in the trace)."""
    if name == "auto":
        name = "trace" if duration <= trace_duration else "stationary"
    if name.startswith("mmpp:"):  # a fitted MMPP model directory (swell fit mmpp)
        from swell.generators.mmpp_arrivals import MmppArrivals

        return MmppArrivals.from_option(name[len("mmpp:"):])
    if name not in PROCESSES:
        raise SwellError("arrivals", f"unknown arrival process {name!r} "
                                     f"(known: auto, {', '.join(sorted(PROCESSES))})")
    return PROCESSES[name]
