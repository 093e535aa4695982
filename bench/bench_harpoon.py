"""Sessions and connections per second the Harpoon generator sustains on one core.

Run as root under the CPU lock::

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_harpoon.py [--seconds 20]

A Harpoon model from the alexa-app capture (``../shared/data``) is driven at
rising rate factors over loopback (clients 127.1.0.x, servers 127.2.0.x, no
emulated link: the generator is the bottleneck), with ``swell-gen run`` and
``swell-gen serve`` each pinned to its own core (``taskset``). For each level:
sessions and connections scheduled per second, what completed per second,
the client's CPU share (from /proc), and the draw time of the schedule. The
highest level where at least 99% of the scheduled connections complete is the
sustained rate. Prints a Markdown table (docs/harpoon.md).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from swell.extract import harpoon as H
from swell.extract import harpoon_model as HM
from swell.extract.flows import read_flows
from swell.generators.base import Local, run_generator
from swell.generators.harpoon import HarpoonSpec, harpoon_schedule
from swell.generators.schedule import write_schedule
from swell.generators.swing import SwingConfig, SwingGenerator
from swell.generators.swing_accounting import load_records

ALEXA = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcap" / "ndpi" / \
    "alexa-app.pcapng"


class Pinned(Local):
    def __init__(self, cpu: int) -> None:
        self.cpu = cpu

    def argv(self, argv):  # type: ignore[no-untyped-def]
        return ["taskset", "-c", str(self.cpu), *argv]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--mbps", default="50,200,500,1000,2000")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-harpoon-"))
    p = H.HarpoonParams(interval_s=60)
    model = HM.build(H.fit(read_flows([ALEXA]), p), p, {"inputs": [str(ALEXA)]})
    HM.save(model, tmp / "model")
    m = HM.load(tmp / "model")
    clients = [f"127.1.0.{i}" for i in range(2, 3)]
    servers = [f"127.2.0.{i}" for i in range(2, 2 + len(m.pool("server")[0]))]
    print("| target Mbit/s | sessions/s scheduled | conns/s scheduled | conns/s completed | "
          "completed | Mbit/s received | client CPU | draw s |")
    print("|---|---|---|---|---|---|---|---|")
    for mbps in [float(x) for x in args.mbps.split(",")]:
        spec = HarpoonSpec(model="m", time_scale=6, target_mbps=mbps, udp=False)
        t0 = time.monotonic()
        sched = harpoon_schedule(m, clients, servers, args.seconds, 1, spec)
        draw = time.monotonic() - t0
        out = tmp / f"run-{int(mbps)}"
        out.mkdir()
        path = write_schedule(out / "schedule.jsonl", sched)
        gen = SwingGenerator(SwingConfig(path, out, server=Pinned(1), client=Pinned(0),
                                         duration_s=args.seconds + 5))
        c0 = os.times()
        res = run_generator(gen, duration_s=None, label=f"harpoon {mbps:g}")
        c1 = os.times()
        recs = load_records(res.files["records"])
        ok = [r for r in recs if r["ok"]]
        span = max(r["end"] for r in ok) - min(r["start"] for r in ok)
        nconn = len(sched.conns())
        cpu = (c1.children_user + c1.children_system - c0.children_user -
               c0.children_system) / max(span, 1e-9)
        print(f"| {mbps:g} | {len(sched.sessions) / args.seconds:.0f} | "
              f"{nconn / args.seconds:.0f} | {len(ok) / span:.0f} | "
              f"{len(ok) / max(nconn, 1):.1%} | {8 * sum(r['rx'] for r in ok) / span / 1e6:.0f} | "
              f"{cpu:.0%} (client+server) | {draw:.2f} |", flush=True)
        (out / "summary.json").write_text(json.dumps(res.summary, default=str))


if __name__ == "__main__":
    main()
