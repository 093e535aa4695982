"""What a fitted MMPP is: the model of session arrivals per interval that
:mod:`swell.extract.mmpp` fits, its analytic moments, draws from it and its
model directory. Nothing here fits; everything here is used by the fit, by the
generators that replay a model (``rps``, Swing's ``arrivals: mmpp``) and by
``swell model show``.

A discrete-time MMPP (dMMPP) has a modulating Markov chain with transition
matrix ``P`` (one step per interval of ``interval_s``) and, in state ``i``,
Poisson(``lambda_i``) arrivals in the interval. :class:`MMPPModel` is the
superposition of L two-state dMMPPs (:class:`Scale`, one per time scale of the
autocovariance: rates 0 and ``rate``, P(high) ``pi``, second eigenvalue of its
``P`` ``theta``, so its autocovariance is ``psi theta^k`` with
``psi = pi (1 - pi) rate^2``) and one M-state dMMPP with i.i.d. states (the
marginal: rates ``marg_rates``, law ``marg_probs``): states
``{1,2}^L x {1..M}``, ``P = P1 (x) ... (x) PL (x) P_M`` (Kronecker product) and
the rates their Kronecker sum (rates add). Because the marginal's states are
i.i.d., the autocovariance at lags >= 1 is exactly ``sum psi_l theta_l^k``
(:meth:`MMPPModel.autocov`; :meth:`MMPPModel.autocov_matrix` computes the same
from the full ``P`` as a check of the Kronecker form), and the count of one
interval is a Poisson mixture over the states' rates
(:meth:`MMPPModel.count_cdf`).

:func:`simulate` draws counts and arrival times (uniform within their
interval, as a Poisson process with a constant rate is) from a model with a
seed: each two-state chain from alternating geometric run lengths (it starts
in its stationary law), the marginal's state i.i.d. per interval.

The model directory (:func:`save_mmpp_model`, through
:mod:`swell.extract.modeldir`, written atomically) holds ``model.json``
(``format: swell-mmpp-model``, ``kind: mmpp``: the scales with their time
constants, the marginal, the fit's report and provenance) and ``arrays.npz``
(the counts, the autocovariances, ``P`` and the rates);
:func:`load_mmpp_model` checks that the scales and the marginal form a valid
model and names the file when they do not.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell import __version__
from swell.errors import SwellError
from swell.extract import modeldir

FORMAT = "swell-mmpp-model"
FORMAT_VERSION = 1
KIND = "mmpp"


@dataclass
class Scale:
    """One two-state dMMPP: rates (0, ``rate``), P(high) ``pi``, decay ``theta``."""

    theta: float
    psi: float
    pi: float
    rate: float

    @property
    def P(self) -> np.ndarray:  # noqa: N802 - the paper's name
        a, b = self.pi * (1 - self.theta), (1 - self.pi) * (1 - self.theta)
        return np.array([[1 - a, a], [b, 1 - b]])

    @property
    def rates(self) -> np.ndarray:
        return np.array([0.0, self.rate])


@dataclass
class MMPPModel:
    """A fitted superposition (see the module docstring)."""

    interval_s: float
    scales: list[Scale]
    marg_rates: np.ndarray
    marg_probs: np.ndarray
    report: dict[str, Any] = field(default_factory=dict)
    data: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n_states(self) -> int:
        return len(self.marg_rates) * 2 ** len(self.scales)

    def transition_matrix(self) -> np.ndarray:
        P = np.ones((1, 1))
        for s in self.scales:
            P = np.kron(P, s.P)
        return np.kron(P, np.tile(self.marg_probs, (len(self.marg_probs), 1)))

    def rates(self) -> np.ndarray:
        r = np.zeros(1)
        for s in self.scales:
            r = (r[:, None] + s.rates[None, :]).ravel()
        return (r[:, None] + self.marg_rates[None, :]).ravel()

    def stationary(self) -> np.ndarray:
        p = np.ones(1)
        for s in self.scales:
            p = np.kron(p, np.array([1 - s.pi, s.pi]))
        return np.kron(p, self.marg_probs)

    def mean(self) -> float:
        return float(sum(s.pi * s.rate for s in self.scales) + self.marg_rates @ self.marg_probs)

    def autocov(self, max_lag: int) -> np.ndarray:
        """Analytic autocovariance of the counts, lags 0..max_lag."""
        k = np.arange(max_lag + 1, dtype=np.float64)
        c = np.zeros(max_lag + 1)
        for s in self.scales:
            c += s.psi * s.theta**k
        mr = self.marg_rates @ self.marg_probs
        c[0] += float(self.marg_probs @ self.marg_rates**2 - mr**2) + self.mean()
        return c

    def autocov_matrix(self, max_lag: int) -> np.ndarray:
        """The same from the full ``P`` and rates (a check of the Kronecker form)."""
        P, lam, pi = self.transition_matrix(), self.rates(), self.stationary()
        m = pi @ lam
        out = [float(pi @ lam**2 - m * m + m)]
        v = lam.copy()
        for _ in range(max_lag):
            v = P @ v
            out.append(float((pi * lam) @ v - m * m))
        return np.array(out)

    def atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """(rate, probability) of every state, merged where rates coincide."""
        lam, w = self.rates(), self.stationary()
        u, inv = np.unique(np.round(lam, 9), return_inverse=True)
        return u, np.bincount(inv.ravel(), weights=w)

    def count_cdf(self, n: np.ndarray) -> np.ndarray:
        """P(count <= n) of one interval (analytic Poisson mixture)."""
        from scipy import special  # here: the rps kind imports this module for every run

        lam, w = self.atoms()
        n = np.asarray(n, dtype=np.float64)
        out = np.zeros(n.shape)
        for a, p in zip(lam, w, strict=True):
            out += p * (special.pdtr(n, a) if a > 0 else (n >= 0).astype(np.float64))
        return out

    def count_pmf(self, n_max: int) -> np.ndarray:
        cdf = self.count_cdf(np.arange(n_max + 1))
        return np.diff(np.r_[0.0, cdf])


# -- simulation ---------------------------------------------------------------------------------


@dataclass
class Simulation:
    counts: np.ndarray  # arrivals per interval
    times: np.ndarray  # arrival times, seconds from the start (sorted)


def _two_state_path(s: Scale, n: int, rng: np.random.Generator) -> np.ndarray:
    """State (0 low, 1 high) per interval of one two-state chain, from alternating
    geometric run lengths (the first run too: the chain starts in its stationary
    law and run lengths are memoryless)."""
    a, b = float(s.P[0, 1]), float(s.P[1, 0])
    state = int(rng.random() < s.pi)
    runs: list[np.ndarray] = []
    total = 0
    while total < n:
        m = max(16, int(n * 2 * a * b / max(a + b, 1e-12) * 1.1) + 16)
        lo = rng.geometric(max(a, 1e-12), m)
        hi = rng.geometric(max(b, 1e-12), m)
        r = np.empty(2 * m, dtype=np.int64)
        r[0::2], r[1::2] = (lo, hi) if state == 0 else (hi, lo)
        runs.append(r)
        total += int(r.sum())
    lengths = np.concatenate(runs)
    vals = (np.arange(len(lengths)) + state) % 2
    return np.repeat(vals.astype(np.int8), lengths)[:n]


def simulate(model: MMPPModel, n_intervals: int, seed: int = 0, times: bool = True) -> Simulation:
    """Draw ``n_intervals`` intervals: counts and (if ``times``) arrival times."""
    rng = np.random.default_rng(seed)
    lam = np.zeros(n_intervals)
    for s in model.scales:
        lam += s.rate * _two_state_path(s, n_intervals, rng)
    lam += rng.choice(
        model.marg_rates, size=n_intervals, p=model.marg_probs / model.marg_probs.sum()
    )
    counts = rng.poisson(lam)
    if not times:
        return Simulation(counts, np.zeros(0))
    idx = np.repeat(np.arange(n_intervals), counts)
    t = (idx + rng.random(len(idx))) * model.interval_s
    return Simulation(counts, np.sort(t))


# -- model directory ----------------------------------------------------------------------------


def _jsonable(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return o


def model_meta(model: MMPPModel, provenance: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "swell_version": __version__,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "provenance": provenance,
        "interval_s": model.interval_s,
        "scales": [
            {
                "theta": s.theta,
                "psi": s.psi,
                "pi": s.pi,
                "rate": s.rate,
                "time_constant_s": -model.interval_s / math.log(s.theta),
            }
            for s in model.scales
        ],
        "marginal": {"rates": model.marg_rates, "probs": model.marg_probs},
        "report": model.report,
    }


def save_mmpp_model(
    model: MMPPModel, dest: str | os.PathLike[str], provenance: dict[str, Any] | None = None
) -> Path:
    """Write the model directory atomically."""
    arrays = dict(model.data)
    arrays["P"] = model.transition_matrix()
    arrays["rates"] = model.rates()
    return modeldir.save(dest, _jsonable(model_meta(model, provenance or {})), arrays)


def load_mmpp_model(src: str | os.PathLike[str]) -> tuple[MMPPModel, dict[str, Any]]:
    """Read a model directory; returns the model and its full metadata."""
    src = Path(src)
    mj = src / "model.json"
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, KIND)
    try:
        scales = [
            Scale(float(s["theta"]), float(s["psi"]), float(s["pi"]), float(s["rate"]))
            for s in meta["scales"]
        ]
        r = np.asarray(meta["marginal"]["rates"], dtype=np.float64)
        q = np.asarray(meta["marginal"]["probs"], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SwellError(src, f"bad MMPP model: {exc}") from None
    if len(r) == 0 or len(r) != len(q) or abs(q.sum() - 1) > 1e-6 or (r < 0).any():
        raise SwellError(mj, "the marginal's rates and probabilities do not form a distribution")
    for s in scales:
        if not (0 < s.theta < 1 and 0 < s.pi < 1 and s.rate >= 0):
            raise SwellError(mj, f"time scale out of range: {s}")
    data = {k: v for k, v in arrays.items() if k not in ("P", "rates")}
    model = MMPPModel(float(meta["interval_s"]), scales, r, q, dict(meta.get("report", {})), data)
    return model, meta
