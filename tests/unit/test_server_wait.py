"""The servers' wait before a response (``rspWait``): extracted from the request-to-
response gap less the server's round trip, drawn per TCP pair with its own generator,
written as a pair's fourth number, counted by the transfer-time estimate and kept by
the steady start's cut."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from swell.analysis.swing_window import PathEstimate, pair_times
from swell.errors import SwellError
from swell.extract.model import load_model, save_model
from swell.extract.pipeline import extract_model
from swell.extract.sessions import server_waits
from swell.generators import steady_start
from swell.generators.schedule import (
    MIN_REQ,
    WAIT_MIN_REQ,
    AppSamples,
    Conn,
    Rre,
    Schedule,
    Session,
    build_schedule,
    read_schedule,
    write_schedule,
)

REPO = Path(__file__).resolve().parents[2]
CLIENTS = [f"10.0.1.{i}" for i in range(1, 6)]
SERVERS = ["10.0.2.1", "10.0.2.2"]


def test_wait_is_the_gap_less_the_servers_round_trip() -> None:
    nan = np.nan
    p = {
        "conn": np.array([0, 0, 1, 1, 2]),
        "req_size": np.array([300, 300, 0, 200, 100]),
        "rsp_size": np.array([5000, 0, 900, 800, 100]),
        "req_t1": np.array([1.00, 2.00, nan, 5.00, 7.0]),
        "rsp_t0": np.array([1.08, nan, 3.0, 5.01, 7.5]),
    }
    leg = np.array([0.02, 0.03, nan])  # connection 2: no handshake seen
    w = server_waits(p, leg)
    assert w[0] == pytest.approx(0.06)  # 80 ms gap, 20 ms round trip
    assert np.isnan(w[1]) and np.isnan(w[2])  # no response; no request
    assert w[3] == 0.0  # the response came sooner than a round trip: 0, not negative
    assert np.isnan(w[4])  # no round trip to take off


def test_the_bundled_capture_has_its_servers_latency(tmp_path: Path) -> None:
    m = extract_model(REPO / "data/pcap/example.pcap")
    w = m.arrays["app/http-tcp/rspWait"]
    assert w.size > 300 and w.min() >= 0
    assert 0.01 < float(np.median(w)) < 0.06  # 28 ms (ynet's servers, behind a CDN)
    assert m.arrays["app/dns-udp/rspWait"].size == 0  # UDP: no handshake, no sample
    save_model(m, tmp_path / "m")
    assert np.array_equal(load_model(tmp_path / "m").arrays["app/http-tcp/rspWait"], w)
    m.arrays["app/http-tcp/rspWait"] = w - 1.0
    with pytest.raises(SwellError, match="rspWait must hold times >= 0"):
        save_model(m, tmp_path / "bad")  # validated before it is written


def app(proto: str = "tcp", wait: np.ndarray | None = None) -> AppSamples:
    rng = np.random.default_rng(0)
    return AppSamples(
        f"web-{proto}", proto, 8080, np.sort(rng.uniform(0, 100, 300)), 100.0,
        num_rre=np.array([1, 2, 3]), inter_rre=rng.exponential(1.0, 50),
        num_conn=np.array([1, 1, 4]), inter_conn=rng.exponential(0.05, 50),
        num_pairs=np.array([1, 2, 5]), req_size=np.array([0, 3, 300, 1200]),
        rsp_size=rng.pareto(1.2, 200) * 1000, req_think=rng.exponential(0.1, 50),
        rsp_wait=np.zeros(0) if wait is None else wait)


def test_waits_are_drawn_per_tcp_pair_and_leave_the_rest_of_the_draw_alone() -> None:
    waits = np.array([0.01, 0.05, 0.2])
    kw = dict(start="empty")
    plain = build_schedule([app(), app("udp")], CLIENTS, SERVERS, 30.0, 5, **kw)
    waited = build_schedule([app(wait=waits), app("udp", waits)], CLIENTS, SERVERS, 30.0, 5,
                            **kw)
    assert [(s.t, s.client) for s in plain.sessions] == [
        (s.t, s.client) for s in waited.sessions]
    seen = set()
    for (*_, a), (*_, b) in zip(plain.conns(), waited.conns(), strict=True):
        assert (a.server, a.offset, a.pairs) == (b.server, b.offset, b.pairs)
        assert a.waits == ()
        if b.proto == "udp":
            assert b.waits == ()  # swell-gen's UDP server answers at once
            continue
        assert len(b.waits) == len(b.pairs)
        for (q, _, _), w in zip(b.pairs, b.waits, strict=True):
            assert w in (0.0, *waits) and (w == 0.0 or q >= WAIT_MIN_REQ)
            if q < WAIT_MIN_REQ:
                assert w == 0.0  # a header-sized request is answered at once
            seen.add(w)
    assert set(waits) <= seen


def test_waits_round_trip_through_the_file_and_bad_ones_are_refused(tmp_path: Path) -> None:
    c = Conn("10.0.2.1:80", "tcp", "web", 0.0, ((100, 1000, 0.5), (12, 10, 0.0)), (0.25, 0.0))
    sched = Schedule(1, 5.0, [Session(0, 0.0, "10.0.1.1", (Rre(0.0, (c,)),))])
    path = write_schedule(tmp_path / "s.jsonl", sched)
    line = json.loads(path.read_text().splitlines()[1])
    assert line["rres"][0]["conns"][0]["pairs"] == [[100, 1000, 0.5, 0.25], [12, 10, 0.0, 0.0]]
    assert read_schedule(path).sessions[0].rres[0].conns[0] == c
    for bad, msg in (
        (replace(c, waits=(0.25,)), "1 server waits for 2 pairs"),
        (replace(c, waits=(-1.0, 0.0)), "server wait -1.0 s out of range"),
        (replace(c, proto="udp", pairs=((100, 10, 0.0), (100, 10, 0.0))), "TCP only"),
        (replace(c, pairs=((8, 1000, 0.5), (12, 10, 0.0))), "request >= 12 bytes"),
    ):
        with pytest.raises(SwellError, match=msg):
            write_schedule(tmp_path / "bad.jsonl",
                           Schedule(1, 5.0, [Session(0, 0.0, "10.0.1.1", (Rre(0.0, (bad,)),))]))
    mixed = path.read_text().replace("[12,10,0.0,0.0]", "[12,10,0.0]")
    assert mixed != path.read_text()
    (tmp_path / "mixed.jsonl").write_text(mixed)
    with pytest.raises(SwellError, match="mix"):
        read_schedule(tmp_path / "mixed.jsonl")


PATH = PathEstimate(0.1, 8e6)  # 100 ms, 1 MB/s


def test_the_estimate_holds_the_response_back_by_the_wait() -> None:
    c = Conn("1:80", "tcp", "web", 0.0, ((600, 1000, 0.0),))
    (p0,), end0 = pair_times(c, 0.0, PATH)
    (p1,), end1 = pair_times(replace(c, waits=(0.4,)), 0.0, PATH)
    assert p1.req_end == p0.req_end and p1.rsp_start == pytest.approx(p0.req_end + 0.4)
    assert p1.rsp_end == pytest.approx(p0.rsp_end + 0.4) and end1 == pytest.approx(end0 + 0.4)
    assert p0.rsp_start == p0.req_end


def test_a_session_cut_while_its_server_waits_keeps_the_rest_of_the_wait() -> None:
    # handshake 0.1 s, request 0.05 s: the server waits from about 0.15 s to 1.15 s
    c = Conn("1:80", "tcp", "web", 0.0, ((600, 50_000, 0.0), (600, 1000, 0.0)), (1.0, 0.3))
    s = Session(0, -0.65, "", (Rre(0.0, (c,)),))
    (p, _), _ = pair_times(c, s.t, PATH)
    cut = steady_start.remaining(s, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    assert cut is not None and cut.t == 0.0
    (kept,) = cut.rres[0].conns
    assert kept.pairs[0] == (WAIT_MIN_REQ, 50_000, 0.0)  # the response is still to come
    assert kept.waits[0] == pytest.approx(p.rsp_start, abs=1e-6)  # what is left of 1 s
    assert kept.pairs[1] == c.pairs[1] and kept.waits[1] == 0.3


def test_a_swing_background_can_leave_the_waits_out() -> None:
    from swell.generators.swing import SwingSpec, spec_samples

    m = extract_model(REPO / "data/pcap/example.pcap")
    on, _ = spec_samples(SwingSpec(model="m"), m, "m")
    off, _ = spec_samples(SwingSpec(model="m", server_wait=False), m, "m")
    http = [a for a in on if a.name == "http-tcp"][0]
    assert http.rsp_wait.size > 300  # the default: the trace's servers' latency
    assert all(a.rsp_wait.size == 0 for a in off)
    sched = build_schedule(off, CLIENTS, SERVERS, 20.0, 3, start="empty")
    assert all(c.waits == () for *_, c in sched.conns())


def test_a_whole_session_keeps_its_pairs_own_waits(tmp_path: Path) -> None:
    """``pairWait``: each pair's own wait in whole-session order, -1 where none was
    measured; the measured ones are exactly the application's ``rspWait``. A whole
    session's pair waits its own; a pair without one, and every pair with ``pair_wait:
    drawn``, draws as before, and the draw of the waits is the same either way."""
    from swell.extract import modeldir
    from swell.extract.model import FORMAT, FORMAT_VERSION
    from swell.generators.swing import SwingSpec, spec_samples

    m = extract_model(REPO / "data/pcap/example.pcap")
    for a in m.apps:
        own = m.arrays[f"app/{a}/pairWait"]
        assert own.size == m.arrays[f"app/{a}/pairReq"].size
        assert np.array_equal(np.sort(own[own >= 0]), np.sort(m.arrays[f"app/{a}/rspWait"]))
        assert set(np.unique(own[own < 0])) <= {-1.0}
    model = save_model(m, tmp_path / "m")
    on, _ = spec_samples(SwingSpec(model="m", rre_draw="session"), load_model(model), "m")
    drawn, _ = spec_samples(SwingSpec(model="m", rre_draw="session", pair_wait="drawn"),
                            load_model(model), "m")
    http = [a for a in on if a.name == "http-tcp"][0]
    assert http.pair_wait.size and all(a.pair_wait.size == 0 for a in drawn)
    a = build_schedule(on, CLIENTS, SERVERS, 30.0, 4, rre_draw="session", start="empty")
    b = build_schedule(drawn, CLIENTS, SERVERS, 30.0, 4, rre_draw="session", start="empty")
    assert [(s.t, s.client) for s in a.sessions] == [(s.t, s.client) for s in b.sessions]
    # each drawn HTTP connection is one of the trace's: find it by its pairs
    conns = {}
    for c0, c1 in zip(np.r_[0, np.cumsum(http.rre_pairs)][:-1],
                      np.r_[0, np.cumsum(http.rre_pairs)][1:], strict=True):
        key = tuple(int(x) for x in http.pair_rsp[c0:c1])
        conns.setdefault(key, []).append(http.pair_wait[c0:c1])
    own_used = other = 0
    for (*_, x), (*_, y) in zip(a.conns(), b.conns(), strict=True):
        assert x.pairs == y.pairs
        if x.app != "http-tcp" or not x.waits:
            continue
        key = tuple(p[1] for p in x.pairs)
        if key not in conns:  # a connection of the trace without a pair: one empty pair
            assert x.pairs == ((MIN_REQ["tcp"], 0, 0.0),)
            continue
        cands = conns[key]
        for i, ((q, _, _), w, v) in enumerate(zip(x.pairs, x.waits, y.waits, strict=True)):
            if q < WAIT_MIN_REQ:
                assert w == v == 0.0
            elif all(c[i] >= 0 for c in cands) and len({round(c[i], 6) for c in cands}) == 1:
                assert w == round(float(cands[0][i]), 6)  # its own
                own_used += 1
            elif all(c[i] < 0 for c in cands):
                assert w == v  # none measured: drawn as without pairWait
                other += 1
    assert own_used > 100 and other > 0
    meta, arrays = modeldir.load(model, FORMAT, FORMAT_VERSION, "swing")
    arrays["app/http-tcp/pairWait"] = arrays["app/http-tcp/pairWait"][:-1]
    modeldir.save(tmp_path / "bad", meta, arrays, default=str)
    with pytest.raises(SwellError, match="pairWait must hold"):
        load_model(tmp_path / "bad")
