"""How long a run must be to show Figure 14's zero-think rise at 1-8 s (no network; seconds).

``.venv/bin/python bench/fig14_zero_think.py [--seeds 20] [--lengths 60,180,600]``

Figure 14 of the paper (seed 004, section 5.2) sets Swing's think times to
zero and sees more energy at 1-8 s (octaves 10-13 of a 1 ms series). A 60 s
run of swell's Fig. 14 file shows a rise there but cannot resolve it
(docs/fig13-14.md). This bench asks why, over many seeds and run lengths,
without the emulator: for the bundled capture's model at the Auck rate
(3.3 Mbit/s), Base and ZeroThink, it draws each run's schedule exactly as
``swell run`` does (``swing_schedule``: target by construction, stationary
arrivals, 40 clients and 10 servers), and turns it into the server -> client
byte series of a **fluid closed loop**: each RRE starts when the previous one
of its session has ended plus its gap, each connection lasts its pairs' round
trips, think times and transfer at a fixed rate, its response bytes spread
evenly over that time. The fluid series is not the emulated traffic (no TCP
dynamics, no queueing, one rate for every transfer); what it keeps is what
decides the energy at seconds: when sessions arrive, how many bytes they
carry, and how think times spread them.

For each length and seed pair (Base seed k, ZeroThink seed 1000+k:
independent draws, as the study's runs are), the difference ZeroThink - Base
of the log2 energy averaged over octaves 10-13 (those with at least 8
coefficients), and the Abry-Veitch 95% interval of that difference (the
criterion ``bench/paper_fig13_14.py`` uses). Printed: the mean difference
over seeds, its spread between seeds (sd), the share of single pairs whose
difference is beyond their interval (what one run pair can show), and the
spread of single pairs against the interval, which assumes independent
coefficients (heavy-tailed sessions make the real spread wider).

``--screen LABEL=TRACE ...`` screens candidate stand-ins for the paper's Auck
instead (each trace or model directory, extracted once): per candidate, over
``--seeds`` draws of one ``--lengths`` window, the **think share** of its
sessions (the part of a session's fluid duration that zero think time removes:
``1 - D_zero / D_base`` for the same drawn session, D from its start to its last
connection's end; weighted by the session's bytes, and by its time), the
response bytes per session, and the fluid prediction twice: with the fixed
exchange ``--rtt`` (what the first study used) and with the candidate's own
round trip (``2 x (10 ms bottleneck + median client and server access delays
of the model)``) plus slow start (each response ``ceil(log2(1 + bytes /
14,480))`` more round trips: ten-segment initial window, no loss). Arrivals
are stationary for every candidate (a run shorter than a long trace would
otherwise replay the trace's own arrival profile). Writes
``docs/paper/fig14_standins.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.analysis.energy import energy_plot  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BIN_S = 0.001
RTT_S = 0.06  # Fig. 14's 10 ms bottleneck both ways plus the model's access delays, about
RATE_BPS = 8e6  # one transfer's rate: under the 10 Mbit/s bottleneck and the access links
BAND = (10, 13)  # 1-8 s at 1 ms bins
WARMUP_S = 10.0
BOTTLENECK_S = 0.010  # Fig. 14's one-way bottleneck delay
IW_BYTES = 10 * 1448  # Linux's initial window


def pair_s(q: int, a: int, think: float, rtt_s: float, slow_start: bool) -> float:
    """A request/response pair's time in the fluid loop: round trip(s), transfer, think."""
    rounds = 1 + (int(np.ceil(np.log2(1 + a / IW_BYTES))) if slow_start else 0)
    return rounds * rtt_s + (q + a) * 8 / RATE_BPS + think


def session_span(sess: Any, rtt_s: float, slow_start: bool, zero: bool) -> float:
    """A session's fluid duration (start to its last connection's end), think times
    zeroed when ``zero``."""
    t = sess.t
    for rre in sess.rres:
        t += 0.0 if zero else rre.gap
        ends = [t]
        for c in rre.conns:
            ends.append(t + c.offset + max(BIN_S, sum(
                pair_s(q, a, 0.0 if zero else k, rtt_s, slow_start) for q, a, k in c.pairs)))
        t = max(ends)
    return t - sess.t


def fluid_series(sched: Any, warmup_s: float, end_s: float, rtt_s: float = RTT_S,
                 slow_start: bool = False) -> np.ndarray:
    """Server -> client bytes per 1 ms bin in ``[warmup_s, end_s)`` of a fluid closed loop."""
    n = int(round((end_s - warmup_s) / BIN_S))
    rate = np.zeros(n + 1)  # a difference array of bytes per bin
    for sess in sched.sessions:
        t = sess.t
        for rre in sess.rres:
            t += rre.gap
            ends = [t]
            for c in rre.conns:
                start = t + c.offset
                dur = sum(pair_s(q, a, think, rtt_s, slow_start) for q, a, think in c.pairs)
                dur = max(dur, BIN_S)
                ends.append(start + dur)
                rsp = c.rsp_bytes
                i0 = int(np.floor((start - warmup_s) / BIN_S))
                i1 = int(np.floor((start + dur - warmup_s) / BIN_S))
                per_bin = rsp / max(i1 - i0, 1)
                a, b = max(i0, 0), min(max(i1, i0 + 1), n)
                if a < b:
                    rate[a] += per_bin
                    rate[b] -= per_bin
            t = max(ends)
    return np.cumsum(rate)[:n]


def band_diff(x_base: np.ndarray, x_zero: np.ndarray) -> tuple[float, float]:
    """Mean over the band's octaves of y(zero) - y(base), and of their combined interval."""
    eb, ez = energy_plot(x_base, BIN_S, 3, 8), energy_plot(x_zero, BIN_S, 3, 8)
    diffs, cis = [], []
    for j in range(BAND[0], BAND[1] + 1):
        if j in eb.octaves and j in ez.octaves:
            ib, iz = eb.at(j), ez.at(j)
            if np.isfinite(eb.y[ib]) and np.isfinite(ez.y[iz]):
                diffs.append(ez.y[iz] - eb.y[ib])
                cis.append(float(np.hypot(eb.ci[ib], ez.ci[iz])))
    return (float(np.mean(diffs)), float(np.mean(cis))) if diffs else (np.nan, np.nan)


def model_rtt_s(model_dir: Path) -> float:
    """The candidate's own round trip: bottleneck plus median access delays, both ways."""
    from swell.extract.model import load_model

    m = load_model(model_dir)
    med = [float(np.median(d)) if (d := m.net(side, "delay_s")).size else 0.0
           for side in ("client", "server")]
    return 2 * (BOTTLENECK_S + sum(med))


def think_share(sched: Any, rtt_s: float, slow_start: bool, warmup_s: float, end_s: float
                ) -> dict[str, float]:
    """How much of the window's sessions' time zero think time removes (byte and time
    weighted), and their response bytes per session."""
    span, gone, weight = [], [], []
    for sess in sched.sessions:
        if not warmup_s <= sess.t < end_s:
            continue
        base = session_span(sess, rtt_s, slow_start, False)
        zero = session_span(sess, rtt_s, slow_start, True)
        span.append(base)
        gone.append(base - zero)
        weight.append(sum(c.rsp_bytes for rre in sess.rres for c in rre.conns))
    b, g, w = np.array(span), np.array(gone), np.array(weight, float)
    if not b.size:
        return {"sessions": 0}
    share = np.divide(g, b, out=np.zeros_like(g), where=b > 0)
    return {"sessions": int(b.size), "by_time": float(g.sum() / max(b.sum(), 1e-12)),
            "by_bytes": float((share * w).sum() / max(w.sum(), 1e-12)),
            "median_session_s": float(np.median(b)), "rsp_kb_per_session": float(w.mean() / 1e3)}


def screen(cands: list[str], seeds: int, length: float, out: Path,
           warmup_s: float = WARMUP_S) -> int:
    """Per candidate stand-in: think share and the fluid prediction (see the docstring)."""
    from swell.extract.model import save_model
    from swell.extract.pipeline import extract_model
    from swell.fsutil import write_json
    from swell.generators.models import VariantSpec, apply_variant
    from swell.generators.schedule import load_app_samples
    from swell.generators.swing import swing_schedule

    tmp = Path(tempfile.mkdtemp(prefix="fig14screen-"))
    clients = [f"10.1.0.{i + 1}" for i in range(40)]
    servers = [f"10.2.0.{i + 1}" for i in range(10)]
    total = warmup_s + length
    res: dict[str, Any] = {"length_s": length, "warmup_s": warmup_s, "seeds": seeds,
                           "fixed_rtt_s": RTT_S,
                           "rate_bps": RATE_BPS, "band_octaves": BAND, "candidates": {}}
    print(f"{'stand-in':<16} {'rtt':>5} {'sess':>5} {'think/time':>10} {'think/bytes':>11} "
          f"{'kB/sess':>8} {'fluid 60ms':>12} {'fluid own+ss':>13} {'Mbit/s B/Z':>10}")
    for cand in cands:
        label, _, src = cand.partition("=")
        path = Path(src)
        base = path if (path / "model.json").is_file() else save_model(
            extract_model(path, label=label), tmp / label)
        models = {"Base": apply_variant(base, VariantSpec(target_mbps=3.3), tmp),
                  "ZeroThink": apply_variant(base, VariantSpec(target_mbps=3.3, zero_think=True),
                                             tmp)}
        own = model_rtt_s(base)
        shares, fixed, ownss = [], [], []
        rate: dict[str, list[float]] = {"Base": [], "ZeroThink": []}
        for k in range(1, seeds + 1):
            series: dict[str, dict[str, np.ndarray]] = {"fixed": {}, "own": {}}
            for name, seed in (("Base", k), ("ZeroThink", 1000 + k)):
                apps, scale = load_app_samples(models[name])
                sched = swing_schedule(apps, clients, servers, total, seed, scale, 3.3,
                                       arrivals="stationary", window_start_s=warmup_s)
                series["fixed"][name] = fluid_series(sched, warmup_s, total)
                series["own"][name] = fluid_series(sched, warmup_s, total, own, True)
                rate[name].append(float(series["own"][name].sum()) * 8 / length / 1e6)
                if name == "Base":
                    shares.append(think_share(sched, own, True, warmup_s, total))
            fixed.append(band_diff(series["fixed"]["Base"], series["fixed"]["ZeroThink"])[0])
            ownss.append(band_diff(series["own"]["Base"], series["own"]["ZeroThink"])[0])
        row = {"source": src, "own_rtt_s": own,
               **{k: float(np.mean([s[k] for s in shares if s.get("sessions")]))
                  for k in ("sessions", "by_time", "by_bytes", "median_session_s",
                            "rsp_kb_per_session")},
               "fluid_fixed_rtt": {"mean": float(np.nanmean(fixed)),
                                   "sd": float(np.nanstd(fixed, ddof=1))},
               "fluid_own_rtt_slow_start": {"mean": float(np.nanmean(ownss)),
                                            "sd": float(np.nanstd(ownss, ddof=1))},
               "fluid_rate_mbps": {k: float(np.mean(v)) for k, v in rate.items()}}
        res["candidates"][label] = row
        print(f"{label:<16} {own * 1e3:4.0f}m {row['sessions']:5.0f} {row['by_time']:10.0%} "
              f"{row['by_bytes']:11.0%} {row['rsp_kb_per_session']:8.0f} "
              f"{row['fluid_fixed_rtt']['mean']:+6.2f}+-{row['fluid_fixed_rtt']['sd']:4.2f} "
              f"{row['fluid_own_rtt_slow_start']['mean']:+7.2f}+-"
              f"{row['fluid_own_rtt_slow_start']['sd']:4.2f} "
              f"{row['fluid_rate_mbps']['Base']:4.2f}/{row['fluid_rate_mbps']['ZeroThink']:4.2f}",
              flush=True)
    write_json(out, res)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--lengths", default="60,180,600", help="measured window lengths, s")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--warmup", type=float, default=WARMUP_S, help="--screen: warm-up, s")
    ap.add_argument("--screen", nargs="+", metavar="LABEL=TRACE",
                    help="screen candidate stand-ins (traces or model directories)")
    args = ap.parse_args()
    if args.screen:
        return screen(args.screen, args.seeds, float(args.lengths.split(",")[0]),
                      args.out or REPO / "docs/paper/fig14_standins.json", args.warmup)
    args.out = args.out or REPO / "docs/paper/fig14_zero_think.json"
    from swell.extract.model import save_model
    from swell.extract.pipeline import extract_model
    from swell.fsutil import write_json
    from swell.generators.models import VariantSpec, apply_variant
    from swell.generators.schedule import load_app_samples
    from swell.generators.swing import swing_schedule

    tmp = Path(tempfile.mkdtemp(prefix="fig14zt-"))
    base = save_model(extract_model(REPO / "data/pcap/example.pcap", label="example"),
                      tmp / "base")
    models = {"Base": apply_variant(base, VariantSpec(target_mbps=3.3), tmp),
              "ZeroThink": apply_variant(base, VariantSpec(target_mbps=3.3, zero_think=True),
                                         tmp)}
    clients = [f"10.1.0.{i + 1}" for i in range(40)]
    servers = [f"10.2.0.{i + 1}" for i in range(10)]
    out: dict[str, Any] = {"rtt_s": RTT_S, "rate_bps": RATE_BPS, "band_octaves": BAND,
                           "warmup_s": WARMUP_S, "seeds": args.seeds, "lengths": {}}
    print(f"{'window':>7} {'mean diff':>9} {'sd (seeds)':>10} {'mean AV ci':>10} "
          f"{'pairs shown':>11} {'sd of mean':>10}")
    for length in (float(x) for x in args.lengths.split(",")):
        total = WARMUP_S + length
        diffs, cis = [], []
        for k in range(1, args.seeds + 1):
            series = {}
            for name, seed in (("Base", k), ("ZeroThink", 1000 + k)):
                apps, scale = load_app_samples(models[name])
                sched = swing_schedule(apps, clients, servers, total, seed, scale, 3.3,
                                       window_start_s=WARMUP_S)
                series[name] = fluid_series(sched, WARMUP_S, total)
            d, ci = band_diff(series["Base"], series["ZeroThink"])
            diffs.append(d)
            cis.append(ci)
        dd, cc = np.array(diffs), np.array(cis)
        row = {"mean_diff": float(np.nanmean(dd)), "sd_diff": float(np.nanstd(dd, ddof=1)),
               "mean_ci": float(np.nanmean(cc)),
               "pairs_shown": float(np.nanmean(dd > cc)),
               "diffs": [round(float(x), 3) for x in dd]}
        out["lengths"][f"{length:g}"] = row
        print(f"{length:6.0f}s {row['mean_diff']:+9.2f} {row['sd_diff']:10.2f} "
              f"{row['mean_ci']:10.2f} {row['pairs_shown']:11.0%} "
              f"{row['sd_diff'] / np.sqrt(len(dd)):10.2f}", flush=True)
    write_json(args.out, out)
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "diffs"}
                      for k, v in out["lengths"].items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
