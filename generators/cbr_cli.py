"""``swell gen cbr`` / ``swell gen poisson``: one paced flow by hand.

One flow at ``--rate`` over ``--proto udp|tcp`` (CU, CT, PU, PT), engine
``swell`` or ``ditg``. Registered through the CBR and Poisson kinds
(``CbrKind.cli``) in the kind registry.
"""

from __future__ import annotations

import argparse
import json

from swell.generators.base import run_generator
from swell.generators.cbr import CbrConfig, CbrGenerator, parse_rate
from swell.generators.cli_common import add_places, out_dir, place


def cmd_cbr(args: argparse.Namespace, dist: str | None = None) -> int:
    cfg = CbrConfig(dst=args.dst, rate_bps=parse_rate(args.rate),
                    out_dir=out_dir(args.out, "cbr", args.force),
                    proto=args.proto, dist=dist or args.dist, size=args.size,
                    duration_s=args.duration, port=args.port, src=args.src,
                    server=place(args.dst_ns), client=place(args.src_ns), engine=args.engine,
                    seed=args.seed, signal_port=args.signal_port, realtime=args.rt)
    res = run_generator(CbrGenerator(cfg), duration_s=None, warmup_s=args.warmup,
                        label=f"{'poisson' if cfg.dist == 'poisson' else 'cbr'}/{cfg.proto}")
    print(json.dumps({**res.summary, "log": str(res.files["log"])}, default=str))
    return 0


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
    add_places(p)
    p.set_defaults(func=lambda a: cmd_cbr(a, dist))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``swell gen cbr | poisson``."""
    _add_cbr(sub, "cbr", None)
    _add_cbr(sub, "poisson", "poisson")
