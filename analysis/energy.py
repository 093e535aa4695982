"""Wavelet energy plots: the Abry-Veitch log-scale diagram (DESIGN 5).

A series ``x`` (bytes or packets per bin of width ``D`` seconds) is decomposed
with the orthonormal Daubechies wavelet with ``N`` vanishing moments
(PyWavelets ``db{N}``). At octave ``j`` (time scale ``2**j * D``) the detail
coefficients ``d(j, k)`` give

    mu_j = mean_k d(j, k)**2                  (n_j coefficients)
    y_j  = log2(mu_j) - g_j,   g_j = psi(n_j/2)/ln 2 - log2(n_j/2)
    95% interval: y_j +- 1.96 * sqrt(zeta(2, n_j/2)) / ln 2

``g_j`` removes the bias of the log of a mean of ``n_j`` squared Gaussians and
``zeta(2, n_j/2)/ln^2 2`` is its variance (Abry and Veitch, IEEE Trans. IT
1998). A flat plot is white noise (Poisson); a slope ``alpha`` over a range of
octaves is scaling with Hurst parameter ``H = (alpha + 1) / 2``.

Boundaries: only coefficients computed entirely from real samples are kept.
The pyramid runs ``pywt.dwt(mode="zero")`` one level at a time and slices out
the outputs whose filter support lies inside the input (for a filter of
length ``F = 2N`` these are outputs ``F/2 - 1 .. (n - 2) // 2``); the next
level starts from the equally clean approximation. This equals a "valid"
convolution followed by keeping every second output, so no padding or
wrap-around enters ``mu_j``.

Everything here is a pure function over arrays; plotting is in
:mod:`swell.analysis.plots`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pywt

DEFAULT_VANISHING_MOMENTS = 3
DEFAULT_MIN_COEFFS = 4
CI_Z = 1.96
LN2 = math.log(2.0)


@dataclass(frozen=True)
class EnergyPlot:
    """One log-scale diagram. Arrays are indexed by octave, ``octaves[i] = j``."""

    octaves: np.ndarray  # int, 1..J
    n_coeffs: np.ndarray  # int, n_j
    mu: np.ndarray  # mean squared detail coefficient
    y: np.ndarray  # bias-corrected log2 energy
    ci: np.ndarray  # 95% half-width of y
    bin_s: float  # D, seconds per sample of the input series
    vanishing_moments: int
    n_samples: int
    mean: float  # mean of the input series (per bin)

    @property
    def time_scale_s(self) -> np.ndarray:
        """Real time scale of each octave, ``2**j * D`` seconds."""
        return np.exp2(self.octaves.astype(float)) * self.bin_s

    @property
    def variance(self) -> np.ndarray:
        """Variance of ``y_j`` under the Gaussian, independent-coefficient model."""
        return variance_of_y(self.n_coeffs)

    def at(self, octave: int) -> int:
        """Index of ``octave`` in the arrays; ``KeyError`` when absent."""
        idx = np.flatnonzero(self.octaves == octave)
        if idx.size == 0:
            raise KeyError(octave)
        return int(idx[0])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (for results files)."""
        return {
            "octaves": self.octaves.tolist(),
            "n_coeffs": self.n_coeffs.tolist(),
            "mu": self.mu.tolist(),
            "y": self.y.tolist(),
            "ci": self.ci.tolist(),
            "time_scale_s": self.time_scale_s.tolist(),
            "bin_s": self.bin_s,
            "vanishing_moments": self.vanishing_moments,
            "n_samples": self.n_samples,
            "mean": self.mean,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnergyPlot:
        return cls(
            octaves=np.asarray(d["octaves"], dtype=int),
            n_coeffs=np.asarray(d["n_coeffs"], dtype=int),
            mu=np.asarray(d["mu"], dtype=float),
            y=np.asarray(d["y"], dtype=float),
            ci=np.asarray(d["ci"], dtype=float),
            bin_s=float(d["bin_s"]),
            vanishing_moments=int(d["vanishing_moments"]),
            n_samples=int(d["n_samples"]),
            mean=float(d["mean"]),
        )


@dataclass(frozen=True)
class HurstEstimate:
    """Weighted-regression fit ``y_j = slope * j + intercept`` over ``[j1, j2]``."""

    hurst: float
    slope: float
    intercept: float
    slope_stderr: float
    j1: int
    j2: int


def bias_g(n_coeffs: np.ndarray) -> np.ndarray:
    """``g_j = psi(n_j/2)/ln 2 - log2(n_j/2)``: the mean of log2 of a chi2(n)/n."""
    from scipy.special import digamma  # here: SciPy's import is most of `swell run`'s start

    half = np.asarray(n_coeffs, dtype=float) / 2.0
    return digamma(half) / LN2 - np.log2(half)


def variance_of_y(n_coeffs: np.ndarray) -> np.ndarray:
    """``Var y_j = zeta(2, n_j/2) / ln^2 2``."""
    from scipy.special import zeta

    half = np.asarray(n_coeffs, dtype=float) / 2.0
    return zeta(2.0, half) / LN2**2


def wavelet_name(vanishing_moments: int) -> str:
    if not 1 <= vanishing_moments <= 38:
        raise ValueError(f"vanishing moments must be 1..38, got {vanishing_moments}")
    return f"db{vanishing_moments}"


def valid_slice(n_in: int, filter_len: int) -> slice:
    """Outputs of ``pywt.dwt(mode='zero')`` that touch no padding."""
    return slice(filter_len // 2 - 1, (n_in - 2) // 2 + 1)


def detail_coefficients(
    x: np.ndarray, vanishing_moments: int = DEFAULT_VANISHING_MOMENTS, min_coeffs: int = 1
) -> list[np.ndarray]:
    """Boundary-free detail coefficients ``[d_1, d_2, ...]`` of ``x``.

    Stops when a level would have fewer than ``min_coeffs`` coefficients.
    """
    wavelet = pywt.Wavelet(wavelet_name(vanishing_moments))
    flen = wavelet.dec_len
    approx = np.asarray(x, dtype=float)
    details: list[np.ndarray] = []
    while approx.size >= flen:
        cA, cD = pywt.dwt(approx, wavelet, mode="zero")
        keep = valid_slice(approx.size, flen)
        d = cD[keep]
        if d.size < max(1, min_coeffs):
            break
        details.append(d)
        approx = cA[keep]
    return details


def energy_plot(
    x: np.ndarray,
    bin_s: float,
    vanishing_moments: int = DEFAULT_VANISHING_MOMENTS,
    min_coeffs: int = DEFAULT_MIN_COEFFS,
) -> EnergyPlot:
    """The log-scale diagram of series ``x`` sampled every ``bin_s`` seconds.

    Octaves with fewer than ``min_coeffs`` coefficients are left out. Octaves
    whose coefficients are all zero (an empty stretch) have ``mu = 0`` and
    ``y = -inf``; plotting and comparison skip non-finite values.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError("energy_plot needs a 1-D series")
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    details = detail_coefficients(x, vanishing_moments, min_coeffs)
    n = np.array([d.size for d in details], dtype=int)
    mu = np.array([float(np.mean(d * d)) for d in details], dtype=float)
    with np.errstate(divide="ignore"):
        y = np.log2(mu) - bias_g(n) if n.size else np.zeros(0)
    ci = CI_Z * np.sqrt(variance_of_y(n)) if n.size else np.zeros(0)
    return EnergyPlot(
        octaves=np.arange(1, n.size + 1, dtype=int),
        n_coeffs=n,
        mu=mu,
        y=np.asarray(y, dtype=float),
        ci=np.asarray(ci, dtype=float),
        bin_s=float(bin_s),
        vanishing_moments=int(vanishing_moments),
        n_samples=int(x.size),
        mean=float(x.mean()) if x.size else 0.0,
    )


def hurst_estimate(plot: EnergyPlot, j1: int, j2: int | None = None) -> HurstEstimate:
    """Hurst parameter by weighted regression of ``y_j`` on ``j`` for ``j1 <= j <= j2``.

    Weights are ``1 / Var y_j`` (Abry-Veitch); ``H = (slope + 1) / 2``.
    ``j2=None`` takes the largest octave available.
    """
    last = int(plot.octaves.max()) if plot.octaves.size else 0
    j2 = last if j2 is None else min(j2, last)
    sel = (plot.octaves >= j1) & (plot.octaves <= j2) & np.isfinite(plot.y)
    if int(sel.sum()) < 2:
        raise ValueError(f"need at least 2 octaves in [{j1}, {j2}] for a Hurst estimate")
    j = plot.octaves[sel].astype(float)
    yv = plot.y[sel]
    w = 1.0 / variance_of_y(plot.n_coeffs[sel])
    s0, s1, s2 = w.sum(), (w * j).sum(), (w * j * j).sum()
    det = s0 * s2 - s1 * s1
    slope = float((s0 * (w * j * yv).sum() - s1 * (w * yv).sum()) / det)
    intercept = float((s2 * (w * yv).sum() - s1 * (w * j * yv).sum()) / det)
    stderr = float(math.sqrt(s0 / det))
    return HurstEstimate(
        hurst=(slope + 1.0) / 2.0,
        slope=slope,
        intercept=intercept,
        slope_stderr=stderr,
        j1=int(j[0]),
        j2=int(j[-1]),
    )


def octave_for_time_scale(time_scale_s: float, bin_s: float) -> float:
    """Octave (possibly fractional) whose time scale ``2**j * D`` equals ``time_scale_s``."""
    return math.log2(time_scale_s / bin_s)
