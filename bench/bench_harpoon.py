"""Sessions and connections per second the Harpoon generator sustains on one core.

Run as root under the CPU lock::

    flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_harpoon.py \\
        [--seconds 20] [--runs 3] [--mbps 50,200,...] [--sessions model|construct]
        [--nofile 1048576] [--raw docs/harpoon/bench-raw.jsonl]

A Harpoon model from the alexa-app capture (``../shared/data``, 60 s
intervals run in 10 s, ``--sessions`` as given: the default ``model``, TCP
only) is driven at rising rates between two namespaces this script creates
for each run and removes (``swb<hex>-c`` with 64 client addresses, equally
weighted in place of the model's one: see ``CLIENTS``; ``swb<hex>-s`` with
the model's 11 server addresses; one veth, segmentation offloads off, no
shaping: the generator is the bottleneck). ``swell-gen run`` is
pinned to core 0 and ``swell-gen serve`` to core 1 (``taskset``). Each level
runs ``--runs`` times with a new seed. Per run: sessions and connections
scheduled per second; connections completed per second over the span they
took (first start to last end); the share completed; how far the span ran
past the schedule; the Mbit/s received; the CPU of the client process alone
and of the server process alone (user + system time from ``/proc``, polled
every 0.1 s, over the span, as a share of one core: past saturation the
process outlives the span and a full core reads above 100%); the schedule's draw
time. The open-file limit (``--nofile``, soft and hard, inherited by every
process the bench starts) is raised first where the machine allows it
(connections in flight each hold a socket; the limit used is in the output's
first line). Sustained: at least 99% of the connections complete and the span runs
at most 5% past the schedule; the completed rate is then the sustained rate.
Prints a Markdown table of medians (min-max over runs) and writes every
run's numbers as JSON lines to ``--raw``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.extract import harpoon as H  # noqa: E402
from swell.extract import harpoon_model as HM  # noqa: E402
from swell.extract.flows import read_flows  # noqa: E402
from swell.generators.base import run_generator  # noqa: E402
from swell.generators.harpoon import HarpoonSpec, harpoon_schedule  # noqa: E402
from swell.generators.schedule import write_schedule  # noqa: E402
from swell.generators.swing import SwingConfig, SwingGenerator  # noqa: E402
from swell.generators.swing_accounting import load_records  # noqa: E402
from swell.nsset import NetnsSet  # noqa: E402
from swell.placement import Via  # noqa: E402
from swell.topologies.layout import HOST_SYSCTLS  # noqa: E402

ALEXA = Path(__file__).resolve().parents[2] / "shared" / "data" / "pcap" / "ndpi" / \
    "alexa-app.pcapng"
HZ = os.sysconf("SC_CLK_TCK")
SUBCOMMAND = {"client": b"run", "server": b"serve"}
TIME_SCALE = 6  # the model's 60 s intervals run in 10 s: a schedule is whole intervals
# The alexa model has one client address: thousands of connections per second from it
# to a few servers run out of ephemeral ports while the closed ones wait in TIME_WAIT
# (60 s), and connect() then searches the port space for seconds (measured: 73% of
# 13,000 connections/s completed, the rest stuck, at a full core). The bench's model
# gets CLIENTS equally weighted client addresses instead, the whole port range, and the
# TIME_WAIT reuse that a topology's host namespaces have (topologies/layout.py).
CLIENTS = 64
CLIENT_SYSCTLS = ("net.ipv4.ip_local_port_range=1024 65535",
                  *(f"{k}={v}" for k, v in HOST_SYSCTLS.items()))


class CpuPoll(threading.Thread):
    """CPU seconds (user + system) of ``swell-gen run`` in the client namespace and
    ``swell-gen serve`` in the server one (by their network namespace's inode; the
    readiness probes are other processes), polled until stopped."""

    def __init__(self, namespaces: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.stop_ev = threading.Event()
        self.inodes = {f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]": label
                       for label, ns in namespaces.items()}
        self.ticks: dict[int, tuple[str, int]] = {}

    def poll(self) -> None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                label = self.inodes.get(os.readlink(entry / "ns" / "net"))
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                sub = SUBCOMMAND.get(label or "")
                if sub is None or not argv[0].endswith(b"swell-gen") or sub not in argv[1:2]:
                    continue
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            self.ticks[int(entry.name)] = (label, int(fields[11]) + int(fields[12]))

    def run(self) -> None:
        while not self.stop_ev.is_set():
            self.poll()
            time.sleep(0.1)

    def seconds(self, label: str) -> float:
        return sum(t for s, t in self.ticks.values() if s == label) / HZ


def one_run(nss_pair: tuple[str, str], m: HM.HarpoonModel, clients: list[str],
            servers: list[str], mbps: float, seed: int, seconds: float, tmp: Path,
            sessions: str) -> dict[str, Any]:
    spec = HarpoonSpec(model="m", time_scale=TIME_SCALE, target_mbps=mbps, udp=False,
                       sessions=sessions)
    t0 = time.monotonic()
    sched = harpoon_schedule(m, clients, servers, seconds, seed, spec)
    draw = time.monotonic() - t0
    out = tmp / f"run-{int(mbps)}-{seed}"
    out.mkdir()
    path = write_schedule(out / "schedule.jsonl", sched)
    cns, sns = nss_pair
    gen = SwingGenerator(SwingConfig(
        path, out, server=Via(("ip", "netns", "exec", sns, "taskset", "-c", "1")),
        client=Via(("ip", "netns", "exec", cns, "taskset", "-c", "0")),
        duration_s=seconds + 5))
    cpu = CpuPoll({"client": cns, "server": sns})
    cpu.start()
    try:
        run_generator(gen, duration_s=None, label=f"harpoon {mbps:g}")
    finally:
        cpu.stop_ev.set()
        cpu.join()
    recs = load_records(out / "records.jsonl")
    shutil.rmtree(out)  # records of a fast level are hundreds of MB
    ok = [r for r in recs if r["ok"]]
    nconn = len(sched.conns())
    span = max(r["end"] for r in ok) - min(r["start"] for r in ok) if ok else float("nan")
    return {"target_mbps": mbps, "seed": seed, "seconds": seconds,
            "sessions_per_s": len(sched.sessions) / seconds, "conns_per_s": nconn / seconds,
            "completed_per_s": len(ok) / span, "completed": len(ok) / max(nconn, 1),
            "span_s": span, "mbps_received": 8 * sum(r["rx"] for r in ok) / span / 1e6,
            "client_cpu": cpu.seconds("client") / span, "server_cpu": cpu.seconds("server") / span,
            "client_cpu_s": cpu.seconds("client"), "processes": len(cpu.ticks),
            "errors": dict(collections.Counter(r["error"].split(":")[0] for r in recs
                                               if not r["ok"]).most_common(3)),
            "draw_s": draw}


def raise_nofile(want: int) -> None:
    """Soft and hard open-file limit to ``want`` (at most ``fs.nr_open``); where the hard
    limit cannot be raised (no CAP_SYS_RESOURCE, as in a container) the soft one goes
    to the hard one, and a line on stderr says so."""
    want = min(want, int(Path("/proc/sys/fs/nr_open").read_text()))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
    except (ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        print(f"bench_harpoon: open-file limit stays at the hard limit {hard} (raising it "
              f"needs CAP_SYS_RESOURCE)", file=sys.stderr)


def _cell(rows: list[dict[str, Any]], key: str, fmt: str) -> str:
    vals = [r[key] for r in rows]
    med = format(statistics.median(vals), fmt)
    return f"{med} ({format(min(vals), fmt)}-{format(max(vals), fmt)})"


def table(results: dict[float, list[dict[str, Any]]]) -> list[str]:
    out = ["| target Mbit/s | sessions/s scheduled | conns/s scheduled | conns/s completed | "
           "completed | span past schedule | Mbit/s received | client CPU | server CPU | "
           "draw s | sustained |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for mbps, rows in results.items():
        sustained = all(r["completed"] >= 0.99 and r["span_s"] <= 1.05 * r["seconds"]
                        for r in rows)
        for r in rows:
            r["past"] = r["span_s"] / r["seconds"] - 1
        out.append(f"| {mbps:g} | {_cell(rows, 'sessions_per_s', '.0f')} | "
                   f"{_cell(rows, 'conns_per_s', '.0f')} | "
                   f"{_cell(rows, 'completed_per_s', '.0f')} | "
                   f"{_cell(rows, 'completed', '.1%')} | {_cell(rows, 'past', '+.0%')} | "
                   f"{_cell(rows, 'mbps_received', '.0f')} | "
                   f"{_cell(rows, 'client_cpu', '.0%')} | {_cell(rows, 'server_cpu', '.0%')} | "
                   f"{_cell(rows, 'draw_s', '.2f')} | {'yes' if sustained else 'no'} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20.0, help="schedule length per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per level (seeds 1..N)")
    ap.add_argument("--mbps", default="50,200,400,600,800,1000,1500",
                    help="levels, Mbit/s of TCP")
    ap.add_argument("--sessions", choices=("model", "construct"), default="model")
    ap.add_argument("--nofile", type=int, default=1 << 20, help="open-file limit to set")
    ap.add_argument("--raw", type=Path, help="write every run's numbers here (JSON lines)")
    args = ap.parse_args()
    raise_nofile(args.nofile)
    if args.seconds % (60 / TIME_SCALE):
        ap.error(f"--seconds must be whole {60 / TIME_SCALE:g} s intervals (sessions of an "
                 f"interval run to its end)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-harpoon-"))
    p = H.HarpoonParams(interval_s=60)
    HM.save(HM.build(H.fit(read_flows([ALEXA]), p), p, {"inputs": [str(ALEXA)]}),
            tmp / "model")
    m = HM.load(tmp / "model")
    clients = [f"10.78.1.{i}" for i in range(1, CLIENTS + 1)]
    m.arrays["pool/client_addr"] = np.array(clients)
    m.arrays["pool/client_weight"] = np.ones(CLIENTS)
    servers = [f"10.78.2.{i}" for i in range(1, 1 + len(m.pool("server")[0]))]
    head = {"machine": platform.node(), "kernel": platform.release(),
            "cpu": next((ln.split(":", 1)[1].strip() for ln in
                         Path("/proc/cpuinfo").read_text().splitlines()
                         if ln.startswith("model name")), "?"),
            "cores": os.cpu_count(), "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "argv": sys.argv[1:], "sessions": args.sessions,
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)}
    print(json.dumps(head), flush=True)
    results: dict[float, list[dict[str, Any]]] = {}
    for mbps in [float(x) for x in args.mbps.split(",")]:
        for seed in range(1, args.runs + 1):
            with NetnsSet("swb") as nss:  # fresh: no TIME_WAIT left by the previous run
                cns, sns = nss.add("c", sysctls=CLIENT_SYSCTLS), nss.add("s")
                nss.veth(cns, "eth0", sns, "eth0")
                nss.add_addresses(cns, "eth0", [f"{a}/16" for a in clients])
                nss.add_addresses(sns, "eth0", [f"{a}/16" for a in servers])
                row = one_run((cns, sns), m, clients, servers, mbps, seed, args.seconds, tmp,
                              args.sessions)
            print(json.dumps(row), flush=True)
            results.setdefault(mbps, []).append(row)
    shutil.rmtree(tmp)
    if args.raw:
        with open(args.raw, "w") as fh:
            fh.write(json.dumps(head) + "\n")
            for rows in results.values():
                fh.writelines(json.dumps(r) + "\n" for r in rows)
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
