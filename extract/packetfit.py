"""Packet-level models (D-ITG style): per flow class, an inter-departure time
(IDT) and a packet size distribution, fitted by maximum likelihood and chosen
with a goodness-of-fit test that accounts for the fitted parameters.

Flow classes. A packet's class is its transport, its conversation's server
port and its direction, named ``tcp-80-s2c``. The server side of a
conversation is the destination of a TCP SYN without ACK when one was seen;
else the port in :data:`swell.extract.conntypes.WELL_KNOWN`; else the lower
port. Only packets that carry transport payload count (pure ACKs and other
control segments are the transport's, not the application's): a class's size
samples are payload lengths in bytes, its IDT samples are the gaps between
consecutive payload packets of the same directional flow (5-tuple and
direction), pooled over the class's flows. IDTs of 0 (two packets with one
timestamp) are raised to half a microsecond so positive families apply.

Families: D-ITG's (constant, uniform, exponential, Pareto, Weibull, gamma,
normal, Cauchy) plus lognormal, each with D-ITG's own parameterisation (no
location parameter for the positive families: D-ITG draws ``scale * X``).
Fitting (:func:`fit_samples`):

1. Constant when the samples do not vary (sizes all equal; IDTs with a
   coefficient of variation under :data:`CONSTANT_CV`, i.e. timer jitter).
2. Otherwise every family is fitted by maximum likelihood (``dist.fit`` of
   scipy.stats with ``loc`` fixed where D-ITG has none) on at most
   ``max_samples`` samples (a seeded random subset) and ranked by BIC (AIC is
   reported too; BIC's heavier penalty keeps an exponential from losing to
   the gamma and Weibull that contain it).
3. In BIC order, the Monte-Carlo Kolmogorov-Smirnov test of
   :func:`scipy.stats.goodness_of_fit` (which refits on every simulated
   sample, so the p-value accounts for the fitted parameters) is run; the
   first family with p >= ``alpha`` is chosen. Maximising the p-value instead
   would pick at random among adequate families (p is uniform under the null),
   so the test is the gate and the likelihood the order. When no family among
   the first ``max_tests`` passes, the best by BIC is kept and flagged
   ``rejected``: real packet sizes are often multi-modal (a header-sized and
   an MSS-sized mode), which no single family describes; the model keeps the
   empirical samples too, so a generator can replay them instead.
4. Confidence intervals (95 %) of the chosen parameters by parametric
   bootstrap: ``ci_reps`` samples drawn from the fit, each refitted (basic
   intervals, see :func:`bootstrap_ci`).

Packet sizes are integers; D-ITG truncates its draws (``size = (int) X``). So
sizes are fitted as ``size + U[0, 1)`` (seeded), which is X under that model,
and everything stays continuous.

The model directory (:func:`save_packet_model`, :func:`load_packet_model`):
``model.json`` (``format: swell-packet-model``, ``kind: packet``, version,
provenance, settings, per class its counts and both fits with their tables)
and ``arrays.npz`` (the samples, ``class/<name>/idt`` in seconds and
``class/<name>/size`` in bytes), written atomically.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell import __version__
from swell.errors import SwellError
from swell.extract import modeldir

FORMAT = "swell-packet-model"
FORMAT_VERSION = 1
KIND = "packet"

FAMILIES = tuple(
    "constant uniform exponential pareto weibull lognormal gamma normal cauchy".split()
)
CONTINUOUS = FAMILIES[1:]
PARAM_NAMES: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
    "pareto": ("shape", "scale"),
    "weibull": ("shape", "scale"),
    "lognormal": ("mu", "sigma"),
    "gamma": ("shape", "scale"),
    "normal": ("mean", "std"),
    "cauchy": ("location", "scale"),
    "discrete": ("values", "probs"),
}
# scipy.stats distribution (by name) and the parameters held fixed while fitting.
# SciPy's stats is imported where it is used, not at the top: the packet kind's
# generator imports this module (through the kind registry, so every experiment
# does), and ``scipy.stats`` costs 0.5 s of each ``swell`` process (25 s in the VM
# layer's TCG guest).
_SCIPY: dict[str, tuple[str, dict[str, float]]] = {
    "uniform": ("uniform", {}),
    "exponential": ("expon", {"loc": 0.0}),
    "pareto": ("pareto", {"loc": 0.0}),
    "weibull": ("weibull_min", {"loc": 0.0}),
    "lognormal": ("lognorm", {"loc": 0.0}),
    "gamma": ("gamma", {"loc": 0.0}),
    "normal": ("norm", {}),
    "cauchy": ("cauchy", {}),
}
CONSTANT_CV = 0.01  # IDT coefficient of variation below which a flow is constant-rate
MIN_SAMPLES = 20
MIN_IDT_S = 5e-7
UNITS = {"idt": "s", "size": "bytes"}


def _scipy_dist(family: str) -> tuple[Any, dict[str, float]]:
    """The scipy.stats distribution of ``family`` and its fixed parameters."""
    from scipy import stats

    name, fixed = _SCIPY[family]
    return getattr(stats, name), fixed


@dataclass(frozen=True)
class Dist:
    """One distribution in swell's units (IDT in seconds, sizes in bytes)."""

    family: str
    params: dict[str, Any]

    def __post_init__(self) -> None:
        if self.family not in PARAM_NAMES:
            raise SwellError("distribution", f"unknown family {self.family!r}")
        missing = set(PARAM_NAMES[self.family]) - set(self.params)
        if missing:
            raise SwellError("distribution", f"{self.family} lacks {sorted(missing)}")

    def frozen(self) -> Any:
        """The scipy.stats frozen distribution (not for ``constant``)."""
        from scipy import stats

        p = self.params
        f = self.family
        if f == "uniform":
            return stats.uniform(loc=p["low"], scale=p["high"] - p["low"])
        if f == "exponential":
            return stats.expon(scale=p["mean"])
        if f == "pareto":
            return stats.pareto(b=p["shape"], scale=p["scale"])
        if f == "weibull":
            return stats.weibull_min(c=p["shape"], scale=p["scale"])
        if f == "lognormal":
            return stats.lognorm(s=p["sigma"], scale=math.exp(p["mu"]))
        if f == "gamma":
            return stats.gamma(a=p["shape"], scale=p["scale"])
        if f == "normal":
            return stats.norm(loc=p["mean"], scale=p["std"])
        if f == "cauchy":
            return stats.cauchy(loc=p["location"], scale=p["scale"])
        if f == "discrete":
            return stats.rv_discrete(values=(p["values"], p["probs"]))
        raise SwellError("distribution", "a constant has no scipy.stats form")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.family == "constant":
            return np.full(n, float(self.params["value"]))
        return np.asarray(self.frozen().rvs(size=n, random_state=rng), dtype=np.float64)

    def mean(self) -> float:
        if self.family == "constant":
            return float(self.params["value"])
        return float(self.frozen().mean())

    def ditg_args(self, quantity: str) -> list[str] | None:
        """D-ITG ``ITGSend`` options drawing this distribution (``quantity`` idt or
        size), from ITGSend.cpp 2.8.1: IDT options take rates (pkt/s) or
        milliseconds; ``-W``/``-w`` take the *scale first* (newran's
        ``Weibull(scale, shape)`` constructor, whatever the help text says);
        size options ``-u -e -n -y`` read integers (a spread under 1 byte becomes
        1: D-ITG rejects 0). None: D-ITG has no such family (lognormal)."""
        p, f = self.params, self.family
        if quantity == "idt":
            ms = 1000.0
            table = {
                "constant": ["-C", _g(1.0 / p.get("value", 1))],
                "uniform": [
                    "-U",
                    _g(1.0 / p.get("high", 1)),
                    _g(1.0 / max(p.get("low", 1), 1e-12)),
                ],
                "exponential": ["-E", _g(1.0 / p.get("mean", 1))],
                "pareto": ["-V", _g(p.get("shape", 0)), _g(p.get("scale", 0) * ms)],
                "weibull": ["-W", _g(p.get("scale", 0) * ms), _g(p.get("shape", 0))],
                "gamma": ["-G", _g(p.get("shape", 0)), _g(p.get("scale", 0) * ms)],
                "normal": ["-N", _g(p.get("mean", 0) * ms), _g(p.get("std", 0) * ms)],
                "cauchy": ["-Y", _g(p.get("location", 0) * ms), _g(p.get("scale", 0) * ms)],
            }
        else:
            r = round
            table = {
                "constant": ["-c", str(int(p.get("value", 0)))],
                "uniform": ["-u", str(r(p.get("low", 0))), str(r(p.get("high", 0)))],
                "exponential": ["-e", str(r(p.get("mean", 0)))],
                "pareto": ["-v", _g(p.get("shape", 0)), _g(p.get("scale", 0))],
                "weibull": ["-w", _g(p.get("scale", 0)), _g(p.get("shape", 0))],
                "gamma": ["-g", _g(p.get("shape", 0)), _g(p.get("scale", 0))],
                "normal": ["-n", str(r(p.get("mean", 0))), str(max(1, r(p.get("std", 0))))],
                "cauchy": ["-y", str(r(p.get("location", 0))), str(max(1, r(p.get("scale", 0))))],
            }
        return table.get(f)

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "params": dict(self.params)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Dist:
        return cls(str(d["family"]), dict(d["params"]))

    def describe(self, unit: str = "") -> str:
        vals = ", ".join(f"{k}={_g(v)}" for k, v in self.params.items() if not isinstance(v, list))
        return f"{self.family}({vals}){' ' + unit if unit else ''}"


def _g(x: float) -> str:
    return f"{float(x):.6g}"


def _to_dist(family: str, fitted: tuple[float, ...]) -> Dist:
    """scipy's fitted tuple (shapes..., loc, scale) -> :class:`Dist`."""
    if family == "uniform":
        loc, scale = fitted
        return Dist(family, {"low": float(loc), "high": float(loc + scale)})
    if family == "exponential":
        return Dist(family, {"mean": float(fitted[1])})
    if family in ("pareto", "weibull", "gamma"):
        return Dist(family, {"shape": float(fitted[0]), "scale": float(fitted[2])})
    if family == "lognormal":
        return Dist(family, {"mu": float(math.log(fitted[2])), "sigma": float(fitted[0])})
    if family == "normal":
        return Dist(family, {"mean": float(fitted[0]), "std": float(fitted[1])})
    return Dist(family, {"location": float(fitted[0]), "scale": float(fitted[1])})


def fit_family(family: str, x: np.ndarray) -> Dist | None:
    """Maximum-likelihood fit of one continuous family; None when it cannot fit."""
    dist, fixed = _scipy_dist(family)
    if fixed.get("loc") == 0.0 and (x <= 0).any():
        return None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            fitted = dist.fit(x, **{f"f{k}": v for k, v in fixed.items()})
        except (ValueError, RuntimeError, FloatingPointError):
            return None
    if not all(np.isfinite(fitted)):
        return None
    d = _to_dist(family, tuple(float(v) for v in fitted))
    if family == "uniform" and d.params["high"] <= d.params["low"]:
        return None
    return d


def _loglik(d: Dist, x: np.ndarray) -> float:
    with np.errstate(all="ignore"):
        ll = float(np.sum(d.frozen().logpdf(x)))
    return ll if math.isfinite(ll) else -math.inf


@dataclass
class FitResult:
    """The chosen distribution of one quantity of one class, and how it was chosen."""

    quantity: str
    n: int
    n_used: int
    chosen: Dist
    statistic: float  # KS D of the chosen fit (CV for a constant)
    pvalue: float
    rejected: bool
    ci: dict[str, tuple[float, float]]
    table: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "quantity": self.quantity,
            "unit": UNITS[self.quantity],
            "n": self.n,
            "n_used": self.n_used,
            "chosen": self.chosen.to_json(),
            "statistic": self.statistic,
            "pvalue": self.pvalue,
            "rejected": self.rejected,
            "ci": {k: list(v) for k, v in self.ci.items()},
            "ditg": self.chosen.ditg_args(self.quantity),
            "table": self.table,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FitResult:
        return cls(
            quantity=d["quantity"],
            n=int(d["n"]),
            n_used=int(d["n_used"]),
            chosen=Dist.from_json(d["chosen"]),
            statistic=float(d["statistic"]),
            pvalue=float(d["pvalue"]),
            rejected=bool(d["rejected"]),
            ci={k: (float(v[0]), float(v[1])) for k, v in d["ci"].items()},
            table=list(d.get("table", [])),
            notes=list(d.get("notes", [])),
        )


def _constant_fit(quantity: str, x: np.ndarray, n: int) -> FitResult:
    mean = float(x.mean())
    sd = float(x.std())
    half = 1.96 * sd / math.sqrt(len(x))
    cv = sd / mean if mean > 0 else 0.0
    note = "all samples equal" if sd == 0 else f"coefficient of variation {cv:.2g} <= {CONSTANT_CV}"
    return FitResult(
        quantity,
        n,
        len(x),
        Dist("constant", {"value": mean}),
        cv,
        1.0,
        False,
        {"value": (mean - half, mean + half)},
        [],
        [f"constant: {note}"],
    )


def bootstrap_ci(
    d: Dist, n: int, reps: int, rng: np.random.Generator, level: float = 0.95
) -> dict[str, tuple[float, float]]:
    """Basic (pivotal) parametric-bootstrap intervals of ``d``'s parameters for ``n``
    samples: ``[2t - q_hi, 2t - q_lo]`` from the refits' quantiles. Unlike the
    percentile interval it covers boundary estimators (Pareto scale = sample
    minimum, uniform ends), whose refits all lie on one side of the estimate."""
    names = PARAM_NAMES[d.family]
    draws: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(reps):
        r = fit_family(d.family, d.sample(rng, n))
        if r is not None:
            for k in names:
                draws[k].append(float(r.params[k]))
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    out = {}
    for k in names:
        v, t = np.asarray(draws[k]), float(d.params[k])
        if len(v) == 0:
            out[k] = (math.nan, math.nan)
            continue
        out[k] = (2 * t - float(np.quantile(v, hi)), 2 * t - float(np.quantile(v, lo)))
    return out


def fit_samples(
    x: np.ndarray,
    quantity: str,
    *,
    max_samples: int = 1000,
    mc_reps: int = 99,
    ci_reps: int = 99,
    alpha: float = 0.05,
    max_tests: int = 4,
    seed: int = 0,
    where: str = "samples",
) -> FitResult:
    """Fit IDT (``quantity='idt'``, seconds) or size (``'size'``, bytes) samples."""
    from scipy import stats

    if quantity not in UNITS:
        raise SwellError(where, f"quantity must be idt or size, not {quantity!r}")
    x = np.asarray(x, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = len(x)
    if n < MIN_SAMPLES:
        raise SwellError(where, f"{n} {quantity} samples; at least {MIN_SAMPLES} are needed")
    rng = np.random.default_rng(seed)
    if n > max_samples:
        x = rng.choice(x, size=max_samples, replace=False)
    notes = []
    if quantity == "size":
        if np.all(x == x[0]):
            return _constant_fit(quantity, x, n)
        x = x + rng.random(len(x))  # D-ITG truncates its draws: fit X, not int(X)
        notes.append("sizes fitted as size + U[0,1) (D-ITG sends int(X))")
    else:
        zeros = int((x < MIN_IDT_S).sum())
        x = np.maximum(x, MIN_IDT_S)
        if zeros:
            notes.append(f"{zeros} IDTs under {MIN_IDT_S * 1e6:g} us raised to it")
        if x.std() <= CONSTANT_CV * x.mean():
            return _constant_fit(quantity, x, n)
    if n > max_samples:
        notes.append(f"fitted on a random {max_samples} of {n} samples")
    rows = []
    for fam in CONTINUOUS:
        d = fit_family(fam, x)
        if d is None:
            continue
        ll = _loglik(d, x)
        if not math.isfinite(ll):
            continue
        k = len(PARAM_NAMES[fam])
        ks = float(stats.kstest(x, d.frozen().cdf).statistic)
        rows.append(
            {
                "family": fam,
                "params": d.params,
                "loglik": ll,
                "aic": 2 * k - 2 * ll,
                "bic": k * math.log(len(x)) - 2 * ll,
                "ks": ks,
                "pvalue": None,
                "_dist": d,
            }
        )
    if not rows:
        raise SwellError(where, f"no family could be fitted to the {quantity} samples")
    rows.sort(key=lambda r: r["bic"])
    chosen = None
    for r in rows[:max_tests]:
        r["pvalue"] = _gof_pvalue(r["family"], x, mc_reps, rng)
        if r["pvalue"] >= alpha:
            chosen = r
            break
    rejected = chosen is None
    if chosen is None:
        chosen = rows[0]
        notes.append(
            f"every family tested (the {min(max_tests, len(rows))} best by BIC) rejected "
            f"at {alpha:g}: kept the best by BIC"
        )
    d = chosen["_dist"]
    ci = bootstrap_ci(d, len(x), ci_reps, rng)
    table = [{k: v for k, v in r.items() if k != "_dist"} for r in rows]
    return FitResult(
        quantity, n, len(x), d, chosen["ks"], float(chosen["pvalue"]), rejected, ci, table, notes
    )


def _gof_pvalue(family: str, x: np.ndarray, reps: int, rng: np.random.Generator) -> float:
    """Monte-Carlo KS p-value with refitting (scipy.stats.goodness_of_fit)."""
    from scipy import stats

    dist, fixed = _scipy_dist(family)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            res = stats.goodness_of_fit(
                dist, x, known_params=fixed, statistic="ks", n_mc_samples=reps, random_state=rng
            )
        except (ValueError, RuntimeError, FloatingPointError):
            return 0.0
    p = float(res.pvalue)
    return p if math.isfinite(p) else 0.0


# -- flow classes from a trace ------------------------------------------------------------------


@dataclass
class ClassSamples:
    """Samples of one flow class."""

    name: str
    transport: str
    server_port: int
    direction: str
    app: str
    packets: int
    flows: int
    bytes: int
    duration_s: float
    idt: np.ndarray
    size: np.ndarray


def _load_columns(trace: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The columns needed, filtered to TCP/UDP, streaming over the trace."""
    from swell.extract.reader import FRAG_LATER, open_trace

    keep = (
        "ts_ns",
        "proto",
        "saddr_hi",
        "saddr_lo",
        "daddr_hi",
        "daddr_lo",
        "sport",
        "dport",
        "tcp_flags",
        "payload_len",
    )
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keep}
    total = 0
    with open_trace(trace) as tr:
        for ch in tr.chunks():
            total += len(ch)
            m = ((ch.proto == 6) | (ch.proto == 17)) & ch.l4_ok & ((ch.frag & FRAG_LATER) == 0)
            for k in keep:
                parts[k].append(getattr(ch, k)[m])
        info = {"packets": total, "warnings": tr.warnings, "format": tr.info.format}
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}, info


def class_samples(cols: dict[str, np.ndarray]) -> list[ClassSamples]:
    """Group payload packets into flow classes (see the module docstring)."""
    from swell.extract.conntypes import KNOWN_PORTS, WELL_KNOWN

    n = len(cols["ts_ns"])
    if n == 0:
        return []
    a = np.stack([cols["saddr_hi"], cols["saddr_lo"], cols["sport"].astype(np.uint64)], 1)
    b = np.stack([cols["daddr_hi"], cols["daddr_lo"], cols["dport"].astype(np.uint64)], 1)
    fwd = (a[:, 0] < b[:, 0]) | (
        (a[:, 0] == b[:, 0]) & ((a[:, 1] < b[:, 1]) | ((a[:, 1] == b[:, 1]) & (a[:, 2] <= b[:, 2])))
    )
    lo = np.where(fwd[:, None], a, b)
    hi = np.where(fwd[:, None], b, a)
    proto = cols["proto"].astype(np.uint64)
    conv_key = np.concatenate([proto[:, None], lo, hi], 1)
    _, conv = np.unique(conv_key, axis=0, return_inverse=True)
    conv = conv.ravel()
    nconv = int(conv.max()) + 1 if n else 0
    # server endpoint per conversation: 1 = the 'hi' endpoint, 0 = the 'lo' endpoint
    syn = (cols["proto"] == 6) & ((cols["tcp_flags"] & 0x12) == 0x02)
    server_hi = np.full(nconv, -1, dtype=np.int8)
    server_hi[conv[syn]] = (~fwd[syn]).astype(np.int8) ^ 1  # SYN goes to the server
    lo_port, hi_port = lo[:, 2].astype(np.int64), hi[:, 2].astype(np.int64)
    p8 = cols["proto"].astype(np.int64)
    known_hi = KNOWN_PORTS[p8, hi_port]
    known_lo = KNOWN_PORTS[p8, lo_port]
    guess = np.where(
        known_hi & ~known_lo,
        1,
        np.where(known_lo & ~known_hi, 0, (hi_port < lo_port).astype(np.int64)),
    )
    sh = server_hi[conv]
    srv_is_hi = np.where(sh >= 0, sh, guess).astype(bool)
    server_port = np.where(srv_is_hi, hi_port, lo_port)
    to_server = srv_is_hi == fwd  # packet goes lo->hi when fwd
    payload = cols["payload_len"].astype(np.int64)
    m = payload > 0
    ts = cols["ts_ns"][m]
    # a flow (for IDTs): the TCP connection's direction; for UDP the client host,
    # server endpoint and direction (a new ephemeral port per DNS query is one flow)
    cli = np.where(srv_is_hi[:, None], lo, hi)
    srv = np.where(srv_is_hi[:, None], hi, lo)
    cli[:, 2] = np.where(cols["proto"] == 6, cli[:, 2], 0)
    fkey = np.concatenate([proto[:, None], cli, srv, to_server[:, None].astype(np.uint64)], 1)
    _, flow = np.unique(fkey[m], axis=0, return_inverse=True)
    flow = flow.ravel()
    order = np.lexsort((ts, flow))
    flow, ts = flow[order], ts[order]
    sizes = payload[m][order]
    sport, prt, ts_dir = server_port[m][order], cols["proto"][m][order], to_server[m][order]
    same = np.r_[False, flow[1:] == flow[:-1]]
    idt_all = np.r_[0, np.diff(ts)].astype(np.float64) / 1e9
    out = []
    cls_key = np.stack([prt.astype(np.int64), sport, ts_dir.astype(np.int64)], 1)
    keys, cls = np.unique(cls_key, axis=0, return_inverse=True)
    cls = cls.ravel()
    for i, (p, port, c2s) in enumerate(keys):
        sel = cls == i
        transport = "tcp" if p == 6 else "udp"
        direction = "c2s" if c2s else "s2c"
        app = WELL_KNOWN.get((int(p), int(port)), "other")
        t = ts[sel]
        out.append(
            ClassSamples(
                name=f"{transport}-{int(port)}-{direction}",
                transport=transport,
                server_port=int(port),
                direction=direction,
                app=app,
                packets=int(sel.sum()),
                flows=len(np.unique(flow[sel])),
                bytes=int(sizes[sel].sum()),
                duration_s=float((t.max() - t.min()) / 1e9),
                idt=idt_all[sel & same],
                size=sizes[sel].astype(np.float64),
            )
        )
    out.sort(key=lambda c: (-c.packets, c.name))
    return out


@dataclass
class PacketModel:
    """A packet-level model: metadata plus the per-class sample arrays."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def classes(self) -> list[str]:
        return list(self.meta["classes"])

    def fit(self, cls: str, quantity: str) -> FitResult:
        return FitResult.from_json(self.meta["classes"][cls][quantity])

    def dist(self, cls: str, quantity: str) -> Dist:
        return self.fit(cls, quantity).chosen

    def samples(self, cls: str, quantity: str) -> np.ndarray:
        return self.arrays[f"class/{cls}/{quantity}"]


def fit_trace(
    trace: str | os.PathLike[str],
    *,
    max_classes: int = 12,
    min_packets: int = MIN_SAMPLES + 1,
    seed: int = 0,
    **fit_kw: Any,
) -> PacketModel:
    """Read ``trace`` and fit IDT and size per flow class (the largest ``max_classes``)."""
    cols, info = _load_columns(trace)
    classes = class_samples(cols)
    if not classes:
        raise SwellError(trace, f"no TCP or UDP payload packets among {info['packets']:,} packets")
    fit_meta: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    arrays: dict[str, np.ndarray] = {}
    for i, c in enumerate(classes):
        if len(c.idt) < MIN_SAMPLES or c.packets < min_packets:
            skipped[c.name] = (
                f"{c.packets} payload packets in {c.flows} flows ({len(c.idt)} IDTs); "
                f"at least {MIN_SAMPLES} IDTs needed"
            )
            continue
        if len(fit_meta) >= max_classes:
            skipped[c.name] = f"{c.packets} packets: beyond the {max_classes} largest classes"
            continue
        where = f"{trace}: class {c.name}"
        idt = fit_samples(c.idt, "idt", seed=seed + 2 * i, where=where, **fit_kw)
        size = fit_samples(c.size, "size", seed=seed + 2 * i + 1, where=where, **fit_kw)
        fit_meta[c.name] = {
            "transport": c.transport,
            "server_port": c.server_port,
            "direction": c.direction,
            "app": c.app,
            "packets": c.packets,
            "flows": c.flows,
            "bytes": c.bytes,
            "duration_s": c.duration_s,
            "rate_pps_per_flow": (1.0 / float(np.mean(c.idt))) if len(c.idt) else 0.0,
            "idt": idt.to_json(),
            "size": size.to_json(),
        }
        arrays[f"class/{c.name}/idt"] = c.idt
        arrays[f"class/{c.name}/size"] = c.size
    if not fit_meta:
        biggest = max(len(c.idt) for c in classes)
        raise SwellError(
            trace,
            f"no flow class has {MIN_SAMPLES} inter-departure times to fit "
            f"({len(classes)} classes; the largest has {biggest})",
        )
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        "swell_version": __version__,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "provenance": {
            "source": os.path.abspath(trace),
            "size_bytes": os.path.getsize(trace),
            "reader": info,
        },
        "settings": {
            "seed": seed,
            "alpha": fit_kw.get("alpha", 0.05),
            "mc_reps": fit_kw.get("mc_reps", 99),
            "ci_reps": fit_kw.get("ci_reps", 99),
            "max_samples": fit_kw.get("max_samples", 1000),
            "constant_cv": CONSTANT_CV,
            "statistic": "ks",
        },
        "classes": fit_meta,
        "skipped": skipped,
    }
    return PacketModel(meta, arrays)


def save_packet_model(model: PacketModel, dest: str | os.PathLike[str]) -> Path:
    """Write the model directory atomically (validated first)."""
    validate_packet_model(model, str(dest))
    return modeldir.save(dest, model.meta, model.arrays)


def load_packet_model(src: str | os.PathLike[str]) -> PacketModel:
    """Read and validate a packet model directory."""
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, KIND)
    model = PacketModel(meta, arrays)
    validate_packet_model(model, str(src))
    return model


def validate_packet_model(model: PacketModel, where: str) -> None:
    """Check that metadata and arrays agree; raise :class:`SwellError` otherwise."""
    meta = model.meta
    for key in ("classes", "provenance", "settings"):
        if key not in meta:
            raise SwellError(where, f"model.json lacks {key!r}")
    for name, c in meta["classes"].items():
        for q in ("idt", "size"):
            if f"class/{name}/{q}" not in model.arrays:
                raise SwellError(where, f"arrays.npz lacks class/{name}/{q}")
            try:
                FitResult.from_json(c[q])
            except (KeyError, TypeError, ValueError, SwellError) as exc:
                raise SwellError(where, f"class {name}: bad {q} fit ({exc})") from exc
