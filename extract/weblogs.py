"""Arrival counts per interval from web logs and traces: the MMPP fit's input.

Sources (the format is detected from the lines themselves, never from the
file name):

* ``clf``: Common Log Format and Combined Log Format (CLF plus referer and
  user agent; both may appear in one file): ``host ident user [10/Oct/2000:
  13:55:36 -0700] "GET / HTTP/1.0" 200 2326 ["referer" "agent"]``;
* ``tsv``: the NASA-HTTP form in ``../shared/data/weblogs``: a header
  ``host logname time method url response bytes`` and tab-separated rows with
  the time in epoch seconds;
* ``csv``: a count series, one row per interval: ``timestamp,count[,...]``
  (header first; ISO date-times, naive ones read as UTC), like the WC98
  per-minute file. It gives aggregate counts only (no hosts, no sessions);
* a pcap/pcapng trace (:func:`trace_events`): every TCP SYN without ACK is a
  request, its source address the host.

Bad input. Each line is classified on its own. Lines of another known format
than the file's majority make the file *mixed*: a :class:`SwellError` names
the file, both formats, their counts and the first offending line. Lines of
no known format are *unparseable*: counted and kept in
:attr:`LogEvents.unparseable` with the first few line numbers (never dropped
silently); more than half unparseable is an error.

Sessions (the RPS paper's rule): a request starts a new session when its
host made no request in the previous ``timeout_s`` seconds (default 1800 s,
the usual web-analytics half hour; the paper does not give its value).

Counting (:func:`count_series`): intervals of ``interval_s`` from the first
event; the last, partial interval is left out. The log's coverage is split
into segments at gaps longer than ``max_gap_s`` with no request at all
(default ``max(10 * interval_s, 600 s)``): such gaps are taken as times the
log did not record (the Elastic Apache sample holds one minute per hour),
not as zero arrivals, and the autocovariance is computed within segments
only. A count series' missing rows split it the same way.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from swell.errors import SwellError

FORMAT_NAMES = {
    "clf": "Common/Combined Log Format",
    "tsv": "NASA-style TSV (epoch seconds)",
    "csv": "per-interval count CSV",
    "pcap": "TCP SYNs of a trace",
}
DEFAULT_SESSION_TIMEOUT_S = 1800.0
MAX_UNPARSEABLE_FRACTION = 0.5
MIN_INTERVALS = 24
NOISY_INTERVALS = 200
_EXAMPLES = 5

_CLF = re.compile(
    r"^(\S+) \S+ \S+ \[(\d{2})/(\w{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})\] "
    r'"[^"]*" (?:\d{3}|-) (?:\d+|-)(?: "[^"]*" "[^"]*")?\s*$'
)
_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_CSV_ROW = re.compile(r"^\s*(\d{4}-\d{2}-\d{2}[ T][\d:]+(?:[+-]\d{2}:?\d{2}|Z)?)\s*,\s*(\d+)")
_TSV_HEADER = re.compile(r"^host\tlogname\ttime\t", re.I)
_CSV_HEADER = re.compile(r"^\s*[A-Za-z_ ]+(,[A-Za-z_ ]+)+\s*$")


@dataclass
class LogEvents:
    """Timestamped requests of one source (sorted by time)."""

    path: str
    format: str
    times: np.ndarray  # float seconds since the epoch
    hosts: np.ndarray  # int host id per request (-1: unknown)
    lines: int = 0
    unparseable: int = 0
    bad_examples: list[tuple[int, str]] = field(default_factory=list)
    counts: np.ndarray | None = None  # csv: the count of each row (times = row starts)
    row_interval_s: float | None = None  # csv: the rows' spacing

    def warnings(self) -> list[str]:
        if not self.unparseable:
            return []
        ex = "; ".join(f"line {n}: {t!r}" for n, t in self.bad_examples)
        return [
            f"{self.path}: {self.unparseable:,} of {self.lines:,} lines unparseable as "
            f"{FORMAT_NAMES[self.format]} and left out (first: {ex})"
        ]


@dataclass
class CountSeries:
    """Arrivals per interval, in contiguous observed segments."""

    source: str
    what: str  # sessions | requests | connections
    interval_s: float
    segments: list[np.ndarray]
    seg_starts: list[float]
    notes: list[str] = field(default_factory=list)

    @property
    def counts(self) -> np.ndarray:
        return np.concatenate(self.segments) if self.segments else np.zeros(0, np.int64)

    @property
    def n_intervals(self) -> int:
        return int(sum(len(s) for s in self.segments))


def _clf_time(m: re.Match[str]) -> float:
    d, mon, y, hh, mm, ss, sign, th, tm = m.groups()[1:10]
    base = calendar.timegm((int(y), _MONTHS.get(mon, 0), int(d), int(hh), int(mm), int(ss)))
    off = (int(th) * 3600 + int(tm) * 60) * (1 if sign == "+" else -1)
    return float(base - off)


def _classify(line: str) -> str | None:
    if _CLF.match(line):
        return "clf"
    if "\t" in line:
        f = line.split("\t")
        if len(f) >= 7 and f[2].strip().isdigit():
            return "tsv"
    if _CSV_ROW.match(line):
        return "csv"
    return None


def _iso_time(s: str) -> float:
    t = _dt.datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return t.timestamp()


def read_log(path: str | os.PathLike[str]) -> LogEvents:
    """Parse a web log or count CSV (see the module docstring for formats and errors)."""
    p = Path(path)
    if not p.is_file():
        raise SwellError(p, "no such file")
    with open(p, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    kinds: list[str | None] = []
    for i, line in enumerate(lines):
        if not line.strip():
            kinds.append("blank")
        elif i == 0 and (_TSV_HEADER.match(line) or _CSV_HEADER.match(line)):
            kinds.append("header")
        else:
            kinds.append(_classify(line))
    found = {k: kinds.count(k) for k in ("clf", "tsv", "csv")}
    found = {k: v for k, v in found.items() if v}
    if not found:
        raise SwellError(p, f"no line in a known log format ({', '.join(FORMAT_NAMES.values())})")
    fmt = max(found, key=lambda k: found[k])
    if len(found) > 1:
        other = next(k for k in found if k != fmt)
        first = kinds.index(other) + 1
        raise SwellError(
            p,
            f"mixed log formats: {found[fmt]:,} lines of {FORMAT_NAMES[fmt]} and "
            f"{found[other]:,} of {FORMAT_NAMES[other]} (first at line {first}); "
            "split the file by format",
        )
    bad_idx = [i for i, k in enumerate(kinds) if k is None]
    n_lines = sum(1 for k in kinds if k not in ("blank", "header"))
    examples = [(i + 1, lines[i][:80]) for i in bad_idx[:_EXAMPLES]]
    if len(bad_idx) > MAX_UNPARSEABLE_FRACTION * n_lines:
        raise SwellError(
            p,
            f"{len(bad_idx):,} of {n_lines:,} lines unparseable as "
            f"{FORMAT_NAMES[fmt]} (first: line {examples[0][0]})",
        )
    good = [lines[i] for i, k in enumerate(kinds) if k == fmt]
    ev = _parse_rows(p, fmt, good)
    ev.lines, ev.unparseable, ev.bad_examples = n_lines, len(bad_idx), examples
    return ev


def _host_ids(hosts: list[str]) -> np.ndarray:
    _, inv = np.unique(np.array(hosts, dtype=object).astype(str), return_inverse=True)
    return inv.astype(np.int64)


def _parse_rows(p: Path, fmt: str, rows: list[str]) -> LogEvents:
    if fmt == "clf":
        ms = [_CLF.match(r) for r in rows]
        times = np.array([_clf_time(m) for m in ms if m])
        hosts = _host_ids([m.group(1) for m in ms if m])
    elif fmt == "tsv":
        fields = [r.split("\t") for r in rows]
        times = np.array([float(f[2]) for f in fields])
        hosts = _host_ids([f[0] for f in fields])
    else:
        ms = [_CSV_ROW.match(r) for r in rows]
        try:
            times = np.array([_iso_time(m.group(1)) for m in ms if m])
        except ValueError as exc:
            raise SwellError(p, f"bad date-time in the count CSV: {exc}") from exc
        counts = np.array([int(m.group(2)) for m in ms if m], dtype=np.int64)
        order = np.argsort(times, kind="stable")
        times, counts = times[order], counts[order]
        if len(times) > 1 and (np.diff(times) == 0).any():
            raise SwellError(p, "the count CSV repeats a timestamp")
        step = float(np.min(np.diff(times))) if len(times) > 1 else 0.0
        ev = LogEvents(str(p), fmt, times, np.full(len(times), -1, np.int64))
        ev.counts, ev.row_interval_s = counts, step
        return ev
    order = np.argsort(times, kind="stable")
    return LogEvents(str(p), fmt, times[order], hosts[order])


def trace_events(path: str | os.PathLike[str]) -> LogEvents:
    """TCP connection attempts (SYN without ACK) of a capture as requests."""
    from swell.extract.reader import SYN, open_trace

    ts, hosts_hi, hosts_lo = [], [], []
    packets = 0
    with open_trace(path) as tr:
        for ch in tr.chunks():
            packets += len(ch)
            m = (ch.proto == 6) & ch.l4_ok & ((ch.tcp_flags & 0x12) == SYN)
            ts.append(ch.ts_ns[m])
            hosts_hi.append(ch.saddr_hi[m])
            hosts_lo.append(ch.saddr_lo[m])
    t = np.concatenate(ts).astype(np.float64) / 1e9 if ts else np.zeros(0)
    if len(t) == 0:
        raise SwellError(path, f"no TCP SYN among {packets:,} packets: no connection starts")
    key = np.stack([np.concatenate(hosts_hi), np.concatenate(hosts_lo)], 1)
    _, hid = np.unique(key, axis=0, return_inverse=True)
    order = np.argsort(t, kind="stable")
    return LogEvents(
        str(path), "pcap", t[order], hid.ravel()[order].astype(np.int64), lines=packets
    )


def syn_times(path: str | os.PathLike[str],
              conns: set[tuple[str, int]]) -> dict[tuple[str, int], np.ndarray]:
    """Times (s) of the SYNs without ACK in a capture sent from the given (source
    address, source port) pairs, sorted, per pair; pairs with none are left out.
    A source port is reused over a long run, so one pair may hold several
    connections (and a retransmitted SYN repeats one): a caller picks the first SYN
    after it knows the connection began. This is how the session starts of a
    generated run are read at the bottleneck: the SYNs of the sessions' first
    connections, named by the runner's records."""
    from swell.extract.reader import SYN, addr_to_str, open_trace

    out: dict[tuple[str, int], list[float]] = {}
    with open_trace(path) as tr:
        for ch in tr.chunks():
            m = np.flatnonzero((ch.proto == 6) & ch.l4_ok & ((ch.tcp_flags & 0x12) == SYN))
            for i in m:
                key = (addr_to_str(int(ch.saddr_hi[i]), int(ch.saddr_lo[i])), int(ch.sport[i]))
                if key in conns:
                    out.setdefault(key, []).append(float(ch.ts_ns[i]) / 1e9)
    return {k: np.sort(np.array(v)) for k, v in out.items()}


def read_events(path: str | os.PathLike[str]) -> LogEvents:
    """A web log, a count CSV or a capture (told apart by the pcap magic numbers)."""
    p = Path(path)
    if p.is_file():
        with open(p, "rb") as f:
            magic = f.read(4)
        if magic in (
            b"\xd4\xc3\xb2\xa1",
            b"\xa1\xb2\xc3\xd4",
            b"\x4d\x3c\xb2\xa1",
            b"\xa1\xb2\x3c\x4d",
            b"\x0a\x0d\x0d\x0a",
        ):
            return trace_events(p)
    return read_log(p)


def session_starts(times: np.ndarray, hosts: np.ndarray, timeout_s: float) -> np.ndarray:
    """Times of requests that start a session: no request from the host in the
    previous ``timeout_s`` seconds (sorted)."""
    if len(times) == 0:
        return times
    order = np.lexsort((times, hosts))
    t, h = times[order], hosts[order]
    new = np.r_[True, (h[1:] != h[:-1]) | (np.diff(t) > timeout_s)]
    return np.sort(t[new])


def _split(times: np.ndarray, max_gap_s: float) -> list[tuple[float, float]]:
    """(start, end) of the stretches of ``times`` without a gap over ``max_gap_s``."""
    cut = np.flatnonzero(np.diff(times) > max_gap_s) if max_gap_s > 0 else np.zeros(0, int)
    starts = np.r_[0, cut + 1]
    ends = np.r_[cut, len(times) - 1]
    return [(float(times[a]), float(times[b])) for a, b in zip(starts, ends, strict=True)]


def count_series(
    ev: LogEvents,
    interval_s: float = 60.0,
    what: str = "sessions",
    timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    max_gap_s: float | None = None,
    min_intervals: int = MIN_INTERVALS,
) -> CountSeries:
    """Counts per interval of ``what`` (``sessions`` or ``requests``) from ``ev``."""
    if interval_s <= 0:
        raise SwellError(ev.path, "the interval must be positive")
    if what not in ("sessions", "requests"):
        raise SwellError(ev.path, f"count sessions or requests, not {what!r}")
    notes = list(ev.warnings())
    gap = max(10 * interval_s, 600.0) if max_gap_s is None else max_gap_s
    if ev.format == "csv":
        if what == "sessions":
            notes.append("the count CSV holds request counts: counting requests, not sessions")
            what = "requests"
        segs, starts = _csv_segments(ev, interval_s, notes)
    else:
        label = "connection" if ev.format == "pcap" else "request"
        if what == "sessions":
            events = session_starts(ev.times, ev.hosts, timeout_s)
            notes.append(
                f"{len(events):,} sessions from {len(ev.times):,} {label}s "
                f"(new after {timeout_s:g} s without a {label} from the host)"
            )
        else:
            events = ev.times
        segs, starts = [], []
        spans = _split(ev.times, gap)
        # a session start needs timeout_s of history: hosts active before a stretch
        # began would otherwise all count as new at its start (left out: censored)
        warm = timeout_s if what == "sessions" else 0.0
        for a0, b in spans:
            a = a0 + warm
            n = int((b - a) // interval_s) if b > a else 0
            if n < 1:
                continue
            sel = events[(events >= a) & (events < a + n * interval_s)]
            segs.append(np.bincount(((sel - a) // interval_s).astype(np.int64), minlength=n)[:n])
            starts.append(a)
        if warm and segs:
            notes.append(
                f"session starts in the first {warm:g} s of each stretch left out "
                "(no history to tell new sessions from continuing ones)"
            )
        if warm and not segs:
            raise SwellError(
                ev.path,
                f"no stretch of the log is longer than the session "
                f"timeout ({warm:g} s) plus one interval: count requests "
                "or use a shorter --session-timeout",
            )
        if len(spans) > 1:
            covered = sum(b - a for a, b in spans)
            notes.append(
                f"{len(spans)} observed stretches (gaps of more than {gap:g} s with no "
                f"{label} are taken as unrecorded), {covered / 3600:.3g} h of "
                f"{(ev.times[-1] - ev.times[0]) / 3600:.3g} h; {len(segs)} hold a full interval"
            )
    if ev.format == "pcap" and what == "requests":
        what = "connections"
    series = CountSeries(ev.path, what, interval_s, segs, starts, notes)
    n = series.n_intervals
    if n < min_intervals:
        span = (ev.times[-1] - ev.times[0]) / 3600 if len(ev.times) else 0.0
        raise SwellError(
            ev.path,
            f"{span:.3g} h of data give {n} full interval(s) of {interval_s:g} s; the MMPP fit "
            f"needs at least {min_intervals}: use a shorter --interval-s or a longer log",
        )
    if n < NOISY_INTERVALS:
        notes.append(f"only {n} intervals: the autocovariance estimate is noisy")
    return series


def _csv_segments(
    ev: LogEvents, interval_s: float, notes: list[str]
) -> tuple[list[np.ndarray], list[float]]:
    step = ev.row_interval_s or interval_s
    k = interval_s / step
    if abs(k - round(k)) > 1e-9 or round(k) < 1:
        raise SwellError(
            ev.path,
            f"rows are {step:g} s apart: the interval must be a "
            f"multiple of {step:g} s, not {interval_s:g}",
        )
    k = int(round(k))
    assert ev.counts is not None
    cut = np.flatnonzero(np.diff(ev.times) > step * 1.5)
    segs, starts = [], []
    for a, b in zip(np.r_[0, cut + 1], np.r_[cut + 1, len(ev.times)], strict=True):
        c = ev.counts[a:b]
        m = len(c) // k
        if m >= 1:
            segs.append(c[: m * k].reshape(m, k).sum(1))
            starts.append(float(ev.times[a]))
    if len(cut):
        notes.append(
            f"{len(cut)} missing stretches of rows split the series into {len(cut) + 1} segments"
        )
    return segs, starts
