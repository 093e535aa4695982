"""The MMPP fit on the shared logs: the tables of docs/packet-mmpp.md ("Measured").

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_mmpp_fit.py [--data DIR] [--reps 10]

Table 1, per setting: intervals, lags K, scales x marginal states, IC over lags
0..K and 1..K, the IC floor (an exact model's autocovariance against its own
logs of this length), the self-fit IC (an exact model's logs of this length
fitted again by the same procedure: median and 10-90 % range), the variance of
a straight line through each segment against the variance beyond Poisson, the
count-histogram KS, and the re-fit check (20x the data's intervals, at least
20,000, generated, counted, refitted with the same lags: IC against the same data
and its difference from the original). WC98: the per-minute request counts of
the 48 h from 8 June 1998 22:00 (the RPS paper's window; sessions cannot be told
apart in a count file).

Table 2, the length a log needs: from the fitted NASA models (sessions and
requests per minute), ``--reps`` logs of N intervals each (the data's length, the
bottleneck test's 319, 1,000, 5,000, the RPS paper's 17,280, 20,000) fitted
again with the data's lags: their own IC (what the procedure reaches on a log
that long when the model is right) and their IC against the NASA data (the
re-fit check at that length) with its distance from the original IC.

Table 3, the yardstick: NASA's IC at other interval lengths and lag ranges, each
with its self-fit range.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from pathlib import Path

import numpy as np

from swell.extract.mmpp import (
    MMPPModel,
    fit_counts,
    inequality_coefficient,
    refit_check,
    simulate,
)
from swell.extract.weblogs import count_series, read_events

SETTINGS = [
    ("NASA sessions 60 s (defaults)", "nasa_19950701.tsv", "sessions", 60.0),
    ("NASA requests 60 s", "nasa_19950701.tsv", "requests", 60.0),
    ("NASA requests 10 s", "nasa_19950701.tsv", "requests", 10.0),
    ("NASA sessions 10 s", "nasa_19950701.tsv", "sessions", 10.0),
    ("Apache requests 1 s", "elastic_examples_apache_logs.log", "requests", 1.0),
]
LENGTHS = (319, 1000, 5000, 17280, 20000)


def wc98_window(path: Path) -> list[np.ndarray]:
    ev = read_events(path)
    t0 = dt.datetime(1998, 6, 8, 22, 0, tzinfo=dt.UTC).timestamp()
    keep = (ev.times >= t0) & (ev.times < t0 + 48 * 3600)
    assert ev.counts is not None
    return [np.asarray(ev.counts[keep], dtype=np.int64)]


def _pct(xs: list[float]) -> str:
    lo, mid, hi = 100 * np.percentile(xs, [10, 50, 90])
    return f"{mid:.1f} % ({lo:.1f}-{hi:.1f})"


def row(label: str, segs: list[np.ndarray], iv: float, reps: int) -> str:
    m = fit_counts(segs, iv, floor_reps=reps, where=label)
    r = m.report
    c = refit_check(m, seed=1)
    excess = r["var_data"] - r["mean_data"]
    lo, hi = r["ic_selffit_range"]
    return (
        f"| {label} | {r['intervals']}"
        + (f" ({r['segments']} stretches)" if r["segments"] > 1 else "")
        + f" | {r['max_lag']} | {r['scales']}x{r['marginal_states']} ({r['states']}) | "
        f"{100 * r['ic']:.2f} % | {100 * r['ic_lags_1']:.2f} % | "
        f"{100 * r['ic_floor']:.1f} % | {100 * r['ic_selffit']:.1f} % "
        f"({100 * lo:.1f}-{100 * hi:.1f}) | {r['trend_var']:.3g} / {excess:.3g} | "
        f"{r['ks']:.3f} | {100 * c['ic_refit_vs_data']:.2f} % "
        f"({100 * abs(c['ic_refit_vs_data'] - c['ic_original']):.2f}) |"
    )


def length_rows(label: str, m: MMPPModel, reps: int) -> list[str]:
    K = int(m.report["max_lag"])
    data = m.data["acov_data"]
    orig = float(m.report["ic"])
    out = []
    for n in (int(m.report["intervals"]), *LENGTHS):
        own, vs, diff = [], [], []
        for i in range(reps):
            c = simulate(m, n, 500 + i, times=False).counts
            f = fit_counts([c], m.interval_s, max_lag=K, floor_reps=0, where="scan")
            own.append(float(f.report["ic"]))
            v = inequality_coefficient(data, f.autocov(K))
            vs.append(v)
            diff.append(abs(v - orig))
        within = sum(d <= 0.02 for d in diff)
        out.append(
            f"| {label} | {n:,} | {_pct(own)} | {_pct(vs)} | "
            f"{100 * float(np.median(diff)):.1f} | {within}/{reps} |"
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data/weblogs")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    d = Path(args.data)
    print(
        f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or '?'}; "
        f"reps {args.reps}\n"
    )
    print(
        "| data | intervals | K | scales x marginal (states) | IC 0..K | IC 1..K | IC floor "
        "| self-fit IC (10-90 %) | trend var / excess var | KS | re-fit IC vs data (diff) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|"
    )
    series = {}
    for label, name, what, iv in SETTINGS:
        s = count_series(read_events(d / name), iv, what).segments
        series[label] = s
        print(row(label, s, iv, args.reps), flush=True)
    wc = d / "wc98_per_minute_merged.csv"
    if wc.exists():
        print(row("WC98 requests 60 s, 48 h from 8 June 22:00", wc98_window(wc), 60.0, args.reps))

    print(
        "\n| model | log length N | self-fit IC (10-90 %) | re-fit IC vs data (10-90 %) "
        "| median diff (points) | within 2 points |\n|---|---|---|---|---|---|"
    )
    for label in ("NASA sessions 60 s (defaults)", "NASA requests 60 s"):
        m = fit_counts(series[label], 60.0, floor_reps=0)
        for line in length_rows(label.replace(" (defaults)", ""), m, args.reps):
            print(line, flush=True)

    print(
        "\n| NASA | interval | lags | intervals | K | IC 0..K | self-fit IC (10-90 %) |\n"
        "|---|---|---|---|---|---|---|"
    )
    nasa = read_events(d / "nasa_19950701.tsv")
    for what in ("sessions", "requests"):
        for iv in (10.0, 30.0, 60.0, 120.0):
            s = count_series(nasa, iv, what).segments
            m = fit_counts(s, iv, floor_reps=args.reps)
            r = m.report
            lo, hi = r["ic_selffit_range"]
            print(
                f"| {what} | {iv:g} s | default | {r['intervals']} | {r['max_lag']} | "
                f"{100 * r['ic']:.1f} % | {100 * r['ic_selffit']:.1f} % "
                f"({100 * lo:.1f}-{100 * hi:.1f}) |",
                flush=True,
            )
        s = count_series(nasa, 60.0, what).segments
        for K in (5, 10, 20):
            m = fit_counts(s, 60.0, max_lag=K, floor_reps=args.reps)
            r = m.report
            lo, hi = r["ic_selffit_range"]
            print(
                f"| {what} | 60 s | 1..{K} | {r['intervals']} | {K} | {100 * r['ic']:.1f} % | "
                f"{100 * r['ic_selffit']:.1f} % ({100 * lo:.1f}-{100 * hi:.1f}) |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
