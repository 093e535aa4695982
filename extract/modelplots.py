"""CDF plots of every distribution of a Swing model (PNG and SVG, matplotlib Agg).

One figure per parameter: one empirical CDF line per application (the eight
largest by bytes, to stay readable), a log x axis where the samples span more
than two decades, and the sample count in the legend. Network parameters get
one figure each with a line per side (client, server), measured hosts only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from swell.extract.model import PARAM_UNITS, SwingModel
from swell.extract.network import NET_PARAMS, SIDES
from swell.extract.sessions import APP_PARAMS

MAX_APPS = 8
SKIP = ("sessionStart", "rreServer")


def _cdf_axes(title: str, xlabel: str, series: list[tuple[str, np.ndarray]]) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    positive = np.concatenate([v[v > 0] for _, v in series]) if series else np.zeros(0)
    log = len(positive) > 1 and positive.max() / max(positive.min(), 1e-12) > 100
    for label, v in series:
        x = np.sort(v.astype(float))
        if log:
            x = x[x > 0]
        if len(x) == 0:
            continue
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(x, y, where="post", label=f"{label} (n={len(x)})")
    if log:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig, plt


def _save(fig: Any, plt: Any, dest: Path, name: str) -> list[Path]:
    out = []
    for ext in ("png", "svg"):
        path = dest / f"{name}.{ext}"
        tmp = dest / f".{name}.tmp.{ext}"
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
        out.append(path)
    plt.close(fig)
    return out


def plot_model(model: SwingModel, dest: str | os.PathLike[str]) -> list[Path]:
    """Write the CDF plots of ``model`` into ``dest``; return the files written."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    info = {a: model.app_info(a) for a in model.apps}
    apps = sorted(info, key=lambda a: -(info[a]["bytes_c2s"] + info[a]["bytes_s2c"]))[:MAX_APPS]
    files: list[Path] = []
    for p in APP_PARAMS:
        if p in SKIP:
            continue
        series = [(a, model.samples(a, p)) for a in apps if len(model.samples(a, p))]
        fig, plt = _cdf_axes(f"{p} per application", PARAM_UNITS.get(p, p), series)
        files += _save(fig, plt, dest, f"app_{p}")
    for p in NET_PARAMS:
        series = [(s, model.net(s, p, measured_only=True)) for s in SIDES]
        series = [(s, v) for s, v in series if len(v)]
        fig, plt = _cdf_axes(f"{p} per host (measured)", PARAM_UNITS.get(p, p), series)
        files += _save(fig, plt, dest, f"net_{p}")
    return files
