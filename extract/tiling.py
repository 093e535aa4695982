"""A trace looped for a whole run, at a chosen rate, by merging time-shifted copies.

The open-loop baselines (UPB, TPB, tcpreplay) play a trace's packets with the
trace's own timing. A capture is usually shorter than a run and carries a
rate of its own; a figure wants every background at the same load for the
whole run. Stretching time would change the burstiness being studied, so
this module never does: the rate is reached the way ``swell trace compose``
(:mod:`swell.extract.compose`) reaches it, by merging copies of the trace,
each copy one more user.

* **period**: the trace loops with period ``P = d + d / (n - 1)`` (``d`` from
  its first to its last packet, ``n`` packets): the mean gap separates the
  last packet of one pass from the first of the next.
* **rate**: the trace's rate is its bytes over ``P``; a target asks for
  ``c = target / rate`` copies.
* **copies**: ``floor(c)`` whole copies, plus one partial copy when the
  fractional part is at least ``MIN_PARTIAL`` (a smaller remainder is
  dropped): the partial copy plays only some of the trace's connections,
  drawn in a seeded random order, as many as bring its bytes closest to the
  fractional part. A target under the trace's rate is thus a partial copy
  alone: a lighter user, still with the trace's own flows and timing.
* **time**: every copy starts at a uniform random phase in ``[0, P)``
  (looped), or, without looping, copy 0 with the run and the others at a
  uniform offset that keeps them whole inside the run when they fit. A run
  that is not a whole number of periods sees part of a pass, heavy or light
  for a bursty trace, so of ``PHASE_TRIES`` seeded draws of the phases (the
  first with copy 0 at phase 0) the one whose rate in the measurement window
  comes closest to the copies' rate is kept: the window carries the asked
  rate, and the draw is still a draw, never a stretch. A looped
  copy is the infinite repetition of the trace, shifted by its phase and cut
  to ``[0, duration)``: its packets keep their gaps exactly (packet ``i`` of
  pass ``m`` leaves at ``t_i + phase + m P``).

:func:`tile` returns, per departure, the trace packet it plays, its copy and
its time (sorted); callers index their own per-packet arrays with it (sizes,
raw records, addresses). One seed makes it reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from swell.errors import SwellError

MIN_PARTIAL = 0.02  # a fractional copy smaller than this is dropped
MAX_COPIES = 4000  # one copy per user; more would be a stress test of the merge
PHASE_TRIES = 16  # draws of the copies' phases; the closest to the asked rate is kept


@dataclass(frozen=True)
class Tiling:
    """Departures of a looped, merged trace: which packet, which copy, when."""

    index: np.ndarray  # int64 per departure: the trace packet played
    copy: np.ndarray  # int64 per departure: its copy (0..copies; the partial one last)
    t_s: np.ndarray  # float64 per departure: offset from the start, non-decreasing
    period_s: float
    copies: int  # whole copies
    partial: float  # bytes of the partial copy over the trace's bytes (0: none)
    phases_s: tuple[float, ...]  # start phase of each copy, the partial one last

    def __len__(self) -> int:
        return int(self.t_s.size)

    @property
    def users(self) -> float:
        """Copies merged, the partial one counted by its share of the bytes."""
        return self.copies + self.partial

    def mbps(self, nbytes: np.ndarray, duration_s: float) -> float:
        """Mean rate (Mbit/s) of the departures over ``duration_s``."""
        return float(np.asarray(nbytes)[self.index].sum()) * 8 / max(duration_s, 1e-9) / 1e6


def loop_period(t_s: np.ndarray) -> float:
    """The period at which a trace with these packet times loops (see module docstring)."""
    t = np.asarray(t_s, dtype=float)
    if t.size == 0:
        raise SwellError("loop", "no packets to loop")
    d = float(t[-1] - t[0])
    if t.size < 2 or d <= 0:
        return max(d, 1e-3)
    return d + d / (t.size - 1)


def trace_mbps(t_s: np.ndarray, nbytes: np.ndarray) -> float:
    """The trace's own mean rate when looped: its bytes over its period, Mbit/s."""
    return float(np.asarray(nbytes).sum()) * 8 / loop_period(t_s) / 1e6


def copies_for(target_mbps: float | None, rate_mbps: float) -> float:
    """How many copies (fractional) carry ``target_mbps``; 1.0 without a target."""
    if target_mbps is None:
        return 1.0
    if not rate_mbps > 0:
        raise SwellError("target_mbps", "the trace carries no bytes to copy")
    c = target_mbps / rate_mbps
    if c > MAX_COPIES:
        raise SwellError("target_mbps", f"{target_mbps:g} Mbit/s needs {c:.0f} copies of a "
                                        f"{rate_mbps:.3g} Mbit/s trace, more than {MAX_COPIES}")
    return c


def partial_packets(conn: np.ndarray, nbytes: np.ndarray, share: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Packets of the connections (random order) whose bytes come closest to ``share``
    of the trace's; returns the packet mask and the share reached."""
    conn, nbytes = np.asarray(conn), np.asarray(nbytes, dtype=float)
    total = nbytes.sum()
    ids, inv = np.unique(conn, return_inverse=True)
    per = np.bincount(inv.reshape(-1), weights=nbytes, minlength=ids.size)
    order = rng.permutation(ids.size)
    cum = np.cumsum(per[order]) / max(total, 1e-12)
    k = int(np.argmin(np.abs(cum - share)))  # the first k+1 connections of the order
    chosen = np.zeros(ids.size, dtype=bool)
    chosen[order[: k + 1]] = True
    return chosen[inv.reshape(-1)], float(cum[k])


def tile(t_s: np.ndarray, nbytes: np.ndarray, duration_s: float | None,
         n_copies: float = 1.0, conn: np.ndarray | None = None, loop: bool = True,
         seed: int = 1, window_start_s: float = 0.0, tries: int = PHASE_TRIES) -> Tiling:
    """Departures of ``n_copies`` time-shifted copies of the trace over ``duration_s``.

    ``t_s``: the trace's packet times (non-decreasing, any origin); ``nbytes``: their
    sizes (for the partial copy's share and the rate); ``conn``: their connection ids
    (needed for a partial copy; without them the remainder is rounded to a whole copy).
    Without ``duration_s`` a looped trace plays one period.

    A run that is not a whole number of periods sees part of a pass, and a bursty
    trace's part may be heavy or light: of ``tries`` seeded draws of the phases, the
    one whose bytes in ``[window_start_s, duration_s)`` come closest to ``users`` times
    the trace's rate is kept (the first draw starts copy 0 with the trace).
    """
    t = np.asarray(t_s, dtype=float)
    if t.size == 0:
        raise SwellError("loop", "no packets to loop")
    if np.any(np.diff(t) < 0):
        raise SwellError("loop", "packet times are not sorted")
    if not n_copies > 0:
        raise SwellError("loop", f"copies must be positive, not {n_copies}")
    t = t - t[0]
    period = loop_period(t)
    span = float(t[-1])
    end = float(duration_s) if duration_s is not None else (period if loop else span + 1e-9)
    if not end > 0:
        raise SwellError("loop", f"duration must be positive, not {duration_s}")
    rng = np.random.default_rng(seed)
    whole = int(np.floor(n_copies + 1e-9))
    frac = n_copies - whole
    mask_partial, partial = None, 0.0
    if frac >= MIN_PARTIAL or whole == 0:
        if conn is None or np.unique(conn).size < 2:
            whole, frac = max(1, int(round(n_copies))), 0.0  # nothing to thin: whole copies
        else:
            mask_partial, partial = partial_packets(conn, nbytes, frac, rng)
    n = whole + (1 if mask_partial is not None else 0)
    room = max(end - span, 0.0)  # a copy played once fits whole after this offset or less
    want = (whole + partial) * trace_mbps(t, nbytes)
    best: Tiling | None = None
    for k in range(max(1, tries) if (n > 1 or loop) else 1):
        first = float(rng.uniform(0, period)) if (loop and k) else 0.0
        phases = [first] + [float(rng.uniform(0, period)) if loop else float(rng.uniform(0, room))
                            for _ in range(n - 1)]
        cand = _place(t, period, end, loop, phases, whole, mask_partial, partial)
        if best is None or _miss(cand, nbytes, window_start_s, end, want) < \
                _miss(best, nbytes, window_start_s, end, want):
            best = cand
    assert best is not None
    return best


def _miss(til: Tiling, nbytes: np.ndarray, start: float, end: float, want: float) -> float:
    """How far a tiling's rate in ``[start, end)`` is from ``want`` Mbit/s."""
    inside = til.t_s >= min(start, end * 0.5)
    got = float(np.asarray(nbytes)[til.index[inside]].sum()) * 8 / 1e6
    return abs(got / max(end - min(start, end * 0.5), 1e-9) - want)


def _place(t: np.ndarray, period: float, end: float, loop: bool, phases: list[float],
           whole: int, mask_partial: np.ndarray | None, partial: float) -> Tiling:
    """The departures of copies started at ``phases`` (the partial one last)."""
    idx_all = np.arange(t.size)
    parts_t, parts_i, parts_c = [], [], []
    for k, phase in enumerate(phases):
        sel = idx_all if (mask_partial is None or k < whole) else idx_all[mask_partial]
        base = t[sel] + phase
        passes = range(-1, int(np.ceil(end / period)) + 1) if loop else range(0, 1)
        for m in passes:
            tm = base + m * period
            keep = (tm >= 0) & (tm < end)
            if keep.any():
                parts_t.append(tm[keep])
                parts_i.append(sel[keep])
                parts_c.append(np.full(int(keep.sum()), k, dtype=np.int64))
    if not parts_t:
        raise SwellError("loop", f"no packets fall inside {end:g} s")
    tt, ii, cc = (np.concatenate(x) for x in (parts_t, parts_i, parts_c))
    o = np.argsort(tt, kind="stable")
    return Tiling(ii[o].astype(np.int64), cc[o], tt[o], period, whole, partial, tuple(phases))
