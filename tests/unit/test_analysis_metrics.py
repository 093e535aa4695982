"""Application metrics on hand-computed examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swell.analysis.metrics import (
    available_bandwidth_truth,
    ecdf,
    inter_arrivals,
    jitter_summary,
    percent_error,
    rfc3550_jitter,
    slowdown,
    statistic,
    summary,
    throughput_series,
)


def test_ecdf_and_statistics() -> None:
    x, p = ecdf(np.array([3.0, 1.0, np.nan, 2.0]))
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert p.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert statistic(v, "p90") == pytest.approx(4.6)  # 1 + 0.9 * 4
    assert statistic(v, "p5") == pytest.approx(1.2)
    assert statistic(v, "mean") == 3.0
    s = summary(v)
    assert s["p50"] == 3.0 and s["std"] == pytest.approx(math.sqrt(2.5)) and s["n"] == 5
    with pytest.raises(ValueError):
        statistic(v, "median")


def test_slowdown_mean_and_sd_across_repetitions() -> None:
    nbg = [np.array([1.0, 1.0, 1.0]), np.array([1.0, 1.0])]
    runs = [np.array([2.0, 2.0, 2.0]), np.array([4.0, 4.0, 4.0])]
    sd = slowdown(runs, nbg)
    assert set(sd) == {"p5", "p50", "p90", "p95", "mean"}
    for s in sd.values():
        assert s.baseline == 1.0
        assert s.per_rep.tolist() == [2.0, 4.0]
        assert s.mean == 3.0
        assert s.std == pytest.approx(math.sqrt(2.0))
        assert s.increase_pct == pytest.approx(200.0)
    # Percentiles differ: NBG [1, 3] has p50 2; a run [2, 10] has p50 6 -> slowdown 3.
    sd2 = slowdown([np.array([2.0, 10.0])], [np.array([1.0, 3.0])], stats=("p50", "p95", "mean"))
    assert sd2["p50"].mean == pytest.approx(3.0) and sd2["p50"].std == 0.0
    assert sd2["p95"].mean == pytest.approx((2 + 0.95 * 8) / (1 + 0.95 * 2))
    assert sd2["mean"].mean == pytest.approx(3.0)
    assert sd2["mean"].to_dict()["per_rep"] == [pytest.approx(3.0)]
    with pytest.raises(ValueError):
        slowdown([], nbg)


def test_inter_arrivals_and_jitter() -> None:
    gaps = inter_arrivals(np.array([0.3, 0.0, 0.1]))
    assert gaps.tolist() == pytest.approx([0.1, 0.2])
    js = jitter_summary(np.array([0.01, 0.02, 0.03, 0.04]))
    assert js["mean"] == pytest.approx(0.025) and js["max"] == 0.04
    assert js["p50"] == pytest.approx(0.025)
    assert math.isnan(jitter_summary(np.array([]))["mean"])
    j = rfc3550_jitter(np.array([0.0, 1.0, 2.0]), np.array([0.1, 1.3, 2.2]))
    assert j.tolist() == pytest.approx([0.2 / 16, 0.2 / 16 + (0.1 - 0.2 / 16) / 16])


def test_throughput_series_and_bandwidth_truth() -> None:
    t, bps = throughput_series(np.array([0.0, 0.5, 1.2]), np.array([100, 100, 300]), 1.0)
    assert t.tolist() == [0.0, 1.0]
    assert bps.tolist() == [1600.0, 2400.0]
    t2, bps2 = throughput_series(np.array([0.0, 0.5, 1.2]), np.array([100, 100, 300]), 0.5,
                                 start_s=0.0, end_s=1.0)
    assert bps2.tolist() == [1600.0, 1600.0]
    truth = available_bandwidth_truth(np.array([1e6, 3e6, 0.0]), 20e6, bin_s=1.0)
    assert truth.tolist() == [12e6, 0.0, 20e6]
    err = percent_error(np.array([13.2e6, 1e6, 20e6]), truth)
    assert err[0] == pytest.approx(10.0) and math.isnan(err[1]) and err[2] == 0.0
