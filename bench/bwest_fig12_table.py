"""The Figure 12 table (docs/bwest.md) from a study's results.json.

One row per background, one column group per estimator: the delivered
background, the truth (mean over runs of each run's mean truth over its
estimates' spans), the low and high estimates (SLoPS) or the estimate
(chirp) as mean ± sd over runs of each run's mean, and the error against the
truth per 1 s bin: mean ± sd over runs of each run's mean error, with the
number of estimates over all runs in brackets. For the chirp, also each
usable single chirp's error against the truth of its 1 s bin (mean ± sd over
runs of each run's mean, chirps over all runs in brackets): a smoothed
estimate needs ``smooth`` usable chirps, which a short run may not have. "held"
is how many of the chirps inside the smoothed estimates had their sender held
up mid-chirp and were read at their actual send gaps (runs from before that
analysis have no such count: "-"). "runs" is how many runs gave at least one estimate,
of how many, and in brackets how many of them the link engine flagged as held up (1% or
more of its frames 50 us or more late: the run's warning).

Usage: .venv/bin/python bench/bwest_fig12_table.py STUDY/results.json[.gz]
"""

from __future__ import annotations

import gzip
import json
import math
import sys
from collections import defaultdict
from typing import Any

import numpy as np


def _ms(values: list[float], nd: int = 1, sign: bool = False) -> str:
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if v.size == 0:
        return "none"
    fmt = f"{{:{'+' if sign else ''}.{nd}f}}"
    sd = v.std(ddof=1) if v.size > 1 else 0.0
    return f"{fmt.format(v.mean())} ± {sd:.{nd}f}"


def _mean(fg: dict[str, Any], key: str) -> float | None:
    return (fg.get("summary", {}).get(key) or {}).get("mean")


def _chirp_errors(fg: dict[str, Any]) -> list[float]:
    """Each usable single chirp's error (%) against the truth of its 1 s bin."""
    truth = fg.get("truth_mbps") or []
    out = []
    for t, v in fg.get("chirps", []):
        k = math.floor(t)
        if v is not None and math.isfinite(v) and 0 <= k < len(truth) and truth[k]:
            out.append(100 * (v / truth[k] - 1))
    return out


def main(path: str) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    order: list[str] = []
    for r in data["runs"]:
        bg, fg = r["point"]["background"], r["point"]["foreground"]
        groups[(bg, fg)].append(r)
        if bg not in order:
            order.append(bg)
    fgs = sorted({k[1] for k in groups}, key=lambda s: (s != "SLoPS", s))
    for fgl in fgs:
        chirp = fgl != "SLoPS"
        print(f"\n{fgl}:\n")
        if chirp:
            print("| background | asked | delivered | truth | estimate | error % (n) | "
                  "usable chirps | single-chirp error % (n) | held | held out | runs |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
        else:
            print("| background | asked | delivered | truth | low | high | midpoint | "
                  "error % (n) | low / high error % | runs |")
            print("|---|---|---|---|---|---|---|---|---|---|")
        for bg in order:
            runs = groups.get((bg, fgl), [])
            if not runs:
                continue
            f = [r["foreground"] for r in runs]
            head = (f"| {bg} | {runs[0]['load']['reverse']['asked_mbps']:.1f} | "
                    f"{_ms([r['load']['reverse']['bottleneck_bg_mbps'] for r in runs])} | "
                    f"{_ms([_mean(x, 'truth_mbps') for x in f])} |")
            n = sum(len(x.get("error_pct", [])) for x in f)
            late = sum(any("held the emulation up" in w for w in r.get("warnings", []))
                       for r in runs)
            got = sum(bool(x.get("error_pct")) for x in f)
            nruns = f"{got}/{len(runs)} ({late})"
            err = f"{_ms([_mean(x, 'error_pct') for x in f], sign=True)} ({n})"
            est = _ms([_mean(x, "estimate_mbps") for x in f])
            if chirp:
                ch = [c for x in f for c in x.get("chirps", [])]
                per_run = [_chirp_errors(x) for x in f]
                single = _ms([float(np.mean(e)) if e else None for e in per_run], sign=True)
                es = [e for x in f for e in x.get("estimates", []) if "held_chirps" in e]
                held = (f"{sum(e['held_chirps'] for e in es)}/{sum(e['chirps'] for e in es)}"
                        if es else "-")
                out = [x["chirps_held_out"] for x in f if "chirps_held_out" in x]
                held_out = str(sum(out)) if out else "-"
                print(f"{head} {est} | {err} | {sum(c[1] is not None for c in ch)}/{len(ch)} "
                      f"| {single} ({sum(len(e) for e in per_run)}) | {held} | {held_out} "
                      f"| {nruns} |")
            else:
                lo = _ms([_mean(x, "low_mbps") for x in f])
                hi = _ms([_mean(x, "high_mbps") for x in f])
                le = _ms([_mean(x, "error_low_pct") for x in f], sign=True)
                he = _ms([_mean(x, "error_high_pct") for x in f], sign=True)
                print(f"{head} {lo} | {hi} | {est} | {err} | {le} / {he} | {nruns} |")


if __name__ == "__main__":
    main(sys.argv[1])
