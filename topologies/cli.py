"""Command line for topologies: ``swell topo up|status|down``, ``swell cleanup``, ``swell doctor``.

``swell topo up SPEC`` brings a dumbbell up and stays in the foreground
(the topology lives as long as this process: its Mininet shells and engine
are children of it). It prints the run prefix and the namespaces, keeps its
state in ``/run/swell/<prefix>/``, and tears everything down on Ctrl-C,
SIGTERM (what ``swell topo down`` sends) or if the engine dies. Run it in the
background (``swell topo up spec.yaml &``) to use the namespaces from a shell:
``ip netns exec <prefix>-c0 ping ...``.

``swell cleanup`` removes the leftovers of runs whose owner died (SIGKILL,
power loss), by prefix, and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_json
from swell.topologies import cleanup as cl
from swell.topologies import doctor
from swell.topologies.spec import load_spec
from swell.topologies.topology import STATE_ROOT, Topology


def register(subparsers: Any) -> None:
    topo = subparsers.add_parser("topo", help="bring an emulated dumbbell up or down")
    sub = topo.add_subparsers(dest="topo_command", metavar="ACTION", required=True)
    up = sub.add_parser(
        "up",
        help="bring a dumbbell up and keep it until Ctrl-C / topo down",
        description="Bring the dumbbell of SPEC up; stays in the foreground.",
    )
    up.add_argument("spec", type=Path, help="topology spec (YAML)")
    up.add_argument("--engine", choices=("auto", "netem", "native"), help="override the spec")
    up.add_argument("--capture-dir", type=Path, help="write the bottleneck pcaps here")
    up.add_argument("--prefix", help="run prefix sw<4 hex> (default: random)")
    up.set_defaults(func=cmd_up)
    status = sub.add_parser("status", help="list running and crashed runs")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    down = sub.add_parser("down", help="tear a run down (the only one if RUN is omitted)")
    down.add_argument("run", nargs="?", help="run prefix, e.g. sw1a2b")
    down.add_argument("--timeout", type=float, default=60.0)
    down.set_defaults(func=cmd_down)
    clean = subparsers.add_parser(
        "cleanup", help="remove leftovers of crashed runs (by prefix, nothing else)"
    )
    clean.add_argument("run", nargs="?", help="only this prefix")
    clean.add_argument("--force", action="store_true", help="also a run whose owner is alive")
    clean.add_argument("--dry-run", action="store_true", help="list, do not remove")
    clean.set_defaults(func=cmd_cleanup)
    doc = subparsers.add_parser("doctor", help="what this host offers; which engine auto picks")
    doc.add_argument("--json", action="store_true")
    doc.set_defaults(func=cmd_doctor)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_up(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec)
    if args.prefix and not cl.PREFIX_RE.match(args.prefix):
        raise SwellError("--prefix", f"{args.prefix!r} is not sw followed by 4 hex digits")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    topo = Topology(spec, engine=args.engine, capture_dir=args.capture_dir, prefix=args.prefix)
    try:
        with topo:
            _print_up(topo)
            while True:
                time.sleep(0.5)
                if topo.engine is not None and topo.engine.pid is not None:
                    if not os.path.exists(f"/proc/{topo.engine.pid}"):
                        raise SwellError(topo.prefix, "the engine died; tearing down")
    except KeyboardInterrupt:
        pass
    report = topo.report
    if args.capture_dir is not None and report:
        write_json(args.capture_dir / "topology-report.json", {"prefix": topo.prefix, **report})
    for c in report.get("captures", []):
        print(
            f"capture {c['direction']}: {c['path']} {c['written']} packets, {c['dropped']} dropped"
        )
    for problem in report.get("problems", []):
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{topo.prefix}: down")
    return 1 if report.get("problems") else 0


def _print_up(topo: Topology) -> None:
    print(f"{topo.prefix}: up, engine {topo.engine_name}, {len(topo.hosts)} emulated hosts")
    assert topo.layout is not None
    for node in topo.plan.nodes:
        print(
            f"  {topo.layout.name(node.suffix):14s} {node.role} {node.side:5s} "
            f"{len(node.hosts):4d} hosts {node.hosts[0]}..{node.hosts[-1]}"
        )
    for direction, path in topo.captures.items():
        print(f"  capture {direction}: {path}")
    print(f"  stop with Ctrl-C or: swell topo down {topo.prefix}", flush=True)


def _runs() -> list[dict[str, Any]]:
    runs = []
    for prefix in sorted(cl.find_prefixes()):
        state_file = STATE_ROOT / prefix / "state.json"
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            state = {}
        alive = cl.owner_alive(prefix)
        runs.append(
            {
                "prefix": prefix,
                "owner_alive": alive,
                "status": state.get("status", "?") if alive else "crashed (run swell cleanup)",
                "engine": state.get("engine"),
                "hosts": state.get("hosts"),
                "owner_pid": state.get("owner_pid"),
                "namespaces": [n for n in cl.netns_names() if n.startswith(prefix + "-")],
            }
        )
    return runs


def cmd_status(args: argparse.Namespace) -> int:
    runs = _runs()
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print("no swell runs on this host")
    for r in runs:
        print(
            f"{r['prefix']}: {r['status']}, engine {r['engine']}, {r['hosts']} hosts, "
            f"{len(r['namespaces'])} namespaces, owner pid {r['owner_pid']}"
        )
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    prefix = args.run
    if prefix is None:
        runs = _runs()
        if len(runs) != 1:
            names = ", ".join(r["prefix"] for r in runs) or "none"
            raise SwellError("topo down", f"name the run to stop (runs: {names})")
        prefix = runs[0]["prefix"]
    if not cl.PREFIX_RE.match(prefix):
        raise SwellError(prefix, "not a run prefix (sw followed by 4 hex digits)")
    if cl.owner_alive(prefix):
        pid = json.loads((STATE_ROOT / prefix / "state.json").read_text())["owner_pid"]
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + args.timeout
        while cl.owner_alive(prefix) and time.monotonic() < deadline:
            time.sleep(0.1)
        if cl.owner_alive(prefix):
            raise SwellError(prefix, f"owner {pid} did not stop in {args.timeout} s")
    left = cl.find_leftovers(prefix)
    problems = [] if left.empty() else cl.remove(left)
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{prefix}: down" + (" (cleaned leftovers)" if not left.empty() else ""))
    return 1 if problems else 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    if args.run and not cl.PREFIX_RE.match(args.run):
        raise SwellError(args.run, "not a run prefix (sw followed by 4 hex digits)")
    results = cl.cleanup(args.run, force=args.force, dry_run=args.dry_run)
    if not results:
        print("nothing to clean")
    status = 0
    for left, problems, what in results:
        print(f"{left.prefix}: {what}")
        if what in ("removed", "would remove"):
            for line in left.describe():
                print(f"  {line}")
        for problem in problems:
            print(f"  problem: {problem}", file=sys.stderr)
            status = 1
    return status


def cmd_doctor(args: argparse.Namespace) -> int:
    report = doctor.diagnose()
    print(json.dumps(report, indent=2) if args.json else doctor.render(report))
    return 0
