"""``swell gen ...``: run a generator between given addresses and namespaces.

Subcommands:

* ``swell gen schedule MODEL -o FILE --clients ... --servers ...``: draw a
  session schedule from a Swing model with one seed.
* ``swell gen swing --schedule FILE``: serve on the schedule's server
  addresses (in ``--dst-ns``) and run its sessions (in ``--src-ns``).
* ``swell gen cbr`` / ``swell gen poisson``: one paced flow at ``--rate``
  over ``--proto udp|tcp`` (CU, CT, PU, PT), engine ``swell`` or ``ditg``.
* ``swell gen serve --listen ADDR:PORT ...``: only the server side, until
  Ctrl-C (for clients started elsewhere).

Every run shows live counters (sessions active, connections/s, Mbit/s per
direction) on stderr and prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from swell.errors import SwellError
from swell.generators.base import Local, Netns, Place, run_generator
from swell.generators.cbr import CbrConfig, CbrGenerator, parse_rate
from swell.generators.schedule import build_schedule, load_app_samples, write_schedule
from swell.generators.swing import (
    PlaceHosts,
    SwingConfig,
    SwingGenerator,
    load_records,
    verify_records,
)
from swell.native import native_artifact


def _place(ns: str | None) -> Place:
    return Netns(ns) if ns else Local()


def _out_dir(arg: str | None, label: str) -> Path:
    return Path(arg) if arg else Path(tempfile.mkdtemp(prefix=f"swell-gen-{label}-"))


def _split(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


def cmd_schedule(args: argparse.Namespace) -> int:
    apps, rate_scale = load_app_samples(args.model, base_port=args.base_port,
                                        apps=_split(args.apps) if args.apps else None)
    sched = build_schedule(apps, _split(args.clients), _split(args.servers), args.duration,
                           args.seed, args.scale * rate_scale, meta={"model": str(args.model)})
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
        if not sep or not ns or not _split(addrs):
            raise SwellError(spec, "expected NAMESPACE=ADDR[,ADDR...]")
        out.append(PlaceHosts(Netns(ns), _split(addrs)))
    return out


def cmd_swing(args: argparse.Namespace) -> int:
    out = _out_dir(args.out, "swing")
    cfg = SwingConfig(Path(args.schedule), out, server=_place(args.dst_ns),
                      client=_place(args.src_ns), interval_ms=args.interval_ms,
                      duration_s=args.duration, server_groups=_groups(args.server_group),
                      client_groups=_groups(args.client_group))
    gen = SwingGenerator(cfg)
    res = run_generator(gen, duration_s=None, warmup_s=args.warmup, label="swing")
    problems = verify_records(gen.sched, load_records(res.files["records"]))
    summary = {**res.summary, "records": str(res.files["records"]),
               "mismatches": len(problems), "first_mismatches": problems[:5]}
    print(json.dumps(summary, default=str))
    return 0


def cmd_cbr(args: argparse.Namespace, dist: str | None = None) -> int:
    cfg = CbrConfig(dst=args.dst, rate_bps=parse_rate(args.rate), out_dir=_out_dir(args.out, "cbr"),
                    proto=args.proto, dist=dist or args.dist, size=args.size,
                    duration_s=args.duration, port=args.port, src=args.src,
                    server=_place(args.dst_ns), client=_place(args.src_ns), engine=args.engine,
                    seed=args.seed, signal_port=args.signal_port, realtime=args.rt)
    res = run_generator(CbrGenerator(cfg), duration_s=None, warmup_s=args.warmup,
                        label=f"{'poisson' if cfg.dist == 'poisson' else 'cbr'}/{cfg.proto}")
    print(json.dumps({**res.summary, "log": str(res.files["log"])}, default=str))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    argv = [str(native_artifact("swell-gen")), "serve"]
    for addr in args.listen:
        argv += ["--listen", addr]
    proc = _place(args.ns).popen(argv)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 130


def _add_places(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src-ns", help="network namespace of the client side (default: this one)")
    p.add_argument("--dst-ns", help="network namespace of the server side (default: this one)")
    p.add_argument("--out", help="output directory (default: a new temporary one)")
    p.add_argument("--warmup", type=float, default=0.0, help="seconds left out of the series")


def _add_cbr(sub: argparse._SubParsersAction, name: str, dist: str | None) -> None:
    p = sub.add_parser(name, help=f"one {'Poisson' if dist else 'CBR'} flow over UDP or TCP",
                       description="Rates count IP bytes: payload + 28 (UDP) or 52 (TCP) bytes "
                                   "per message.")
    p.add_argument("--rate", required=True, help="mean rate, e.g. 10M, 500k (bit/s, IP level)")
    p.add_argument("--dst", required=True, help="receiver address")
    p.add_argument("--src", help="source address to bind (the client emulated host)")
    p.add_argument("--proto", choices=("udp", "tcp"), default="udp")
    if dist is None:
        p.add_argument("--dist", choices=("const", "poisson"), default="const")
    p.add_argument("--size", type=int, default=512, help="payload bytes per message")
    p.add_argument("--duration", type=float, default=10.0, help="seconds")
    p.add_argument("--port", type=int, default=9600)
    p.add_argument("--engine", choices=("swell", "ditg"), default="swell")
    p.add_argument("--signal-port", type=int, default=9000, help="D-ITG signalling port")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rt", action="store_true",
                   help="SCHED_FIFO sender (root): swell-gen --rt, or chrt for ITGSend")
    _add_places(p)
    p.set_defaults(func=lambda a: cmd_cbr(a, dist))


def register(subparsers: argparse._SubParsersAction) -> None:
    gen = subparsers.add_parser("gen", help="run a generator (swing, cbr, poisson, upb, ...)",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = gen.add_subparsers(dest="gen_command", metavar="GENERATOR", required=True)

    p = sub.add_parser("schedule", help="draw a session schedule from a Swing model")
    p.add_argument("model", help="Swing model directory")
    p.add_argument("-o", "--output", required=True, help="schedule file to write (JSON lines)")
    p.add_argument("--clients", required=True, help="client addresses, comma separated")
    p.add_argument("--servers", required=True, help="server addresses, comma separated")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of session arrivals")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--scale", type=float, default=1.0, help="session arrival rate x this")
    p.add_argument("--apps", help="only these applications (comma separated)")
    p.add_argument("--base-port", type=int, default=5000, help="ports for apps without one")
    p.set_defaults(func=cmd_schedule)

    p = sub.add_parser("swing", help="run a schedule: serve and generate sessions")
    p.add_argument("--schedule", required=True, help="schedule file (swell gen schedule)")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--interval-ms", type=int, default=1000, help="counter interval")
    p.add_argument("--client-group", action="append", metavar="NS=ADDR,...",
                   help="client hosts living in namespace NS (repeat; instead of --src-ns)")
    p.add_argument("--server-group", action="append", metavar="NS=ADDR,...",
                   help="server hosts living in namespace NS (repeat; instead of --dst-ns)")
    _add_places(p)
    p.set_defaults(func=cmd_swing)

    _add_cbr(sub, "cbr", None)
    _add_cbr(sub, "poisson", "poisson")

    from swell.generators import playback, replay

    playback.add_parsers(sub)  # swell gen upb | tpb
    replay.add_parsers(sub)  # swell gen replay

    p = sub.add_parser("serve", help="only the Swing server side, until Ctrl-C")
    p.add_argument("--listen", action="append", required=True, help="ADDR:PORT (repeat)")
    p.add_argument("--ns", help="network namespace to serve in")
    p.set_defaults(func=cmd_serve)
