"""The MMPP fit on the shared logs: the table of docs/packet-mmpp.md ("Measured").

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_mmpp_fit.py [--data DIR]

Per setting: intervals, lags K, scales x marginal states, IC over lags 0..K and
1..K, the IC floor (an exact model on logs of this length), the count-histogram
KS, and the re-fit check (20x the data's intervals, at least 20,000, generated,
counted, refitted with the same lags: IC against the same data and its
difference from the original). WC98: the per-minute request counts of the 48 h
from 8 June 1998 22:00 (the RPS paper's window; sessions cannot be told apart in
a count file).
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import numpy as np

from swell.extract.mmpp import fit_counts, refit_check
from swell.extract.weblogs import count_series, read_events

SETTINGS = [
    ("NASA sessions 60 s (defaults)", "nasa_19950701.tsv", "sessions", 60.0),
    ("NASA requests 60 s", "nasa_19950701.tsv", "requests", 60.0),
    ("NASA requests 10 s", "nasa_19950701.tsv", "requests", 10.0),
    ("NASA sessions 10 s", "nasa_19950701.tsv", "sessions", 10.0),
    ("Apache requests 1 s", "elastic_examples_apache_logs.log", "requests", 1.0),
]


def wc98_window(path: Path) -> list[np.ndarray]:
    ev = read_events(path)
    t0 = dt.datetime(1998, 6, 8, 22, 0, tzinfo=dt.UTC).timestamp()
    keep = (ev.times >= t0) & (ev.times < t0 + 48 * 3600)
    assert ev.counts is not None
    return [np.asarray(ev.counts[keep], dtype=np.int64)]


def row(label: str, segs: list[np.ndarray], iv: float) -> str:
    m = fit_counts(segs, iv, where=label)
    r = m.report
    c = refit_check(m, seed=1)
    return (f"| {label} | {r['intervals']}"
            + (f" ({r['segments']} stretches)" if r["segments"] > 1 else "")
            + f" | {r['max_lag']} | {r['scales']}x{r['marginal_states']} ({r['states']}) | "
            f"{100 * r['ic']:.2f} % | {100 * r['ic_lags_1']:.2f} % | "
            f"{100 * r['ic_floor']:.1f} % | {r['ks']:.3f} | "
            f"{100 * c['ic_refit_vs_data']:.2f} % "
            f"({100 * abs(c['ic_refit_vs_data'] - c['ic_original']):.2f}) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data/weblogs")
    args = ap.parse_args()
    d = Path(args.data)
    print("| data | intervals | K | scales x marginal (states) | IC 0..K | IC 1..K | IC floor "
          "| KS | re-fit IC vs data (diff) |\n|---|---|---|---|---|---|---|---|---|")
    for label, name, what, iv in SETTINGS:
        print(row(label, count_series(read_events(d / name), iv, what).segments, iv),
              flush=True)
    wc = d / "wc98_per_minute_merged.csv"
    if wc.exists():
        print(row("WC98 requests 60 s, 48 h from 8 June 22:00", wc98_window(wc), 60.0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
