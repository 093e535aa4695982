"""Benchmark of the traffic engine (manual; root): ``.venv/bin/python bench/bench_gen.py``.

Swing side (``swell-gen run`` on one core, ``serve`` on the other side of a
veth pair between two namespaces this script creates and removes, MTU 1500,
segmentation offloads off, no shaping):

* concurrent sessions: N sessions start within 1 s and each holds one TCP
  connection open through think times; peak ``sessions_active`` and the
  client's peak RSS (VmHWM) give memory per session;
* new TCP connections per second: short sessions (one 100-byte request, one
  1000-byte response) arriving faster than the engine can open them;
* aggregate Mbit/s: a few sessions with large responses.

Packet sources: CBR and Poisson over UDP at 1k, 10k and 50k packets/s, swell
and D-ITG side by side (interleaved), without and with SCHED_FIFO.

``--write docs/bench-gen.md`` writes the tables there.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.generators.base import Netns, Proc, run_generator  # noqa: E402
from swell.generators.cbr import CbrConfig, CbrGenerator  # noqa: E402
from swell.generators.schedule import Conn, Rre, Schedule, Session, write_schedule  # noqa: E402
from swell.generators.swing import load_records  # noqa: E402
from swell.native import native_artifact  # noqa: E402
from swell.nsset import NetnsSet  # noqa: E402

CLIENTS = [f"10.77.1.{i}" for i in range(1, 51)]
SERVERS = [f"10.77.2.{i}" for i in range(1, 5)]


@dataclass(frozen=True)
class Pair:
    """Two namespaces joined by a veth pair (client addresses on one side, servers on the other)."""

    cns: str
    sns: str


def make_pair(nss: NetnsSet) -> Pair:
    """``<prefix>-c`` (CLIENTS) -- ``<prefix>-s`` (SERVERS), all /16 on one veth.

    The veth's segmentation offloads are off (wire-sized packets, as in the
    tests' namespaces).
    """
    pair = Pair(nss.add("c"), nss.add("s"))
    nss.veth(pair.cns, "eth0", pair.sns, "eth0")
    nss.add_addresses(pair.cns, "eth0", (f"{a}/16" for a in CLIENTS))
    nss.add_addresses(pair.sns, "eth0", (f"{a}/16" for a in SERVERS))
    return pair


def run_schedule(pair: Pair, sessions: list[Session], tmp: Path, label: str
                 ) -> tuple[list[dict], float, int]:
    """Serve and run; returns counter lines, wall time and the client's peak RSS (kB)."""
    path = write_schedule(tmp / f"{label}.jsonl", Schedule(1, 60.0, sessions))
    exe = str(native_artifact("swell-gen"))
    server = Proc("serve", Netns(pair.sns), [exe, "serve"] + [
        x for s in SERVERS for x in ("--listen", f"{s}:7000")])
    try:
        server.wait_line(lambda ln: ln == "READY", 10)
        t0 = time.monotonic()
        client = Proc("run", Netns(pair.cns), [exe, "run", "--schedule", str(path),
                                               "--records", str(tmp / f"{label}.rec"),
                                               "--interval-ms", "250", "--duration", "90"])
        hwm = 0
        lines: list[dict] = []
        while client.alive():
            hwm = max(hwm, peak_rss(client))
            lines += [json.loads(x) for x in client.drain() if x.startswith("{")]
            time.sleep(0.1)  # sampling period of the RSS probe
        client.stop()
        lines += [json.loads(x) for x in client.drain() if x.startswith("{")]
        return lines, time.monotonic() - t0, hwm
    finally:
        server.stop()


def peak_rss(proc: Proc) -> int:
    """VmHWM (kB) of the swell-gen child of ``ip netns exec`` (same pid: exec)."""
    try:
        for ln in Path(f"/proc/{proc.popen.pid}/status").read_text().splitlines():
            if ln.startswith("VmHWM:"):
                return int(ln.split()[1])
    except OSError:
        pass
    return 0


def tcp(server: str, pairs: list[tuple[int, int, float]]) -> Conn:
    return Conn(f"{server}:7000", "tcp", "bench-tcp", 0.0, tuple(pairs))


def bench_concurrent(pair: Pair, tmp: Path, n: int) -> dict[str, float]:
    sessions = [Session(i, i / n, CLIENTS[i % len(CLIENTS)], (Rre(0.0, (
        tcp(SERVERS[i % len(SERVERS)], [(100, 1000, 1.0)] * 4 + [(100, 1000, 0.0)]),)),))
        for i in range(n)]
    lines, wall, hwm = run_schedule(pair, sessions, tmp, "concurrent")
    peak = max(r["sessions_active"] for r in lines)
    final = lines[-1]
    return {"sessions": n, "peak_active": peak, "ok": final["conns_ok"],
            "failed": final["conns_failed"], "peak_rss_mb": hwm / 1024,
            "kb_per_session": hwm / max(peak, 1)}


def bench_connrate(pair: Pair, tmp: Path, n: int, rate: float) -> dict[str, float]:
    sessions = [Session(i, i / rate, CLIENTS[i % len(CLIENTS)], (Rre(0.0, (
        tcp(SERVERS[i % len(SERVERS)], [(100, 1000, 0.0)]),)),)) for i in range(n)]
    lines, wall, _ = run_schedule(pair, sessions, tmp, "connrate")
    done = [r for r in lines if r["t"] > 0]
    best = max((b["conns_ok"] - a["conns_ok"]) / (b["t"] - a["t"])
               for a, b in zip(done, done[1:], strict=False) if b["t"] - a["t"] > 0.1)
    final = lines[-1]
    errors = collections.Counter(r["error"] for r in load_records(tmp / "connrate.rec")
                                 if not r["ok"])
    return {"connections": n, "offered_per_s": rate, "ok": final["conns_ok"],
            "failed": final["conns_failed"], "mean_per_s": final["conns_ok"] / final["t"],
            "best_250ms_per_s": best, "errors": dict(errors.most_common(3)),
            "deferred": final.get("conns_deferred", 0)}


def bench_throughput(pair: Pair, tmp: Path, nsess: int, mbytes: int) -> dict[str, float]:
    sessions = [Session(i, 0.0, CLIENTS[i], (Rre(0.0, (
        tcp(SERVERS[i % len(SERVERS)], [(100, mbytes << 20, 0.0)]),)),)) for i in range(nsess)]
    lines, wall, _ = run_schedule(pair, sessions, tmp, "throughput")
    final = lines[-1]
    return {"sessions": nsess, "mbytes_each": mbytes, "seconds": final["t"],
            "mbit_per_s": final["rx_bytes"] * 8e-6 / final["t"], "failed": final["conns_failed"]}


def bench_timing(tmp: Path, pps_list: list[int], seconds: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    with NetnsSet("swb") as nss:
        ns = nss.add("t")
        for pps in pps_list:
            for dist in ("const", "poisson"):
                for rt in (False, True):
                    for engine in ("swell", "ditg"):
                        cfg = CbrConfig(dst="127.0.0.1", rate_bps=pps * 8 * 540.0,
                                        out_dir=tmp / f"{engine}{pps}{dist}{rt}", dist=dist,
                                        duration_s=seconds, engine=engine, realtime=rt,
                                        server=Netns(ns), client=Netns(ns),
                                        signal_port=9000 + len(rows))
                        s = run_generator(CbrGenerator(cfg), label=f"{engine} {pps}").summary
                        rows.append({**s, "pps_achieved": s["pps"], "pps": pps, "dist": dist,
                                     "rt": rt, "engine": engine})
    return rows


def tables(res: dict[str, object]) -> str:
    c, r, t = res["concurrent"], res["connrate"], res["throughput"]
    out = [f"Host: {platform.node()}, {platform.machine()}, kernel {platform.release()}; "
           f"{res['when']}. Shared 2-core machine: numbers move with the other load.", "",
           "| Swing engine (one core, veth, MTU 1500, no shaping) | target | measured |",
           "|---|---|---|",
           f"| concurrent sessions (peak active of {c['sessions']}) | >= 5,000 | "
           f"{c['peak_active']:,} ({c['failed']} failed) |",
           f"| memory per session (client peak RSS / peak sessions) | report | "
           f"{c['kb_per_session']:.1f} kB ({c['peak_rss_mb']:.1f} MB total) |",
           f"| new TCP connections/s (mean; best 250 ms) | >= 2,000 | "
           f"{r['mean_per_s']:,.0f}; {r['best_250ms_per_s']:,.0f} ({r['failed']} failed: "
           f"{r['errors'] or 'none'}; offered {r['offered_per_s']:,.0f}/s; "
           f"{r['deferred']:,} starts deferred for lack of descriptors) |",
           f"| aggregate Mbit/s ({t['sessions']} sessions x {t['mbytes_each']} MB) | >= 500 | "
           f"{t['mbit_per_s']:,.0f} |", "",
           "| pps | dist | SCHED_FIFO | engine | achieved pps | idt mean us | idt std us | "
           "p99 abs dev us | KS D vs exp | lost |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in res["timing"]:  # type: ignore[union-attr]
        out.append(f"| {row['pps']:,} | {row['dist']} | {'yes' if row['rt'] else 'no'} | "
                   f"{row['engine']} | {row['pps_achieved']:,.0f} | {row['idt_mean_us']:.2f} | "
                   f"{row['idt_std_us']:.2f} | {row['idt_p99_abs_dev_us']:.2f} | "
                   f"{row['ks_exp_d']:.3f} | {row['lost']} |")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=6000)
    ap.add_argument("--conns", type=int, default=40000)
    ap.add_argument("--conn-rate", type=float, default=20000.0)
    ap.add_argument("--seconds", type=float, default=3.0, help="per timing run")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--write", type=Path, help="write the markdown tables to this file")
    args = ap.parse_args()
    res: dict[str, object] = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    with tempfile.TemporaryDirectory(prefix="swell-bench-gen-") as tmpdir:
        tmp = Path(tmpdir)
        with NetnsSet("swb") as nss:
            pair = make_pair(nss)
            res["concurrent"] = bench_concurrent(pair, tmp, args.sessions)
            print(res["concurrent"], flush=True)
            res["connrate"] = bench_connrate(pair, tmp, args.conns, args.conn_rate)
            print(res["connrate"], flush=True)
            res["throughput"] = bench_throughput(pair, tmp, 8, 400)
            print(res["throughput"], flush=True)
        res["timing"] = [] if args.skip_timing else bench_timing(tmp, [1000, 10000, 50000],
                                                                 args.seconds)
    text = tables(res)
    print(text)
    if args.write:  # replace what follows the marker, keep the prose before it
        marker = "<!-- bench -->"
        head = args.write.read_text().split(marker)[0] if args.write.exists() else ""
        args.write.write_text(f"{head}{marker}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
