"""The "Against the real tools" table (docs/bwest.md) from studies' results.json.

One row per (link, background, estimator) run of the experiment files
``experiments/bwest_tools_{20,50,100}.yaml``, in the order of the table: by
capacity, then background (idle first), then SLoPS, pathload, chirp, pathChirp.
The columns, all read from the run's foreground metrics:

- estimate: mean ± sd over the run's estimates (chirp, pathChirp), or the mean
  range midpoint with the mean low-high range in brackets (SLoPS, pathload);
- n: the number of estimates (and the timeouts, when any);
- truth: the mean truth over the estimates' spans (over the measurement
  window's 1 s bins when there is no estimate);
- error %: the mean error against the truth over each estimate's span (± sd
  when there are several);
- first: the time to the first estimate (s);
- kB/est: the probe bytes per estimate.

A run without an estimate says so, with its problems. Each study's header line
gives its name, the start of its first run (UTC) and the code's git revision.

Usage: .venv/bin/python bench/bwest_tools_table.py STUDY/results.json [...]
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
from typing import Any

ORDER = ["slops", "pathload", "chirp", "pathchirp"]
# The versions built in /opt/bwtools/bin (docs/bwest.md, "Against the real tools").
REAL = {"pathload": "pathload 1.3.2", "pathchirp": "pathChirp 2.3.7"}


def _name(spec: dict[str, Any]) -> str:
    kind = spec["kind"]
    if kind == "slops":
        return "SLoPS (swell)"
    if kind == "chirp":
        return f"chirp (swell, F = {spec['decrease']:g})"
    return REAL.get(kind, kind)


def _bg(spec: dict[str, Any]) -> str:
    if spec.get("kind") in (None, "none"):
        return "idle"
    label = spec.get("label") or spec["kind"]
    return re.sub(r"(?<=[A-Za-z])(?=\d)", " ", label)


def _summary(fg: dict[str, Any], key: str) -> tuple[float | None, float | None]:
    s = fg.get("summary", {}).get(key) or {}
    return s.get("mean"), s.get("sd")


def _row(run: dict[str, Any], duration_s: float) -> list[str]:
    fg = run["foreground"]
    kind = run["spec"]["foreground"]["kind"]
    n = len(fg.get("estimate_mbps", []))
    nt = f"{n}" + (f" ({fg['timeouts']} timeouts)" if fg.get("timeouts") else "")
    if n == 0:
        bins = [x for x in fg.get("truth_mbps", [])[: int(duration_s)] if x is not None]
        truth = f"{sum(bins) / len(bins):.1f}" if bins else ""
        why = "; ".join(p for p in fg.get("problems", []) if not p.startswith("no estimate"))
        text = f"no estimate in {duration_s:g} s" + (f" ({why})" if why else "")
        return [text, nt, truth, "", "", ""]
    est, sd = _summary(fg, "estimate_mbps")
    if kind in ("slops", "pathload"):
        lo, hi = _summary(fg, "low_mbps")[0], _summary(fg, "high_mbps")[0]
        estimate = f"{est:.1f} [{lo:.1f}-{hi:.1f}]"
    else:
        estimate = f"{est:.1f}" + (f" ± {sd:.1f}" if n > 1 else "")
    truth = _summary(fg, "truth_mbps")[0]
    err, esd = _summary(fg, "error_pct")
    error = f"{err:+.1f}" + (f" ± {esd:.1f}" if n > 1 and esd is not None else "")
    first = fg.get("time_to_first_s")
    bpe = fg.get("bytes_per_estimate")
    return [estimate, nt, f"{truth:.1f}", error,
            "" if first is None else f"{first:.1f}",
            "" if bpe is None or not math.isfinite(bpe) else f"{bpe / 1000:.0f}"]


def main(paths: list[str]) -> None:
    studies = [json.loads(open(p).read()) for p in paths]
    studies.sort(key=lambda d: d["experiment"]["topology"]["bottleneck"]["rate_mbps"])
    for d in studies:
        start = min(r["timing"]["background_start"] for r in d["runs"])
        when = dt.datetime.fromtimestamp(start, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        host = d["host"]
        dirty = " (dirty)" if host.get("git_dirty") else ""
        print(f"<!-- {d['experiment']['name']}: {when}, {host.get('cpus')} CPUs, kernel "
              f"{host.get('kernel')}, git {host.get('git_revision', '?')[:10]}{dirty} -->")
    print("| link, background | estimator | estimate (Mbit/s) | n | truth | error % | "
          "first (s) | kB/est |")
    print("|---|---|---|---|---|---|---|---|")
    for d in studies:
        rate = d["experiment"]["topology"]["bottleneck"]["rate_mbps"]
        duration = d["experiment"]["duration_s"]
        runs = sorted(d["runs"], key=lambda r: (
            r["spec"]["background"].get("kind") not in (None, "none"),
            r["spec"]["background"].get("rate_mbps") or 0,
            ORDER.index(r["spec"]["foreground"]["kind"])
            if r["spec"]["foreground"]["kind"] in ORDER else len(ORDER),
            r.get("repetition", 0)))
        last = None
        for r in runs:
            group = f"{rate:g}, {_bg(r['spec']['background'])}"
            cells = [group if group != last else "", _name(r["spec"]["foreground"])]
            last = group
            print("| " + " | ".join(cells + _row(r, duration)) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1:])
