"""A Swing schedule's steady start (``swell.generators.steady_start``): the sessions under
way at 0 cut where the transfer-time estimate has them, a load that does not ramp up,
and a target met in the window by the bytes the estimate moves there."""

from __future__ import annotations

import numpy as np
import pytest

from swell.analysis.swing_window import PathEstimate, conn_spans, share_in, spans
from swell.generators import steady_start
from swell.generators.schedule import (
    MIN_REQ,
    WAIT_MIN_REQ,
    AppSamples,
    Conn,
    Rre,
    Session,
    build_schedule,
)

PATH = PathEstimate(0.1, 8e6)  # 100 ms, 1 MB/s
CLIENTS = [f"10.0.1.{i}" for i in range(1, 21)]
SERVERS = [f"10.0.2.{i}" for i in range(1, 11)]


def conn(pairs: tuple[tuple[int, int, float], ...], offset: float = 0.0) -> Conn:
    return Conn("1:80", "tcp", "web", offset, pairs)


def test_a_response_under_way_keeps_what_is_left_to_move() -> None:
    # handshake 0.1 s, request 600 B (0.05 s + 0.6 ms), then 2 MB: slow start to the
    # rate, then 1 MB/s; the session arrives 1 s before the cut
    big = conn(((600, 2_000_000, 0.0),))
    later = conn(((300, 1000, 0.0),), offset=1.5)  # opens 0.5 s after the cut
    nxt = Rre(0.7, (conn(((300, 1000, 0.0),)),))
    s = Session(0, -1.0, "", (Rre(0.0, (big, later)), nxt))
    (a, b, _), *_ = conn_spans(s, s.t, PATH)
    assert a == -1.0 and b > 0.5
    cut = steady_start.remaining(s, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    assert cut is not None and cut.t == 0.0
    first, second = cut.rres
    kept_big, kept_later = first.conns
    assert first.gap == 0.0 and second == nxt  # later RREs as they were
    # the request was sent: a header's worth asks for the rest of the response
    (req, rsp, think), = kept_big.pairs
    assert req == MIN_REQ["tcp"] and kept_big.offset == 0.0
    # the response moves at most at the rate, 1 MB/s, in the time left (its bytes are
    # spread evenly over its estimate, slow start included: a little less than that)
    est = [p for p in conn_spans(s, s.t, PATH) if p[2] is big][0]
    left_s = est[1] - PATH.rtt_s / 2  # the response's estimated end, less the close
    assert 0.8 * 1e6 * left_s < rsp <= 1e6 * left_s
    assert kept_later.offset == pytest.approx(0.5) and kept_later.pairs == later.pairs


def test_a_finished_session_is_dropped_and_a_future_rre_starts_the_session() -> None:
    short = Session(0, -5.0, "", (Rre(0.0, (conn(((300, 1000, 0.0),)),)),))
    assert steady_start.remaining(short, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ) is None
    # first RRE done before 0, the second starts its 3 s gap after: at about -1.8 + 3
    s = Session(0, -2.0, "", (Rre(0.0, (conn(((300, 1000, 0.0),)),)),
                              Rre(3.0, (conn(((300, 1000, 0.0),)),))))
    cut = steady_start.remaining(s, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    assert cut is not None and len(cut.rres) == 1 and cut.rres[0].gap == 0.0
    assert cut.t == pytest.approx(conn_spans(s, s.t, PATH)[1][0])
    assert 0.9 < cut.t < 1.3
    # a pair in its think time at 0 is dropped; the next pair opens when it would start
    thinking = Session(0, -1.0, "", (Rre(0.0, (conn(((300, 1000, 2.0), (300, 1000, 0.0))),)),))
    cut = steady_start.remaining(thinking, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    assert cut is not None and cut.rres[0].conns[0].pairs == ((300, 1000, 0.0),)
    assert 0.5 < cut.t < 1.5 and cut.rres[0].conns[0].offset == 0.0


def app(rate: float = 2.0) -> AppSamples:
    """Long sessions: 3-8 RREs a few seconds apart, responses up to a few hundred kB."""
    rng = np.random.default_rng(0)
    span = 200.0
    return AppSamples(
        "web-tcp", "tcp", 8080, np.sort(rng.uniform(0, span, int(rate * span))), span,
        num_rre=np.array([3, 5, 8]), inter_rre=rng.uniform(1.0, 4.0, 50),
        num_conn=np.array([1, 2, 4]), inter_conn=rng.exponential(0.05, 50),
        num_pairs=np.array([1, 2, 3]), req_size=np.array([300, 600, 1200]),
        rsp_size=rng.pareto(1.5, 200) * 20_000, req_think=rng.exponential(0.1, 50))


def moved_per_s(sched, path: PathEstimate) -> np.ndarray:
    """Bytes the estimate moves in each second of the run."""
    d = int(sched.duration_s)
    out = np.zeros(d)
    for s in sched.sessions:
        for a, b, n in spans(s, s.t, path):
            for k in range(max(0, int(a)), min(d, int(b) + 1)):
                out[k] += n * share_in(a, b, k, k + 1)
    return out


def test_the_load_does_not_ramp_up_from_an_empty_start() -> None:
    path = PathEstimate(0.05, 10e6)
    first = {"steady": [], "empty": []}
    for seed in range(1, 9):
        for start in first:
            sched = build_schedule([app()], CLIENTS, SERVERS, 40.0, seed, start=start,
                                   path=path, arrivals="stationary")
            per_s = moved_per_s(sched, path)
            first[start].append(per_s[:3].sum() / per_s[10:].mean() / 3)
            if start == "steady":
                info = sched.meta["steady_start"]
                assert 10 < info["lead_in_s"] <= steady_start.LEAD_MAX
                assert 0 < info["sessions_under_way"] < info["lead_in_sessions"]
                assert all(s.t >= 0 for s in sched.sessions)
    # sessions of 3-8 RREs a few seconds apart: empty, the first 3 s carry about half
    # the steady load; a steady start carries it from the first second
    assert np.mean(first["empty"]) < 0.7, first
    assert 0.85 < np.mean(first["steady"]) < 1.15, first


def test_a_target_is_met_by_the_bytes_moved_in_the_window() -> None:
    path = PathEstimate(0.05, 10e6)
    for seed in (1, 2, 3):
        sched = build_schedule([app()], CLIENTS, SERVERS, 20.0, seed, target_mbps=4.0,
                               cuts=(5.0,), path=path, arrivals="stationary")
        moved = sum(n * share_in(a, b, 5.0, 20.0)
                    for s in sched.sessions for a, b, n in spans(s, s.t, path))
        assert 8 * moved / 15.0 / 1e6 == pytest.approx(4.0, rel=0.05)


def test_the_trace_profile_is_preceded_by_its_mean_rate() -> None:
    """The trace's profile begins at 0; before it, sessions arrive at its mean rate."""
    path = PathEstimate(0.05, 10e6)
    ramp, under_way = [], []
    for seed in range(1, 9):
        sched = build_schedule([app()], CLIENTS, SERVERS, 20.0, seed, path=path,
                               arrivals="trace")
        info = sched.meta["steady_start"]
        assert sched.meta["arrivals"] == "trace" and info["lead_in_s"] > 10
        under_way.append(info["sessions_under_way"])
        per_s = moved_per_s(sched, path)
        ramp.append(per_s[:3].sum() / per_s[10:].mean() / 3)
    assert min(under_way) > 0 and 0.8 < np.mean(ramp) < 1.2, (under_way, ramp)
    empty = build_schedule([app()], CLIENTS, SERVERS, 20.0, 1, start="empty", arrivals="trace")
    assert "steady_start" not in empty.meta
    with pytest.raises(Exception, match="start must be one of"):
        build_schedule([app()], CLIENTS, SERVERS, 20.0, 1, start="warm")
