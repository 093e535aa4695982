"""The numbers docs/paper.md quotes for Figures 2 and 3, from the study's ``results.json``.

``bench/paper_fig02_03.py STUDY [--json OUT]``, after ``swell run
experiments/paper/fig02_03_backgrounds.yaml -o STUDY``.

One row per run: the background's delivered IP rate towards the clients at
the bottleneck (server -> client), its share of the asked load as the run
reports it (payload over payload for Swing), the busiest 100 ms bin of its
time series (Figure 3), and the slope of its energy plot (Figure 2) from
octave 3 (8 ms) to the largest, by the Abry-Veitch weighted regression of
:func:`swell.analysis.energy.hurst_estimate` (Hurst = (slope + 1) / 2), with
the problems the run reports. The plots are the report's
(``energy-reverse.png``, ``timeseries-reverse.png``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paper_common import study_rows  # noqa: E402

from swell.analysis.energy import EnergyPlot, hurst_estimate  # noqa: E402

FIRST_OCTAVE = 3  # 2^3 ms = 8 ms of the 1 ms series


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run with its load, its busiest 100 ms and its energy slope."""
    rows = []
    for run in data["runs"]:
        rev = run["bottleneck"]["reverse"]
        row: dict[str, Any] = {
            "label": run["label"], "repetition": run.get("repetition", 0),
            "asked_s2c_mbps": (run.get("asked_mbps") or {}).get("reverse"),
            "delivered_s2c_mbps": float(rev["bg_mean_mbps"]),
            "delivered_share": ((run.get("load") or {}).get("reverse") or {}).get(
                "delivered_share"),
            "busiest_bin_mbps": max(rev.get("series_mbps") or [0.0]),
            "bin_s": rev.get("series_bin_s"),
            "problems": run.get("problems", []),
        }
        if rev.get("energy"):
            est = hurst_estimate(EnergyPlot.from_dict(rev["energy"]), FIRST_OCTAVE)
            row.update(slope=est.slope, slope_stderr=est.slope_stderr, hurst=est.hurst,
                       octaves=[est.j1, est.j2])
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    rows = study_rows(__doc__, rows_of, argv)
    print("| background | delivered s->c (IP) | share | busiest bin | energy slope from 8 ms "
          "(Hurst) | problems |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        share = f"{100 * r['delivered_share']:.0f}%" if r["delivered_share"] is not None else "-"
        slope = f"{r['slope']:+.2f} ({r['hurst']:.2f})" if "slope" in r else "-"
        print(f"| {r['label']} | {r['delivered_s2c_mbps']:.2f} | {share} | "
              f"{r['busiest_bin_mbps']:.1f} Mbit/s in {1000 * (r['bin_s'] or 0):.0f} ms | "
              f"{slope} | {'; '.join(r['problems'])[:300] or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
