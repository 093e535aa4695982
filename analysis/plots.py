"""Plots for people: energy plots, time series, CDFs, slowdown bars (matplotlib Agg).

Each ``plot_*`` function takes plain values (no files read), draws one figure
and :func:`save` writes it as PNG and SVG side by side, atomically. Labels
carry units; energy plots label both the octave ``j`` (bottom) and the real
time scale ``2**j * D`` (top), and draw the 95% intervals as error bars.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from swell.analysis.compare import OctaveComparison  # noqa: E402
from swell.analysis.energy import EnergyPlot  # noqa: E402
from swell.fsutil import atomic_path  # noqa: E402

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def human_seconds(s: float) -> str:
    """``0.004 -> '4 ms'``, ``2.048 -> '2 s'``: short labels for time-scale ticks."""
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


DIRECTION_NAMES = {
    "c2s": "c2s, client to server",
    "s2c": "s2c, server to client",
    "out": "out, from the address set",
    "in": "in, to the address set",
    "all": "both directions",
}


def direction_label(name: str) -> str:
    """``'s2c'`` -> ``'s2c, server to client'`` (unknown names unchanged)."""
    return DIRECTION_NAMES.get(name, name)


def human_rate(bps: float) -> str:
    for unit, f in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(bps) >= f:
            return f"{bps / f:.3g} {unit}"
    return f"{bps:.3g} bit/s"


def save(
    fig: Figure, base: str | os.PathLike[str], formats: Sequence[str] = ("png", "svg")
) -> list[Path]:
    """Write ``base.png`` and ``base.svg`` atomically; return the paths."""
    out = []
    for fmt in formats:
        dest = Path(f"{os.fspath(base)}.{fmt}")
        with atomic_path(dest, suffix=f".{fmt}") as tmp:
            fig.savefig(tmp, format=fmt, dpi=130, bbox_inches="tight")
        out.append(dest)
    plt.close(fig)
    return out


def _color(colors: Sequence[str] | None, i: int) -> str:
    """The i-th series' colour: the caller's (stable across figures) or the palette's."""
    if colors is not None and i < len(colors):
        return colors[i]
    return COLORS[i % len(COLORS)]


def _time_scale_axis(ax: plt.Axes, bin_s: float, octaves: np.ndarray) -> None:
    """Top axis: the real time scale of the octaves under the bottom ticks."""
    top = ax.twiny()
    top.set_xlim(ax.get_xlim())
    ticks = [int(t) for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    top.set_xticks(ticks)
    top.set_xticklabels([human_seconds(2.0**t * bin_s) for t in ticks], fontsize=8)
    top.set_xlabel(f"time scale 2^j x {human_seconds(bin_s)}")


def plot_energy(
    plots: Sequence[tuple[str, EnergyPlot]],
    title: str = "Energy plot",
    unit: str = "bytes",
    floor: tuple[EnergyPlot, dict[int, float]] | None = None,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Overlay of log-scale diagrams with 95% intervals; optional floor band.

    ``floor=(reference, {octave: floor})`` shades ``reference.y +- floor``:
    the spread of the reference against itself.
    """
    fig, ax = plt.subplots(figsize=(8, 5))
    all_j: list[int] = []
    for i, (label, p) in enumerate(plots):
        ok = np.isfinite(p.y)
        ax.errorbar(
            p.octaves[ok], p.y[ok], yerr=p.ci[ok], label=label, color=_color(colors, i),
            marker=MARKERS[i % len(MARKERS)], markersize=4, capsize=3, linewidth=1.4,
        )
        all_j.extend(p.octaves[ok].tolist())
    if floor is not None:
        ref, fl = floor
        js = np.array([j for j in ref.octaves if int(j) in fl and np.isfinite(ref.y[ref.at(j)])])
        if js.size:
            yr = np.array([ref.y[ref.at(int(j))] for j in js])
            f = np.array([fl[int(j)] for j in js])
            ax.fill_between(js, yr - f, yr + f, color="0.6", alpha=0.25,
                            label="floor: reference first half vs second half")
    if all_j:
        ax.set_xlim(min(all_j) - 0.5, max(all_j) + 0.5)
        ax.set_xticks(range(min(all_j), max(all_j) + 1))
    ax.set_xlabel("octave j")
    ax.set_ylabel(f"log2 energy of {unit} per bin, bias-corrected (95% CI)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    if plots:
        _time_scale_axis(ax, plots[0][1].bin_s, np.array(all_j))
    ax.set_title(title, pad=28)
    fig.tight_layout()
    return fig


def plot_energy_difference(
    cmp: OctaveComparison, title: str = "Generated minus original"
) -> Figure:
    """Per-octave difference with its combined CI, and the +-floor band when present."""
    fig, ax = plt.subplots(figsize=(10, 4))
    ok = np.isfinite(cmp.diff)
    ax.axhline(0, color="0.3", linewidth=0.8)
    if cmp.floor is not None:
        f = np.where(np.isfinite(cmp.floor), cmp.floor, np.nan)
        ax.fill_between(cmp.octaves, -f, f, color="0.6", alpha=0.3, label="+- floor (pass band)")
        passed = cmp.passed
        judged = ok & np.isfinite(cmp.floor)
        ax.scatter(cmp.octaves[judged & passed], cmp.diff[judged & passed], color="#2ca02c",
                   zorder=3, label="within floor")
        ax.scatter(cmp.octaves[judged & ~passed], cmp.diff[judged & ~passed], color="#d62728",
                   zorder=3, marker="x", s=60, label="outside floor")
        if np.any(ok & ~judged):
            ax.scatter(cmp.octaves[ok & ~judged], cmp.diff[ok & ~judged], color="0.5",
                       zorder=3, marker="o", facecolors="none",
                       label="no floor (too few coefficients in a half)")
    ax.errorbar(cmp.octaves[ok], cmp.diff[ok], yerr=cmp.ci[ok], fmt="none", ecolor="0.2",
                capsize=3, label="difference, 95% CI")
    if cmp.octaves.size:
        ax.set_xlim(cmp.octaves.min() - 0.5, cmp.octaves.max() + 0.5)
        ax.set_xticks(cmp.octaves)
    ax.set_xlabel("octave j")
    ax.set_ylabel("difference of log2 energy")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if cmp.octaves.size:
        bin_s = float(cmp.time_scale_s[0] / 2.0 ** cmp.octaves[0])
        _time_scale_axis(ax, bin_s, cmp.octaves)
    ax.set_title(title, pad=28)
    fig.tight_layout()
    return fig


def plot_time_series(
    series: Sequence[tuple[str, np.ndarray, np.ndarray]],
    title: str = "Throughput",
    ylabel: str = "throughput (Mbit/s)",
    scale: float = 1e-6,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Lines of ``(label, times_s, values)``; values multiplied by ``scale``."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for i, (label, t, v) in enumerate(series):
        ax.plot(t, np.asarray(v) * scale, label=label, color=_color(colors, i),
                linewidth=1.0, drawstyle="steps-post")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def plot_cdfs(
    samples: Sequence[tuple[str, np.ndarray]],
    title: str = "Response times",
    xlabel: str = "response time (s)",
    logx: bool = False,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Empirical CDFs (step lines) of several samples."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (label, v) in enumerate(samples):
        x = np.sort(np.asarray(v, dtype=float)[np.isfinite(v)])
        if x.size == 0:
            continue
        p = np.arange(1, x.size + 1) / x.size
        ax.step(x, p, where="post", label=f"{label} (n={x.size})",
                color=_color(colors, i))
    if logx:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction <= x")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_slowdown_bars(
    groups: Sequence[tuple[str, dict[str, tuple[float, float]]]],
    stats: Sequence[str] = ("p5", "p50", "p90", "p95", "mean"),
    title: str = "Slowdown against no background",
) -> Figure:
    """Grouped bars: per background, ``{stat: (mean, std)}`` of the slowdown ratio."""
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(groups) + 3), 4.5))
    width = 0.8 / max(1, len(stats))
    x = np.arange(len(groups))
    for k, s in enumerate(stats):
        means = [g[1].get(s, (np.nan, 0.0))[0] for g in groups]
        stds = [g[1].get(s, (np.nan, 0.0))[1] for g in groups]
        ax.bar(x + (k - (len(stats) - 1) / 2) * width, means, width, yerr=stds, capsize=3,
               label=_stat_label(s), color=COLORS[k % len(COLORS)])
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xticks(x)
    ax.set_xticklabels([g[0] for g in groups])
    ax.set_ylabel("response time / no-background response time")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, title="statistic (mean +- sd over repetitions)", title_fontsize=8)
    fig.tight_layout()
    return fig


def _stat_label(s: str) -> str:
    if s == "mean":
        return "mean"
    if s == "p50":
        return "median"
    return f"{s[1:]}th percentile"
