"""Soak: a long Swing background plus httperf, memory of every swell process sampled.

Runs ``swell run`` on a one-configuration study (Swing background from the
bundled ``example.pcap`` at a moderate target load, httperf fetching 100 kB
objects over a 20 Mbit/s, 10 ms dumbbell) for ``--minutes`` minutes (default
30), and every ``--every`` seconds (default 60) records the resident memory
(VmRSS) of every swell process: the ``swell`` command itself, ``swell-link``
(the link engine) and ``swell-gen`` (Swing's generators), per pid and summed
per program. The JSON keeps every sample's per-pid memory.

What it judges (any of them fails the soak, exit 1):

* **memory**: growth of each long-lived process (alive at the first sample
  after warm-up and at the last one before teardown) from that sample to its
  peak; the first two samples are warm-up; over 10% fails. A ``subprocess``
  fork of the swell process caught between fork and exec shows the parent's
  command line and part of its RSS for one sample: such a child (same command
  line as its swell parent) is kept in the JSON, marked ``forking``, and left
  out of the totals and the growth;
* **failures**: httperf's errors, non-2xx replies and connections without a
  reply (beyond the one in flight at the stop) are explained by load only when
  the bottleneck direction httperf downloads over was busy (mean of all traffic
  at least 90% of its rate); Swing's failed connections only when they are
  UDP exchanges that timed out and the run's pipes dropped packets (a lost
  datagram) -- anything else (refused, reset, non-2xx) is never load;
* **leftovers**: the run's prefix objects (processes, namespaces, interfaces)
  and any swell, httperf, apache or tcpdump process started during the soak
  and still alive after it.

    flock /tmp/swell-cpu.lock .venv/bin/python bench/soak.py --minutes 30 \\
        --out /tmp/swell-soak
    .venv/bin/python bench/soak.py --render /tmp/swell-soak/soak.json \\
        --doc docs/robustness.md

The second form rewrites the block between ``<!-- soak:begin -->`` and
``<!-- soak:end -->`` in the document from a soak's JSON (the table and its
summary are never edited by hand).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = ("swell", "swell-link", "swell-gen")
HELPERS = ("httperf", "apache2", "tcpdump")  # started by a run; none may outlive it
WARMUP_SAMPLES = 2
GROWTH_LIMIT_PCT = 10.0
BUSY_SHARE = 0.9  # a bottleneck direction this busy explains httperf errors
BEGIN, END = "<!-- soak:begin -->", "<!-- soak:end -->"

EXP = """
name: soak
duration_s: {duration}
warmup_s: 10
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: {rate}, delay_ms: 10, queue_bytes: 100000}}
  clients: {{count: 20}}
  servers: {{count: 5}}
background: {{kind: swing, trace: {trace}, variant: {{target_mbps: {mbps}}}}}
foreground: {{kind: httperf, object_bytes: 100000}}
"""


def _program(argv: list[str]) -> str | None:
    if not argv:
        return None
    exe = os.path.basename(argv[0])
    if exe in PROGRAMS[1:] or exe in HELPERS:
        return exe
    if exe.startswith("python") and len(argv) > 2 and argv[1:3] == ["-m", "swell"]:
        return "swell"
    if exe == "swell" or (len(argv) > 1 and argv[1].endswith("/swell")):
        return "swell"
    return None


def _procs() -> dict[str, dict[str, Any]]:
    """pid -> program, command line, parent pid and RSS (MB) of swell's processes."""
    out: dict[str, dict[str, Any]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            prog = _program(argv)
            if prog is None:
                continue
            rss, ppid = 0.0, 0
            for line in (d / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("PPid:"):
                    ppid = int(line.split()[1])
            out[d.name] = {"program": prog, "rss_mb": round(rss, 2), "ppid": ppid,
                           "cmd": " ".join(argv)[:200]}
        except (OSError, ValueError, IndexError):
            continue
    return out


def _descends(pid: str, root: int, procs: dict[str, dict[str, Any]]) -> bool:
    """Whether ``pid`` is ``root`` or its descendant (walking /proc's parent links)."""
    seen = 0
    while pid and seen < 64:
        if int(pid) == root:
            return True
        info = procs.get(pid)
        if info is None:
            try:
                st = Path(f"/proc/{pid}/status").read_text()
                info = {"ppid": int(next(x for x in st.splitlines()
                                         if x.startswith("PPid:")).split()[1])}
            except (OSError, StopIteration, ValueError):
                return False
        pid, seen = str(info["ppid"]) if info["ppid"] else "", seen + 1
    return False


def sample(root: int | None = None) -> dict[str, Any]:
    """Per program: processes and total RSS (MB); per pid: program, parent, RSS.
    With ``root``: only that process and its descendants (not another user's swell)."""
    procs = _procs()
    if root is not None:
        procs = {pid: p for pid, p in procs.items() if _descends(pid, root, procs)}
    out: dict[str, Any] = {p: {"processes": 0, "rss_mb": 0.0} for p in PROGRAMS}
    pids: dict[str, dict[str, Any]] = {}
    for pid, p in procs.items():
        parent = procs.get(str(p["ppid"]))
        forking = (p["program"] in PROGRAMS and parent is not None
                   and parent["cmd"] == p["cmd"])
        pids[pid] = {"program": p["program"], "rss_mb": p["rss_mb"], "ppid": p["ppid"],
                     **({"forking": True} if forking else {})}
        if p["program"] in PROGRAMS and not forking:
            out[p["program"]]["processes"] += 1
            out[p["program"]]["rss_mb"] = round(out[p["program"]]["rss_mb"] + p["rss_mb"], 2)
    out["pids"] = pids
    return out


def growth(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """pid -> program, base (first sample after warm-up), peak, last and growth (%),
    for every long-lived swell process (alive at the base and at the last sample
    before teardown; forking children left out)."""
    out: dict[str, dict[str, Any]] = {}
    if len(samples) <= WARMUP_SAMPLES + 1:
        return out
    base, before_end = samples[WARMUP_SAMPLES]["pids"], samples[-2]["pids"]
    rest = samples[WARMUP_SAMPLES:-1]
    for pid, b in base.items():
        if b["program"] not in PROGRAMS or b.get("forking") or not b["rss_mb"]:
            continue
        if pid not in before_end:
            continue
        seen = [s["pids"][pid]["rss_mb"] for s in rest if pid in s["pids"]]
        peak = max(seen)
        out[pid] = {"program": b["program"], "base_mb": b["rss_mb"], "peak_mb": peak,
                    "last_mb": seen[-1],
                    "growth_pct": round((peak - b["rss_mb"]) / b["rss_mb"] * 100, 2)}
    return out


def judge_failures(run: dict[str, Any], rate_mbps: float) -> dict[str, Any]:
    """httperf's and Swing's failures, each split into explained by load or not."""
    fg = (run.get("foreground") or {}).get("httperf") or {}
    down = ((run.get("bottleneck") or {}).get("reverse") or {}).get("all_mean_mbps") or 0.0
    busy = down >= BUSY_SHARE * rate_mbps
    missing = max(0, fg.get("connections", 0) - fg.get("replies", 0) - 1)
    bad = fg.get("errors", 0) + fg.get("status_other", 0) + missing
    load = run.get("load") or {}
    conns = load.get("connections") or {}
    drops = sum(p.get("queue_drops") or 0 for p in load.get("saturated") or [])
    errors = conns.get("errors") or {}
    lost_udp = errors.get("udp-timeout", 0) if drops else 0
    return {
        "httperf": {**fg, "missing_replies": missing, "reverse_mean_mbps": round(down, 3),
                    "bottleneck_busy": busy, "failures": bad,
                    "unexplained": 0 if busy else bad},
        "background": {"failed": conns.get("failed", 0), "errors": errors,
                       "queue_drops": drops,
                       "unexplained": conns.get("failed", 0) - lost_udp},
    }


def _helpers_alive(before: set[str]) -> list[str]:
    return [f"{p['program']} pid {pid}" for pid, p in _procs().items() if pid not in before]


def _context() -> dict[str, Any]:
    def git(*a: str) -> str:
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return r.stdout.rstrip("\n")

    mem_kb = next((int(x.split()[1]) for x in Path("/proc/meminfo").read_text().splitlines()
                   if x.startswith("MemTotal:")), 0)
    cpu = next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text()
                .splitlines() if x.startswith("model name")), platform.machine())
    return {"started_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "git_revision": git("rev-parse", "HEAD"),
            "git_modified": git("status", "--short", "--untracked-files=no").splitlines(),
            "cpus": os.cpu_count(), "mem_gib": round(mem_kb / 2**20, 1),
            "kernel": platform.release(), "cpu_model": cpu,
            "command": " ".join([Path(sys.executable).name, *sys.argv])}


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the study, sample it, judge it; the summary (also written as JSON)."""
    args.out.mkdir(parents=True, exist_ok=True)
    exp = args.out / "soak.yaml"
    exp.write_text(EXP.format(duration=int(args.minutes * 60), mbps=args.mbps, rate=args.rate,
                              trace=REPO / "data" / "pcap" / "example.pcap"))
    study = args.out / "study"
    if study.exists():  # a resumed study would reuse the old run
        raise SystemExit(f"{study} exists; give a new --out")
    context = _context()
    before = set(_procs())
    env = {**os.environ, "SWELL_QUIET": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "swell", "run", str(exp), "-o", str(study),
                             "--no-report"], env=env, cwd=REPO)
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    while proc.poll() is None:
        time.sleep(min(args.every, 5.0))
        if proc.poll() is not None:
            break
        if not samples or time.monotonic() - t0 >= len(samples) * args.every:
            samples.append({"t_min": round((time.monotonic() - t0) / 60, 2), **sample(proc.pid)})
    from swell.topologies import cleanup as cl

    left = [d for x in (cl.find_leftovers(p) for p in cl.find_prefixes())
            if not x.owner_alive and not x.empty() for d in x.describe()]
    left += _helpers_alive(before)
    run: dict[str, Any] = {}
    if (study / "results.json").is_file():
        run = json.loads((study / "results.json").read_text())["runs"][0]
    per_pid = growth(samples)
    worst = {p: max((g["growth_pct"] for g in per_pid.values() if g["program"] == p),
                    default=None) for p in PROGRAMS}
    failures = judge_failures(run, args.rate)
    summary = {"context": context, "minutes": args.minutes, "every_s": args.every,
               "mbps": args.mbps, "rate_mbps": args.rate, "exit": proc.returncode,
               "warmup_samples": WARMUP_SAMPLES, "growth_limit_pct": GROWTH_LIMIT_PCT,
               "growth_by_pid": per_pid, "growth_pct": worst, "failures": failures,
               "leftovers": left, "samples": samples}
    summary["verdict"] = verdict(summary)
    (args.out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def verdict(s: dict[str, Any]) -> list[str]:
    """What failed (empty: the soak passed)."""
    bad = []
    if s["exit"] != 0:
        bad.append(f"swell run exited {s['exit']}")
    for pid, g in s["growth_by_pid"].items():
        if g["growth_pct"] > s["growth_limit_pct"]:
            bad.append(f"{g['program']} pid {pid} grew {g['growth_pct']:+.1f}%")
    if not s["growth_by_pid"]:
        bad.append("too few samples to judge memory")
    for who in ("httperf", "background"):
        n = s["failures"][who]["unexplained"]
        if n:
            bad.append(f"{who}: {n} failures not explained by load")
    if s["leftovers"]:
        bad.append(f"left on the host: {s['leftovers']}")
    return bad


def render(s: dict[str, Any]) -> str:
    """The markdown the document shows: context, memory table, growth, failures."""
    c, f = s["context"], s["failures"]
    h, bg = f["httperf"], f["background"]
    n_mod = len(c["git_modified"])
    mod = (f" with {n_mod} files modified in the working tree (listed in the JSON; other "
           "work in progress)") if n_mod else ""
    machine = f"{c['cpus']} cores" + (f" of {c['cpu_model']}" if c.get("cpu_model") else "")
    command = f" by `{c['command']}` (under the CPU lock)" if c.get("command") else ""
    lines = [f"Measured {c['started_utc'][:10]} at `{c['git_revision'][:10]}`{mod}{command} "
             f"({machine}, {c['mem_gib']} GiB, kernel {c['kernel']}): "
             f"{s['minutes']:g} minutes, Swing at {s['mbps']:g} Mbit/s plus httperf over "
             f"{s['rate_mbps']:g} Mbit/s; `swell run` exited {s['exit']}.", "",
             "| minute | " + " | ".join(f"{p} (MB, procs)" for p in PROGRAMS) + " |",
             "|---:|" + "---:|" * len(PROGRAMS)]
    for x in s["samples"]:
        lines.append(f"| {x['t_min']:.1f} | " + " | ".join(
            f"{x[p]['rss_mb']:.1f} ({x[p]['processes']})" for p in PROGRAMS) + " |")
    lines += ["", f"Growth per long-lived process, sample {s['warmup_samples'] + 1} to its "
              f"peak (limit {s['growth_limit_pct']:g}%):", ""]
    for pid, g in sorted(s["growth_by_pid"].items(), key=lambda kv: kv[1]["program"]):
        lines.append(f"* {g['program']} (pid {pid}): {g['base_mb']:.1f} -> peak "
                     f"{g['peak_mb']:.1f} MB, {g['growth_pct']:+.1f}%")
    forks = sum(1 for x in s["samples"] for p in x["pids"].values()
                if p.get("forking") and p["program"] in PROGRAMS)
    if forks:
        lines.append(f"* {forks} sample(s) caught a swell child between fork and exec "
                     "(kept in the JSON, left out of the totals)")
    lines += ["", f"httperf: {h.get('connections', 0):,} connections, "
              f"{h.get('replies', 0):,} replies ({h.get('status_2xx', 0):,} 2xx), "
              f"{h.get('errors', 0)} errors, {h['missing_replies']} missing replies, median "
              f"connect {h.get('conn_time_ms_median', 0)} ms; download direction "
              f"{h['reverse_mean_mbps']:.2f} Mbit/s of {s['rate_mbps']:g} "
              f"({'busy' if h['bottleneck_busy'] else 'not busy'}): "
              f"**{h['unexplained']} unexplained**.",
              f"Swing: {bg['failed']} failed connections {bg['errors'] or ''} with "
              f"{bg['queue_drops']:,} queue drops: **{bg['unexplained']} unexplained**.",
              f"Left on the host: {', '.join(s['leftovers']) or '**nothing**'}. Verdict: "
              + ("**pass**" if not s["verdict"] else "**fail**: " + "; ".join(s["verdict"]))
              + "."]
    return "\n".join(lines)


def render_into(doc: Path, s: dict[str, Any], json_rel: str) -> None:
    """Replace the block between the markers in ``doc`` with :func:`render`."""
    text = doc.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc}: no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = (f"\n<!-- generated by bench/soak.py --render {json_rel}; do not edit -->\n"
            + render(s) + "\n")
    doc.write_text(head + BEGIN + body + END + tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--mbps", type=float, default=6.0, help="Swing target load")
    ap.add_argument("--rate", type=float, default=20.0, help="bottleneck rate, Mbit/s")
    ap.add_argument("--out", type=Path, default=Path("/tmp/swell-soak"))
    ap.add_argument("--render", type=Path, metavar="JSON",
                    help="only render a soak's JSON (into --doc, else to stdout)")
    ap.add_argument("--doc", type=Path, help="document whose soak block --render rewrites")
    args = ap.parse_args()
    if args.render:
        s = json.loads(args.render.read_text())
        if args.doc:
            rel = os.path.relpath(args.render.resolve(), REPO)
            render_into(args.doc, s, rel)
            print(f"wrote the soak block of {args.doc}")
        else:
            print(render(s))
        return 0 if not s["verdict"] else 1
    s = soak(args)
    print(render(s))
    print(f"\nraw samples: {args.out / 'soak.json'}")
    return 1 if s["verdict"] else 0


if __name__ == "__main__":
    sys.exit(main())
