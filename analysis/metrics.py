"""Application metrics: response times, slowdown, jitter, throughput, bandwidth truth.

Pure functions over arrays (seconds and bytes), used by the experiment report:

* :func:`ecdf` - the empirical CDF of response times (or any sample).
* :func:`slowdown` - a background run against the no-background (NBG) run, as
  in the seed paper's Figures 4, 8 and 9. For each repetition ``r`` and each
  statistic ``s`` (5th, 50th, 90th, 95th percentile and the mean of the
  response times), ``slowdown_s,r = s(run_r) / s(NBG)`` where the NBG
  statistic pools every NBG repetition. Reported: mean and standard deviation
  (``ddof=1``; 0 with one repetition) of ``slowdown_s,r`` across repetitions,
  also as the percentage increase ``100 * (slowdown - 1)``.
* :func:`inter_arrivals` / :func:`jitter_summary` / :func:`rfc3550_jitter` -
  the packet inter-arrival distribution and the RFC 3550 interarrival jitter.
* :func:`throughput_series` - bit/s per bin from timestamps and sizes.
* :func:`available_bandwidth_truth` - per 1 s bin, capacity minus the
  background bit rate measured at the bottleneck (never below 0), and
  :func:`percent_error` of estimates against it.

Percentiles use NumPy's default (linear interpolation between order
statistics).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SLOWDOWN_STATS: tuple[str, ...] = ("p5", "p50", "p90", "p95", "mean")


def ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite values and ``P(X <= x)`` at each (``i/n``, i = 1..n)."""
    v = np.asarray(values, dtype=float)
    v = np.sort(v[np.isfinite(v)])
    return v, np.arange(1, v.size + 1) / max(1, v.size)


def statistic(values: np.ndarray, name: str) -> float:
    """``p<q>`` (percentile q) or ``mean`` of the finite values."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan")
    if name == "mean":
        return float(v.mean())
    if name.startswith("p"):
        return float(np.percentile(v, float(name[1:])))
    raise ValueError(f"unknown statistic {name!r}")


def summary(values: np.ndarray, stats: Sequence[str] = SLOWDOWN_STATS) -> dict[str, float]:
    """``{stat: value}`` plus ``std`` and ``n`` of one sample."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    out = {s: statistic(v, s) for s in stats}
    out["std"] = float(v.std(ddof=1)) if v.size > 1 else 0.0
    out["n"] = float(v.size)
    return out


@dataclass(frozen=True)
class Slowdown:
    """Per statistic: mean and standard deviation of the ratio across repetitions."""

    stat: str
    baseline: float  # the NBG statistic, seconds
    per_rep: np.ndarray  # ratio per repetition
    mean: float
    std: float

    @property
    def increase_pct(self) -> float:
        return 100.0 * (self.mean - 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stat": self.stat,
            "baseline": self.baseline,
            "per_rep": self.per_rep.tolist(),
            "mean": self.mean,
            "std": self.std,
            "increase_pct": self.increase_pct,
        }


def slowdown(
    runs: Sequence[np.ndarray],
    baseline_runs: Sequence[np.ndarray],
    stats: Sequence[str] = SLOWDOWN_STATS,
) -> dict[str, Slowdown]:
    """Slowdown of ``runs`` (one response-time array per repetition) against NBG."""
    if not runs:
        raise ValueError("slowdown needs at least one repetition")
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in baseline_runs]) if len(
        baseline_runs
    ) else np.zeros(0)
    out: dict[str, Slowdown] = {}
    for s in stats:
        base = statistic(pooled, s)
        ratios = np.array([statistic(r, s) / base for r in runs], dtype=float)
        std = float(ratios.std(ddof=1)) if ratios.size > 1 else 0.0
        out[s] = Slowdown(s, base, ratios, float(ratios.mean()), std)
    return out


def inter_arrivals(ts_s: np.ndarray) -> np.ndarray:
    """Gaps between consecutive arrivals (arrivals sorted first)."""
    return np.diff(np.sort(np.asarray(ts_s, dtype=float)))


def jitter_summary(gaps_s: np.ndarray) -> dict[str, float]:
    """Mean, standard deviation and tail percentiles of inter-arrival gaps."""
    g = np.asarray(gaps_s, dtype=float)
    if g.size == 0:
        return {k: float("nan") for k in ("mean", "std", "p50", "p95", "p99", "max")}
    return {
        "mean": float(g.mean()),
        "std": float(g.std(ddof=1)) if g.size > 1 else 0.0,
        "p50": float(np.percentile(g, 50)),
        "p95": float(np.percentile(g, 95)),
        "p99": float(np.percentile(g, 99)),
        "max": float(g.max()),
    }


def rfc3550_jitter(send_s: np.ndarray, recv_s: np.ndarray) -> np.ndarray:
    """RFC 3550 interarrival jitter after each packet: ``J += (|D| - J) / 16``.

    ``D`` is the change in transit time (receive minus send) between
    consecutive packets in sending order.
    """
    send = np.asarray(send_s, dtype=float)
    recv = np.asarray(recv_s, dtype=float)
    order = np.argsort(send, kind="stable")
    transit = (recv - send)[order]
    d = np.abs(np.diff(transit))
    j = np.zeros(d.size)
    acc = 0.0
    for i, di in enumerate(d):
        acc += (di - acc) / 16.0
        j[i] = acc
    return j


def throughput_series(
    ts_s: np.ndarray, sizes: np.ndarray, bin_s: float, start_s: float | None = None,
    end_s: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(bin start times, bit/s per bin)`` over ``[start_s, end_s)`` in whole bins."""
    ts = np.asarray(ts_s, dtype=float)
    sz = np.asarray(sizes, dtype=float)
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    start = float(ts.min()) if start_s is None else start_s
    end = float(ts.max()) if end_s is None else end_s
    nbins = max(0, int(np.floor((end - start) / bin_s + 1e-9)))
    if end_s is None:
        nbins += 1  # include the last packet's bin
    idx = np.floor((ts - start) / bin_s).astype(np.int64)
    sel = (idx >= 0) & (idx < nbins)
    b = np.bincount(idx[sel], weights=sz[sel], minlength=nbins)
    return start + np.arange(nbins) * bin_s, b * 8.0 / bin_s


def available_bandwidth_truth(
    background_bytes_per_bin: np.ndarray, capacity_bps: float, bin_s: float = 1.0
) -> np.ndarray:
    """Capacity minus background bit rate per bin, floored at 0 (bit/s)."""
    used = np.asarray(background_bytes_per_bin, dtype=float) * 8.0 / bin_s
    return np.maximum(0.0, capacity_bps - used)


def percent_error(estimates: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``100 * (estimate - truth) / truth`` (NaN where truth is 0)."""
    e = np.asarray(estimates, dtype=float)
    t = np.asarray(truth, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t != 0, 100.0 * (e - t) / np.where(t != 0, t, 1.0), np.nan)
