"""The report's sweep views: results against a swept parameter, energy against a baseline.

``swell report`` (:mod:`swell.experiments.report`) draws one bar or curve per
configuration. A study whose sweep varies a number besides the background (a
capacity sweep ``topology.bottleneck.rate_mbps: [5, 10, ...]``, an object size
``foreground.object_bytes: [1000000, 4096]``) asks for that number on an axis;
this module draws those views from ``results.json`` alone, for any study:

* **Sweep axis.** A point key other than ``background`` is an axis when every
  configuration's ``point`` has it, every value reads as a finite number and it
  takes at least two values. Each axis gets its own views; any other varying
  point key (a second axis, a loss model's name) is part of a line's name.
* ``slowdown-vs-<axis>.png``: the median and 90th-percentile slowdown in two
  panels against the axis, one line per background, each point the mean over
  repetitions with their standard deviation as error bars. The numbers are the
  report's own (:func:`slowdowns`, which the report's table and bars use): each
  configuration against :func:`~swell.experiments.results.baseline_for`, the
  spec's ``baseline`` or the run with no background at the same sweep point.
  A configuration without one is left out and a note under the plots says so.
  The x axis is logarithmic when the values span more than a decade.
* ``response-cdf-by-<axis>.png``: response-time CDFs (repetitions pooled), one
  panel per value of the axis, one line per background with its delivered
  rates at the bottleneck (mean over repetitions) in the legend.
* ``energy-diff.png`` (per direction a panel): per octave, the bottleneck
  energy (``bottleneck.<direction>.energy`` of repetition 0, as the report's
  energy plots) of each background minus the baseline background's at the same
  sweep point, with the combined 95% interval ``sqrt(ci_a^2 + ci_b^2)``. The
  baseline background is the first one in the sweep's order (the experiment's
  ``sweep.background`` list, then first appearance in the runs) that is not
  ``none`` and has energy at that point. Drawn only when the study has at least
  two such backgrounds.

``bench/paper_fig08.py`` and ``bench/paper_fig13_14.py`` compute their tables
with the same functions (:func:`slowdowns`, :func:`energy_diff`, :func:`band`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis import plots as P
from swell.analysis.energy import EnergyPlot
from swell.analysis.metrics import SLOWDOWN_STATS, Slowdown, slowdown
from swell.experiments.results import baseline_for

Groups = dict[str, list[dict[str, Any]]]
DIRECTIONS = {"reverse": "server -> client", "forward": "client -> server"}
AXIS_STATS = (("p50", "median"), ("p90", "90th percentile"))

CAPTIONS = {
    "slowdown": "Slowdown (response time over the baseline's: the spec's baseline, else the "
                "run with no background at the same sweep point) against {axis}: points are "
                "the mean over repetitions, error bars one standard deviation.",
    "cdf": "Foreground response times (repetitions pooled), one panel per value of {axis}; "
           "the legend gives each background's delivered rate at the bottleneck.",
    "energy": "Per octave, the bottleneck energy of each background minus the baseline "
              "background's ({baseline}) at the same sweep point (repetition 0), with the "
              "combined 95% interval. Above zero: more energy (burstier) at that time scale.",
}


def response_times(run: dict[str, Any]) -> np.ndarray:
    """The foreground's response times of one run (s; empty without any)."""
    return np.asarray((run.get("foreground") or {}).get("response_times_s") or [], float)


def slowdowns(data: dict[str, Any], groups: Groups,
              stats: tuple[str, ...] = SLOWDOWN_STATS) -> dict[str, dict[str, Slowdown]]:
    """Per configuration, its slowdown against its own baseline (``baseline_for``);
    configurations without a baseline or without response times are absent."""
    out = {}
    for label, runs in groups.items():
        base = baseline_for(data, label)
        if base is None or base == label:
            continue
        base_rts = [r for r in map(response_times, groups[base]) if r.size]
        rts = [r for r in map(response_times, runs) if r.size]
        if rts and base_rts:
            out[label] = slowdown(rts, base_rts, stats)
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _point(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return runs[0].get("point") or {}


def sweep_axes(groups: Groups) -> list[str]:
    """The numeric point keys (besides ``background``) that take two values or more."""
    keys: list[str] = []
    for runs in groups.values():
        keys += [k for k in _point(runs) if k != "background" and k not in keys]
    axes = []
    for key in keys:
        values = [_number(_point(runs).get(key)) for runs in groups.values()]
        if all(v is not None for v in values) and len(set(values)) > 1:
            axes.append(key)
    return axes


def background_of(label: str, runs: list[dict[str, Any]]) -> str:
    """The configuration's background label (its sweep point's), else its own label."""
    return str(_point(runs).get("background") or label)


def _is_none(runs: list[dict[str, Any]]) -> bool:
    return runs[0].get("background_kind") == "none"


def background_order(data: dict[str, Any], groups: Groups) -> list[str]:
    """Background labels in the sweep's order, then those only the runs name."""
    sweep = ((data.get("experiment") or {}).get("sweep") or {}).get("background") or []
    seen = {background_of(label, runs) for label, runs in groups.items()}
    order = [str(b.get("label")) for b in sweep
             if isinstance(b, dict) and str(b.get("label")) in seen]
    for label, runs in groups.items():
        name = background_of(label, runs)
        if name not in order:
            order.append(name)
    return order


def _rest(runs: list[dict[str, Any]], axis: str | None) -> tuple[tuple[str, str], ...]:
    """The sweep point without the background and ``axis``: what else tells lines apart."""
    return tuple(sorted((k, str(v)) for k, v in _point(runs).items()
                        if k not in ("background", axis)))


def _varying(groups: Groups, axis: str | None) -> set[str]:
    """Point keys besides background and ``axis`` that take several values."""
    values: dict[str, set[str]] = {}
    for runs in groups.values():
        for k, v in _rest(runs, axis):
            values.setdefault(k, set()).add(v)
    return {k for k, vs in values.items() if len(vs) > 1}


def short(key: str) -> str:
    """``topology.bottleneck.rate_mbps`` -> ``rate_mbps`` (file names, legends)."""
    return key.rsplit(".", 1)[-1]


def _line(name: str, rest: tuple[tuple[str, str], ...], varying: set[str]) -> str:
    extra = ", ".join(f"{short(k)}={v}" for k, v in rest if k in varying)
    return f"{name} ({extra})" if extra else name


def axis_rows(data: dict[str, Any], groups: Groups, axis: str,
              slow: dict[str, dict[str, Slowdown]] | None = None) -> list[dict[str, Any]]:
    """One row per configuration with a background: its axis value, line name and
    slowdowns ``{stat: (mean, sd)}`` (None without a baseline)."""
    slow = slowdowns(data, groups) if slow is None else slow
    varying = _varying(groups, axis)
    order = background_order(data, groups)
    rows = []
    for label, runs in groups.items():
        if _is_none(runs):
            continue
        name = background_of(label, runs)
        sd = slow.get(label)
        rows.append({"label": label, "background": name, "x": _number(_point(runs)[axis]),
                     "line": _line(name, _rest(runs, axis), varying),
                     "order": order.index(name), "repetitions": len(runs),
                     "baseline": baseline_for(data, label),
                     "slowdown": None if sd is None else
                     {s: (v.mean, v.std) for s, v in sd.items()}})
    return rows


def log_axis(xs: list[float]) -> bool:
    """A logarithmic axis when the positive values span more than a decade."""
    return bool(xs) and min(xs) > 0 and max(xs) / min(xs) > 10


def _tick(x: float) -> str:
    """``1000000.0`` -> ``1000000`` (not ``1e+06``), ``2.5`` -> ``2.5``."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e12 else f"{x:g}"


def _lines(rows: list[dict[str, Any]]) -> list[str]:
    return sorted({r["line"] for r in rows},
                  key=lambda n: min((r["order"], r["line"]) for r in rows if r["line"] == n))


def plot_slowdown_vs(rows: list[dict[str, Any]], axis: str, base: Path,
                     title: str | None = None) -> list[Path]:
    """The median and 90th-percentile slowdown against ``axis``, one line per background."""
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["slowdown"] and all(s in r["slowdown"] for s, _ in AXIS_STATS)]
    xs = sorted({r["x"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, (stat, name) in zip(axes, AXIS_STATS, strict=True):
        for i, line in enumerate(_lines(rows)):
            pts = sorted((r for r in rows if r["line"] == line), key=lambda r: r["x"])
            ax.errorbar([r["x"] for r in pts], [r["slowdown"][stat][0] for r in pts],
                        yerr=[r["slowdown"][stat][1] for r in pts], capsize=3, label=line,
                        marker=P.MARKERS[i % len(P.MARKERS)], color=P.COLORS[i % len(P.COLORS)])
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        if log_axis(xs):
            ax.set_xscale("log")
        ax.set_xticks(xs, [_tick(x) for x in xs])
        ax.minorticks_off()
        ax.set_xlabel(axis)
        ax.set_title(f"slowdown, {name}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("response time / baseline's")
    bases = {r["baseline"] for r in rows}
    fig.suptitle(title or (f"Slowdown against {next(iter(bases))}" if len(bases) == 1 else
                           f"Slowdown against no background at the same {short(axis)}"))
    fig.tight_layout()
    return P.save(fig, base)


def plot_cdfs_by(data: dict[str, Any], groups: Groups, axis: str, base: Path,
                 title: str | None = None) -> list[Path]:
    """Response-time CDFs, one panel per value of ``axis``, one line per background."""
    import matplotlib.pyplot as plt

    varying = _varying(groups, axis)
    order = background_order(data, groups)
    by: dict[float, list[tuple[tuple[int, str], str, np.ndarray, str]]] = {}
    for label, runs in groups.items():
        rts = [r for r in map(response_times, runs) if r.size]
        if not rts:
            continue
        name = background_of(label, runs)
        rates = [np.mean([r["bottleneck"][d]["bg_mean_mbps"] for r in runs])
                 for d in ("reverse", "forward")]
        line = _line(name, _rest(runs, axis), varying)
        by.setdefault(_number(_point(runs)[axis]), []).append(
            ((order.index(name), line), line, np.concatenate(rts),
             f" [s->c {rates[0]:.2f}, c->s {rates[1]:.2f} Mbit/s]"))
    names = sorted({key for entries in by.values() for key, *_ in entries})
    cols = min(3, len(by))
    rows = -(-len(by) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[len(by):]:
        ax.set_visible(False)
    for ax, (x, entries) in zip(axes.flat, sorted(by.items()), strict=False):
        for key, line, rt, rate in sorted(entries, key=lambda e: e[0]):
            v = np.sort(rt)
            i = names.index(key)
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post",
                    color=P.COLORS[i % len(P.COLORS)], label=f"{line} (n={v.size}){rate}")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("response time (s)")
        ax.set_title(f"{short(axis)} = {_tick(x)}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    for ax in axes[:, 0]:
        ax.set_ylabel("fraction <= x")
    fig.suptitle(title or f"Foreground response times by {short(axis)}")
    fig.tight_layout()
    return P.save(fig, base)


def energy_diff(a: EnergyPlot, b: EnergyPlot) -> list[dict[str, float]]:
    """Per octave both plots have (finite), ``a - b`` and the combined 95% interval."""
    out = []
    for j in a.octaves:
        ia, ib = a.at(int(j)), b.at(int(j)) if int(j) in b.octaves else None
        if ib is None or not (np.isfinite(a.y[ia]) and np.isfinite(b.y[ib])):
            continue
        out.append({"octave": int(j), "scale_s": float(a.time_scale_s[ia]),
                    "diff": float(a.y[ia] - b.y[ib]),
                    "ci": float(np.hypot(a.ci[ia], b.ci[ib]))})
    return out


def band(diffs: list[dict[str, float]], lo: int, hi: int) -> dict[str, Any]:
    """Mean difference and mean interval over octaves ``lo..hi``; ``shown`` when the
    difference is beyond the interval."""
    sel = [d for d in diffs if lo <= d["octave"] <= hi]
    if not sel:
        return {"octaves": [], "mean_diff": None, "mean_ci": None, "shown": False}
    md = float(np.mean([d["diff"] for d in sel]))
    mc = float(np.mean([d["ci"] for d in sel]))
    return {"octaves": [d["octave"] for d in sel], "mean_diff": md, "mean_ci": mc,
            "shown": abs(md) > mc, "sign": "more" if md > 0 else "less"}


def energy_against_baseline(data: dict[str, Any], groups: Groups,
                            direction: str) -> list[dict[str, Any]]:
    """Each background's energy minus the baseline background's at the same sweep point.

    Empty unless at least two backgrounds that are not ``none`` have energy in
    ``direction``. Entries: ``background``, ``baseline``, ``label``, ``point`` (the
    rest of the sweep point), ``plot`` (its EnergyPlot), ``per_octave``."""
    order = background_order(data, groups)
    at: dict[tuple[tuple[str, str], ...], list[tuple[int, str, str, EnergyPlot]]] = {}
    for label, runs in groups.items():
        e = runs[0]["bottleneck"][direction].get("energy")
        if e and not _is_none(runs):
            name = background_of(label, runs)
            at.setdefault(_rest(runs, None), []).append(
                (order.index(name), name, label, EnergyPlot.from_dict(e)))
    if len({name for entries in at.values() for _, name, _, _ in entries}) < 2:
        return []
    out = []
    for point, entries in at.items():
        entries.sort(key=lambda e: e[0])
        _, base_name, _, base_plot = entries[0]
        out += [{"background": name, "baseline": base_name, "label": label,
                 "point": point, "plot": plot, "per_octave": energy_diff(plot, base_plot)}
                for _, name, label, plot in entries[1:]]
    return out


def _point_order(point: tuple[tuple[str, str], ...]) -> tuple[tuple[float, str], ...]:
    """Sweep points in numeric order where their values are numbers (5 before 10)."""
    return tuple((x if (x := _number(v)) is not None else math.inf, v) for _, v in point)


def plot_energy_diffs(diffs: dict[str, list[dict[str, Any]]], varying: set[str], base: Path,
                      title: str | None = None) -> list[Path]:
    """Per direction a panel: every background's difference with its 95% interval."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(diffs), figsize=(6 * len(diffs), 4.2), sharey=True,
                             squeeze=False)
    for ax, (d, entries) in zip(axes[0], diffs.items(), strict=True):
        names = list(dict.fromkeys(e["background"] for e in entries))
        points = sorted({e["point"] for e in entries}, key=_point_order)
        n = len(names) * len(points)
        ax.axhline(0, color="0.3", linewidth=0.8)
        for e in entries:
            i, k = names.index(e["background"]), points.index(e["point"])
            c = i * len(points) + k
            q = e["per_octave"]
            ax.errorbar(np.array([x["octave"] for x in q]) + (c - (n - 1) / 2) * 0.08,
                        [x["diff"] for x in q], yerr=[x["ci"] for x in q],
                        color=P.COLORS[c % len(P.COLORS)], marker=P.MARKERS[i % len(P.MARKERS)],
                        markersize=4, capsize=2, linewidth=1,
                        linestyle=("-", ":", "--", "-.")[i % 4],
                        label=_line(f"{e['background']} - {e['baseline']}", e["point"], varying))
        bin_s = entries[0]["plot"].bin_s
        ax.set_xlabel(f"octave j (time scale 2^j x {P.human_seconds(bin_s)})")
        ax.set_title(f"{d} ({DIRECTIONS.get(d, d)})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("log2 energy difference")
    fig.suptitle(title or "Background energy minus the baseline background's, 95% intervals")
    fig.tight_layout()
    return P.save(fig, base)


def sweep_figures(data: dict[str, Any], groups: Groups, out: Path, wanted: set[str],
                  slow: dict[str, dict[str, Slowdown]]) -> tuple[list[tuple[Path, str]],
                                                                 list[str]]:
    """Every sweep view the study has, into ``out``: (PNG, caption) pairs and the notes
    on what could not be drawn."""
    figures: list[tuple[Path, str]] = []
    notes: list[str] = []
    for axis in sweep_axes(groups):
        if "slowdown" in wanted:
            rows = axis_rows(data, groups, axis, slow)
            notes += [f"slowdown against {axis}: {r['label']} left out, no run without "
                      f"background at {short(axis)} = {_tick(r['x'])} (or no response times)"
                      for r in rows if not r["slowdown"]]
            if any(r["slowdown"] for r in rows):
                figures += [(p, CAPTIONS["slowdown"].format(axis=axis)) for p in
                            plot_slowdown_vs(rows, axis, out / f"slowdown-vs-{short(axis)}")
                            if p.suffix == ".png"]
        if "cdf" in wanted and any(response_times(r).size for rs in groups.values()
                                   for r in rs):
            figures += [(p, CAPTIONS["cdf"].format(axis=axis)) for p in
                        plot_cdfs_by(data, groups, axis, out / f"response-cdf-by-{short(axis)}")
                        if p.suffix == ".png"]
    if "energy" in wanted:
        diffs = {d: e for d in DIRECTIONS if (e := energy_against_baseline(data, groups, d))}
        if diffs:
            bases = sorted({e["baseline"] for es in diffs.values() for e in es})
            figures += [(p, CAPTIONS["energy"].format(baseline=", ".join(bases))) for p in
                        plot_energy_diffs(diffs, _varying(groups, None), out / "energy-diff")
                        if p.suffix == ".png"]
    return figures, notes
