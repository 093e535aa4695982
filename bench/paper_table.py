"""The numbers docs/paper.md quotes for one figure, from its study's ``results.json``.

``bench/paper_table.py STUDY [--json OUT]``, after ``swell run
experiments/paper/figNN_....yaml -o STUDY``.

One row per configuration (the repetitions of one sweep point), in study
order: what the background was asked and delivered towards the clients (the
server -> client IP rate at the bottleneck, per repetition, and its share of
the asked rate), the downloads the foreground finished, the pooled
percentiles of their response times, the increase of the mean response time
over the configuration's baseline (mean +- sd over the repetitions, each
repetition's mean against the baseline's pooled mean), the slowdown at the
median, 90th and 95th percentiles as ``swell report`` computes it
(:func:`swell.analysis.metrics.slowdown`), and the problems the runs report.
Figure 8's plot (slowdown against the capacity) is drawn by ``swell report``;
``bench/paper_fig08.py`` prints its table. This script only prints (and with
``--json`` stores) the table, so that every number on the page can be
recomputed from the stored results.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paper_common import response_times, study_rows  # noqa: E402

from swell.analysis.metrics import slowdown  # noqa: E402
from swell.experiments.results import baseline_for, group_runs  # noqa: E402

STATS = ("p50", "p90", "p95")


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per configuration with its load, response times and slowdowns."""
    groups = group_runs(data)
    rows = []
    for label, runs in groups.items():
        rts = [response_times(r) for r in runs]
        pooled = np.concatenate(rts) if rts else np.zeros(0)
        asked = [float((r.get("asked_mbps") or {}).get("reverse") or 0.0) for r in runs]
        got = [float(r["bottleneck"]["reverse"]["bg_mean_mbps"]) for r in runs]
        up = [float(r["bottleneck"]["forward"]["bg_mean_mbps"]) for r in runs]
        row: dict[str, Any] = {
            "label": label, "kind": runs[0].get("background_kind"),
            "point": runs[0].get("point"), "repetitions": len(runs),
            "asked_s2c_mbps": asked[0],
            "delivered_s2c_mbps": got, "delivered_c2s_mbps": up,
            # the run's own share: IP over IP for the open-loop kinds and playback,
            # payload over payload for Swing (whose target is payload)
            "delivered_share": [((r.get("load") or {}).get("reverse") or {}).get("delivered_share")
                                for r in runs],
            # what the run counts per direction (payload for Swing, IP for the others)
            "load_delivered_mbps": [{d: ((r.get("load") or {}).get(d) or {}).get("delivered_mbps")
                                     for d in ("reverse", "forward")} for r in runs],
            "load_asked_mbps": [{d: ((r.get("load") or {}).get(d) or {}).get("asked_mbps")
                                 for d in ("reverse", "forward")} for r in runs],
            "downloads": int(pooled.size),
            "problems": [p for r in runs for p in r.get("problems", [])],
        }
        if pooled.size:
            row.update({f"rt_p{q}_s": float(np.percentile(pooled, q)) for q in (5, 50, 90, 95)})
            row["rt_mean_s"] = float(pooled.mean())
            row["rt_max_s"] = float(pooled.max())
        base = baseline_for(data, label)
        base_rts = [r for r in (response_times(x) for x in groups.get(base, [])) if r.size]
        ok = [r for r in rts if r.size]
        if base and base != label and ok and base_rts:
            base_mean = float(np.concatenate(base_rts).mean())
            inc = np.array([r.mean() / base_mean - 1.0 for r in ok])
            row["baseline"] = base
            row["baseline_mean_s"] = base_mean
            row["increase_mean"] = float(inc.mean())
            row["increase_sd"] = float(inc.std(ddof=1)) if inc.size > 1 else 0.0
            for s, v in slowdown(ok, base_rts, STATS).items():
                row[f"slowdown_{s}"] = v.mean
                row[f"slowdown_{s}_sd"] = v.std
                row[f"slowdown_{s}_reps"] = [float(x) for x in v.per_rep]
        rows.append(row)
    return rows


def _f(x: float | None, fmt: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, fmt)


def main(argv: list[str] | None = None) -> int:
    rows = study_rows(__doc__, rows_of, argv)
    print("| config | asked s->c | delivered s->c (per rep) | share | c->s | downloads | "
          "p5 / p50 / p90 / p95 (s) | mean increase | slowdown p50 / p90 / p95 | problems |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        share = [s for s in r["delivered_share"] if s is not None]
        pct = " / ".join(_f(r.get(f"rt_p{q}_s"), ".3f") for q in (5, 50, 90, 95))
        inc = (f"{100 * r['increase_mean']:.0f}% +- {100 * r['increase_sd']:.0f}"
               if "increase_mean" in r else "-")
        sd = " / ".join(f"{_f(r.get(f'slowdown_{s}'))}+-{_f(r.get(f'slowdown_{s}_sd'))}"
                        for s in STATS) if "slowdown_p50" in r else "-"
        print(f"| {r['label']} | {_f(r['asked_s2c_mbps'])} | "
              f"{', '.join(_f(x) for x in r['delivered_s2c_mbps'])} | "
              f"{', '.join(f'{100 * s:.0f}%' for s in share) or '-'} | "
              f"{', '.join(_f(x) for x in r['delivered_c2s_mbps'])} | {r['downloads']} | "
              f"{pct} | {inc} | {sd} | {'; '.join(r['problems'])[:300] or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
