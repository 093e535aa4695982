"""The whole-session draw (issue 19, docs/scale.md 7.3): extracted, validated, drawn whole.

* the extractor records each session (its RREs, the gaps between them) and every
  pair's request, response and think time in connection order: checked on a
  hand-made connection table;
* ``rre_draw="session"`` is opt-in; the independent and joint schedules are byte
  for byte what they were before the sessions were stored; a model without them
  falls back to the joint draw and says so; a bad session array is a one-line
  error naming the model (``test_joint_rre.py``, with the joint sample's cases);
* on the bundled model every drawn session is one of the trace's sessions (RRE
  count, gaps, offsets, pair sizes and thinks), each RRE with its own server
  (``test_server_match.py``);
* a target load is met by construction with whole sessions too;
* the variants that change sizes and think times act on the whole sessions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.cli import main as swell_main
from swell.extract import modeldir, variants
from swell.extract.conntypes import ConnTable
from swell.extract.model import FORMAT, FORMAT_VERSION, load_model, save_model
from swell.extract.sessions import (
    ANCHOR_PARAMS,
    CLIENT_PARAMS,
    EARLY_PARAMS,
    JOINT_PARAMS,
    PACE_PARAMS,
    PAIR_WAIT_PARAMS,
    SESSION_PARAMS,
    Thresholds,
    app_parameters,
)
from swell.generators.schedule import build_schedule, load_app_samples
from tests.unit.test_joint_rre import CLIENTS, EXAMPLE, SERVERS, _file, http_table


def _table() -> ConnTable:
    """Client 0: connections at 0.0 (2 pairs) and 0.2 (1 pair), one RRE; then 5.0 (no
    pair: 4.5 s idle, a new RRE of the same session); client 1: 1.0 (3 pairs). Rows
    shuffled."""
    # pairs by connection: row 1: (11, 110); row 2: (21, 210), (22, 220), (23, 230);
    # row 3: (31, 310), (32, 320); think before a connection's later pairs 0.01, 0.02, ...
    p = {"conn": np.array([1, 2, 2, 2, 3, 3]),
         "req_size": np.array([11, 21, 22, 23, 31, 32]),
         "rsp_size": np.array([110, 210, 220, 230, 310, 320]),
         "think_before": np.array([np.nan, np.nan, 0.01, 0.02, np.nan, 0.03])}
    return http_table([5.0, 0.2, 1.0, 0.0], [5.1, 0.4, 1.5, 0.5], [0, 0, 1, 0],
                      np.array([0, 1, 3, 2]), p)


def test_sessions_extracted_by_hand() -> None:
    params, _ = app_parameters(_table(), Thresholds(rre_gap_s=1.0, session_timeout_s=60.0))
    a = params["http-tcp"]
    assert a["rreConns"].tolist() == [2, 1, 1]  # client 0: {0.0, 0.2}, {5.0}; client 1
    assert a["sessRres"].tolist() == [2, 1]
    assert np.allclose(a["sessGaps"], [4.5])  # 5.0 minus the RRE's latest end 0.5
    assert a["rrePairs"].tolist() == [2, 1, 0, 3]
    assert a["pairReq"].tolist() == [31, 32, 11, 21, 22, 23]
    assert a["pairRsp"].tolist() == [310, 320, 110, 210, 220, 230]
    assert np.allclose(a["pairThink"], [0.03, 0.0, 0.0, 0.01, 0.02, 0.0])


@pytest.fixture(scope="module")
def example_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sessions") / "model"
    assert swell_main(["extract", str(EXAMPLE), "-o", str(out)]) == 0
    return out


def _without(src: Path, dest: Path, params: tuple[str, ...]) -> Path:
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, "swing")
    modeldir.save(dest, meta, {k: v for k, v in arrays.items()
                               if k.rsplit("/", 1)[-1] not in params}, default=str)
    return dest


def test_joint_and_independent_unchanged_and_the_fallback(
        example_model: Path, tmp_path: Path) -> None:
    before = _without(example_model, tmp_path / "before",
                      SESSION_PARAMS + ANCHOR_PARAMS + PAIR_WAIT_PARAMS + CLIENT_PARAMS
                      + PACE_PARAMS + EARLY_PARAMS)
    assert not any(load_model(before).has_sessions(a) for a in load_model(before).apps)
    assert all(load_model(example_model).has_sessions(a)
               for a in load_model(example_model).apps)
    apps_b, scale = load_app_samples(before)
    apps_n, _ = load_app_samples(example_model)
    assert not any(a.whole for a in apps_b) and all(a.whole for a in apps_n)
    for draw in ("independent", "joint"):
        old = build_schedule(apps_b, CLIENTS, SERVERS, 30.0, 3, scale=4 * scale, rre_draw=draw)
        new = build_schedule(apps_n, CLIENTS, SERVERS, 30.0, 3, scale=4 * scale, rre_draw=draw)
        assert _file(old, tmp_path / f"{draw}-a") == _file(new, tmp_path / f"{draw}-b")
    # a model without the sessions, asked for them: the joint draw, and the meta says so
    fall = build_schedule(apps_b, CLIENTS, SERVERS, 30.0, 3, scale=4 * scale,
                          rre_draw="session")
    joint = build_schedule(apps_b, CLIENTS, SERVERS, 30.0, 3, scale=4 * scale,
                           rre_draw="joint")
    assert set(fall.meta["rre_draw"].values()) == {"joint"}
    assert _file(fall, tmp_path / "f") == _file(joint, tmp_path / "j")
    sess = build_schedule(apps_n, CLIENTS, SERVERS, 30.0, 3, scale=4 * scale,
                          rre_draw="session")
    assert set(sess.meta["rre_draw"].values()) == {"session"}


def _trace_sessions(model: Path, app: str) -> set[tuple]:
    """Every trace session of ``app`` as (per RRE: gap, per connection (offset, pairs))."""
    m = load_model(model)
    rres, gaps, req, rsp, think = (m.samples(app, k) for k in SESSION_PARAMS)
    conns, offs, npairs = (m.samples(app, k) for k in JOINT_PARAMS)
    c_at, p_at = np.r_[0, np.cumsum(conns)], np.r_[0, np.cumsum(npairs)]
    out, r, g = set(), 0, 0
    for n in rres:
        sess = []
        for i in range(int(n)):
            gap = 0.0 if i == 0 else round(float(gaps[g + i - 1]), 9)
            cs = []
            for c in range(int(c_at[r + i]), int(c_at[r + i + 1])):
                a, b = int(p_at[c]), int(p_at[c + 1])
                pairs = [(max(8, int(q)), int(x), round(float(t), 9))
                         for q, x, t in zip(req[a:b], rsp[a:b], think[a:b], strict=True)]
                cs.append((round(float(offs[c]), 9), tuple(pairs) or ((8, 0, 0.0),)))
            sess.append((gap, tuple(cs)))
        out.add(tuple(sess))
        r, g = r + int(n), g + int(n) - 1
    return out


def test_drawn_sessions_are_trace_sessions(example_model: Path) -> None:
    apps, scale = load_app_samples(example_model)
    tcp = {a.name for a in apps if a.proto == "tcp"}
    shapes = {app: _trace_sessions(example_model, app) for app in tcp}
    seen: dict[str, set[tuple]] = {app: set() for app in tcp}
    for seed in (1, 2):
        # the draw itself: sessions carried in from before the run are cut (steady start)
        sched = build_schedule(apps, CLIENTS, SERVERS, 120.0, seed, scale=scale,
                               rre_draw="session", start="empty")
        for s in sched.sessions:
            app = s.rres[0].conns[0].app
            if app not in tcp:
                continue
            drawn = tuple((r.gap, tuple((c.offset, c.pairs) for c in r.conns))
                          for r in s.rres)
            assert drawn in shapes[app], app
            seen[app].add(drawn)
            for r in s.rres:  # one server per RRE
                assert len({c.server for c in r.conns}) == 1
    # the trace has 6 TCP sessions (http 2, https 4): several different ones drawn
    assert sum(len(v) for v in seen.values()) >= 3, seen


def test_target_met_by_construction_with_whole_sessions(example_model: Path) -> None:
    """Whole sessions are bigger pieces than one-by-one draws, but the construction still
    stops closest to the budget: the window's offer within 5% of asked, every seed."""
    from swell.generators.swing import swing_schedule
    from swell.generators.swing_accounting import offered_by_direction

    apps, scale = load_app_samples(example_model)
    servers = [f"10.2.0.{i + 1}" for i in range(60)]
    clients = [f"10.1.{i // 200}.{i % 200 + 1}" for i in range(400)]
    for seed in range(1, 6):
        sched = swing_schedule(apps, clients, servers, 25.0, seed, scale, 70.0,
                               window_start_s=5.0, rre_draw="session")
        assert set(sched.meta["rre_draw"].values()) == {"session"}
        got = offered_by_direction(sched, 5.0)
        assert abs(sum(got.values()) / 70.0 - 1) < 0.05, (seed, got)


def test_variants_act_on_whole_sessions(example_model: Path, tmp_path: Path) -> None:
    m = load_model(example_model)
    v = variants.apply(m, scale=2.0, rsp=2.0, req=3.0, zero_think_times=True)
    save_model(v, tmp_path / "v")
    base = {a.name: a for a in load_app_samples(example_model)[0]}
    for a in load_app_samples(tmp_path / "v")[0]:
        b = base[a.name]
        assert np.array_equal(a.pair_rsp, np.rint(b.pair_rsp * 2.0))
        assert np.array_equal(a.pair_req, np.rint(b.pair_req * 3.0))
        assert not a.sess_gaps.any() and not a.pair_think.any()
        assert np.array_equal(a.sess_rres, b.sess_rres)


def test_the_swing_kind_accepts_the_session_draw(example_model: Path) -> None:
    from swell.generators.swing import SwingSpec, swing_schedule

    assert SwingSpec(model="m", rre_draw="session").rre_draw == "session"
    apps, scale = load_app_samples(example_model)
    sched = swing_schedule(apps, CLIENTS, SERVERS, 60.0, 1, scale, None, rre_draw="session")
    assert sched.meta["rre_draw"]["http-tcp"] == "session"


def test_apps_for_draw_leaves_out_what_each_draw_does_not_use(
        example_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fidelity bench prepares its samples with the schedule's own rule: it once
    emptied the joint sample alone, and a model with sessions then failed validation
    ("the whole sessions' arrays do not agree") before any run."""
    from swell.generators.schedule import apps_for_draw

    apps, _ = load_app_samples(example_model)
    assert any(a.whole for a in apps)
    for draw, whole, joint in (("independent", False, False), ("joint", False, True),
                               ("session", True, True)):
        got = apps_for_draw(apps, draw)
        assert any(a.whole for a in got) == whole and any(a.joint for a in got) == joint
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "bench"))
    import fidelity

    for draw in ("independent", "joint", "session"):
        monkeypatch.setattr(fidelity, "RRE_DRAW", draw)
        ok, _, _ = fidelity.usable_apps(example_model)
        assert ok and all(a.whole == (draw == "session") for a in ok if a.rre_conns.size)


def test_scheduled_payload_counts_connections_by_their_scheduled_start() -> None:
    """A connection counts in a window when its session's arrival, the gaps of the RREs
    up to its own and its offset put its start inside; its bytes go to their direction.
    ``offered_mbps`` is both directions of the same count."""
    from swell.generators.schedule import Conn, Rre, Schedule, Session
    from swell.generators.swing import offered_mbps
    from swell.generators.swing_accounting import offered_by_direction, scheduled_by_direction

    def conn(offset: float, req: int, rsp: int) -> Conn:
        return Conn("10.2.0.1:80", "tcp", "http", offset, ((req, rsp, 0.0),))

    # session at 1 s: RRE 1 (gap 0) conns at 1.0 and 4.5; RRE 2 (gap 3) conn at 4.0 + 2
    sess = Session(0, 1.0, "10.1.0.1", (Rre(0.0, (conn(0.0, 1000, 9000), conn(3.5, 10, 20))),
                                        Rre(3.0, (conn(2.0, 500, 5000),))))
    sched = Schedule(1, 10.0, [sess])
    got = scheduled_by_direction(sched, 2.0, 6.0)  # 4.5 in, 1.0 before, 6.0 at the end
    assert got == pytest.approx({"forward": 8 * 10 / 4 / 1e6, "reverse": 8 * 20 / 4 / 1e6})
    whole = scheduled_by_direction(sched, 0.0)
    assert whole == pytest.approx({"forward": 8 * 1510 / 10 / 1e6,
                                   "reverse": 8 * 14020 / 10 / 1e6})
    assert offered_mbps(sched, 2.0, 7.0) == pytest.approx(8 * 5530 / 5 / 1e6)
    assert offered_by_direction(sched, 0.0) == whole  # no steady start: the same count
