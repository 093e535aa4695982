"""Plausibility of flow times: bogus exporter clocks and spans no model can use.

Exporters' clocks are not to be trusted: a router that never got NTP stamps
its flows in 1970 (logstash's ``netflow9_test_nprobe_dpi``), a wrapped
SysUptime throws a record years ahead, and datagram sets collected from many
exporters over many years (logstash's test fixtures, 2015 to 2018) put one
model's flows over decades. A Harpoon model cut into 300 s intervals over 49
years is millions of empty intervals, so the fit screens the times first
(:func:`screen`); ``swell flows read`` only reports what it would do
(:func:`check`).

The rules, per record and per exporter (``docs/flows.md``):

1. **Bogus clock**: a record starting before 1996-01-01 (NetFlow's first
   year) or ending more than a day after now is dropped and counted.
2. **Outlier of its exporter**: a record starting more than ``max_span_s``
   from its exporter's median start, or lasting longer than ``max_span_s``, is
   dropped and counted (a few stray timestamps of one exporter).
3. **Span**: if what is left still spans more than ``max_span_s`` (default 31
   days), the exporters disagree or the inputs come from different periods;
   that is an error (one line naming the first and last exporter), not
   something to guess around: the user picks the inputs or a larger bound.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np

from swell.errors import SwellError
from swell.extract.flows.table import FlowTable

FLOOR_NS = 820_454_400 * 10**9  # 1996-01-01T00:00:00Z
FUTURE_SLACK_NS = 86_400 * 10**9
DEFAULT_MAX_SPAN_S = 31 * 86_400.0


@dataclass
class TimeCheck:
    """What :func:`check` found: records to keep, dropped counts, the span left."""

    keep: np.ndarray
    dropped: Counter[str] = field(default_factory=Counter)  # "exporter: reason" -> records
    span_s: float = 0.0
    first: tuple[int, str] = (0, "")  # (start ns, exporter) of the earliest kept record
    last: tuple[int, str] = (0, "")  # (end ns, exporter) of the latest kept record

    @property
    def n_dropped(self) -> int:
        return int((~self.keep).sum())

    def notes(self) -> list[str]:
        return [f"dropped {n:,} record{'s' if n > 1 else ''} of exporter {k}"
                for k, n in sorted(self.dropped.items())]


def _day(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def human_span(s: float) -> str:
    if s >= 2 * 365.25 * 86400:
        return f"{s / (365.25 * 86400):.1f} years"
    if s >= 2 * 86400:
        return f"{s / 86400:.1f} days"
    return f"{s:,.0f} s"


def check(t: FlowTable, max_span_s: float = DEFAULT_MAX_SPAN_S,
          now_ns: int | None = None) -> TimeCheck:
    """Rules 1 and 2 of the module docstring, and the span of what is left."""
    c = t.cols
    n = len(t)
    keep = np.ones(n, dtype=bool)
    res = TimeCheck(keep)
    if n == 0:
        return res
    now = time.time_ns() if now_ns is None else now_ns
    names = np.array(t.exporters + ["?"], dtype=object)
    exp = np.where((c["exporter"] >= 0) & (c["exporter"] < len(t.exporters)), c["exporter"],
                   len(t.exporters))
    start, end = c["start_ns"], np.maximum(c["end_ns"], c["start_ns"])
    span_ns = int(max_span_s * 1e9)

    def drop(mask: np.ndarray, why: str) -> None:
        mask = mask & keep
        if mask.any():
            ids, cnt = np.unique(exp[mask], return_counts=True)
            for i, k in zip(ids, cnt, strict=True):
                res.dropped[f"{names[i]}: {why}"] += int(k)
            keep[mask] = False

    drop(start < FLOOR_NS, "start before 1996 (exporter clock not set?)")
    drop(end > now + FUTURE_SLACK_NS, "time in the future (exporter clock wrong?)")
    drop(end - start > span_ns, f"lasting longer than {human_span(max_span_s)}")
    for i in np.unique(exp[keep]):
        mine = keep & (exp == i)
        med = int(np.median(start[mine]))
        drop(mine & (np.abs(start - med) > span_ns),
             f"start more than {human_span(max_span_s)} from the exporter's median "
             f"({_day(med)})")
    if keep.any():
        k = np.flatnonzero(keep)
        a, z = k[np.argmin(start[k])], k[np.argmax(end[k])]
        res.first, res.last = (int(start[a]), str(names[exp[a]])), (int(end[z]),
                                                                     str(names[exp[z]]))
        res.span_s = (res.last[0] - res.first[0]) / 1e9
    return res


def screen(t: FlowTable, max_span_s: float = DEFAULT_MAX_SPAN_S,
           now_ns: int | None = None) -> tuple[FlowTable, TimeCheck]:
    """The table less the implausible records (rules 1-2), or a one-line
    :class:`SwellError` when the rest spans more than ``max_span_s`` (rule 3)."""
    if not max_span_s > 0:
        raise SwellError("flows", f"the time span bound must be positive, not {max_span_s}")
    res = check(t, max_span_s, now_ns)
    if len(t) and not res.keep.any():
        raise SwellError("flows", "no record has a plausible time: "
                                  + "; ".join(res.notes()))
    if res.span_s > max_span_s:
        raise SwellError(
            "flows",
            f"the flows span {human_span(res.span_s)} ({_day(res.first[0])} from exporter "
            f"{res.first[1]} to {_day(res.last[0])} from exporter {res.last[1]}), more than "
            f"the {human_span(max_span_s)} allowed: exporters' clocks disagree or the inputs "
            f"come from different periods (give inputs of one period, or --max-span-days)")
    if res.keep.all():
        return t, res
    return replace(t, cols={k: v[res.keep] for k, v in t.cols.items()}), res
