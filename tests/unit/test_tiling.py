"""Looping a trace and merging time-shifted copies (swell.extract.tiling), no root."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract.tiling import copies_for, loop_period, tile, trace_mbps
from swell.generators.playback import trace_schedule

TRACE = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"


def toy() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 1 s trace: 11 packets 0.1 s apart, 100 bytes each, 4 connections."""
    t = np.arange(11) * 0.1
    return t, np.full(11, 100), np.arange(11) % 4


def test_period_is_span_plus_mean_gap() -> None:
    t, nb, _ = toy()
    assert loop_period(t) == pytest.approx(1.1)
    assert trace_mbps(t, nb) == pytest.approx(1100 * 8 / 1.1 / 1e6)


def test_one_copy_looped_keeps_every_gap_and_fills_the_duration() -> None:
    t, nb, _ = toy()
    til = tile(t, nb, duration_s=5.5)
    assert len(til) == 55  # five whole passes, nothing stretched
    assert np.allclose(np.diff(til.t_s), 0.1)
    assert np.array_equal(til.index, np.tile(np.arange(11), 5))
    assert til.copies == 1 and til.partial == 0.0


def test_copies_are_time_shifted_not_stretched() -> None:
    t, nb, conn = toy()
    til = tile(t, nb, duration_s=11.0, n_copies=3.0, conn=conn, seed=4)
    assert til.copies == 3 and len(til.phases_s) == 3 and til.phases_s[0] == 0.0
    assert len(til) == 3 * 110
    for k in range(3):
        mine = til.t_s[til.copy == k]
        assert np.allclose(np.diff(mine), 0.1)  # each copy keeps the trace's own gaps
        assert mine[0] == pytest.approx(til.phases_s[k] % 0.1)
    assert np.all(np.diff(til.t_s) >= 0)
    assert til.mbps(nb, 11.0) == pytest.approx(3 * trace_mbps(t, nb))


def test_fraction_is_a_partial_copy_of_whole_connections() -> None:
    t, nb, conn = toy()
    til = tile(t, nb, duration_s=11.0, n_copies=1.5, conn=conn, seed=2)
    assert til.copies == 1 and 0.25 <= til.partial <= 0.75
    part = til.index[til.copy == 1]
    played = set(conn[np.unique(part)])
    assert set(conn[part]) == played and 0 < len(played) < 4  # whole connections only
    assert til.mbps(nb, 11.0) == pytest.approx(til.users * trace_mbps(t, nb), rel=0.01)


def test_target_under_the_trace_rate_is_a_lighter_user() -> None:
    t, nb, conn = toy()
    til = tile(t, nb, duration_s=11.0, n_copies=0.5, conn=conn)
    assert til.copies == 0 and 0 < til.partial < 1
    assert til.mbps(nb, 11.0) < trace_mbps(t, nb)


def test_without_loop_a_copy_plays_once_inside_the_run() -> None:
    t, nb, conn = toy()
    til = tile(t, nb, duration_s=5.0, n_copies=2.0, conn=conn, loop=False)
    assert len(til) == 22 and til.t_s.max() < 5.0
    for k in range(2):
        assert np.allclose(np.diff(til.t_s[til.copy == k]), 0.1)


def test_reproducible_and_seed_dependent() -> None:
    t, nb, conn = toy()
    a, b = (tile(t, nb, 20.0, 2.7, conn, seed=9) for _ in range(2))
    assert np.array_equal(a.t_s, b.t_s) and a.phases_s == b.phases_s
    assert tile(t, nb, 20.0, 2.7, conn, seed=10).phases_s != a.phases_s


def test_bad_inputs_are_one_line_errors() -> None:
    t, nb, _ = toy()
    with pytest.raises(SwellError):
        tile(t[::-1], nb, 5.0)
    with pytest.raises(SwellError):
        tile(np.zeros(0), np.zeros(0), 5.0)
    with pytest.raises(SwellError):
        tile(t, nb, 5.0, n_copies=0.0)
    with pytest.raises(SwellError):
        copies_for(1e9, 0.001)


def test_real_trace_reaches_a_target_over_a_longer_run() -> None:
    """example.pcap's server side (about 1.7 Mbit/s over 15.6 s) at 10 Mbit/s for 40 s."""
    sched = trace_schedule(TRACE, "server")
    rate = trace_mbps(sched.t_s, sched.ip_len)
    assert 1.0 < rate < 3.0
    n = copies_for(10.0, rate)
    til = tile(sched.t_s, sched.ip_len, 40.0, n, sched.conn, seed=1)
    got = til.mbps(sched.ip_len, 40.0)
    print(f"trace {rate:.3f} Mbit/s, copies {til.users:.2f}, planned {got:.2f} Mbit/s")
    assert got == pytest.approx(10.0, rel=0.05)
    assert til.t_s.max() > 39.0  # the whole run, not the trace's 15.6 s


def test_replay_split_loops_both_directions_with_renumbered_copies(tmp_path: Path) -> None:
    """tcpreplay's split: looped and merged to 8 Mbit/s over 20 s, copies renumbered."""
    import dpkt

    from swell.generators.replay_split import Looping, split_trace, trace_rates

    res = split_trace(TRACE, tmp_path, looping=Looping(20.0, True, 8.0, seed=1, warmup_s=3.0))
    plan = res.plan
    assert plan["whole_copies"] == 4 and 4 < plan["copies"] < 5
    assert plan["planned_mbps"] == pytest.approx(8.0, rel=0.05)
    rates = trace_rates(TRACE)
    assert sum(rates.values()) == pytest.approx(plan["trace_mbps"], rel=1e-6)
    # copy k >= 1 lives in 100.64.0.0/10, one to one with the trace's addresses
    assert len(res.clients) == 5 * len(set(res.clients[: len(res.clients) // 5]))
    assert all(a.startswith("100.64.") for a in res.clients[len(res.clients) // 5:])
    for name in ("c2s", "s2c"):
        ts = [t for t, _ in dpkt.pcap.Reader(open(getattr(res, name), "rb"))]
        assert len(ts) == res.counts[name] and np.all(np.diff(ts) >= 0)
        assert ts[-1] - min(res.first_ts.values()) < 20.0
        assert ts[-1] - min(res.first_ts.values()) > 19.0  # looped for the whole run


def test_playback_config_loops_and_merges(tmp_path: Path) -> None:
    """UPB's generator gets the tiled schedule; its plan states asked, copies, planned."""
    from swell.generators.playback import PlaybackConfig, PlaybackGenerator

    gen = PlaybackGenerator(PlaybackConfig(trace=TRACE, out_dir=tmp_path, dst="10.1.0.2",
                                           loop=True, target_mbps=8.0, run_s=20.0,
                                           warmup_s=3.0))
    sched, plan = gen.legs[0].sched, gen.plans["server"]
    assert plan["asked_mbps"] == 8.0 and plan["whole_copies"] == 4
    assert plan["planned_mbps"] == pytest.approx(8.0, rel=0.05)
    assert 19.0 < sched.duration_s < 20.0
    assert np.all(sched.gaps_ms() > 0)
    once = PlaybackGenerator(PlaybackConfig(trace=TRACE, out_dir=tmp_path, dst="10.1.0.2"))
    assert once.plans["server"]["copies"] == 1.0 and once.legs[0].sched.duration_s < 16
    with pytest.raises(SwellError):
        PlaybackConfig(trace=TRACE, out_dir=tmp_path, dst="x", target_mbps=8.0)


def test_kinds_ask_for_their_rate_and_refuse_one_over_the_link(tmp_path: Path) -> None:
    from swell.generators.kind import PrepareContext
    from swell.generators.playback import UpbKind, UpbSpec
    from swell.generators.replay import ReplayKind, ReplaySpec
    from swell.placement import PathFacts

    ctx = PrepareContext(base_dir=TRACE.parent, cache_dir=tmp_path, seed=1)
    upb = UpbKind(UpbSpec(trace=TRACE.name, target_mbps=10))
    upb.prepare(ctx)
    assert upb.asked_mbps() == {"reverse": 10, "forward": 0.0}
    looped = UpbKind(UpbSpec(trace=TRACE.name))
    looped.prepare(ctx)
    assert looped.asked_mbps()["reverse"] == pytest.approx(1.718, rel=0.01)
    assert UpbKind(UpbSpec(trace=TRACE.name, loop=False)).asked_mbps() is None
    rep = ReplayKind(ReplaySpec(trace=TRACE.name, target_mbps=8))
    rep.prepare(ctx)
    asked = rep.asked_mbps()
    assert sum(asked.values()) == pytest.approx(8.0) and asked["reverse"] > asked["forward"]
    with pytest.raises(SwellError):
        upb.check_path(PathFacts(forward_mbps=10, reverse_mbps=10))
