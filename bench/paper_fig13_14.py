"""Figures 13 and 14 of the paper from their studies: tables for ``docs/``.

``bench/paper_fig13_14.py --fig13 STUDY13 --fig14 STUDY14... --out docs/paper``, after
``swell run experiments/paper/fig13_reverse.yaml`` and ``fig14_timescales.yaml``
(any durations: the files' own or shortened through an ``extends:`` overlay).

The figures' plots are ``swell report``'s (:mod:`swell.experiments.report_sweep`):
Figure 13's response-time CDFs per bottleneck rate (``response-cdf-by-rate_mbps``)
and Figure 14's energy plots and per-octave differences against the base model
(``energy-<direction>``, ``energy-diff``). This script tabulates their numbers
with the same functions.

Figure 13 (reverse-path load): per bottleneck rate, the 1 MB downloads' response
times for no background (NBG) and the two backgrounds with the same load towards
the clients and about 1 versus 10 Mbit/s against it (Rev1, Rev10), with each
background's measured rates at the bottleneck.

Figure 14 (time scales): per octave the difference of the background's energy at
the bottleneck (1 ms byte series, Abry-Veitch; ``bottleneck.<direction>.energy``
of each run) of zero think time and access links capped at 2 Mbit/s against the
base model, with its 95% interval (the two plots' intervals combined:
``sqrt(ci_a^2 + ci_b^2)``; :func:`~swell.experiments.report_sweep.energy_diff`,
the base being the report's baseline background). The paper's octaves: 4-32 ms
are octaves 2-5 of the 1 ms series, 1-8 s octaves 10-13. A shift counts as shown
when the mean difference over those octaves is beyond the mean combined interval;
otherwise the table says it is not resolved at this run length. ``--fig14-seeds``
pairs Base and ZeroThink runs of several studies and plots every pair
(``fig14-zero-think[-TAG].png``, several studies: not a report's view).

Writes ``fig13_14.json`` (the numbers the Markdown in ``docs/fig13-14.md`` quotes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.analysis import plots as P  # noqa: E402
from swell.analysis.energy import EnergyPlot  # noqa: E402
from swell.experiments.report_sweep import (  # noqa: E402
    band,
    energy_against_baseline,
    energy_diff,
    response_times,
)
from swell.experiments.results import group_runs, load_results  # noqa: E402
from swell.fsutil import write_json  # noqa: E402

BANDS = {"4-32 ms": (2, 5), "1-8 s": (10, 13)}


def _bg(run: dict[str, Any]) -> dict[str, float]:
    return {d: round(run["bottleneck"][d]["bg_mean_mbps"], 3) for d in ("forward", "reverse")}


def fig13(study: Path) -> dict[str, Any]:
    """Per bottleneck rate and background, every repetition: downloads, the background's
    offered load (the schedule's, in the window) and measured rates at the bottleneck,
    median and p90; ``summary``: per configuration, the mean and sd over repetitions."""
    data = load_results(study)
    rows = []
    for label, runs in group_runs(data).items():
        for run in runs:
            rt = response_times(run)
            load = run.get("load") or {}
            rows.append({
                "bottleneck_mbps": float(run["point"].get("topology.bottleneck.rate_mbps")),
                "label": label, "name": run.get("background_label") or label,
                "repetition": int(run.get("repetition", 0)), "seed": run.get("seed"),
                "downloads": int(rt.size), "bg_mbps": _bg(run),
                "offered_mbps": {d: round(load[d]["offered_mbps"], 3)
                                 for d in ("forward", "reverse")
                                 if (load.get(d) or {}).get("offered_mbps") is not None},
                "median_s": float(np.median(rt)) if rt.size else None,
                "p90_s": float(np.percentile(rt, 90)) if rt.size else None,
                "problems": run.get("problems", [])})
    rows.sort(key=lambda r: (-r["bottleneck_mbps"], r["label"], r["repetition"]))
    summary = []
    for key in dict.fromkeys((r["bottleneck_mbps"], r["name"]) for r in rows):
        mine = [r for r in rows if (r["bottleneck_mbps"], r["name"]) == key]
        entry: dict[str, Any] = {"bottleneck_mbps": key[0], "name": key[1], "runs": len(mine)}
        for field in ("median_s", "p90_s"):
            vals = np.array([r[field] for r in mine if r[field] is not None], dtype=float)
            entry[field] = _mean_sd(vals)
        for d in ("forward", "reverse"):
            entry[f"bg_{d}_mbps"] = _mean_sd(np.array([r["bg_mbps"][d] for r in mine]))
        summary.append(entry)
    return {"rows": rows, "summary": summary, "duration_s": data["experiment"].get("duration_s"),
            "repetitions": data["experiment"].get("repetitions"),
            "seeds": data["experiment"].get("seeds", "per_run")}


def _mean_sd(vals: np.ndarray) -> list[float] | None:
    """[mean, sd] (sd 0 for one value), None for none."""
    if not vals.size:
        return None
    return [float(vals.mean()), float(vals.std(ddof=1)) if vals.size > 1 else 0.0]


def fig14(studies: list[Path]) -> dict[str, Any]:
    """The figure's numbers from one study of the file, or from several that together
    hold its runs (overlays of the file, each with part of its sweep, run at once)."""
    parts = [load_results(study) for study in studies]
    data = {**parts[0], "runs": [run for part in parts for run in part["runs"]]}
    groups = group_runs(data)
    rts = []
    for label, runs in groups.items():
        run = runs[0]
        rt = response_times(run)
        rts.append({"label": label, "object_bytes": run["point"].get("foreground.object_bytes"),
                    "downloads": int(rt.size), "bg_mbps": _bg(run),
                    "problems": run.get("problems", []),
                    "median_s": float(np.median(rt)) if rt.size else None,
                    "p90_s": float(np.percentile(rt, 90)) if rt.size else None})
    result: dict[str, Any] = {"responses": rts, "shifts": {},
                              "duration_s": data["experiment"].get("duration_s")}
    for d in ("reverse", "forward"):
        entries = sorted(energy_against_baseline(data, groups, d),
                         key=lambda e: (e["background"], e["point"]))
        for e in entries:
            obj = dict(e["point"]).get("foreground.object_bytes")
            diffs = e["per_octave"]
            result["shifts"].setdefault(d, {}).setdefault(e["background"], {})[obj] = {
                "per_octave": diffs,
                **{b: band(diffs, lo, hi) for b, (lo, hi) in BANDS.items()}}
    return result


def fig14_seeds(studies: list[Path], out: Path, tag: str = "",
                stand_in: str = "") -> dict[str, Any]:
    """Base against ZeroThink over several studies (one run each, its own seed).

    Pairs the k-th Base study with the k-th ZeroThink study (independent draws, as
    a study's runs are) and gives, per direction and band, each pair's mean
    difference over the band's octaves, the mean over pairs, their spread and the
    mean Abry-Veitch interval of one pair; plots every pair's per-octave difference
    and their mean (``fig14-zero-think[-TAG].png``; ``stand_in`` names the background
    in its title).
    """
    import matplotlib.pyplot as plt

    runs: dict[str, list[dict[str, Any]]] = {"Base": [], "ZeroThink": []}
    for study in studies:
        for run in load_results(study)["runs"]:
            name = "ZeroThink" if "ZeroThink" in run["label"] else "Base"
            runs[name].append(run)
    pairs = list(zip(runs["Base"], runs["ZeroThink"], strict=False))
    result: dict[str, Any] = {"pairs": len(pairs), "runs": [], "bands": {}}
    for name, rs in runs.items():
        for run in rs:
            rt = response_times(run)
            result["runs"].append({"variant": name, "seed": run["seed"], "bg_mbps": _bg(run),
                                   "duration_s": run["spec"].get("duration_s"),
                                   "downloads": int(rt.size),
                                   "median_s": float(np.median(rt)) if rt.size else None,
                                   "p90_s": float(np.percentile(rt, 90)) if rt.size else None,
                                   "problems": run.get("problems", [])})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    for ax, d in zip(axes, ("reverse", "forward"), strict=True):
        diffs = [energy_diff(EnergyPlot.from_dict(z["bottleneck"][d]["energy"]),
                             EnergyPlot.from_dict(b["bottleneck"][d]["energy"]))
                 for b, z in pairs]
        for name, (lo, hi) in BANDS.items():
            per = [band(x, lo, hi) for x in diffs]
            md = np.array([q["mean_diff"] for q in per], float)
            result["bands"].setdefault(d, {})[name] = {
                "pair_diffs": [round(float(x), 3) for x in md],
                "mean_diff": float(np.mean(md)), "sd_pairs": float(np.std(md, ddof=1))
                if md.size > 1 else None, "mean_ci_one_pair": float(np.mean(
                    [q["mean_ci"] for q in per])), "octaves": per[0]["octaves"]}
        ax.axhline(0, color="0.3", linewidth=0.8)
        for lo, hi in BANDS.values():
            ax.axvspan(lo - 0.5, hi + 0.5, color="0.85", alpha=0.5)
        octs = sorted({q["octave"] for x in diffs for q in x})
        table = np.full((len(diffs), len(octs)), np.nan)
        for i, x in enumerate(diffs):
            for q in x:
                table[i, octs.index(q["octave"])] = q["diff"]
            ax.plot([q["octave"] for q in x], [q["diff"] for q in x], color="0.6",
                    linewidth=0.8, marker=".", label="one pair (seed k)" if i == 0 else None)
        result.setdefault("per_octave", {})[d] = {
            str(o): {"pairs": [None if np.isnan(x) else round(float(x), 3) for x in table[:, i]],
                     "mean": round(float(np.nanmean(table[:, i])), 3)}
            for i, o in enumerate(octs)}
        ax.plot(octs, np.nanmean(table, axis=0), color=P.COLORS[0], linewidth=2, marker="o",
                label=f"mean of {len(diffs)} pairs")
        ax.set_xlabel("octave j (time scale 2^j ms)")
        ax.set_title(f"{d}: ZeroThink - Base; shaded 4-32 ms and 1-8 s")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("log2 energy difference")
    axes[1].legend(fontsize=8)
    fig.suptitle("Figure 14: zero think time against the base model, pairs of runs"
                 + (f" ({stand_in})" if stand_in else ""))
    fig.tight_layout()
    fig.savefig(out / f"fig14-zero-think{'-' + tag if tag else ''}.png", dpi=110)
    plt.close(fig)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fig13", type=Path)
    ap.add_argument("--fig14", type=Path, nargs="+",
                    help="the study of fig14_timescales.yaml, or studies holding parts of it")
    ap.add_argument("--fig14-seeds", type=Path, nargs="+",
                    help="studies of Base and ZeroThink alone (every run its own seed)")
    ap.add_argument("--tag", default="", help="--fig14-seeds: suffix of the plot's name and "
                    "of the JSON key (another stand-in beside the first)")
    ap.add_argument("--stand-in", default="", help="--fig14-seeds: the background, for the title")
    ap.add_argument("--out", type=Path, default=Path("docs/paper"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    if args.fig13:
        summary["fig13"] = fig13(args.fig13)
    if args.fig14:
        summary["fig14"] = fig14(args.fig14)
    if args.fig14_seeds:
        key = "fig14_zero_think" + (f"_{args.tag}" if args.tag else "")
        summary[key] = fig14_seeds(args.fig14_seeds, args.out, args.tag, args.stand_in)
    path = args.out / "fig13_14.json"
    if path.exists():
        summary = {**json.loads(path.read_text()), **summary}
    write_json(path, summary)
    print(json.dumps({k: v for k, v in summary.items()}, indent=1)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
