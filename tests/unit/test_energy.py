"""The energy plot against theory and against an independent implementation.

* white noise (Poisson counts) is flat at log2(variance);
* exact fractional Gaussian noise (Davies-Harte) has slope 2H - 1;
* a periodic on/off signal peaks at the octave whose band holds its period;
* an independent pyramid (Daubechies filters from spectral factorisation,
  numpy convolution, digamma/zeta from their recurrences) gives the same
  numbers as :mod:`swell.analysis.energy`;
* the 95% intervals cover the true value about 95% of the time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import pywt

from swell.analysis.energy import (
    EnergyPlot,
    energy_plot,
    hurst_estimate,
    octave_for_time_scale,
    valid_slice,
)

# ------------------------------------------------------------ independent code


def daubechies_lowpass(n_vm: int) -> np.ndarray:
    """Minimum-phase Daubechies low-pass filter with ``n_vm`` vanishing moments.

    |H(w)|^2 = 2 cos^{2N}(w/2) P(sin^2(w/2)), P(y) = sum_k C(N-1+k, k) y^k; the roots
    of P in y map to z pairs (r, 1/r) through y = (2 - z - 1/z)/4; keep |r| < 1.
    """
    p_coeffs = [math.comb(n_vm - 1 + k, k) for k in range(n_vm)]
    y_roots = np.roots(p_coeffs[::-1]) if n_vm > 1 else np.array([])
    z_roots = []
    for y in y_roots:
        r = np.roots([1.0, -(2.0 - 4.0 * y), 1.0])
        z_roots.append(r[np.argmin(np.abs(r))])
    q = np.real(np.poly(z_roots)) if z_roots else np.array([1.0])
    binom = np.array([math.comb(n_vm, k) for k in range(n_vm + 1)], dtype=float)
    h = np.convolve(q, binom)
    return h * math.sqrt(2.0) / h.sum()


def digamma_half_integer(x: float) -> float:
    """psi(x) for x a positive integer or half-integer, by recurrence."""
    if abs(x - round(x)) < 1e-12:
        k = int(round(x))
        return -0.5772156649015329 + sum(1.0 / i for i in range(1, k))
    k = int(round(x - 0.5))
    return -0.5772156649015329 - 2.0 * math.log(2.0) + sum(1.0 / (i + 0.5) for i in range(k))


def trigamma_half_integer(x: float) -> float:
    """zeta(2, x) for x a positive integer or half-integer, by recurrence."""
    if abs(x - round(x)) < 1e-12:
        k = int(round(x))
        return math.pi**2 / 6.0 - sum(1.0 / i**2 for i in range(1, k))
    k = int(round(x - 0.5))
    return math.pi**2 / 2.0 - sum(1.0 / (i + 0.5) ** 2 for i in range(k))


def reference_energy(x: np.ndarray, n_vm: int, min_coeffs: int) -> dict[str, np.ndarray]:
    h = daubechies_lowpass(n_vm)
    dec_lo = pywt.Wavelet(f"db{n_vm}").dec_lo
    if not np.allclose(h, dec_lo, atol=1e-10):
        h = h[::-1]  # orientation convention only; the filter itself is checked below
    flen = h.size
    g = np.array([(-1) ** (k + 1) * h[flen - 1 - k] for k in range(flen)])
    a = np.asarray(x, dtype=float)
    ns, mus, ys, cis = [], [], [], []
    while a.size >= flen:
        d = np.convolve(a, g, mode="valid")[::2]
        if d.size < min_coeffs:
            break
        a = np.convolve(a, h, mode="valid")[::2]
        n = d.size
        mu = float(np.mean(d**2))
        gj = digamma_half_integer(n / 2) / math.log(2) - math.log2(n / 2)
        ns.append(n)
        mus.append(mu)
        ys.append(math.log2(mu) - gj)
        cis.append(1.96 * math.sqrt(trigamma_half_integer(n / 2)) / math.log(2))
    return {"n": np.array(ns), "mu": np.array(mus), "y": np.array(ys), "ci": np.array(cis)}


def fgn_davies_harte(n: int, hurst: float, rng: np.random.Generator) -> np.ndarray:
    """Exact fractional Gaussian noise (unit variance) by circulant embedding."""
    k = np.arange(n + 1, dtype=float)
    two_h = 2 * hurst
    gamma = 0.5 * (np.abs(k + 1) ** two_h - 2 * k**two_h + np.abs(k - 1) ** two_h)
    row = np.concatenate([gamma, gamma[-2:0:-1]])  # length 2n
    lam = np.fft.fft(row).real
    assert lam.min() > -1e-9, "circulant embedding not non-negative definite"
    m = row.size
    w = np.sqrt(np.maximum(lam, 0.0) / m) * (rng.standard_normal(m) + 1j * rng.standard_normal(m))
    return np.fft.fft(w).real[:n]


# ------------------------------------------------------------ the tests


@pytest.mark.parametrize("n_vm", [1, 2, 3, 4, 6])
def test_filters_match_spectral_factorisation(n_vm: int) -> None:
    h = daubechies_lowpass(n_vm)
    dec_lo = np.asarray(pywt.Wavelet(f"db{n_vm}").dec_lo)
    assert np.allclose(h, dec_lo, atol=1e-9) or np.allclose(h[::-1], dec_lo, atol=1e-9)


@pytest.mark.parametrize("n_vm", [1, 3, 5])
def test_matches_independent_pyramid(n_vm: int) -> None:
    rng = np.random.default_rng(7)
    x = rng.poisson(30.0, 5000).astype(float) + 200 * np.sin(np.arange(5000) / 50.0)
    ref = reference_energy(x, n_vm, min_coeffs=4)
    ep = energy_plot(x, 0.001, vanishing_moments=n_vm, min_coeffs=4)
    assert np.array_equal(ep.n_coeffs, ref["n"])
    assert np.allclose(ep.mu, ref["mu"], rtol=1e-9)
    assert np.allclose(ep.y, ref["y"], atol=1e-9)
    assert np.allclose(ep.ci, ref["ci"], atol=1e-9)
    assert np.array_equal(ep.octaves, np.arange(1, ref["n"].size + 1))


def test_valid_slice_excludes_every_padded_output() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(301)
    for name in ("db2", "db3", "db5"):
        w = pywt.Wavelet(name)
        s = valid_slice(x.size, w.dec_len)
        _, d_zero = pywt.dwt(x, w, mode="zero")
        _, d_sym = pywt.dwt(x, w, mode="symmetric")
        assert np.allclose(d_zero[s], d_sym[s])  # inside: extension does not matter
        assert not np.isclose(d_zero[s.start - 1], d_sym[s.start - 1])  # just outside: it does
        assert not np.isclose(d_zero[s.stop], d_sym[s.stop])


def test_poisson_white_noise_is_flat_at_its_variance() -> None:
    rng = np.random.default_rng(11)
    lam = 40.0
    ep = energy_plot(rng.poisson(lam, 2**17).astype(float), 0.001)
    fit = hurst_estimate(ep, 1, None)
    assert abs(fit.slope) < 0.02, fit
    assert abs(fit.hurst - 0.5) < 0.01
    good = ep.n_coeffs >= 64
    assert np.all(np.abs(ep.y[good] - math.log2(lam)) <= ep.ci[good] + 0.05)


@pytest.mark.parametrize("hurst", [0.6, 0.75, 0.9])
def test_fgn_slope_is_2h_minus_1(hurst: float) -> None:
    rng = np.random.default_rng(int(hurst * 100))
    x = fgn_davies_harte(2**17, hurst, rng)
    ep = energy_plot(x, 0.001, vanishing_moments=3)
    fit = hurst_estimate(ep, 3, 13)
    assert abs(fit.slope - (2 * hurst - 1)) < 0.05, (hurst, fit)
    assert abs(fit.hurst - hurst) < 0.025
    assert fit.slope_stderr < 0.03


def test_fgn_generator_has_the_right_covariance() -> None:
    rng = np.random.default_rng(5)
    x = fgn_davies_harte(2**16, 0.8, rng)
    assert abs(x.var() - 1.0) < 0.1
    lag1 = np.corrcoef(x[:-1], x[1:])[0, 1]
    assert abs(lag1 - (2 ** (2 * 0.8 - 1) - 1)) < 0.05


@pytest.mark.parametrize(("period", "octave"), [(24, 4), (64, 5), (96, 6), (200, 7)])
def test_periodic_on_off_peaks_at_its_period(period: int, octave: int) -> None:
    t = np.arange(2**15)
    rng = np.random.default_rng(period)
    x = 1000.0 * ((t % period) < period // 2) + rng.poisson(5.0, t.size)
    ep = energy_plot(x, 0.001)
    peak = int(ep.octaves[np.argmax(ep.y)])
    # The band of octave j holds periods in (2^j, 2^(j+1)] bins.
    assert peak == octave == math.ceil(math.log2(period)) - 1


def test_confidence_intervals_cover_95_percent() -> None:
    rng = np.random.default_rng(2024)
    sigma2 = 9.0
    hits = []
    for _ in range(400):
        ep = energy_plot(rng.normal(0.0, 3.0, 2**12), 0.001, min_coeffs=60)
        hits.append(np.abs(ep.y - math.log2(sigma2)) <= ep.ci)
    h = np.array(hits)
    assert h.shape[1] == 6
    per_octave = h.mean(axis=0)
    assert np.all((per_octave > 0.90) & (per_octave < 0.99)), per_octave
    assert 0.93 < h.mean() < 0.97, h.mean()


def test_time_scale_axis_and_round_trip() -> None:
    ep = energy_plot(np.random.default_rng(1).poisson(5, 4096).astype(float), 0.0005)
    assert np.allclose(ep.time_scale_s, 2.0 ** ep.octaves * 0.0005)
    assert octave_for_time_scale(0.004, 0.0005) == pytest.approx(3.0)
    back = EnergyPlot.from_dict(ep.to_dict())
    assert np.array_equal(back.y, ep.y) and back.bin_s == ep.bin_s


def test_constant_stretch_gives_minus_inf_not_error() -> None:
    ep = energy_plot(np.zeros(1024), 0.001)
    assert np.all(np.isneginf(ep.y))
    with pytest.raises(ValueError):
        hurst_estimate(ep, 1, 5)
    with pytest.raises(ValueError):
        energy_plot(np.ones((2, 2)), 0.001)
