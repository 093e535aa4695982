"""Anchored requests in whole sessions (issue 19, docs/fidelity.md): ``pairAt``.

* the extractor records when each pair's request left, from its connection's first
  packet, in the whole sessions' pair order (-1 where a pair has no request), by hand
  and on the bundled trace (consistent with the think times);
* a whole session anchors exactly the requests that followed a pause of
  ``ANCHOR_THINK_S`` or more, at the trace's times; the other draws anchor nothing, and
  a model without ``pairAt`` draws the same sessions without anchors;
* the zero-think variant drops them; the schedule file keeps them; bad ones are errors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from swell.analysis.swing_window import PathEstimate, pair_times
from swell.cli import main as swell_main
from swell.errors import SwellError
from swell.extract import modeldir, variants
from swell.extract.model import FORMAT, FORMAT_VERSION, load_model, save_model
from swell.extract.sessions import Thresholds, app_parameters
from swell.generators import steady_start
from swell.generators.schedule import (
    ANCHOR_THINK_S,
    MIN_REQ,
    WAIT_MIN_REQ,
    Conn,
    Rre,
    Schedule,
    Session,
    build_schedule,
    load_app_samples,
    read_schedule,
    write_schedule,
)
from tests.unit.test_joint_rre import CLIENTS, EXAMPLE, SERVERS, http_table


def test_pair_at_extracted_by_hand() -> None:
    """Rows start at 5.0, 0.2, 1.0, 0.0; pairs as test_session_draw's table, with times."""
    p = {"conn": np.array([1, 2, 2, 2, 3, 3]),
         "req_size": np.array([11, 21, 22, 23, 31, 32]),
         "rsp_size": np.array([110, 210, 220, 230, 310, 320]),
         "think_before": np.array([np.nan, np.nan, 0.01, 0.02, np.nan, 0.03]),
         "req_t0": np.array([0.25, 1.01, 1.2, np.nan, 0.05, 0.3])}
    table = http_table([5.0, 0.2, 1.0, 0.0], [5.1, 0.4, 1.5, 0.5], [0, 0, 1, 0],
                       np.array([0, 1, 3, 2]), p)
    a = app_parameters(table, Thresholds(rre_gap_s=1.0, session_timeout_s=60.0))[0]["http-tcp"]
    assert a["pairReq"].tolist() == [31, 32, 11, 21, 22, 23]
    assert np.allclose(a["pairAt"], [0.05, 0.3, 0.05, 0.01, 0.2, -1.0])


@pytest.fixture(scope="module")
def example_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("anchors") / "model"
    assert swell_main(["extract", str(EXAMPLE), "-o", str(out)]) == 0
    return out


def test_pair_at_on_the_trace(example_model: Path) -> None:
    """Within a connection a request leaves after the one before it, and at least the
    think time after it (the think runs from the previous response's end)."""
    m = load_model(example_model)
    anchored = 0
    for app in m.apps:
        at, think = m.samples(app, "pairAt"), m.samples(app, "pairThink")
        first = np.r_[0, np.cumsum(m.samples(app, "rrePairs"))][:-1]
        assert len(at) == len(m.samples(app, "pairReq"))
        assert (at[at >= 0] < m.duration_s + 1).all()
        later = np.ones(len(at), dtype=bool)
        later[first[first < len(at)]] = False
        i = np.flatnonzero(later & (at >= 0) & (np.r_[-1.0, at[:-1]] >= 0))
        assert (at[i] >= at[i - 1] + think[i - 1] - 1e-6).all(), app
        anchored += int((think[i - 1] >= ANCHOR_THINK_S).sum())
    assert anchored > 20  # the persistent connections pause between pages


def _without_at(src: Path, dest: Path) -> Path:
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, "swing")
    modeldir.save(dest, meta, {k: v for k, v in arrays.items() if not k.endswith("/pairAt")},
                  default=str)
    return dest


def test_whole_sessions_anchor_the_requests_after_long_pauses(
        example_model: Path, tmp_path: Path) -> None:
    apps, scale = load_app_samples(example_model)
    kw = {"scale": scale, "rre_draw": "session", "start": "empty"}
    sched = build_schedule(apps, CLIENTS, SERVERS, 60.0, 1, **kw)
    trace_at = {a.name: set(np.round(a.pair_at[a.pair_at >= 0], 9)) for a in apps}
    n = 0
    for *_, c in sched.conns():
        assert not c.at or (len(c.at) == len(c.pairs) and c.at[0] < 0)
        for i in range(1, len(c.at)):
            long_pause = c.pairs[i - 1][2] >= ANCHOR_THINK_S
            assert (c.at[i] >= 0) <= long_pause  # only after a long pause
            if c.at[i] >= 0:
                assert round(c.at[i], 9) in trace_at[c.app]
                n += 1
    assert n > 20
    # the other draws, and a model without the request times: no anchors, same sessions
    for draw in ("independent", "joint"):
        other = build_schedule(apps, CLIENTS, SERVERS, 60.0, 1, **{**kw, "rre_draw": draw})
        assert not any(c.at for *_, c in other.conns())
    bare, _ = load_app_samples(_without_at(example_model, tmp_path / "bare"))
    plain = build_schedule(bare, CLIENTS, SERVERS, 60.0, 1, **kw)
    assert [dataclasses.replace(c, at=()) for *_, c in sched.conns()] == [
        c for *_, c in plain.conns()]
    # the zero-think variant has no pauses left, so no anchors
    zero = tmp_path / "zero"
    save_model(variants.zero_think(load_model(example_model)), zero)
    assert not any(k.endswith("/pairAt") for k in load_model(zero).arrays)
    zapps, _ = load_app_samples(zero)
    assert not any(c.at for *_, c in build_schedule(zapps, CLIENTS, SERVERS, 60.0, 1,
                                                      **kw).conns())


def test_anchor_think_zero_anchors_every_later_request(example_model: Path) -> None:
    """The spec's ``anchor_think_s: 0``: every request but a connection's first leaves at
    its trace time (where the trace has one); the same sessions, only more anchors."""
    from swell.generators.swing import SwingSpec, spec_samples

    m = load_model(example_model)
    src = str(example_model)
    apps, scale = spec_samples(SwingSpec(model=src, rre_draw="session"), m, src)
    assert {a.anchor_think for a in apps} == {ANCHOR_THINK_S}
    every, _ = spec_samples(SwingSpec(model=src, rre_draw="session", anchor_think_s=0), m, src)
    assert {a.anchor_think for a in every} == {0.0}
    kw = {"scale": scale, "rre_draw": "session", "start": "empty"}
    base = build_schedule(apps, CLIENTS, SERVERS, 60.0, 1, **kw)
    all_at = build_schedule(every, CLIENTS, SERVERS, 60.0, 1, **kw)
    assert [dataclasses.replace(c, at=()) for *_, c in base.conns()] == [
        dataclasses.replace(c, at=()) for *_, c in all_at.conns()]
    n_base = n_all = 0
    for (*_, c), (*_, d) in zip(base.conns(), all_at.conns(), strict=True):
        app = next(a for a in every if a.name == d.app)
        if len(d.pairs) < 2 or not app.pair_at.size:
            continue
        assert d.at and d.at[0] < 0
        # wherever the default anchors, zero anchors at the same time
        assert all(x < 0 or y == x for x, y in zip(c.at or [-1.0] * len(d.at), d.at,
                                                    strict=True))
        n_base += sum(x >= 0 for x in c.at)
        n_all += sum(x >= 0 for x in d.at)
    assert n_all > 3 * n_base > 0
    with pytest.raises(ValueError, match="anchor_think_s"):
        SwingSpec(model=src, anchor_think_s=-1)



def test_per_app_anchors_only_the_named_application(example_model: Path, tmp_path: Path,
                                                     capsys) -> None:
    """``per_app: {NAME: {anchor_think_s: 0}}``: that application's requests anchored as
    ``anchor_think_s: 0`` anchors them, every other one's as the background's; the same
    sessions either way. A name the model lacks is one line naming it, in ``swell check``
    and before a run."""
    from swell.generators.swing import SwingKind, SwingSpec, spec_samples

    m = load_model(example_model)
    src = str(example_model)
    names = sorted(m.meta["apps"])
    tcp = [a.name for a in load_app_samples(example_model)[0]
           if a.proto == "tcp" and a.pair_at.size]
    assert len(tcp) >= 2, tcp
    one = tcp[0]
    spec = SwingSpec(model=src, rre_draw="session", per_app={one: {"anchor_think_s": 0,
                                                                   "early_requests": True}})
    apps, scale = spec_samples(spec, m, src)
    assert {a.name: (a.anchor_think, a.early) for a in apps} == {
        a.name: (0.0, "pairs") if a.name == one else (ANCHOR_THINK_S, "none") for a in apps}
    every, _ = spec_samples(SwingSpec(model=src, rre_draw="session", anchor_think_s=0), m, src)
    base, _ = spec_samples(SwingSpec(model=src, rre_draw="session"), m, src)
    kw = {"scale": scale, "rre_draw": "session", "start": "empty"}
    mixed = build_schedule(apps, CLIENTS, SERVERS, 60.0, 1, **kw).conns()
    every_c = build_schedule(every, CLIENTS, SERVERS, 60.0, 1, **kw).conns()
    base_c = build_schedule(base, CLIENTS, SERVERS, 60.0, 1, **kw).conns()
    assert len(mixed) == len(every_c) == len(base_c)
    moved = 0
    for (*_, c), (*_, e), (*_, b) in zip(mixed, every_c, base_c, strict=True):
        assert dataclasses.replace(c, at=(), early=()) == dataclasses.replace(b, at=(),
                                                                              early=())
        assert c.at == (e.at if c.app == one else b.at), c.app
        moved += c.app == one and c.at != b.at
    assert moved > 0
    with pytest.raises(SwellError, match=r"per_app names nope: not an application of "
                                         rf"this model \(it has {', '.join(names)}\)"):
        spec_samples(SwingSpec(model=src, per_app={"nope": {}}), m, src)
    # swell check says so, one line, before anything is drawn
    exp = tmp_path / "per-app.yaml"
    exp.write_text(f"name: k\nduration_s: 10\nwarmup_s: 1\ntopology: {{bottleneck: "
                   f"{{rate_mbps: 20}}}}\nbackground: {{kind: swing, model: {src}, per_app: "
                   f"{{nope: {{anchor_think_s: 0}}}}}}\n")
    assert swell_main(["check", str(exp)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "per_app names nope" in err[0], err
    assert SwingKind(SwingSpec(model=src, per_app={one: {}})) is not None


def test_anchors_in_the_file_and_bad_ones(example_model: Path, tmp_path: Path) -> None:
    apps, scale = load_app_samples(example_model)
    sched = build_schedule(apps, CLIENTS, SERVERS, 30.0, 2, scale=scale, rre_draw="session")
    assert any(c.at for *_, c in sched.conns())  # the steady start's cut sessions too
    back = read_schedule(write_schedule(tmp_path / "s.jsonl", sched))
    assert [c for *_, c in back.conns()] == [c for *_, c in sched.conns()]
    s0 = sched.sessions[0]
    c0 = s0.rres[0].conns[0]
    bad = dataclasses.replace(c0, at=(0.5,) * (len(c0.pairs) + 1))
    broken = dataclasses.replace(s0, rres=(dataclasses.replace(s0.rres[0], conns=(bad,)),))
    with pytest.raises(SwellError, match="request times"):
        write_schedule(tmp_path / "bad.jsonl", Schedule(2, 30.0, [broken]))
    meta, arrays = modeldir.load(example_model, FORMAT, FORMAT_VERSION, "swing")
    key = next(k for k in arrays if k.endswith("/pairAt"))
    arrays[key] = arrays[key][:-1]
    modeldir.save(tmp_path / "short", meta, arrays, default=str)
    with pytest.raises(SwellError, match="pairAt must hold"):
        load_model(tmp_path / "short")


PATH = PathEstimate(0.1, 8e6)  # 100 ms, 1 MB/s


def test_the_estimate_and_the_steady_start_know_the_anchors() -> None:
    """The transfer-time estimate starts an anchored request at its time (or after the
    previous response); a connection cut at the run's start keeps its anchors, moved to
    its new start, and the right number of them."""
    pairs = ((100, 1000, 0.6), (100, 1000, 3.0), (100, 1000, 0.0))
    c = Conn("1:80", "tcp", "web", 0.0, pairs, at=(-1.0, 0.4, 2.0))
    p, end = pair_times(c, 10.0, PATH)
    assert p[1].start == pytest.approx(10.4)  # not the 0.6 s think after the response
    assert p[2].start == pytest.approx(12.0)  # not 3 s after the second response
    plain, _ = pair_times(replace(c, at=()), 10.0, PATH)
    assert plain[1].start == pytest.approx(plain[0].rsp_end + 0.6)
    late = pair_times(replace(c, at=(-1.0, 0.01, 2.0)), 10.0, PATH)[0]
    assert late[1].start == pytest.approx(late[0].rsp_end)  # due before the response ended
    # a session under way at 0, cut in its second pair or its pause
    s = Session(0, -1.0, "", (Rre(0.0, (c,)),))
    cut = steady_start.remaining(s, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    assert cut is not None
    (kept,) = cut.rres[0].conns
    assert kept.pairs == pairs[2:] or kept.pairs == pairs[1:]
    assert len(kept.at) in (0, len(kept.pairs)) and (not kept.at or kept.at[0] < 0)
    s = Session(0, -0.12, "", (Rre(0.0, (c,)),))  # cut in the first request: all three
    cut = steady_start.remaining(s, PATH, MIN_REQ, wait_req=WAIT_MIN_REQ)
    (kept,) = cut.rres[0].conns
    assert len(kept.pairs) == 3 and kept.at[0] < 0
    # reopened `first - c0` later: the anchors move by as much (the third still at 2 s
    # from the original start, i.e. -0.12 + 2.0 = 1.88 s into the run)
    assert cut.t + kept.offset + kept.at[2] == pytest.approx(-0.12 + 2.0, abs=1e-6)
    assert cut.t + kept.offset + kept.at[1] == pytest.approx(-0.12 + 0.4, abs=1e-6)
