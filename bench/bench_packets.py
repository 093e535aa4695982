"""Packet-level generation side by side: swell-gen (``psend``) and D-ITG
(``ITGSend -poll``, multi-flow script) on the same preset, one invocation.

Run by hand, as root, under the CPU lock (not in CI)::

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_packets.py \
        [--presets VoIP:G.711.1:RTP VoIP:G.729.3:CRTP:VAD] [--flows 1 20] \
        [--duration 5] [--repeat 3] [--realtime]

Both engines run in one network namespace on the loopback (sender and
receiver share the clock, so delays are one-way), repeats interleaved
(swell, D-ITG, swell, ...) so both see the same machine load. Per run the
per-flow statistics of :func:`swell.generators.packets.flow_stats` are
pooled over flows: the packet rate against the preset's (rate accuracy, in
percent), the inter-departure standard deviation (median over flows, and the
worst flow), the payload size (every packet must be the preset's), loss.
The table printed is the one in docs/packet-mmpp.md; medians over repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

from swell.extract.ditg_presets import preset
from swell.generators.base import Netns, run_generator
from swell.generators.packets import PacketsConfig, PacketsGenerator, PacketsKind, PacketsSpec
from swell.nsset import NetnsSet


def one(ns: Netns, out: Path, name: str, flows: int, engine: str, duration: float,
        realtime: bool, port: int) -> dict[str, float]:
    kind = PacketsKind(PacketsSpec(kind="packets", preset=name, flows=flows, engine=engine))
    gen = PacketsGenerator(PacketsConfig(
        legs=kind.legs(), out_dir=out, duration_s=duration, engine=engine, seed=1,
        realtime=realtime, signal_port=port, ends={"s2c": ("127.0.0.1", ns, None, ns)}))
    rows = run_generator(gen, warmup_s=0.5).summary["flows"]
    p = preset(name)
    rate = np.array([r["pps"] for r in rows])
    sd = np.array([r["idt_std_us"] for r in rows])
    return {
        "rate_err_pct": float(np.median(np.abs(rate / p.rate_pps - 1)) * 100),
        "rate_pps": float(np.median(rate)),
        "idt_sd_us": float(np.median(sd)), "idt_sd_max_us": float(sd.max()),
        "size_ok": float(all(r["bytes_mean"] == p.size_bytes for r in rows)),
        "loss": float(sum(r["lost"] for r in rows) / max(1, sum(r["sent"] for r in rows))),
        "delay_ms": float(np.median([r["delay_ms"] for r in rows])),
        "jitter_ms": float(np.median([r["jitter_ms"] for r in rows])),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["VoIP:G.711.1:RTP", "VoIP:G.729.3:CRTP:VAD"])
    ap.add_argument("--flows", nargs="+", type=int, default=[1, 20])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--realtime", action="store_true")
    ap.add_argument("--out", default="/tmp/swell-bench/packets")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_packets: needs root (network namespaces)", file=sys.stderr)
        return 3
    nss = NetnsSet("swb")
    rows = []
    try:
        ns = Netns(nss.add("pk"))
        port = 9100
        for name in a.presets:
            for flows in a.flows:
                got: dict[str, list[dict[str, float]]] = {"swell": [], "ditg": []}
                for i in range(a.repeat):
                    for engine in ("swell", "ditg"):
                        port += 1
                        out = Path(a.out) / f"{name.replace(':', '_')}-{flows}-{engine}-{i}"
                        got[engine].append(one(ns, out, name, flows, engine, a.duration,
                                               a.realtime, port))
                for engine, runs in got.items():
                    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    rows.append((name, flows, engine, med))
    finally:
        nss.cleanup()
    print(f"\n{a.repeat} repeats x {a.duration:g} s, medians; realtime={a.realtime}; "
          f"load {os.getloadavg()[0]:.2f}")
    print("| preset | flows | engine | pkt/s (asked) | rate error | IDT sd (median flow) | "
          "IDT sd (worst flow) | sizes exact | loss | delay | jitter |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, flows, engine, m in rows:
        p = preset(name)
        print(f"| {name} | {flows} | {'swell-gen' if engine == 'swell' else 'ITGSend -poll'} | "
              f"{m['rate_pps']:.3f} ({p.rate_pps:g}) | {m['rate_err_pct']:.3f} % | "
              f"{m['idt_sd_us']:.1f} us | {m['idt_sd_max_us']:.1f} us | "
              f"{'yes' if m['size_ok'] == 1 else 'no'} | {m['loss']:.4f} | "
              f"{m['delay_ms']:.3f} ms | {m['jitter_ms']:.3f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
