"""Packet-level generation side by side: swell-gen (``psend``) and D-ITG
(``ITGSend -poll``, multi-flow script) on the same preset, one invocation.

Run by hand, as root, under the CPU lock (not in CI)::

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_packets.py \
        [--presets VoIP:G.711.1:RTP VoIP:G.729.3:CRTP:VAD] [--flows 1 20] \
        [--duration 5] [--repeat 3] [--realtime] [--out DIR]
    .venv/bin/python bench/bench_packets.py --reread --out DIR   # tables again from DIR's logs

Both engines run in one network namespace on the loopback (sender and
receiver share the clock, so delays are one-way), repeats interleaved
(swell, D-ITG, swell, ...) so both see the same machine load. Per run the
per-flow statistics of :func:`swell.generators.packets.flow_stats` are
pooled over flows: the packet rate against the preset's (rate accuracy, in
percent), the inter-departure standard deviation (median over flows, and the
worst flow), the payload size (every packet must be the preset's), loss.
Read from each run's receiver log too (:func:`idt_tail`): how far single
departures stray from the asked gap (median, 99th percentile, largest, share
over 0.1 ms), which says whether an sd is the typical departure or a few
stalls. The two tables printed are the ones in docs/packet-mmpp.md: per cell the mean over
repeats and, after ``±``, the sample standard deviation over repeats (the
spread from run to run), with the command, the UTC start and end and the
machine above it; every repeat's numbers go to ``OUT/runs.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
from pathlib import Path

import numpy as np

from swell.extract.ditg_presets import preset
from swell.generators.base import Netns, run_generator
from swell.generators.packets import (
    PacketsConfig,
    PacketsGenerator,
    PacketsKind,
    PacketsSpec,
    read_ditg,
    read_log,
)
from swell.nsset import NetnsSet

WARMUP_S = 0.5


def one(ns: Netns, out: Path, name: str, flows: int, engine: str, duration: float,
        realtime: bool, port: int) -> dict[str, float]:
    kind = PacketsKind(PacketsSpec(kind="packets", preset=name, flows=flows, engine=engine))
    gen = PacketsGenerator(PacketsConfig(
        legs=kind.legs(), out_dir=out, duration_s=duration, engine=engine, seed=1,
        realtime=realtime, signal_port=port, ends={"s2c": ("127.0.0.1", ns, None, ns)}))
    rows = run_generator(gen, warmup_s=WARMUP_S).summary["flows"]
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
        **idt_tail(out, engine, p.rate_pps),
    }


def idt_tail(out: Path, engine: str, rate_pps: float) -> dict[str, float]:
    """How far single departures stray from the asked gap, from the run's receiver log
    (the sender's timestamps, as the sd columns use): ``|IDT - 1/rate|`` pooled over
    flows (consecutive sequence numbers, after the warm-up): median, 99th percentile,
    largest, and the share over 0.1 ms. An sd over 10 s is moved by 100 us by a handful
    of late departures; these columns say whether the spread is typical or a few events."""
    if engine == "swell":
        log = read_log(next(out.glob("*.bin")))
    else:
        itg = next(out.glob("*.itg"))
        log = read_ditg(itg, itg.with_suffix(".txt"))
    dev = []
    for fid in np.unique(log["flow"]):
        m = log["flow"] == fid
        order = np.argsort(log["seq"][m], kind="stable")
        seq, tx = log["seq"][m][order], log["tx_s"][m][order]
        keep = tx >= tx[0] + WARMUP_S
        seq, tx = seq[keep], tx[keep]
        dev.append(np.abs(np.diff(tx)[np.diff(seq) == 1] - 1.0 / rate_pps) * 1e6)
    d = np.concatenate(dev) if dev else np.zeros(1)
    return {
        "dev_p50_us": float(np.median(d)), "dev_p99_us": float(np.percentile(d, 99)),
        "dev_max_us": float(d.max()), "dev_over_100us_pct": float(np.mean(d > 100) * 100),
    }


def machine() -> str:
    """Host, CPU model and count, kernel: the machine the table was measured on."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}, {os.cpu_count()} x {cpu}, Linux {platform.release()}"


def print_tables(meta: dict[str, str], rows: list[dict[str, object]]) -> None:
    """The two tables of docs/packet-mmpp.md: mean ± sample sd over repeats per cell."""
    print(f"\n`{meta['command']}`; {meta['start_utc']}-{meta['end_utc']} UTC; "
          f"{meta['machine']}; load {meta['load_end']} at the end")
    print(f"{meta['repeat']} repeats x {meta['duration_s']} s per preset, flows and engine, "
          f"interleaved; realtime={meta['realtime']}; mean ± sample sd over repeats")
    if meta.get("reread"):
        print(f"tail columns re-read from the runs' logs by `{meta['reread']}`")

    def ms(runs: list[dict[str, float]], key: str, fmt: str) -> str:
        v = [r[key] for r in runs]
        sd = statistics.stdev(v) if len(v) > 1 else float("nan")
        return f"{statistics.fmean(v):{fmt}} ± {sd:{fmt}}"

    def lead(row: dict[str, object]) -> str:
        engine = "swell-gen" if row["engine"] == "swell" else "ITGSend -poll"
        return f"| {row['preset']} | {row['flows']} | {engine} | "

    print("\n| preset | flows | engine | pkt/s (asked) | rate error | sizes exact | loss | "
          "delay | jitter |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        runs = row["runs"]
        assert isinstance(runs, list)
        exact = sum(r["size_ok"] == 1 for r in runs)
        print(lead(row) + f"{ms(runs, 'rate_pps', '.3f')} ({preset(str(row['preset'])).rate_pps:g})"
              f" | {ms(runs, 'rate_err_pct', '.3f')} % | {exact}/{len(runs)} | "
              f"{ms(runs, 'loss', '.4f')} | {ms(runs, 'delay_ms', '.3f')} ms | "
              f"{ms(runs, 'jitter_ms', '.3f')} ms |")
    first = rows[0]["runs"] if rows else [{}]
    assert isinstance(first, list)
    tail = "dev_p50_us" in first[0]
    print("\n| preset | flows | engine | IDT sd (median flow) | IDT sd (worst flow) |"
          + (" \\|IDT - asked\\| median | 99th pct | max | share > 0.1 ms |" if tail else ""))
    print("|---|---|---|---|---|" + ("---|---|---|---|" if tail else ""))
    for row in rows:
        runs = row["runs"]
        assert isinstance(runs, list)
        line = (lead(row) + f"{ms(runs, 'idt_sd_us', '.1f')} us | "
                f"{ms(runs, 'idt_sd_max_us', '.1f')} us |")
        if tail:
            line += (f" {ms(runs, 'dev_p50_us', '.1f')} us | {ms(runs, 'dev_p99_us', '.1f')} us |"
                     f" {ms(runs, 'dev_max_us', '.0f')} us | "
                     f"{ms(runs, 'dev_over_100us_pct', '.3f')} % |")
        print(line)


def run_dir(out: str, name: str, flows: int, engine: str, i: int) -> Path:
    return Path(out) / f"{name.replace(':', '_')}-{flows}-{engine}-{i}"


def reread(out: str) -> int:
    """Recompute the tail columns of a finished run from its logs (OUT/runs.json and the
    run directories next to it) and print the tables again; nothing is sent."""
    src = Path(out) / "runs.json"
    try:
        data = json.loads(src.read_text())
    except (OSError, ValueError) as exc:
        print(f"bench_packets: {src}: {exc}", file=sys.stderr)
        return 2
    meta, rows = data["meta"], data["rows"]
    for row in rows:
        p = preset(row["preset"])
        for i, r in enumerate(row["runs"]):
            r.update(idt_tail(run_dir(out, row["preset"], row["flows"], row["engine"], i),
                              row["engine"], p.rate_pps))
    meta["reread"] = ".venv/bin/python " + shlex.join(sys.argv)
    print_tables(meta, rows)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["VoIP:G.711.1:RTP", "VoIP:G.729.3:CRTP:VAD"])
    ap.add_argument("--flows", nargs="+", type=int, default=[1, 20])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--realtime", action="store_true")
    ap.add_argument("--out", default="/tmp/swell-bench/packets")
    ap.add_argument("--reread", action="store_true",
                    help="no runs: re-read OUT's logs and print the tables again")
    a = ap.parse_args()
    if a.reread:
        return reread(a.out)
    if os.geteuid() != 0:
        print("bench_packets: needs root (network namespaces)", file=sys.stderr)
        return 3
    cmd = "flock /tmp/swell-cpu.lock .venv/bin/python " + shlex.join(sys.argv)
    start = dt.datetime.now(dt.UTC)
    nss = NetnsSet("swb")
    rows: list[dict[str, object]] = []
    try:
        ns = Netns(nss.add("pk"))
        port = 9100
        for name in a.presets:
            for flows in a.flows:
                got: dict[str, list[dict[str, float]]] = {"swell": [], "ditg": []}
                for i in range(a.repeat):
                    for engine in ("swell", "ditg"):
                        port += 1
                        out = run_dir(a.out, name, flows, engine, i)
                        got[engine].append(one(ns, out, name, flows, engine, a.duration,
                                               a.realtime, port))
                        print(f"{dt.datetime.now(dt.UTC):%H:%M:%S} {name} {flows} {engine} "
                              f"{i}: {got[engine][-1]}", file=sys.stderr, flush=True)
                for engine, runs in got.items():
                    rows.append({"preset": name, "flows": flows, "engine": engine, "runs": runs})
    finally:
        nss.cleanup()
    end = dt.datetime.now(dt.UTC)
    meta = {"command": cmd, "start_utc": f"{start:%Y-%m-%d %H:%M}", "end_utc": f"{end:%H:%M}",
            "machine": machine(), "load_end": f"{os.getloadavg()[0]:.2f}",
            "repeat": str(a.repeat), "duration_s": f"{a.duration:g}",
            "realtime": str(a.realtime)}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "runs.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print_tables(meta, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
