"""Where a Swing window's offered bytes go (issue 19, item "short windows"), no root.

A Swing schedule with a target counts the window's offered load by each
connection's *earliest* start: its session's arrival plus the RRE gaps and
offsets, as if every transfer took no time. This reads finished runs (the
schedule and the generator's per-connection records) and splits the bytes
offered that way in the window ``[W0, W1)`` into what really moved in the window
(records' start to end, uniformly) and what did not (cut at the end, never
started), with the real start lag (record start minus earliest start).

It also evaluates the transfer-time estimate the construction counts with
(``swell.analysis.swing_window``, docs/scale.md section 8): walking each session in order, a
connection starts at its RRE's start plus its offset, an RRE starts ``gap``
after the previous one's last connection ended, and a connection takes one
RTT of handshake, then per pair half an RTT plus the request at the path's
rate, the response in slow start (initial window 10 segments, doubling per
RTT) until the path's rate is reached, the think time, and half an RTT to
close. The path is the model's median server delay (both ways, plus the
bottleneck's) and the smaller of the median access rate and the bottleneck.
No sharing, no loss: an optimistic estimate. Printed: the estimated bytes in
the window against the records' (the estimator's error), and the estimated
start lag against the real one.

    .venv/bin/python bench/window_lag.py RUN_DIR W0 W1 [--model DIR] [--rtt S] [--rate MBPS]

``RUN_DIR`` is a run's ``rep<k>`` directory (``background/schedule.jsonl``,
``background/records.jsonl``). The background's clock starts with the warm-up: a
run of ``duration_s`` 8 after ``warmup_s`` 2 has its window at ``2 10``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis import swing_window


def load(run: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    lines = (run / "background/schedule.jsonl").read_text().splitlines()
    sessions = [json.loads(ln) for ln in lines[1:]]
    records = [json.loads(ln) for ln in (run / "background/records.jsonl").read_text()
               .splitlines()]
    return sessions, records


def transfer_s(nbytes: int, rtt: float, rate_bps: float) -> float:
    """Time to move ``nbytes`` from the first byte sent: slow start, then the rate (the
    schedule's own estimate, :func:`swell.analysis.swing_window.transfer_s`)."""
    return swing_window.transfer_s(nbytes, swing_window.PathEstimate(rtt, rate_bps))


def estimate(sessions: list[dict[str, Any]], rtt: float, rate_bps: float
             ) -> dict[tuple[int, int, int], tuple[float, float, float]]:
    """(earliest start, estimated start, estimated end) of every connection."""
    out = {}
    for s in sessions:
        t_est = t_min = s["t"]
        for ri, r in enumerate(s["rres"]):
            t_est += r["gap"]
            t_min += r["gap"]
            end = t_est
            for ci, c in enumerate(r["conns"]):
                start = t_est + c["offset"]
                t = start + (rtt if c["proto"] == "tcp" else 0.0)
                for req, rsp, think in c["pairs"]:
                    t += transfer_s(req, rtt, rate_bps) + transfer_s(rsp, rtt, rate_bps) + think
                t += rtt / 2
                out[(s["id"], ri, ci)] = (t_min + c["offset"], start, t)
                end = max(end, t)
            t_est = end
    return out


def split(sessions: list[dict[str, Any]], records: list[dict[str, Any]], w0: float,
          w1: float, rtt: float, rate_bps: float) -> dict[str, Any]:
    est = estimate(sessions, rtt, rate_bps)
    size = {(s["id"], ri, ci): sum(p[0] + p[1] for p in c["pairs"])
            for s in sessions for ri, r in enumerate(s["rres"]) for ci, c in enumerate(r["conns"])}

    def inside(a: float, b: float) -> float:
        if b <= a:
            return float(w0 <= a < w1)
        return max(0.0, min(b, w1) - max(a, w0)) / (b - a)

    offered = sum(size[k] for k, (t, _, _) in est.items() if w0 <= t < w1)
    est_in = sum(size[k] * inside(a, b) for k, (_, a, b) in est.items())
    real_in = cut = 0.0
    seen = set()
    lag, lag_est = [], []
    for r in records:
        k = (r["session"], r["rre"], r["conn"])
        seen.add(k)
        got = r["tx"] + r["rx"]
        real_in += got * inside(r["start"], r["end"])
        if w0 <= est[k][0] < w1:
            cut += size[k] - got
        lag.append(r["start"] - est[k][0])
        lag_est.append(est[k][1] - est[k][0])
    unstarted = sum(size[k] for k, (t, _, _) in est.items() if k not in seen and w0 <= t < w1)
    mbps = 8 / (w1 - w0) / 1e6
    return {"sessions": len(sessions), "connections": len(size), "records": len(records),
            "offered_earliest_mbps": offered * mbps, "delivered_records_mbps": real_in * mbps,
            "estimated_in_window_mbps": est_in * mbps, "offered_cut_mbps": cut * mbps,
            "offered_never_started_mbps": unstarted * mbps,
            "lag_s_p50_p90": [float(np.median(lag)), float(np.percentile(lag, 90))],
            "estimated_lag_s_p50_p90": [float(np.median(lag_est)),
                                        float(np.percentile(lag_est, 90))]}


def path_of(model: Path | None, rtt: float | None, rate: float | None, bneck_delay_s: float,
            bneck_mbps: float) -> tuple[float, float]:
    if model is not None and (rtt is None or rate is None):
        from swell.extract.model import load_model

        arrs = load_model(model).arrays
        d = float(np.median(arrs["net/server/delay_s"])) + float(
            np.median(arrs["net/client/delay_s"]))
        cap = min(float(np.median(arrs["net/server/capacity_bps"])),
                  float(np.median(arrs["net/client/capacity_bps"])))
        rtt = rtt if rtt is not None else 2 * (d + bneck_delay_s)
        rate = rate if rate is not None else min(cap, bneck_mbps * 1e6) / 1e6
    if rtt is None or rate is None:
        raise SystemExit("give --model or both --rtt and --rate")
    return rtt, rate * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("w0", type=float)
    ap.add_argument("w1", type=float)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--rtt", type=float)
    ap.add_argument("--rate", type=float, help="Mbit/s")
    ap.add_argument("--bottleneck-delay-ms", type=float, default=10.0)
    ap.add_argument("--bottleneck-mbps", type=float, default=20.0)
    a = ap.parse_args()
    rtt, rate = path_of(a.model, a.rtt, a.rate, a.bottleneck_delay_ms / 1e3, a.bottleneck_mbps)
    sessions, records = load(a.run)
    res = split(sessions, records, a.w0, a.w1, rtt, rate)
    res.update({"run": str(a.run), "window": [a.w0, a.w1], "rtt_s": round(rtt, 4),
                "rate_mbps": rate / 1e6})
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else
                          [round(x, 3) for x in v] if isinstance(v, list) else v)
                      for k, v in res.items()}))
    return 0 if math.isfinite(res["offered_earliest_mbps"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
