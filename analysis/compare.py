"""Comparing traffic: energy plots octave by octave, mean throughput, distributions.

Energy plots. Two log-scale diagrams are compared octave by octave:
``diff_j = y_j(b) - y_j(a)`` with the combined 95% half-width
``sqrt(ci_j(a)^2 + ci_j(b)^2)``. Whether a difference matters is judged
against the *floor*: how much a trace differs from itself. The floor of a
series is taken from its first half against its second half (DESIGN 5):

    floor_j = max(|y_j(first) - y_j(second)|, sqrt(ci_j(first)^2 + ci_j(second)^2))

The first term is the spread actually seen in the trace (non-stationarity
included); the second is the statistical 95% bound for two halves, so an
octave where the halves agree by chance does not get a zero floor. An octave
passes when ``|diff_j| <= floor_j``.

Throughput: mean bit/s per direction and the percentage difference of the
generated against the original (``100 * (gen - orig) / orig``).

Distributions: two-sample Kolmogorov-Smirnov distance (sup of the ECDF
difference) with its p-value, through SciPy.

All functions are pure over arrays and :class:`EnergyPlot` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from swell.analysis.energy import EnergyPlot, energy_plot


@dataclass(frozen=True)
class OctaveComparison:
    """Per-octave difference of ``b`` against reference ``a``, optionally with a floor."""

    octaves: np.ndarray
    time_scale_s: np.ndarray
    y_a: np.ndarray
    y_b: np.ndarray
    diff: np.ndarray  # y_b - y_a
    ci: np.ndarray  # combined 95% half-width
    floor: np.ndarray | None = None  # per octave, from the reference's halves

    @property
    def passed(self) -> np.ndarray:
        """``|diff| <= floor`` per octave (needs a floor); False where undefined."""
        if self.floor is None:
            raise ValueError("no floor: use with_floor() first")
        ok = np.isfinite(self.diff) & np.isfinite(self.floor)
        return ok & (np.abs(np.where(ok, self.diff, 0.0)) <= np.where(ok, self.floor, 0.0))

    def with_floor(self, floor: dict[int, float]) -> OctaveComparison:
        f = np.array([floor.get(int(j), np.nan) for j in self.octaves], dtype=float)
        return OctaveComparison(
            self.octaves, self.time_scale_s, self.y_a, self.y_b, self.diff, self.ci, f
        )

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for i, j in enumerate(self.octaves):
            row: dict[str, Any] = {
                "octave": int(j),
                "time_scale_s": float(self.time_scale_s[i]),
                "y_original": float(self.y_a[i]),
                "y_generated": float(self.y_b[i]),
                "diff": float(self.diff[i]),
                "ci": float(self.ci[i]),
            }
            if self.floor is not None:
                row["floor"] = float(self.floor[i])
                row["pass"] = bool(self.passed[i])
            out.append(row)
        return out


def compare_energy(a: EnergyPlot, b: EnergyPlot) -> OctaveComparison:
    """Per-octave ``y(b) - y(a)`` on the octaves both plots have."""
    if abs(a.bin_s - b.bin_s) > 1e-12 * max(a.bin_s, b.bin_s):
        raise ValueError(f"energy plots use different bins ({a.bin_s} s vs {b.bin_s} s)")
    common = np.intersect1d(a.octaves, b.octaves)
    ia = np.array([a.at(int(j)) for j in common], dtype=int)
    ib = np.array([b.at(int(j)) for j in common], dtype=int)
    ya, yb = a.y[ia], b.y[ib]
    with np.errstate(invalid="ignore"):
        diff = yb - ya
    return OctaveComparison(
        octaves=common.astype(int),
        time_scale_s=np.exp2(common.astype(float)) * a.bin_s,
        y_a=ya,
        y_b=yb,
        diff=diff,
        ci=np.sqrt(a.ci[ia] ** 2 + b.ci[ib] ** 2),
    )


def halves_floor(
    x: np.ndarray, bin_s: float, vanishing_moments: int = 3, min_coeffs: int = 4
) -> dict[int, float]:
    """Per-octave floor of series ``x``: its first half against its second half."""
    x = np.asarray(x, dtype=float)
    h = x.size // 2
    first = energy_plot(x[:h], bin_s, vanishing_moments, min_coeffs)
    second = energy_plot(x[h : 2 * h], bin_s, vanishing_moments, min_coeffs)
    cmp = compare_energy(first, second)
    floor = np.maximum(np.abs(cmp.diff), cmp.ci)
    return {int(j): float(f) for j, f in zip(cmp.octaves, floor, strict=True) if np.isfinite(f)}


@dataclass(frozen=True)
class ThroughputComparison:
    direction: str
    original_bps: float
    generated_bps: float

    @property
    def diff_pct(self) -> float:
        if self.original_bps == 0:
            return float("inf") if self.generated_bps else 0.0
        return 100.0 * (self.generated_bps - self.original_bps) / self.original_bps

    def passed(self, tolerance_pct: float = 10.0) -> bool:
        return abs(self.diff_pct) <= tolerance_pct


def mean_bps(total_bytes: float, duration_s: float) -> float:
    """Mean throughput in bit/s of ``total_bytes`` over ``duration_s``."""
    if duration_s <= 0:
        raise ValueError("duration must be positive")
    return 8.0 * float(total_bytes) / duration_s


def compare_throughput(
    original: dict[str, float], generated: dict[str, float]
) -> list[ThroughputComparison]:
    """Mean bit/s per direction (dict direction -> bit/s), directions of the original."""
    return [
        ThroughputComparison(d, float(original[d]), float(generated.get(d, 0.0)))
        for d in original
    ]


@dataclass(frozen=True)
class KSResult:
    name: str
    distance: float
    pvalue: float
    n_a: int
    n_b: int


def ks_distance(a: np.ndarray, b: np.ndarray, name: str = "") -> KSResult:
    """Two-sample KS distance between samples ``a`` and ``b`` (NaN when one is empty)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return KSResult(name, float("nan"), float("nan"), int(a.size), int(b.size))
    res = stats.ks_2samp(a, b)
    return KSResult(name, float(res.statistic), float(res.pvalue), int(a.size), int(b.size))


def ks_table(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[KSResult]:
    """KS distance for every distribution name present in both ``a`` and ``b``."""
    return [ks_distance(a[k], b[k], k) for k in sorted(set(a) & set(b))]


def ecdf_sup_distance(a: np.ndarray, b: np.ndarray) -> float:
    """``sup |F_a - F_b|`` computed directly (used to cross-check SciPy in tests)."""
    a = np.sort(np.asarray(a, dtype=float))
    b = np.sort(np.asarray(b, dtype=float))
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))
