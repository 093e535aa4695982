"""When a Swing session's bytes move: a transfer-time estimate for a schedule's window.

A Swing schedule with a target counts the measured window's bytes with it, and a
steady start cuts the sessions that arrived before the run where it has them
(:func:`swell.generators.schedule.build_schedule`, :mod:`swell.generators.steady_start`;
docs/scale.md, section 9); ``bench/window_lag.py`` judges a run's schedule against
its records with it. Counting a window's bytes by each connection's *earliest*
start (its session's arrival plus the RRE gaps and offsets, as if transfers took
no time), as schedules did before, is about right over a minute but wrong in a
short window: real connections start later (an RRE starts ``gap`` after the
previous RRE's last connection *ended*) and take time, so in an 8 s window that
count offered 1.8-2.2x the asked load of which 38-50% moved (docs/scale.md,
section 8). This module estimates when each connection really moves its bytes,
and counts them in a segment by the overlap of that transfer with it.

The estimate (validated by ``bench/window_lag.py`` against the generator's
records): walk a session's RREs in order; a connection starts at its RRE's
start plus its offset and takes one RTT of handshake (TCP), then per pair the
request and the response, each in slow start (initial window 10 segments,
doubling per RTT) until the path's rate, then at the rate, plus half an RTT (a
paced UDP request takes at least its span), then the pair's think time; half an
RTT to close. The next RRE starts its gap after the previous RRE's last
connection ended. One path for all sessions
(:class:`PathEstimate`: the median access delays and rates of the emulated
hosts and the bottleneck's): no sharing and no loss, an optimistic estimate
that predicted 60 s windows within 2.4%.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

MSS, IW = 1448, 10
UNLIMITED_BPS = 1e10  # a path with no known rate anywhere (10 Gbit/s)


class _Session(Protocol):
    rres: Sequence[Any]


@dataclass(frozen=True)
class PathEstimate:
    """The one path the estimate assumes: round trip (s) and rate (bit/s); and the share
    of each request's bytes it times (``req_weight``: 1, or a variant's request factor
    undone, so that two draws whose requests differ only by that factor are timed alike
    and draw the same sessions: Figure 13's Rev1 and Rev10, ``size_weights``)."""

    rtt_s: float
    rate_bps: float
    req_weight: float = 1.0

    def __post_init__(self) -> None:
        if not (self.rtt_s >= 0 and self.rate_bps > 0 and self.req_weight > 0):
            raise ValueError(f"path needs rtt >= 0, rate > 0 and req_weight > 0, not {self}")

    def to_meta(self) -> dict[str, float]:
        """The form a schedule records (``meta["steady_start"]["path"]``): rate in
        Mbit/s, ``req_weight`` only when it is not 1."""
        out = {"rtt_s": round(self.rtt_s, 6), "rate_mbps": round(self.rate_bps / 1e6, 3)}
        return out | ({"req_weight": self.req_weight} if self.req_weight != 1.0 else {})

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> PathEstimate:
        """The path of :meth:`to_meta`'s form (older schedules have no ``req_weight``)."""
        return cls(float(meta["rtt_s"]), float(meta["rate_mbps"]) * 1e6,
                   float(meta.get("req_weight", 1.0)))


def path_estimate(client_delays_ms: Iterable[float], server_delays_ms: Iterable[float],
                  rates_mbps: Iterable[float | None], bottleneck_delay_ms: float = 0.0
                  ) -> PathEstimate:
    """A typical path: median access delays of both sides twice (there and back) plus
    the bottleneck's delays both ways (``bottleneck_delay_ms``: forward + reverse), at the
    smallest of the known rates (the median access rates and the bottleneck's)."""
    cd = list(client_delays_ms) or [0.0]
    sd = list(server_delays_ms) or [0.0]
    rtt_ms = 2 * (statistics.median(cd) + statistics.median(sd)) + bottleneck_delay_ms
    known = [r for r in rates_mbps if r is not None and r > 0]
    rate = min(known) * 1e6 if known else UNLIMITED_BPS
    return PathEstimate(rtt_ms / 1e3, rate)


def transfer_s(nbytes: int, path: PathEstimate) -> float:
    """Time to move ``nbytes`` one way from the first byte sent: slow start, then the rate,
    plus half a round trip for the last byte to arrive."""
    if nbytes <= 0:
        return 0.0
    rtt, rate = path.rtt_s, path.rate_bps
    t, sent, cwnd = 0.0, 0.0, float(IW * MSS)
    while rtt > 0 and sent + cwnd < nbytes and cwnd * 8 / rtt < rate:
        sent += cwnd
        cwnd *= 2
        t += rtt
    return t + (nbytes - sent) * 8 / rate + rtt / 2


@dataclass(frozen=True)
class PairTimes:
    """When one request/response pair of a connection is estimated to move: the request
    from ``start`` to ``req_end``, the server's wait until ``rsp_start``, the response
    until ``rsp_end``, then the think time until ``end`` (the next pair's start)."""

    start: float
    req_end: float
    rsp_start: float
    rsp_end: float
    end: float


def pair_times(conn: Any, start: float, path: PathEstimate) -> tuple[list[PairTimes], float]:
    """Each pair's estimated times if the connection opens at ``start`` (a TCP handshake
    first), and when the connection ends (half a round trip to close). An anchored
    request (the connection's ``at``) starts at its time from ``start``, or when the
    previous response ends if that is later, as ``swell-gen`` sends it; an early one (the
    connection's ``early``) does not wait for the previous response: at its time, or once
    the previous request is out. A server answers in order, so a response starts after
    its request, its wait and the previous response."""
    e = start + (path.rtt_s if conn.proto == "tcp" else 0.0)
    out = []
    waits = getattr(conn, "pair_waits", None) or (0.0,) * len(conn.pairs)
    anchor_of = getattr(conn, "anchor", lambda i: None)
    early = tuple(getattr(conn, "early", ()))
    spans = [t for _, t in getattr(conn, "pace", ())] or [0.0] * len(conn.pairs)
    r = e
    for i, ((req, rsp, think), wait) in enumerate(zip(conn.pairs, waits, strict=True)):
        q = e + max(transfer_s(round(req * path.req_weight), path), spans[i])
        rs = max(q + wait, r)
        r = rs + transfer_s(rsp, path)
        anchor = anchor_of(i + 1)
        after, pause = (q, 0.0) if i + 1 < len(early) and early[i + 1] else (r, think)
        end = after + pause if anchor is None else max(start + anchor, after)
        out.append(PairTimes(e, q, rs, r, end))
        e = end
    return out, max(e, r) + path.rtt_s / 2


def rre_times(session: _Session, t0: float, path: PathEstimate
              ) -> list[tuple[float, list[tuple[float, list[PairTimes], float]]]]:
    """Per RRE of a session arriving at ``t0``: its estimated start, and per connection
    ``(start, pair times, end)``; an RRE starts its gap after the previous one's last
    connection ended."""
    out = []
    t = t0
    for rre in session.rres:
        t += rre.gap
        conns = []
        end = t
        for c in rre.conns:
            start = t + c.offset
            pairs, e = pair_times(c, start, path)
            conns.append((start, pairs, e))
            end = max(end, e)
        out.append((t, conns))
        t = end
    return out


def conn_spans(session: _Session, t0: float, path: PathEstimate
               ) -> list[tuple[float, float, Any]]:
    """``(estimated start, estimated end, connection)`` of each of a session's
    connections if the session arrives at ``t0``."""
    return [(start, end, c) for rre, (_, conns) in zip(session.rres, rre_times(session, t0, path),
                                                       strict=True)
            for c, (start, _, end) in zip(rre.conns, conns, strict=True)]


def session_end(session: _Session, t0: float, path: PathEstimate) -> float:
    """When a session arriving at ``t0`` is estimated to end (its last connection's end)."""
    return max((e for _, e, _ in conn_spans(session, t0, path)), default=t0)


def spans(session: _Session, t0: float, path: PathEstimate
          ) -> list[tuple[float, float, int]]:
    """``(estimated start, estimated end, bytes both ways)`` of each of a session's
    connections if the session arrives at ``t0``."""
    return [(a, b, c.req_bytes + c.rsp_bytes) for a, b, c in conn_spans(session, t0, path)]


def share_in(a: float, b: float, start: float, end: float) -> float:
    """The share of a transfer spanning ``[a, b)`` that moves in ``[start, end)`` (an
    instant transfer: all or nothing)."""
    if b <= a:
        return float(start <= a < end)
    return max(0.0, min(b, end) - max(a, start)) / (b - a)


def bytes_in(conn_spans: Iterable[tuple[float, float, int]], a: float, b: float) -> float:
    """Bytes of ``conn_spans`` moved in ``[a, b)``, each spread evenly over its span."""
    return sum(n * share_in(s, e, a, b) for s, e, n in conn_spans)


def earliest_in(session: _Session, t0: float, a: float, b: float) -> float:
    """Bytes of the connections whose earliest start (no transfer time) is in ``[a, b)``."""
    total = 0
    t = t0
    for rre in session.rres:
        t += rre.gap
        total += sum(c.req_bytes + c.rsp_bytes for c in rre.conns if a <= t + c.offset < b)
    return float(total)
