"""Soak: a long Swing background plus httperf, memory of every swell process sampled.

Runs ``swell run`` on a one-configuration study (Swing background from the
bundled ``example.pcap`` at a moderate target load, httperf fetching 100 kB
objects over a 20 Mbit/s, 10 ms dumbbell) for ``--minutes`` minutes (default
30), and every ``--every`` seconds (default 60) records the resident memory
(VmRSS) of every swell process: the ``swell`` command itself, ``swell-link``
(the link engine) and ``swell-gen`` (Swing's generators), summed per program.
At the end it reports growth after warm-up (the first two samples are
warm-up; growth over 10% fails), httperf's connection errors against its
connections, and whatever the run left on the host (nothing is expected).

    flock /tmp/swell-cpu.lock .venv/bin/python bench/soak.py --minutes 30

prints a markdown table (docs/robustness.md) and writes it with the raw
samples to ``--out`` (default ``/tmp/swell-soak``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = ("swell", "swell-link", "swell-gen")

EXP = """
name: soak
duration_s: {duration}
warmup_s: 10
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 10, queue_bytes: 100000}}
  clients: {{count: 20}}
  servers: {{count: 5}}
background: {{kind: swing, trace: {trace}, variant: {{target_mbps: {mbps}}}}}
foreground: {{kind: httperf, object_bytes: 100000}}
"""


def _program(argv: list[str]) -> str | None:
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if exe in ("swell-link", "swell-gen"):
        return exe
    if exe.startswith("python") and len(argv) > 2 and argv[1:3] == ["-m", "swell"]:
        return "swell"
    if exe == "swell" or (len(argv) > 1 and argv[1].endswith("/swell")):
        return "swell"
    return None


def sample() -> dict[str, Any]:
    """Per program: processes and total RSS (MB); per pid: program and RSS (MB)."""
    out: dict[str, Any] = {p: {"processes": 0, "rss_mb": 0.0} for p in PROGRAMS}
    pids: dict[str, list[Any]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            prog = _program(argv)
            if prog is None:
                continue
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    mb = int(line.split()[1]) / 1024
                    out[prog]["processes"] += 1
                    out[prog]["rss_mb"] += mb
                    pids[d.name] = [prog, round(mb, 2)]
        except OSError:
            continue
    out["pids"] = pids
    return out


def growth_pct(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Largest RSS growth per program among its long-lived processes.

    Totals per program are not comparable between samples: a ``subprocess``
    fork of the swell process, caught between fork and exec, shows the
    parent's command line and part of its RSS for one sample (seen in the first
    soak as a second "swell" of 80-140 MB at minutes 5, 7 and 10). So growth is
    measured per pid, from the first sample after warm-up (the third) to the
    peak before teardown, over the processes alive in both.
    """
    out: dict[str, float] = {}
    if len(samples) <= 3:
        return out
    base, rest = samples[2]["pids"], samples[2:-1]
    for prog in PROGRAMS:
        worst = 0.0
        for pid, (p, mb0) in base.items():
            if p != prog or not mb0 or pid not in samples[-2]["pids"]:
                continue
            peak = max(s["pids"][pid][1] for s in rest if pid in s["pids"])
            worst = max(worst, (peak - mb0) / mb0 * 100)
        out[prog] = worst
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--mbps", type=float, default=6.0, help="Swing target load")
    ap.add_argument("--out", type=Path, default=Path("/tmp/swell-soak"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    exp = args.out / "soak.yaml"
    exp.write_text(EXP.format(duration=int(args.minutes * 60), mbps=args.mbps,
                              trace=REPO / "data" / "pcap" / "example.pcap"))
    study = args.out / "study"
    env = {**os.environ, "SWELL_QUIET": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "swell", "run", str(exp), "-o", str(study),
                             "--no-report"], env=env, cwd=REPO)
    samples = []
    t0 = time.monotonic()
    while proc.poll() is None:
        time.sleep(min(args.every, 5.0))
        if proc.poll() is not None:
            break
        if not samples or time.monotonic() - t0 >= len(samples) * args.every:
            samples.append({"t_min": round((time.monotonic() - t0) / 60, 2), **sample()})
    if proc.returncode != 0:
        print(f"swell run failed: exit {proc.returncode}", file=sys.stderr)
    from swell.topologies import cleanup as cl

    left = [x.describe() for x in (cl.find_leftovers(p) for p in cl.find_prefixes())
            if not x.owner_alive and not x.empty()]
    fg = {}
    with_results = study / "results.json"
    if with_results.is_file():
        run = json.loads(with_results.read_text())["runs"][0]
        fg = (run.get("foreground") or {}).get("httperf") or {}
    lines = ["| minute | " + " | ".join(f"{p} (MB, procs)" for p in PROGRAMS) + " |",
             "|---:|" + "---:|" * len(PROGRAMS)]
    for s in samples:
        lines.append(f"| {s['t_min']:.1f} | " + " | ".join(
            f"{s[p]['rss_mb']:.1f} ({s[p]['processes']})" for p in PROGRAMS) + " |")
    growth = growth_pct(samples)
    table = "\n".join(lines)
    summary = {"minutes": args.minutes, "exit": proc.returncode, "growth_pct": growth,
               "httperf": fg, "leftovers": left, "samples": samples}
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    (args.out / "soak.md").write_text(table + "\n")
    print(table)
    print("\ngrowth after warm-up (per long-lived process, peak vs sample 3): "
          + ", ".join(f"{p} {g:+.1f}%" for p, g in growth.items()))
    print(f"httperf: {json.dumps(fg)[:400]}")
    print(f"left on the host: {left or 'nothing'}")
    bad = any(g > 10 for g in growth.values()) or left or proc.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
