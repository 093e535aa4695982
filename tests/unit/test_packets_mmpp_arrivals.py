"""A fitted MMPP as a Swing arrival process: session starts placed by it, counted and
fitted again, keep the inequality coefficient within 2 points; option errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract.mmpp import (
    MMPPModel,
    Scale,
    fit_counts,
    inequality_coefficient,
    simulate,
)
from swell.generators.arrivals import choose
from swell.generators.mmpp_arrivals import MmppArrivals


def _known() -> MMPPModel:
    scales = [Scale(math.exp(-1 / tau), pi * (1 - pi) * r * r, pi, r)
              for tau, pi, r in ((60.0, 0.3, 8.0), (5.0, 0.5, 4.0))]
    return MMPPModel(10.0, scales, np.array([2.0, 6.0]), np.array([0.6, 0.4]))


def test_starts_placed_by_a_fitted_mmpp_refit_within_two_points(tmp_path) -> None:
    data = simulate(_known(), 20_000, seed=21, times=False).counts
    fit = fit_counts([data], 10.0)
    proc = MmppArrivals(fit, tmp_path / "m")
    # like refit_check: far longer than the data (50x), so the refit's own sampling noise
    # is small next to the data's (the fit's slow scale lasts ~5,000 intervals)
    n_int, n = 1_000_000, int(round(data.mean() * 1_000_000))
    starts = proc.place(None, n, 0.0, n_int * 10.0,  # type: ignore[arg-type]
                        np.random.default_rng(5))
    assert starts.size == n and np.all(np.diff(starts) >= 0)
    counts = np.bincount((starts // 10.0).astype(np.int64), minlength=n_int)[:n_int]
    K = int(fit.report["max_lag"])
    refit = fit_counts([counts], 10.0, max_lag=K, floor_reps=0)
    ic_data = float(fit.report["ic"])
    ic_refit = inequality_coefficient(fit.data["acov_data"], refit.autocov(K))
    print(f"\nIC fit {ic_data:.4f}, refit of placed starts vs data {ic_refit:.4f}")
    assert abs(ic_refit - ic_data) <= 0.02


def test_option_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(SwellError, match="model directory"):
        choose("mmpp:", 10.0, 10.0)
    with pytest.raises(SwellError, match="not seconds"):
        choose(f"mmpp:{tmp_path}@fast", 10.0, 10.0)
    with pytest.raises(SwellError, match="not a swell model"):
        choose(f"mmpp:{tmp_path}", 10.0, 10.0)


def test_short_run_gets_its_share_and_time_compression(tmp_path) -> None:
    fit = _known()
    proc = MmppArrivals(fit, tmp_path, interval_s=1.0)
    t = proc.place(None, 500, 2.0, 7.5, np.random.default_rng(1))  # type: ignore[arg-type]
    assert t.size == 500 and t.min() >= 2.0 and t.max() < 7.5
    assert proc.name.endswith("@1")
