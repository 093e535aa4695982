"""Session arrivals as a discrete-time MMPP, fitted by the multiscale procedure
of Salvador, Valadas and Pacheco (Telecommunication Systems 23, 2003), as the
RPS paper uses it (seed 003): the fit, the statistics it is judged by (the
inequality coefficient, the count distribution's KS distance) and the
yardsticks for them (what an exactly right model reaches on logs of the data's
length, and the re-fit of arrivals drawn from the fitted model).

What the fitted model is (a superposition of L two-state dMMPPs, one per time
scale, and one M-state dMMPP for the marginal, joined by Kronecker product and
sum), how it is drawn from and how it is stored are in
:mod:`swell.extract.mmpp_model`; its names (:class:`MMPPModel`,
:class:`Scale`, :func:`simulate`, :func:`save_mmpp_model`,
:func:`load_mmpp_model`, ``KIND``, ...) are importable from here too.

The four steps, as implemented here (:func:`fit_counts`):

1. Autocovariance. The empirical autocovariance ``C(k)`` of the counts (within
   observed segments only, about the mean over all intervals), for lags 1..K,
   is approximated by ``sum_l psi_l theta_l^k`` with ``psi_l > 0``,
   ``0 < theta_l < 1`` and ``sum psi_l <= C(0) - mean`` (the modulation cannot
   vary more than the counts do beyond Poisson): for given decays the weights
   are a constrained non-negative least-squares solution (variable
   projection), and the decays (as log time constants, 0.1 to 20 K
   intervals) are optimised by Nelder-Mead from several starts spread over
   the lag range. L grows from 1 while the fit's inequality coefficient
   improves by at least ``ic_gain`` (0.5 point), at most ``max_scales``. K,
   unless given: the lags up to where the autocorrelation stays inside the
   white-noise band ``1.96 / sqrt(n)`` for 10 lags in a row, at least 10 and
   at most n/4 (and the longest segment): the lags that carry information.
2. One 2-state dMMPP per scale: rates 0 and ``delta_l``, probability
   ``pi_l`` of the high state, switching so that ``P``'s second eigenvalue is
   ``theta_l`` (``p12 = pi_l (1 - theta_l)``, ``p21 = (1 - pi_l)(1 - theta_l)``)
   and ``pi_l (1 - pi_l) delta_l^2 = psi_l``: its autocovariance is exactly
   ``psi_l theta_l^k``. The split ``pi_l`` is left to the marginal.
3. The M-state dMMPP: i.i.d. states (every row of its ``P`` is its
   stationary law ``q``), so it adds nothing to the autocovariance at lags
   >= 1 and the superposition's autocovariance is exactly step 1's sum. Its
   rates ``r_m >= 0`` and ``q`` maximise the likelihood of the count
   histogram under the whole superposition (a Poisson mixture over all
   states), by EM; the ``pi_l`` are chosen on a grid by the same likelihood,
   M (1..``max_marginal``) by BIC. (Salvador et al. match the empirical
   probability function by a deconvolution; maximum likelihood on the
   histogram is this implementation's version of that step.)
4. Kronecker product and sum give the ``M 2^L``-state dMMPP.

Reported (:attr:`MMPPModel.report`): the inequality coefficient of the
autocovariance ``IC = sqrt(sum (x_k - y_k)^2 / sum x_k^2)`` (x the data's,
y the model's analytic autocovariance; the RPS paper reached 2.35 %, without
saying which lags) over lags 0..K (``ic``: the whole function, the variance
included) and over lags 1..K (``ic_lags_1``: the correlation only); the IC
an exactly right model gets on simulated logs of the data's length
(``ic_floor``: the model's own autocovariance against theirs, the estimate's
noise); the IC this procedure reaches on such logs when it fits them again
(``ic_selffit``, median, and ``ic_selffit_range``, 10th-90th percentile: the
yardstick for the data's ``ic``, since the fit absorbs part of a log's noise);
the variance of a straight line through each segment (``trend_var``, against
the variance beyond Poisson: a trend means the log is not stationary, which
the procedure assumes); and the Kolmogorov-Smirnov
distance between the count distributions (the data's histogram against the
model's analytic Poisson mixture), plus means and variances.
The re-fit check (:func:`refit_check`, :func:`refit_compare`): arrivals
generated from the model (or captured at a bottleneck), counted per interval
again and fitted with the original lags; the re-fit's IC against the original
data must stay within 2 points of the original IC. :func:`refit_length` picks
a generated path long enough that its own noise is under 1 IC point.

Libraries: numpy and scipy only (scipy.optimize nnls and Nelder-Mead,
scipy.stats Poisson). No Python implementation of this procedure was found;
PyPI ``line-solver`` has KPC-Toolbox's MMPP2 fits from counting-process
indices of dispersion, a different (continuous-time, two-state) fit, so it
is not used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special

from swell.errors import SwellError

# the model, its draws and its directory: re-exported for this module's importers
from swell.extract.mmpp_model import (
    FORMAT,
    FORMAT_VERSION,
    KIND,
    MMPPModel,
    Scale,
    Simulation,
    _two_state_path,
    load_mmpp_model,
    model_meta,
    save_mmpp_model,
    simulate,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KIND",
    "MAX_HIST_BINS",
    "PI_GRID",
    "REFIT_MAX_INTERVALS",
    "REFIT_NOISE",
    "MMPPModel",
    "Scale",
    "Simulation",
    "_two_state_path",
    "default_max_lag",
    "empirical_autocov",
    "fit_counts",
    "fit_exponentials",
    "fit_marginal",
    "ic_floor",
    "ic_selffit",
    "inequality_coefficient",
    "ks_counts",
    "load_mmpp_model",
    "model_meta",
    "refit_check",
    "refit_compare",
    "refit_length",
    "save_mmpp_model",
    "simulate",
    "trend_variance",
]

PI_GRID = (0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8)
MAX_HIST_BINS = 500


# -- step 1: autocovariance ---------------------------------------------------------------------


def empirical_autocov(segments: list[np.ndarray], max_lag: int) -> np.ndarray:
    """Autocovariance for lags 0..max_lag: sums of products within segments,
    about the overall mean, over the number of such pairs."""
    x = [np.asarray(s, dtype=np.float64) for s in segments]
    mu = float(np.concatenate(x).mean())
    num = np.zeros(max_lag + 1)
    pairs = np.zeros(max_lag + 1)
    for s in x:
        d = s - mu
        n = len(d)
        m = min(max_lag, n - 1)
        f = np.fft.rfft(d, 2 * n)
        ac = np.fft.irfft(f * np.conj(f), 2 * n)[: m + 1]
        num[: m + 1] += ac
        pairs[: m + 1] += n - np.arange(m + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, num / np.maximum(pairs, 1), np.nan)


def default_max_lag(acov: np.ndarray, n: int, longest: int) -> int:
    """Lags that carry information: up to the first run of 10 lags inside the
    white-noise band ``1.96 / sqrt(n)`` of the autocorrelation (at least 10 lags,
    at most n/4 and the longest segment)."""
    cap = max(2, min(n // 4, longest - 1, len(acov) - 1))
    rho = acov[1 : cap + 1] / acov[0] if acov[0] > 0 else np.zeros(cap)
    inside = (rho <= 1.96 / math.sqrt(n)).astype(np.int64)
    run = np.convolve(inside, np.ones(10, dtype=np.int64), mode="valid")
    first = np.flatnonzero(run == 10)
    k = int(first[0]) if len(first) else cap
    return int(min(cap, max(10, k)))


def inequality_coefficient(x: np.ndarray, y: np.ndarray) -> float:
    """IC = sqrt(sum (x - y)^2 / sum x^2) (x: the data)."""
    den = float(np.sum(x * x))
    return math.sqrt(float(np.sum((x - y) ** 2)) / den) if den > 0 else math.nan


def _vp(
    theta: np.ndarray, k: np.ndarray, y: np.ndarray, vmax: float = math.inf
) -> tuple[np.ndarray, float]:
    """Weights for given decays: non-negative least squares over lags 1..K, plus lag 0
    when ``sum psi`` exceeds ``vmax`` (the counts' variance beyond Poisson): the
    model's variance is the mean + ``sum psi`` + the marginal's variance, so weights
    beyond ``vmax`` cost at lag 0 what they gain at the other lags (one-sided: below
    ``vmax`` the marginal makes up the difference). The residual is the IC's over
    lags 0..K."""
    B = theta[None, :] ** k[:, None]
    psi, res = optimize.nnls(B, y)
    if psi.sum() > vmax:  # the penalty is active: the lag-0 row as one more equation
        psi, _ = optimize.nnls(np.vstack([B, np.ones(len(theta))]), np.r_[y, vmax])
        res = float(np.linalg.norm(np.r_[B @ psi - y, psi.sum() - vmax]))
    return psi, float(res)


def fit_exponentials(
    y: np.ndarray, max_scales: int = 5, ic_gain: float = 0.005, vmax: float = math.inf
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """``y[k-1] ~ sum psi_l theta_l^k`` for k = 1..len(y), ``sum psi <= vmax``;
    returns (psi, theta, IC per number of scales tried)."""
    K = len(y)
    k = np.arange(1, K + 1, dtype=np.float64)
    if not np.any(y > 0):
        return np.zeros(0), np.zeros(0), []

    tau_lo, tau_hi = 0.1, 20.0 * K  # in intervals: a slower scale is a constant here

    def theta_of(u: np.ndarray) -> np.ndarray:
        return np.exp(-1.0 / np.exp(np.clip(u, math.log(tau_lo), math.log(tau_hi))))

    def obj(u: np.ndarray) -> float:
        return _vp(theta_of(u), k, y, vmax)[1]

    best: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))
    ics: list[float] = []
    prev_ic = 1.0
    prev_tau: list[float] = []
    for L in range(1, max_scales + 1):
        starts = [list(np.geomspace(0.5, 2.0 * K, L))]
        for t in np.geomspace(0.3, 3.0 * K, 6):
            starts.append(sorted(prev_tau + [float(t)]))
        cand = None
        for taus in starts:
            r = optimize.minimize(
                obj,
                np.log(taus),
                method="Nelder-Mead",
                options={"xatol": 1e-4, "fatol": 1e-12, "maxiter": 400 * L},
            )
            if cand is None or r.fun < cand.fun:
                cand = r
        assert cand is not None
        theta = theta_of(cand.x)
        psi, _ = _vp(theta, k, y, vmax)
        keep = psi > 1e-9 * max(float(np.abs(y).max()), 1e-300)  # drop vanished scales
        theta, psi = theta[keep], psi[keep]
        ic = inequality_coefficient(y, (psi[None, :] * theta[None, :] ** k[:, None]).sum(1))
        ics.append(ic)
        if L > 1 and (prev_ic - ic < ic_gain or len(theta) < L):
            break
        best, prev_ic = (psi, theta), ic
        prev_tau = list(-1.0 / np.log(theta))
    order = np.argsort(best[1])[::-1]
    return best[0][order], best[1][order], ics


# -- step 2-3: marginal by EM -------------------------------------------------------------------


def _histogram(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v, h = np.unique(counts, return_counts=True)
    if len(v) <= MAX_HIST_BINS:
        return v.astype(np.float64), h.astype(np.float64)
    edges = np.unique(np.quantile(counts, np.linspace(0, 1, MAX_HIST_BINS + 1)))
    idx = np.clip(np.searchsorted(edges, counts, side="right") - 1, 0, len(edges) - 2)
    hb = np.bincount(idx, minlength=len(edges) - 1).astype(np.float64)
    vb = np.bincount(idx, weights=counts, minlength=len(edges) - 1) / np.maximum(hb, 1)
    keep = hb > 0
    return vb[keep], hb[keep]


def _scale_atoms(psi: np.ndarray, pis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    delta = np.sqrt(psi / (pis * (1 - pis)))
    s, p = np.zeros(1), np.ones(1)
    for d, q in zip(delta, pis, strict=True):
        s = (s[:, None] + np.array([0.0, d])[None, :]).ravel()
        p = (p[:, None] * np.array([1 - q, q])[None, :]).ravel()
    return s, p, delta


def _em(
    v: np.ndarray,
    h: np.ndarray,
    s: np.ndarray,
    p: np.ndarray,
    M: int,
    iters: int,
    r0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """EM for the marginal's rates r (>= 0) and probabilities q, the scale atoms
    (s, p) fixed. Returns (r, q, log-likelihood)."""
    N = h.sum()
    lg = special.gammaln(v + 1)[:, None, None]
    if r0 is None:
        base = np.maximum(np.repeat(v, h.astype(np.int64)) - float(s @ p), 0.0)
        r = np.maximum(np.quantile(base, (np.arange(M) + 0.5) / M), 1e-3)
    else:
        r = r0.copy()
    q = np.full(M, 1.0 / M)
    ll = -math.inf
    for _ in range(iters):
        lam = s[None, :, None] + r[None, None, :]
        logw = (
            np.log(p)[None, :, None]
            + np.log(q)[None, None, :]
            + v[:, None, None] * np.log(np.maximum(lam, 1e-300))
            - lam
            - lg
        )
        mx = logw.max(axis=(1, 2), keepdims=True)
        tot = np.exp(logw - mx).sum(axis=(1, 2), keepdims=True)
        new_ll = float((h * (mx + np.log(tot)).ravel()).sum())
        w = np.exp(logw - mx) / tot * h[:, None, None]
        q = np.maximum(w.sum(axis=(0, 1)) / N, 1e-12)
        A = w.sum(axis=0)  # (j, m)
        B = (w * v[:, None, None]).sum(axis=0)
        for _ in range(4):  # Newton on sum_j B/(s+r) - A = 0, r >= 0 (decreasing, convex)
            den = s[:, None] + r[None, :]
            g = (B / np.maximum(den, 1e-12)).sum(0) - A.sum(0)
            dg = -(B / np.maximum(den, 1e-12) ** 2).sum(0)
            r = np.maximum(r - g / np.minimum(dg, -1e-12), 0.0)
        if new_ll - ll < 1e-7 * abs(new_ll):
            ll = new_ll
            break
        ll = new_ll
    return r, q, ll


def fit_marginal(
    counts: np.ndarray, psi: np.ndarray, max_marginal: int = 12
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """Choose the scales' ``pi`` and the M-state marginal. Returns (pis, r, q, info)."""
    v, h = _histogram(counts)
    N = float(h.sum())
    L = len(psi)
    pis = np.full(L, 0.5)
    mu = float(counts.mean())
    m_probe = min(3, max_marginal)

    def score(p_try: np.ndarray) -> float:
        s, p, delta = _scale_atoms(psi, p_try)
        if float(p_try @ delta) > mu:  # the scales alone would exceed the mean
            return -math.inf
        return _em(v, h, s, p, m_probe, 60)[2]

    for _ in range(2 if L else 0):
        for i in range(L):
            scores = []
            for g in PI_GRID:
                t = pis.copy()
                t[i] = g
                scores.append(score(t))
            if np.isfinite(max(scores)):
                pis[i] = PI_GRID[int(np.argmax(scores))]
    s, p, delta = _scale_atoms(psi, pis)
    best = None
    for M in range(1, max_marginal + 1):
        r, q, ll = _em(v, h, s, p, M, 400)
        bic = -2 * ll + (2 * M - 1 + L) * math.log(N)
        if best is None or bic < best[3]:
            best = (r, q, ll, bic, M)
        elif M >= best[4] + 2:  # two steps without gain: stop
            break
    assert best is not None
    r, q, ll, bic, M = best
    keep = q > 1e-9
    r, q = r[keep], q[keep]
    return (
        pis,
        r,
        q,
        {"loglik": ll, "bic": bic, "M": int(keep.sum()), "binned": len(v) < len(np.unique(counts))},
    )


# -- the whole procedure ------------------------------------------------------------------------


def ks_counts(counts: np.ndarray, model: MMPPModel) -> float:
    """KS distance between the data's count distribution and the model's."""
    v, h = np.unique(counts, return_counts=True)
    fe = np.cumsum(h) / h.sum()
    fe_before = np.r_[0.0, fe[:-1]]
    fm = model.count_cdf(v)
    fm_before = model.count_cdf(v - 1)
    return float(max(np.max(np.abs(fe - fm)), np.max(np.abs(fe_before - fm_before))))


def fit_counts(
    segments: list[np.ndarray],
    interval_s: float,
    *,
    max_lag: int | None = None,
    max_scales: int = 5,
    max_marginal: int = 12,
    floor_reps: int = 10,
    where: str = "counts",
) -> MMPPModel:
    """The multiscale fit of counts per interval (in observed segments)."""
    segs = [np.asarray(s, dtype=np.int64) for s in segments if len(s)]
    counts = np.concatenate(segs) if segs else np.zeros(0, np.int64)
    n = len(counts)
    if n < 24:
        raise SwellError(where, f"{n} intervals; the MMPP fit needs at least 24")
    if counts.sum() == 0:
        raise SwellError(where, "no arrivals in any interval")
    longest = max(len(s) for s in segs)
    full = empirical_autocov(segs, max(2, min(n // 2, longest - 1)))
    K = max_lag or default_max_lag(full, n, longest)
    K = min(K, len(full) - 1)
    acov = full[: K + 1]
    y = acov[1:]
    excess = float(acov[0] - counts.mean())
    psi, theta, ics = fit_exponentials(y, max_scales, vmax=max(excess, 0.0))
    pis, r, q, minfo = fit_marginal(counts, psi, max_marginal)
    _, _, delta = _scale_atoms(psi, pis)
    scales = [
        Scale(float(t), float(p), float(pi), float(d))
        for t, p, pi, d in zip(theta, psi, pis, delta, strict=True)
    ]
    model = MMPPModel(interval_s, scales, r, q)
    m_acov = model.autocov(K)
    ic = inequality_coefficient(acov, m_acov)
    notes = []
    if excess <= 0:
        notes.append(
            f"the counts are not over-dispersed (variance {acov[0]:.4g} <= mean "
            f"{counts.mean():.4g}): an MMPP's variance is at least its mean"
        )
    if not len(scales):
        notes.append("no positive autocovariance at lags >= 1: no time scale (i.i.d. counts)")
    model.report = {
        "intervals": n,
        "segments": len(segs),
        "interval_s": interval_s,
        "max_lag": K,
        "ic": ic,
        "ic_lags_1": inequality_coefficient(y, m_acov[1:]),
        "ic_by_scales": ics,
        "ks": ks_counts(counts, model),
        "mean_data": float(counts.mean()),
        "mean_model": model.mean(),
        "var_data": float(acov[0]),
        "var_model": float(m_acov[0]),
        "scales": len(scales),
        "marginal_states": len(r),
        "states": model.n_states,
        "marginal_fit": minfo,
        "notes": notes,
    }
    model.data = {
        "counts": counts,
        "segment_lengths": np.array([len(s) for s in segs]),
        "acov_data": acov,
        "acov_model": m_acov,
    }
    trend = trend_variance(segs)
    model.report["trend_var"] = trend
    if excess > 0 and trend >= 0.5 * excess:
        notes.append(
            f"a straight line through each segment carries {trend:.4g} of the counts' "
            f"{excess:.4g} variance beyond Poisson: the log is not stationary, and the "
            "slowest time scale stands for its trend"
        )
    if floor_reps:
        lengths = [len(s) for s in segs]
        model.report["ic_floor"] = ic_floor(model, lengths, floor_reps)
        sf = ic_selffit(model, lengths, floor_reps)
        model.report["ic_selffit"] = sf[1]
        model.report["ic_selffit_range"] = [sf[0], sf[2]]
    return model


def trend_variance(segments: list[np.ndarray]) -> float:
    """Variance (about the overall mean, over all intervals) of a least-squares
    straight line through each segment: how much of the counts' variance is a
    trend over the log rather than fluctuation about a level."""
    fitted = []
    ys = [np.asarray(s, dtype=np.float64) for s in segments]
    for y in ys:
        x = np.arange(len(y), dtype=np.float64)
        fitted.append(
            np.polyval(np.polyfit(x, y, 1), x) if len(y) > 2 else np.full(len(y), y.mean())
        )
    f = np.concatenate(fitted)
    return float(np.mean((f - np.concatenate(ys).mean()) ** 2))


def ic_selffit(
    model: MMPPModel, lengths: list[int], reps: int = 10, seed: int = 11
) -> tuple[float, float, float]:
    """The IC this procedure reaches when the model is exactly right: ``reps`` logs
    drawn from ``model`` with the data's segment lengths, each fitted again (same
    lags) and judged against its own autocovariance, as the data's fit is.
    Returns the 10th percentile, the median and the 90th percentile. The data's IC
    inside this range means the fit is as good as a log of this length allows;
    the range shrinks as the log grows (docs/packet-mmpp.md)."""
    K = int(model.report["max_lag"])
    out = []
    for i in range(reps):
        segs = [
            simulate(model, n, seed + 1000 * i + j, times=False).counts
            for j, n in enumerate(lengths)
        ]
        if sum(int(c.sum()) for c in segs) == 0:
            continue
        f = fit_counts(segs, model.interval_s, max_lag=K, floor_reps=0, where="self-fit")
        out.append(float(f.report["ic"]))
    if not out:
        return (math.nan, math.nan, math.nan)
    p10, p50, p90 = np.percentile(out, [10, 50, 90])
    return (float(p10), float(p50), float(p90))


def ic_floor(model: MMPPModel, lengths: list[int], reps: int = 10, seed: int = 7) -> float:
    """The IC an exactly right model gets: the median, over ``reps`` logs drawn from
    ``model`` with the data's segment lengths, of the IC between their empirical
    autocovariance and the model's. An IC near or under it is as good as the
    data's length allows."""
    K = int(model.report["max_lag"])
    y = model.autocov(K)
    out = []
    for i in range(reps):
        segs = [
            simulate(model, n, seed + 1000 * i + j, times=False).counts
            for j, n in enumerate(lengths)
        ]
        out.append(inequality_coefficient(empirical_autocov(segs, K), y))
    return float(np.median(out))


# -- the re-fit check ----------------------------------------------------------------------------


REFIT_MAX_INTERVALS = 4_000_000
REFIT_NOISE = 0.01


def refit_length(model: MMPPModel, seed: int = 99) -> tuple[int, float]:
    """Intervals generated for the re-fit check, and the path noise expected at that
    length. At least 20 times the data's intervals and 20,000; then long enough that
    one path's own autocovariance lies within ``REFIT_NOISE`` (IC, 1 point) of the
    model's, so the check tests the fit, not one noisy sample: the noise is the
    largest of five paths of the first length (a slow scale's noise is heavy-tailed:
    the 90th percentile is about 3.5 times the median) and falls as ``1/sqrt(N)`` (at most
    ``REFIT_MAX_INTERVALS``). WC98's model (4 h scale, K = 518 lags): 16 % at
    57,600 intervals, where its re-fit landed 12.9 points from the original."""
    n0 = max(20 * int(model.report["intervals"]), 20000)
    K = int(model.report["max_lag"])
    y = model.autocov(K)
    eps = max(
        inequality_coefficient(
            y, empirical_autocov([simulate(model, n0, seed + i, times=False).counts], K)
        )
        for i in range(5)
    )
    n = n0 if eps <= REFIT_NOISE else int(math.ceil(n0 * (eps / REFIT_NOISE) ** 2))
    n = min(n, max(n0, REFIT_MAX_INTERVALS))
    return n, eps * math.sqrt(n0 / n)


def refit_check(
    model: MMPPModel, n_intervals: int | None = None, seed: int = 1
) -> dict[str, float]:
    """Generate arrivals from ``model`` (``n_intervals``, default :func:`refit_length`),
    count them per interval again and refit with the same lags (:func:`refit_compare`).
    The check: the refit's IC against the same data within 2 points of the original."""
    if n_intervals:
        n, noise = n_intervals, math.nan
    else:
        n, noise = refit_length(model)
    sim = simulate(model, n, seed, times=False)
    # arrival times drawn as simulate() draws them, a chunk of intervals at a time
    # (tens of millions of arrivals at once would not fit), and counted again; beyond
    # 1e8 arrivals (WC98's 24,000 a minute) the counts are used as they are
    from_times = int(sim.counts.sum()) <= 1e8
    rng = np.random.default_rng(seed + 1)
    counts = sim.counts.copy()
    chunk = max(1, int(2e6 / max(model.mean(), 1e-9)))
    for a in range(0, n if from_times else 0, chunk):
        c = sim.counts[a : a + chunk]
        idx = np.repeat(np.arange(a, a + len(c)), c)
        t = (idx + rng.random(len(idx))) * model.interval_s
        counts[a : a + len(c)] = np.bincount(
            (t // model.interval_s).astype(np.int64) - a, minlength=len(c)
        )[: len(c)]
    return {**refit_compare(model, counts), "from_times": from_times, "path_noise": noise}


def refit_compare(model: MMPPModel, counts: np.ndarray | list[np.ndarray]) -> dict[str, float]:
    """Refit arrivals counted per model interval (generated from ``model``, e.g. captured
    at a bottleneck; one array or a list of segments) with the original fit's lags.
    Returns the original IC, the refit's IC against the original data (the check:
    within 2 points of the original), against the model the arrivals came from and
    against its own counts, and the KS distance of the refit's count distribution
    to the original data's histogram."""
    K = int(model.report["max_lag"])
    segs = counts if isinstance(counts, list) else [np.asarray(counts)]
    refit = fit_counts(segs, model.interval_s, max_lag=K, floor_reps=0, where="refit")
    orig = model.data["acov_data"]
    return {
        "intervals": int(sum(len(c) for c in segs)),
        "ic_original": float(model.report["ic"]),
        "ic_refit_vs_data": inequality_coefficient(orig, refit.autocov(K)),
        "ic_refit_vs_model": inequality_coefficient(model.autocov(K), refit.autocov(K)),
        "ic_refit_own": float(refit.report["ic"]),
        "ks_refit_vs_data": ks_counts(model.data["counts"], refit),
        "mean_refit": refit.mean(),
    }
