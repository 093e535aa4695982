"""The two link engines side by side on one kernel: netem (htb + netem) against swell-link.

Manual, root, on a kernel with sch_netem. On this machine (no sch_netem) it runs
in the VM layer's guest::

    SWELL_VM_BUDGET_S=1800 scripts/vmtest.sh --exec \
        "python bench/bench_engines.py --out out/bench-engines"

The same topology spec goes to both engines (``Topology(spec, engine=...)``),
one engine after the other in the same kernel, and each row measures:

* **RTT error**: median ping RTT between a client and a server minus the
  configured round trip (2 x access + bottleneck both ways), and the same on
  the spec with every delay zero (the path's own cost), so the delay error is
  the difference of the two; and the delayed spec again on an IPv6 address
  plan (``fd00:5e11::/48``), the same path over IPv6;
* **spacing at the bottleneck's exit**: a burst of 60 full-size packets
  (1514-byte frames) through a 10 Mbit/s bottleneck, gaps between departures in
  the bottleneck capture against the serialisation time size/R (1211 us): a
  serialiser spaces every packet by size/R, a token bucket lets bursts through;
* **loss pattern**: 2,000 pings through a bottleneck with Bernoulli 5% loss and
  with Gilbert-Elliott loss (p_gb 1%, p_bg 20%: mean 4.8%, bursts of 5):
  measured loss and mean run of consecutive lost round trips;
* **throughput with delay**: iperf3 TCP (reno) for 8 s across a 20 Mbit/s
  bottleneck with 40 ms RTT and a queue of one bandwidth-delay product.

Under TCG (no KVM) every figure is relative: emulated CPUs add time to every
packet and every timer; compare the engines with each other, not with the
configured values of a real machine. The output is a markdown table and a JSON
file (``--out``), the JSON rewritten after every row so a run stopped from
outside keeps what it measured; a row that fails is reported as such (its
error in the JSON) and the others still run. ``--engines native`` measures one
engine only; ``--resume`` keeps the rows of an earlier ``--out`` run on the
same kernel that did not fail and measures only the rest.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dpkt

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from swell.topologies.spec import spec_from_dict  # noqa: E402
from swell.topologies.topology import EmulatedHost, Topology  # noqa: E402

_SEQ = re.compile(r"icmp_seq=(\d+) .*time=([0-9.]+) ms")
ENGINES = ("netem", "native")


def rtt_spec(delays: bool, network: str = "10.81.0.0/16") -> dict[str, Any]:
    k = 1.0 if delays else 0.0
    return {
        "network": network,
        "bottleneck": {"rate_mbps": 100, "delay_ms": 10 * k, "queue_packets": 500,
                       "reverse": {"rate_mbps": 100, "delay_ms": 5 * k, "queue_packets": 500}},
        "clients": {"count": 1, "access": {"delay_ms": 1 * k}},
        "servers": {"count": 1, "access": {"delay_ms": 2 * k}},
        "foreground": {"clients": 0, "servers": 0},
    }


def ping(topo: Topology, a: EmulatedHost, b: EmulatedHost, count: int, interval: float,
         size: int = 56, preload: int = 0) -> dict[int, float]:
    argv = ["ping", "-n", "-c", str(count), "-i", str(interval), "-s", str(size), "-W", "3",
            "-I", a.ip, b.ip]
    if preload:
        argv[1:1] = ["-l", str(preload)]
    out = topo.run_in(a, argv, check=False, timeout=300).stdout
    return {int(s): float(t) for s, t in _SEQ.findall(out)}


def rtt_row(engine: str) -> dict[str, float]:
    out = {}
    for delays in (False, True):
        with Topology(spec_from_dict(rtt_spec(delays)), engine=engine) as topo:
            a, b = topo.clients[0], topo.servers[0]
            rtts = list(ping(topo, a, b, 200, 0.01).values())[5:]
            configured = topo.expected_rtt_ms(a, b)
        key = "delayed" if delays else "zero"
        out[f"{key}_median_ms"] = statistics.median(rtts)
        out[f"{key}_p90_ms"] = statistics.quantiles(rtts, n=10)[-1]
        out[f"{key}_configured_ms"] = configured
    out["error_ms"] = out["delayed_median_ms"] - out["delayed_configured_ms"] - out[
        "zero_median_ms"]
    return out


def rtt6_row(engine: str) -> dict[str, float]:
    """The delayed RTT spec on an IPv6 plan: median and p90 RTT, configured RTT."""
    with Topology(spec_from_dict(rtt_spec(True, "fd00:5e11::/48")), engine=engine) as topo:
        a, b = topo.clients[0], topo.servers[0]
        rtts = list(ping(topo, a, b, 200, 0.01).values())[5:]
        configured = topo.expected_rtt_ms(a, b)
    return {"median_ms": statistics.median(rtts), "p90_ms": statistics.quantiles(rtts, n=10)[-1],
            "configured_ms": configured, "replies": len(rtts) + 5}


def spacing_row(engine: str, work: Path) -> dict[str, float]:
    spec = spec_from_dict({"network": "10.82.0.0/16",
                           "bottleneck": {"rate_mbps": 10, "delay_ms": 1, "queue_packets": 100},
                           "capture": {"snaplen": 96}})
    cap = work / f"spacing-{engine}"
    with Topology(spec, engine=engine, capture_dir=cap) as topo:
        a, b = topo.fg_clients[0], topo.fg_servers[0]
        ping(topo, a, b, 60, 0.001, size=1472, preload=60)
    with open(cap / "bottleneck-forward.pcap", "rb") as f:
        frames = [(float(ts), dpkt.ethernet.Ethernet(buf).data) for ts, buf in dpkt.pcap.Reader(f)]
    stamps = [ts for ts, ip in frames if isinstance(ip, dpkt.ip.IP) and ip.len == 1500]
    gaps = [(y - x) * 1e6 for x, y in zip(stamps, stamps[1:], strict=False)]
    ideal = 1514 * 8 / 10
    return {
        "packets": len(stamps),
        "ideal_gap_us": ideal,
        "median_gap_us": statistics.median(gaps),
        "min_gap_us": min(gaps),
        "within_10pct": sum(abs(g - ideal) <= 0.1 * ideal for g in gaps) / len(gaps),
        "below_half": sum(g < 0.5 * ideal for g in gaps) / len(gaps),
    }


def mean_run(lost: list[int]) -> float:
    runs, prev = [], None
    for s in lost:
        if prev is not None and s == prev + 1:
            runs[-1] += 1
        else:
            runs.append(1)
        prev = s
    return statistics.mean(runs) if runs else 0.0


def loss_row(engine: str, loss: dict[str, Any], count: int = 2000) -> dict[str, float]:
    spec = spec_from_dict({"network": "10.83.0.0/16",
                           "bottleneck": {"rate_mbps": 100, "delay_ms": 1, "queue_packets": 500,
                                          "loss": loss,
                                          "reverse": {"rate_mbps": 100, "delay_ms": 1,
                                                      "queue_packets": 500}},
                           "capture": {"enabled": False}})
    with Topology(spec, engine=engine) as topo:
        a, b = topo.fg_clients[0], topo.fg_servers[0]
        got = ping(topo, a, b, count, 0.002)
    lost = [s for s in range(1, count + 1) if s not in got]
    return {"loss": len(lost) / count, "mean_run": mean_run(lost)}


def throughput_row(engine: str, seconds: int = 8) -> dict[str, float]:
    bdp = round(20e6 * 0.040 / 8 / 1500)
    spec = spec_from_dict({"network": "10.84.0.0/16",
                           "bottleneck": {"rate_mbps": 20, "delay_ms": 20, "queue_packets": bdp},
                           "capture": {"enabled": False}})
    with Topology(spec, engine=engine) as topo:
        a, b = topo.fg_clients[0], topo.fg_servers[0]
        # --forceflush: without it iperf3 buffers "Server listening" in the pipe
        srv = topo.popen_in(b, ["iperf3", "-s", "-1", "--forceflush", "-B", b.ip, "-p", "5310"],
                            stdout=subprocess.PIPE, text=True)
        while "listening" not in (line := srv.stdout.readline()):
            assert line, "iperf3 server exited"
        out = topo.run_in(a, ["iperf3", "-c", b.ip, "-B", a.ip, "-p", "5310", "-t",
                              str(seconds), "-C", "reno", "-J"], timeout=120).stdout
        srv.wait(timeout=20)
    end = json.loads(out)["end"]
    return {"mbps": end["sum_received"]["bits_per_second"] / 1e6,
            "retransmits": end["sum_sent"].get("retransmits", 0)}


def cpu_kind() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def table(res: dict[str, dict[str, Any]]) -> str:
    def f(engine: str, part: str, key: str, fmt: str = "{:.2f}") -> str:
        row = res.get(engine, {}).get(part)
        if row is None:
            return "not run"
        if "error" in row:
            return "failed"
        return fmt.format(row[key])

    rows = [
        ("RTT, zero-delay spec (path cost), median ms", "rtt", "zero_median_ms", "{:.3f}"),
        ("RTT, 21 ms configured, median ms", "rtt", "delayed_median_ms", "{:.3f}"),
        ("RTT p90 ms (21 ms configured)", "rtt", "delayed_p90_ms", "{:.3f}"),
        ("delay error: median - configured - path cost, ms", "rtt", "error_ms", "{:+.3f}"),
        ("IPv6 plan: RTT, 21 ms configured, median ms", "rtt6", "median_ms", "{:.3f}"),
        ("exit spacing: median gap us (size/R = 1211)", "spacing", "median_gap_us", "{:.0f}"),
        ("exit spacing: gaps within 10% of size/R", "spacing", "within_10pct", "{:.0%}"),
        ("exit spacing: gaps under size/(2R) (bursts)", "spacing", "below_half", "{:.0%}"),
        ("exit spacing: smallest gap us", "spacing", "min_gap_us", "{:.0f}"),
        ("Bernoulli 5%: measured loss", "bernoulli", "loss", "{:.1%}"),
        ("Bernoulli 5%: mean run of lost pings", "bernoulli", "mean_run", "{:.2f}"),
        ("Gilbert-Elliott (mean 4.8%, bursts 5): loss", "gilbert", "loss", "{:.1%}"),
        ("Gilbert-Elliott: mean run of lost pings", "gilbert", "mean_run", "{:.2f}"),
        ("TCP reno, 20 Mbit/s, 40 ms RTT, BDP queue: Mbit/s", "tcp", "mbps", "{:.2f}"),
        ("TCP: retransmits", "tcp", "retransmits", "{:.0f}"),
    ]
    lines = ["| measure | netem engine | swell-link |", "|---|---:|---:|"]
    for label, part, key, fmt in rows:
        lines.append(f"| {label} | {f('netem', part, key, fmt)} | {f('native', part, key, fmt)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for results.json, table.md")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="comma-separated engines to measure (netem, native)")
    ap.add_argument("--resume", action="store_true",
                    help="keep rows of OUT/results.json measured on this kernel without error")
    args = ap.parse_args()
    engines = [e for e in args.engines.split(",") if e]
    if not engines or any(e not in ENGINES for e in engines):
        ap.error(f"--engines takes {', '.join(ENGINES)}")
    res: dict[str, dict[str, Any]] = {}
    meta = {"kernel": platform.release(), "cpu": cpu_kind(), "python": platform.python_version()}
    prior: dict[str, Any] = {}
    if args.resume and args.out is not None and (args.out / "results.json").is_file():
        old = json.loads((args.out / "results.json").read_text())
        if old.get("meta", {}).get("kernel") == meta["kernel"]:
            prior = old

    def save() -> None:
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "results.json").write_text(json.dumps({"meta": meta, **res}, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        for engine in engines:
            rows = {
                "rtt": lambda e=engine: rtt_row(e),
                "rtt6": lambda e=engine: rtt6_row(e),
                "spacing": lambda e=engine: spacing_row(e, Path(tmp)),
                "bernoulli": lambda e=engine: loss_row(e, {"kind": "bernoulli", "p": 0.05}),
                "gilbert": lambda e=engine: loss_row(
                    e, {"kind": "gilbert", "p_gb": 0.01, "p_bg": 0.2}),
                "tcp": lambda e=engine: throughput_row(e),
            }
            res[engine] = {}
            for name, row in rows.items():
                kept = prior.get(engine, {}).get(name)
                if kept is not None and "error" not in kept:
                    res[engine][name] = kept
                    print(f"{engine} {name} (kept):", json.dumps(kept), flush=True)
                    continue
                t0 = time.monotonic()
                try:
                    res[engine][name] = row()
                except Exception as exc:  # one failed row must not lose the others
                    res[engine][name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                res[engine][name]["seconds"] = round(time.monotonic() - t0, 1)
                print(f"{engine} {name}:", json.dumps(res[engine][name]), flush=True)
                save()
    text = table(res)
    print(f"\n{meta}\n\n{text}")
    save()
    if args.out is not None:
        (args.out / "table.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
