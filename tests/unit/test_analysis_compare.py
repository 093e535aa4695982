"""Comparing energy plots (with the halves floor), throughput and distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from swell.analysis.compare import (
    compare_energy,
    compare_throughput,
    ecdf_sup_distance,
    halves_floor,
    ks_distance,
    ks_table,
    mean_bps,
)
from swell.analysis.energy import energy_plot


def _fgn(n: int, hurst: float, rng: np.random.Generator) -> np.ndarray:
    k = np.arange(n + 1, dtype=float)
    g = 0.5 * (np.abs(k + 1) ** (2 * hurst) - 2 * k ** (2 * hurst) + np.abs(k - 1) ** (2 * hurst))
    lam = np.fft.fft(np.concatenate([g, g[-2:0:-1]])).real
    m = lam.size
    w = np.sqrt(np.maximum(lam, 0) / m) * (rng.standard_normal(m) + 1j * rng.standard_normal(m))
    return np.fft.fft(w).real[:n]


def test_scaling_a_series_shifts_every_octave_by_log2_of_the_square() -> None:
    x = np.random.default_rng(1).poisson(20, 2**14).astype(float)
    a = energy_plot(x, 0.001)
    b = energy_plot(3.0 * x, 0.001)
    cmp = compare_energy(a, b)
    assert np.allclose(cmp.diff, math.log2(9.0))
    assert np.allclose(cmp.ci, np.sqrt(2) * a.ci)
    with pytest.raises(ValueError):
        compare_energy(a, energy_plot(x, 0.002))
    with pytest.raises(ValueError):
        _ = cmp.passed  # no floor yet


def test_floor_is_at_least_the_statistical_bound() -> None:
    x = np.random.default_rng(2).poisson(20, 2**15).astype(float)
    floor = halves_floor(x, 0.001)
    half = energy_plot(x[: 2**14], 0.001)
    for j, f in floor.items():
        assert f >= math.sqrt(2) * half.ci[half.at(j)] - 1e-12


def test_same_process_passes_and_burstier_process_fails() -> None:
    rng = np.random.default_rng(3)
    n, bin_s = 2**16, 0.001
    orig = rng.poisson(50, n).astype(float)
    same = rng.poisson(50, n).astype(float)
    floor = halves_floor(orig, bin_s, min_coeffs=8)
    eo = energy_plot(orig, bin_s, min_coeffs=8)
    ok = compare_energy(eo, energy_plot(same, bin_s, min_coeffs=8)).with_floor(floor)
    judged = np.isfinite(ok.floor)
    assert judged.sum() >= 10 and ok.passed[judged].mean() >= 0.9, ok.rows()
    # Long-range dependent traffic with the same mean and variance at the finest scale.
    lrd = 50 + math.sqrt(50) * _fgn(n, 0.9, rng)
    bad = compare_energy(eo, energy_plot(lrd, bin_s, min_coeffs=8)).with_floor(floor)
    large = bad.octaves >= 6
    assert not bad.passed[large].any(), bad.rows()
    assert np.all(bad.diff[large] > 0)
    rows = bad.rows()
    assert rows[0]["octave"] == 1 and "floor" in rows[0] and "pass" in rows[0]


def test_throughput_comparison() -> None:
    assert mean_bps(1_000_000, 2.0) == 4e6
    rows = compare_throughput({"c2s": 1e6, "s2c": 10e6}, {"c2s": 1.05e6, "s2c": 8e6})
    assert [r.direction for r in rows] == ["c2s", "s2c"]
    assert rows[0].diff_pct == pytest.approx(5.0) and rows[0].passed()
    assert rows[1].diff_pct == pytest.approx(-20.0) and not rows[1].passed()
    assert rows[1].passed(tolerance_pct=25)


def test_ks_distance() -> None:
    rng = np.random.default_rng(4)
    a = rng.exponential(1.0, 3000)
    b = rng.exponential(1.0, 2000)
    c = rng.exponential(2.0, 2000)
    same = ks_distance(a, b, "same")
    diff = ks_distance(a, c, "scaled")
    assert same.distance == pytest.approx(ecdf_sup_distance(a, b))
    assert diff.distance == pytest.approx(ecdf_sup_distance(a, c))
    assert same.distance < 0.05 and same.pvalue > 0.01
    assert diff.distance > 0.2 and diff.pvalue < 1e-6
    # Exact by hand: F_a - F_b reaches 2/3 at x = 3.
    assert ecdf_sup_distance(np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])) == 1.0
    assert ks_distance(np.array([1.0, 2.0, 3.0]), np.array([2.5, 10.0])).distance == \
        pytest.approx(2 / 3)
    assert math.isnan(ks_distance(np.array([]), a).distance)
    table = ks_table({"x": a, "y": b}, {"y": c, "z": a})
    assert [t.name for t in table] == ["y"]
