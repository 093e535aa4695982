"""Figure 8 of the paper from its study: slowdown against the bottleneck's capacity.

``bench/paper_fig08.py STUDY --out docs/paper/fig08_capacity``, after
``swell run experiments/paper/fig08_capacity.yaml -o STUDY`` (any durations).

The paper's Figure 8 plots, against the shared link's capacity (5-100 Mbit/s),
the median and 90th-percentile slowdown of 1 MB downloads relative to no
background at the same capacity, for a bursty (Auck) and a smooth (Poisson)
background of the same mean rate. ``swell report`` draws that figure from the
study's ``results.json`` (``slowdown-vs-rate_mbps.png``,
:mod:`swell.experiments.report_sweep`); this script only tabulates the same
numbers: per capacity and background, the slowdowns the report plots
(:func:`~swell.experiments.report_sweep.slowdowns`, against the run with no
background at the same sweep point; mean over the repetitions and their
standard deviation), the background's delivered rate at the bottleneck
towards the clients (IP level) and the ratio Auck / Poisson at the 90th
percentile, the number the paper quotes ("around a factor of 1.5").

Writes ``fig08.json`` into ``--out`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paper_common import response_times  # noqa: E402

from swell.experiments.report_sweep import slowdowns  # noqa: E402
from swell.experiments.results import baseline_for, group_runs, load_results  # noqa: E402

RATE_KEY = "topology.bottleneck.rate_mbps"


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (capacity, background) with its slowdowns and delivered load."""
    groups = group_runs(data)
    slow = slowdowns(data, groups, ("p50", "p90"))
    rows = []
    for label, runs in groups.items():
        if runs[0].get("background_kind") == "none":
            continue
        base = baseline_for(data, label)
        base_rts = [r for r in (response_times(x) for x in groups.get(base, [])) if r.size]
        rts = [r for r in (response_times(x) for x in runs) if r.size]
        row: dict[str, Any] = {
            "capacity_mbps": float(runs[0]["point"][RATE_KEY]),
            "background": runs[0]["point"].get("background") or label,
            "label": label, "repetitions": len(runs),
            "downloads": int(sum(r.size for r in rts)),
            "baseline_downloads": int(sum(r.size for r in base_rts)),
            "delivered_s2c_mbps": [float(r["bottleneck"]["reverse"]["bg_mean_mbps"])
                                   for r in runs],
            "problems": [p for r in runs for p in r.get("problems", [])],
        }
        if label in slow:
            sd = slow[label]
            row.update({f"slowdown_{s}": v.mean for s, v in sd.items()})
            row.update({f"slowdown_{s}_sd": v.std for s, v in sd.items()})
            row["baseline_p50_s"] = sd["p50"].baseline
        rows.append(row)
    return rows


def ratios(rows: list[dict[str, Any]], a: str, b: str) -> dict[float, float]:
    """Per capacity, the 90th-percentile slowdown of background ``a`` over ``b``."""
    by = {(r["capacity_mbps"], r["background"]): r for r in rows}
    out = {}
    for cap in sorted({r["capacity_mbps"] for r in rows}):
        ra, rb = by.get((cap, a)), by.get((cap, b))
        if ra and rb and "slowdown_p90" in ra and "slowdown_p90" in rb:
            out[cap] = ra["slowdown_p90"] / rb["slowdown_p90"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", help="study directory or its results.json")
    ap.add_argument("--out", required=True, help="directory for the JSON")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = rows_of(load_results(args.study))
    ratio = ratios(rows, "Auck", "Poisson")
    (out / "fig08.json").write_text(json.dumps({"rows": rows, "p90_auck_over_poisson":
                                                {f"{k:g}": v for k, v in ratio.items()}},
                                               indent=1) + "\n")
    print("| capacity | background | delivered s->c | downloads | slowdown p50 | "
          "slowdown p90 | p90 Auck / Poisson |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["capacity_mbps"], r["background"])):
        d = ", ".join(f"{x:.2f}" for x in r["delivered_s2c_mbps"])
        q = ratio.get(r["capacity_mbps"]) if r["background"] == "Auck" else None
        print(f"| {r['capacity_mbps']:g} | {r['background']} | {d} | {r['downloads']} | "
              f"{r.get('slowdown_p50', float('nan')):.2f} | "
              f"{r.get('slowdown_p90', float('nan')):.2f} | "
              f"{'' if q is None else f'{q:.2f}'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
