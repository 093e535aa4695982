"""How far one interval's offered bytes stray from its target, over seeds (no root).

::

    .venv/bin/python bench/harpoon_spread.py [--seeds 400] [--interval 3600]
        [--time-scale 1800 ...] [--mbps 6 ...] [--sessions model|construct ...]
        [--out docs/harpoon/model-spread.txt [--append]]

The compressed day of ``tests/integration/test_harpoon.py``: the alexa-app
capture's flows shaped by WorldCup98's 1 May 1998 (``../shared/data``) into
intervals of ``--interval`` seconds (3600: 24 intervals), run at
``--time-scale`` (1800: 2 s per hour) and ``--mbps`` of TCP on average. For
each seed the run's schedule is drawn (what the generator would offer;
delivery is the integration test's part) and each interval's offered TCP
bytes divided by its target. Printed: the ratio's mean and sd over every
interval of every seed, its extremes and quantiles, the share of intervals
within 10% and of seeds whose every interval is, per seed the largest
deviation and the sd over its intervals, the day's total, the correlation of
the offered bytes with the targets, the active sessions and connections per
interval, and the UDP offer against the model's UDP bytes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.extract import harpoon as H  # noqa: E402
from swell.extract import harpoon_model as HM  # noqa: E402
from swell.extract.flows import read_flows  # noqa: E402
from swell.generators.harpoon import HarpoonSpec, harpoon_schedule  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ALEXA = DATA / "pcap" / "ndpi" / "alexa-app.pcapng"
WC98 = DATA / "weblogs" / "wc98_per_minute_merged.csv"


def day_model(interval_s: float = 3600.0) -> HM.HarpoonModel:
    """The alexa-app flows shaped as WorldCup98's 1 May 1998 in ``interval_s`` intervals."""
    p = H.HarpoonParams(interval_s=interval_s)
    fit = H.reshape(H.fit(read_flows([ALEXA]), p), p, H.read_profile(str(WC98), interval_s),
                    WC98.name)
    return HM.build(fit, p, {"inputs": [str(ALEXA)]})


def measure(m: HM.HarpoonModel, seeds: int, ts: float, mode: str, mbps: float) -> list[str]:
    clients = [f"10.0.0.{i}" for i in range(2, 40)]
    servers = [f"10.1.0.{i}" for i in range(2, 40)]
    spec = HarpoonSpec(model="m", time_scale=ts, target_mbps=mbps, sessions=mode)
    ratio, udp, active, corr, draw, conns = [], [], [], [], [], []
    for seed in range(1, seeds + 1):
        t0 = time.monotonic()
        sched = harpoon_schedule(m, clients, servers, 86400 / ts, seed, spec)
        ivs = sched.meta["intervals"]
        draw.append(time.monotonic() - t0)
        conns.append(sum(len(s.rres[0].conns) for s in sched.sessions
                         if s.rres[0].conns[0].proto == "tcp") / len(ivs))
        off = np.array([iv["offered_bytes"] for iv in ivs])
        tgt = np.array([iv["target_bytes"] for iv in ivs])
        ratio.append(off / tgt)
        corr.append(float(np.corrcoef(off, tgt)[0, 1]))
        udp.append(sum(iv["udp_offered_bytes"] for iv in ivs) /
                   sum(iv["udp_target_bytes"] for iv in ivs))
        active.append([iv["tcp_sessions"] for iv in ivs])
    r, dev = np.array(ratio), np.abs(np.array(ratio) - 1)
    day, sd, worst = r.mean(axis=1), r.std(axis=1), dev.max(axis=1)
    q = np.quantile
    return [
        f"sessions: {mode}, {m.interval_s:g} s model intervals, time_scale {ts:g} "
        f"({m.interval_s / ts:g} s run intervals), {mbps:g} Mbit/s, {seeds} seeds x "
        f"{r.shape[1]} intervals, draw {np.mean(draw):.2f} s per schedule",
        f"offered/target per interval: mean {r.mean():.4f} sd {r.std():.4f}; p0.1 "
        f"{q(r, 0.001):.3f} p1 {q(r, 0.01):.3f} p99 {q(r, 0.99):.3f} p99.9 {q(r, 0.999):.3f}; "
        f"min {r.min():.3f} max {r.max():.3f}",
        f"intervals within 10%: {(dev < 0.1).mean():.1%} (per seed: min "
        f"{(dev < 0.1).mean(axis=1).min():.1%}); seeds with every interval within 10%: "
        f"{(dev < 0.1).all(axis=1).mean():.1%}",
        f"per seed, largest |ratio - 1|: median {np.median(worst):.3f} p99 "
        f"{q(worst, 0.99):.3f} max {worst.max():.3f}",
        f"per seed, sd over its intervals: median {np.median(sd):.3f} p99 {q(sd, 0.99):.3f} "
        f"max {sd.max():.3f}",
        f"day's total / target: mean {day.mean():.4f} sd {day.std():.4f} min {day.min():.3f} "
        f"max {day.max():.3f}",
        f"Pearson(offered, target) per seed: min {min(corr):.3f} p1 {q(corr, 0.01):.3f} "
        f"median {np.median(corr):.3f}",
        f"first interval: mean {r[:, 0].mean():.3f} sd {r[:, 0].std():.3f}",
        f"active TCP sessions per interval: {np.min(active)}-{np.max(active)}; TCP "
        f"connections per interval, mean {np.mean(conns):.0f}",
        f"UDP offered / model UDP bytes over the day: mean {np.mean(udp):.3f} sd "
        f"{np.std(udp):.3f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--interval", type=float, default=3600.0, help="model interval, s")
    ap.add_argument("--time-scale", type=float, nargs="+", default=[1800.0])
    ap.add_argument("--mbps", type=float, nargs="+", default=[6.0], help="mean TCP rate")
    ap.add_argument("--sessions", nargs="+", default=["model"], choices=("model", "construct"))
    ap.add_argument("--out", type=Path, help="also write the lines here")
    ap.add_argument("--append", action="store_true", help="append to --out")
    args = ap.parse_args()
    m = day_model(args.interval)
    lines = [f"# {' '.join(sys.argv)}"]
    for mode in args.sessions:
        for ts in args.time_scale:
            for mbps in args.mbps:
                block = measure(m, args.seeds, ts, mode, mbps)
                print("\n".join(block), flush=True)
                lines += [*block, ""]
    if args.out:
        with args.out.open("a" if args.append else "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
