"""``swell gen schedule``, ``swell gen swing``, ``swell gen serve``: Swing by hand.

* ``swell gen schedule MODEL -o FILE --clients ... --servers ...``: draw a
  session schedule from a Swing model with one seed. An OUTPUT that exists and
  is not a schedule is refused (``--force`` replaces it).
* ``swell gen swing --schedule FILE``: serve on the schedule's server
  addresses (in ``--dst-ns``) and run its sessions (in ``--src-ns``).
* ``swell gen serve --listen ADDR:PORT ...``: only the server side, until
  Ctrl-C (for clients started elsewhere).

Registered through the Swing kind (``SwingKind.cli``) in the kind registry.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from swell.errors import SwellError
from swell.fsutil import check_output
from swell.generators.base import Netns, run_generator
from swell.generators.cli_common import add_places, out_dir, place, split
from swell.generators.schedule import FORMAT as SCHEDULE_FORMAT
from swell.generators.schedule import build_schedule, load_app_samples, write_schedule
from swell.generators.swing import (
    PlaceHosts,
    SwingConfig,
    SwingGenerator,
    load_records,
    verify_records,
)
from swell.native import native_artifact


def is_schedule(path: Path) -> bool:
    """Whether ``path`` is a schedule file (its first line names the schedule format)."""
    try:
        with open(path, "rb") as f:
            head = json.loads(f.readline(1 << 16))
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and head.get("format") == SCHEDULE_FORMAT


def cmd_schedule(args: argparse.Namespace) -> int:
    check_output(args.output, is_previous=is_schedule, what="swell schedule file",
                 force=args.force, directory=False)
    apps, rate_scale = load_app_samples(args.model, base_port=args.base_port,
                                        apps=split(args.apps) if args.apps else None)
    sched = build_schedule(apps, split(args.clients), split(args.servers), args.duration,
                           args.seed, args.scale * rate_scale, meta={"model": str(args.model)},
                           start=args.start)
    write_schedule(args.output, sched)
    nconn = len(sched.conns())
    print(json.dumps({"schedule": str(args.output), "sessions": len(sched.sessions),
                      "connections": nconn, "servers": sched.servers(), **sched.meta}))
    return 0


def _groups(specs: list[str] | None) -> list[PlaceHosts] | None:
    """``NS=ADDR,ADDR`` options -> PlaceHosts (one namespace each)."""
    if not specs:
        return None
    out = []
    for spec in specs:
        ns, sep, addrs = spec.partition("=")
        if not sep or not ns or not split(addrs):
            raise SwellError(spec, "expected NAMESPACE=ADDR[,ADDR...]")
        out.append(PlaceHosts(Netns(ns), split(addrs)))
    return out


def cmd_swing(args: argparse.Namespace) -> int:
    out = out_dir(args.out, "swing", args.force)
    cfg = SwingConfig(Path(args.schedule), out, server=place(args.dst_ns),
                      client=place(args.src_ns), interval_ms=args.interval_ms,
                      duration_s=args.duration, server_groups=_groups(args.server_group),
                      client_groups=_groups(args.client_group))
    gen = SwingGenerator(cfg)
    res = run_generator(gen, duration_s=None, warmup_s=args.warmup, label="swing")
    problems = verify_records(gen.sched, load_records(res.files["records"]))
    summary = {**res.summary, "records": str(res.files["records"]),
               "mismatches": len(problems), "first_mismatches": problems[:5]}
    print(json.dumps(summary, default=str))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    argv = [str(native_artifact("swell-gen")), "serve"]
    for addr in args.listen:
        argv += ["--listen", addr]
    proc = place(args.ns).popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 130


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``swell gen schedule | swing | serve``."""
    p = sub.add_parser("schedule", help="draw a session schedule from a Swing model")
    p.add_argument("model", help="Swing model directory")
    p.add_argument("-o", "--output", required=True, help="schedule file to write (JSON lines)")
    p.add_argument("--force", action="store_true",
                   help="replace OUTPUT even when it is not a previous schedule")
    p.add_argument("--clients", required=True, help="client addresses, comma separated")
    p.add_argument("--servers", required=True, help="server addresses, comma separated")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of session arrivals")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0, help="session arrival rate x this")
    p.add_argument("--apps", help="only these applications (comma separated)")
    p.add_argument("--base-port", type=int, default=5000, help="ports for apps without one")
    p.add_argument("--start", choices=("steady", "empty"), default="steady",
                   help="steady: begin with the sessions that arrived before 0 under way "
                        "(docs/scale.md section 9; no delays known here: transfers at the "
                        "hosts' rates only); empty: every session arrives in the run")
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("swing", help="run a schedule: serve and generate sessions")
    p.add_argument("--schedule", required=True, help="schedule file (swell gen schedule)")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--interval-ms", type=int, default=1000, help="counter interval")
    p.add_argument("--client-group", action="append", metavar="NS=ADDR,...",
                   help="client hosts living in namespace NS (repeat; instead of --src-ns)")
    p.add_argument("--server-group", action="append", metavar="NS=ADDR,...",
                   help="server hosts living in namespace NS (repeat; instead of --dst-ns)")
    add_places(p)
    p.set_defaults(func=cmd_swing)

    p = sub.add_parser("serve", help="only the Swing server side, until Ctrl-C")
    p.add_argument("--listen", action="append", required=True, help="ADDR:PORT (repeat)")
    p.add_argument("--ns", help="network namespace to serve in")
    p.set_defaults(func=cmd_serve)
