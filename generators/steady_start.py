"""Starting a Swing schedule in its steady state: the sessions already under way at 0.

A stationary arrival process has been running for ever when a measurement starts:
at any instant some sessions are half way through their RREs. A schedule whose
sessions all arrive in ``[0, duration)`` starts empty and fills up, and a window
after a short warm-up lacks the later RREs of the sessions that would have arrived
before the run. Real models' sessions are long: by the transfer-time estimate
(:mod:`swell.analysis.swing_window`), the heavy HTTP sessions of ``example.pcap``
last about 11 s on the demo's paths (114 ms, 14.5 Mbit/s). With sessions starting at
0 and a 5 s warm-up, a 15 s window of Swing at 13.2 Mbit/s delivered 62-99% of the
asked load over five seeds with no saturated link (docs/scale.md, section 9).

The construction is the classic one for a stationary start: run the process over a
lead-in ``[-H, 0)`` first, then keep only what is still to happen at 0. The schedule
draws the lead-in's sessions exactly as the run's (same arrival process, same count
rule: a Poisson count, or the target's byte budget over ``H``), then :func:`remaining`
cuts each at 0 by the estimate: what is estimated to have moved before 0 is dropped,
the rest becomes a session that starts at or after 0 and runs as any other:

* RREs that ended before 0 are dropped; later RREs are kept as they are (the
  generator starts each its gap after the previous one ended);
* in the RRE under way at 0, connections that ended are dropped; a connection under
  way keeps its pairs from the one under way on (a request or response under way
  keeps the share of its bytes still to move, by its estimated time left, and a
  response under way gets a request of the wire header's size to ask for it; a pair
  in its think time is dropped and the connection opens when the next pair would
  start); connections not yet opened keep their offset, counted from 0;
* a session estimated to end before 0 is dropped whole.

``H`` is the longest estimated duration of :data:`PROBE` sessions drawn for the
purpose (with a generator seeded from the run's), at most :data:`LEAD_MAX` s: a
session longer than that enters the run as if it had arrived ``LEAD_MAX`` s earlier.
The estimate knows no sharing and no loss, so carried-in sessions run a little
ahead of where a real run would have them; the delivery check of every run
(:mod:`swell.generators.swing_accounting`) still measures what moved. A process with
no beginning (``stationary``, a fitted MMPP) runs over the lead-in itself; the
trace-shaped profile begins at 0 (what came before the trace is not in it), so its
lead-in is its mean rate, stationary. (The trace's first seconds may also hold
sessions that were under way when the capture began, seen as new ones: without a
target, a steady start adds the carried-in sessions on top of those.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from swell.analysis.swing_window import PairTimes, PathEstimate, rre_times, session_end

STARTS = ("steady", "empty")  # a schedule's start: in its steady state, or with no session
PROBE = 200  # sessions drawn to size the lead-in
LEAD_MAX = 120.0  # seconds of lead-in at most


def lead_in_s(draw: Callable[[np.random.Generator], Any], rng: np.random.Generator,
              path: PathEstimate) -> float:
    """The lead-in: the longest estimated duration of :data:`PROBE` sessions from
    ``draw`` (one session per call) with a generator seeded from ``rng``."""
    probe = np.random.default_rng(int(rng.integers(1 << 62)))
    longest = max(session_end(draw(probe), 0.0, path) for _ in range(PROBE))
    return float(min(max(longest, 0.0), LEAD_MAX))


def _left(nbytes: int, a: float, b: float, at: float) -> int:
    """The bytes of a transfer estimated over ``[a, b)`` still to move at ``at``."""
    if b <= a:
        return nbytes
    return int(round(nbytes * min(1.0, max(0.0, (b - at) / (b - a)))))


def _pairs_left(conn: Any, pairs: list[PairTimes], at: float, min_req: int, wait_req: int
                ) -> tuple[tuple[tuple[int, int, float], ...], tuple[float, ...], float,
                           list[int]]:
    """The pairs of a connection under way at ``at`` still to move, their server waits,
    when the first of them starts (``at`` when one is under way) and their indices. A
    request cut short keeps at least ``min_req`` bytes, or ``wait_req`` when it carries
    a wait."""
    kept: list[tuple[int, int, float]] = []
    waits: list[float] = []
    idx: list[int] = []
    first = None
    for i, ((req, rsp, think), wait, p) in enumerate(zip(conn.pairs, conn.pair_waits, pairs,
                                                          strict=True)):
        if p.rsp_end <= at:  # moved (and its think time, if any, is under way)
            continue
        idx.append(i)
        if p.start >= at:
            kept.append((req, rsp, think))
            waits.append(wait)
            first = p.start if first is None else first
            continue
        if at < p.req_end:  # the request under way
            least = wait_req if wait > 0 else min_req
            kept.append((max(least, _left(req, p.start, p.req_end, at)), rsp, think))
            waits.append(wait)
        elif at < p.rsp_start:  # the server waiting: the rest of its wait
            kept.append((wait_req, rsp, think))
            waits.append(round(p.rsp_start - at, 6))
        else:  # the response under way
            kept.append((min_req, _left(rsp, p.rsp_start, p.rsp_end, at), think))
            waits.append(0.0)
        first = at
    return tuple(kept), tuple(waits), at if first is None else first, idx


def _anchors_left(conn: Any, idx: list[int], shift: float) -> tuple[float, ...]:
    """The anchors of the kept pairs ``idx`` of a connection reopened ``shift`` s after it
    first opened: moved by that (0 when already due), none on the first kept pair."""
    if not conn.at:
        return ()
    left = [-1.0] + [-1.0 if (a := conn.anchor(j)) is None else round(max(a - shift, 0.0), 9)
                     for j in idx[1:]]
    return tuple(left) if any(x >= 0 for x in left) else ()


def _pace_left(conn: Any, idx: list[int], cut: bool) -> tuple[tuple[int, float], ...]:
    """The paces of the kept pairs ``idx`` of a connection; a request cut short (``cut``:
    the first kept one was under way) sends its rest at once."""
    if not conn.pace:
        return ()
    left = [(1, 0.0) if cut and i == 0 else conn.pace[j] for i, j in enumerate(idx)]
    return tuple(left) if any(n > 1 for n, _ in left) else ()


def _early_left(conn: Any, idx: list[int]) -> tuple[bool, ...]:
    """The early flags of the kept pairs ``idx`` (the first has nothing to wait for)."""
    left = tuple(conn.early[j] for j in idx) if conn.early else ()
    return left if any(left[1:]) else ()


def remaining(session: Any, path: PathEstimate, min_req: Mapping[str, int], at: float = 0.0,
              *, wait_req: int) -> Any | None:
    """What of ``session`` (arriving before ``at``) is estimated to move after ``at``, as
    a session arriving at or after ``at`` (None: all of it moved before). A request cut
    short keeps at least ``min_req[proto]`` bytes, ``wait_req`` (the schedule's
    ``WAIT_MIN_REQ``: swell-gen's header and the wait) when it carries a server wait."""
    rres = list(session.rres)
    times = rre_times(session, session.t, path)
    for i, (rre, (start, conns)) in enumerate(zip(rres, times, strict=True)):
        end = max((e for _, _, e in conns), default=start)
        if end <= at:
            continue
        if start >= at:
            return replace(session, t=round(start, 9),
                           rres=(replace(rre, gap=0.0), *rres[i + 1:]))
        kept = []
        for c, (c0, pairs, c1) in zip(rre.conns, conns, strict=True):
            if c1 <= at:
                continue
            if c0 >= at:
                kept.append(replace(c, offset=round(c0 - at, 9)))
                continue
            left, waits, first, idx = _pairs_left(c, pairs, at, min_req[c.proto], wait_req)
            if left:
                kept.append(replace(c, offset=round(first - at, 9), pairs=left,
                                    waits=waits if any(waits) else (),
                                    at=_anchors_left(c, idx, first - c0),
                                    pace=_pace_left(c, idx, pairs[idx[0]].start < at),
                                    early=_early_left(c, idx)))
        if kept:  # the session restarts when its first kept connection opens
            first = min(c.offset for c in kept)
            kept = [replace(c, offset=round(c.offset - first, 9)) for c in kept]
            return replace(session, t=round(at + first, 9),
                           rres=(replace(rre, gap=0.0, conns=tuple(kept)), *rres[i + 1:]))
        if i + 1 < len(rres):  # only closes were left: the next RRE its gap after the end
            nxt = rres[i + 1]
            return replace(session, t=round(at, 9),
                           rres=(replace(nxt, gap=round(end - at + nxt.gap, 9)),
                                 *rres[i + 2:]))
        return None
    return None
