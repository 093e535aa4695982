"""Swing at the studies' loads on this machine (manual; root): ``bench/bench_scale.py``.

One ``swell run`` per asked load (default 10, 30, 70, 200 and 500 Mbit/s, payload
both directions) of the bundled capture's Swing model (``variant: {target_mbps}``),
1,000 background clients and 256 servers, each with its own access link drawn
from the model, a 1 Gbit/s bottleneck, no foreground; 10 s warm-up then a 20 s
measured window (``--warmup``, ``--duration``). Per load: asked, offered (the
schedule's bytes in the window, as the target counts them: by the transfer-time
estimate of a steady start, docs/scale.md section 9) and delivered (the client
sockets' payload in the window) per direction, the background's bytes at the
bottleneck, connections started and cut, the run's problems, and the CPU time of
the link engine (``swell-link``) and of the generators (``swell-gen``), sampled
from ``/proc`` every 0.5 s during the run, as a share of one core over the run
(this machine has 2 cores shared with the rest of swell; run under
``flock /tmp/swell-cpu.lock``). The CPU shares are the profile of the ceiling:
the process that reaches a core first is what limits the load.

Writes ``docs/scale/bench.json`` and the Markdown table ``docs/scale/table.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.fsutil import write_json  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
PROCS = ("swell-link", "swell-gen")

EXP = """
name: bench-scale-{asked}
duration_s: {duration}
warmup_s: {warmup}
seed: 1
topology:
  network: 10.88.0.0/16
  bottleneck: {{rate_mbps: 1000, delay_ms: 2, queue_bytes: 2000000}}
  clients: {{count: {clients}, namespaces: 4}}
  servers: {{count: {servers}, namespaces: 2}}
foreground: {{kind: none}}
background: {{kind: swing, trace: {trace}, variant: {{target_mbps: {asked}}}}}
"""


class CpuSampler(threading.Thread):
    """CPU seconds of the link engine and the generators (cumulative, per process)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[int, tuple[str, float]] = {}
        self.done = threading.Event()

    def sample(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            if comm in PROCS:
                fields = stat[stat.rindex(")") + 2:].split()
                cpu = (int(fields[11]) + int(fields[12])) / TICK
                self.seen[int(pid)] = (comm, max(cpu, self.seen.get(int(pid), ("", 0))[1]))

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            time.sleep(0.5)

    def totals(self) -> dict[str, float]:
        out = dict.fromkeys(PROCS, 0.0)
        for comm, cpu in self.seen.values():
            out[comm] += cpu
        return out


def one(asked: float, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    from swell.experiments.runner import run_experiment

    exp = tmp / f"scale-{asked:g}.yaml"
    exp.write_text(EXP.format(asked=asked, duration=args.duration, warmup=args.warmup,
                              clients=args.clients, servers=args.servers,
                              trace=REPO / "data/pcap/example.pcap"))
    sampler = CpuSampler()
    sampler.start()
    t0 = time.monotonic()
    study = run_experiment(exp, tmp / f"study-{asked:g}")
    wall = time.monotonic() - t0
    sampler.done.set()
    sampler.join()
    (r,) = json.loads((study / "results.json").read_text())["runs"]
    busy = r["timing"]["end"] - r["timing"]["background_start"]
    cpu = sampler.totals()
    return {"asked_mbps": asked, "load": r["load"], "problems": r["problems"],
            "warnings": r["warnings"], "bottleneck_bg_mbps": {
                d: r["bottleneck"][d]["bg_mean_mbps"] for d in ("forward", "reverse")},
            "traffic_s": busy, "wall_s": wall,
            "cpu_s": cpu, "cpu_share_of_core": {k: v / busy for k, v in cpu.items()}}


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| asked Mbit/s (fwd / rev) | offered | delivered (payload) | at the bottleneck "
            "(IP) | delivered / asked | connections (cut) | CPU swell-link | CPU swell-gen | "
            "problems |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        ld = r["load"]
        f, v = ld["forward"], ld["reverse"]
        c = ld.get("connections") or {}
        tot_a = f["asked_mbps"] + v["asked_mbps"]
        tot_d = f["delivered_mbps"] + v["delivered_mbps"]
        lines.append(
            f"| {r['asked_mbps']:g} ({f['asked_mbps']:.1f} / {v['asked_mbps']:.1f}) "
            f"| {f['offered_mbps']:.1f} / {v['offered_mbps']:.1f} "
            f"| {f['delivered_mbps']:.1f} / {v['delivered_mbps']:.1f} "
            f"| {r['bottleneck_bg_mbps']['forward']:.1f} / "
            f"{r['bottleneck_bg_mbps']['reverse']:.1f} "
            f"| {tot_d / tot_a:.0%} | {c.get('started', 0)} ({c.get('cut', 0)}) "
            f"| {r['cpu_share_of_core']['swell-link']:.0%} "
            f"| {r['cpu_share_of_core']['swell-gen']:.0%} | {len(r['problems'])} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loads", default="10,30,70,200,500", help="asked loads, Mbit/s")
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--servers", type=int, default=256)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--out", type=Path, default=REPO / "docs/scale")
    args = ap.parse_args()
    os.environ.setdefault("SWELL_QUIET", "1")
    rows = []
    with tempfile.TemporaryDirectory(prefix="swell-scale-") as tmp:
        for asked in (float(x) for x in args.loads.split(",")):
            row = one(asked, args, Path(tmp))
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
            for p in row["problems"]:
                print(f"  problem: {p}", flush=True)
            write_json(args.out / "bench.json", {"clients": args.clients,
                                                 "servers": args.servers,
                                                 "warmup_s": args.warmup,
                                                 "duration_s": args.duration, "runs": rows})
    text = table(rows)
    (args.out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
