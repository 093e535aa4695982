"""``swell gen harpoon``: a Harpoon model run by hand between namespaces (or locally).

``swell gen harpoon --model M --clients A,B --servers C,D --duration 60``
draws the run's schedule (:func:`swell.generators.harpoon.harpoon_schedule`),
writes it to the output directory, serves on the server addresses (in
``--dst-ns``) and runs the sessions (in ``--src-ns``) with swell's native
engine, then prints one JSON line: the per-interval targets next to what the
clients received (TCP file bytes, and UDP response bytes). The addresses must
exist in those namespaces (the pools' i-th address is the i-th given).
Registered through ``HarpoonKind.cli``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from swell.generators.base import run_generator
from swell.generators.cli_common import add_places, out_dir, place, split
from swell.generators.harpoon import HarpoonSpec, harpoon_schedule, interval_bytes
from swell.generators.schedule import write_schedule
from swell.generators.swing import SwingConfig, SwingGenerator
from swell.generators.swing_accounting import load_records


def cmd_harpoon(args: argparse.Namespace) -> int:
    from swell.extract import harpoon_model

    model = harpoon_model.load(args.model)
    spec = HarpoonSpec(model=str(args.model), time_scale=args.time_scale,
                       rate_scale=args.rate_scale, target_mbps=args.target_mbps,
                       sessions=args.sessions, start_interval=args.start_interval,
                       port=args.port, udp=not args.no_udp)
    out = out_dir(args.out, "harpoon", args.force)
    sched = harpoon_schedule(model, split(args.clients), split(args.servers), args.duration,
                             args.seed, spec)
    path = write_schedule(out / "schedule.jsonl", sched)
    gen = SwingGenerator(SwingConfig(path, out, server=place(args.dst_ns),
                                     client=place(args.src_ns), duration_s=args.duration))
    res = run_generator(gen, duration_s=None, warmup_s=args.warmup, label="harpoon")
    meta: dict[str, Any] = sched.meta
    recs = load_records(res.files["records"])
    n, length = len(meta["intervals"]), meta["interval_s"]
    got = interval_bytes(recs, length, n)
    udp = interval_bytes(recs, length, n, "udp")
    print(json.dumps({**res.summary, "records": str(res.files["records"]),
                      "intervals": [{"target": round(iv["target_bytes"]),
                                     "offered": round(iv["offered_bytes"]),
                                     "received": int(g), "sessions": iv["tcp_sessions"],
                                     "udp_sources": iv.get("udp_sources", 0),
                                     "udp_received": int(u)}
                                    for iv, g, u in zip(meta["intervals"], got, udp,
                                                        strict=True)]},
                     default=str))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``swell gen harpoon``."""
    p = sub.add_parser("harpoon", help="run a Harpoon model: sessions of file transfers")
    p.add_argument("--model", required=True, help="Harpoon model (swell harpoon extract)")
    p.add_argument("--clients", required=True, help="client addresses by pool rank, comma "
                   "separated")
    p.add_argument("--servers", required=True, help="server addresses by pool rank")
    p.add_argument("--duration", type=float, default=60.0, help="seconds to run")
    p.add_argument("--time-scale", type=float, default=1.0, help="model seconds per second")
    p.add_argument("--rate-scale", type=float, help="bit rate x k (default 1)")
    p.add_argument("--target-mbps", type=float, help="scale to this mean TCP rate")
    p.add_argument("--sessions", choices=("model", "construct"), default="model",
                   help="model: the model's active sessions per interval (Harpoon's "
                   "procedure); construct: one-interval sessions until each target is met "
                   "(not Harpoon's; for short intervals)")
    p.add_argument("--start-interval", type=int, default=0)
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--no-udp", action="store_true", help="TCP sessions only")
    p.add_argument("--seed", type=int, default=1)
    add_places(p)
    p.set_defaults(func=cmd_harpoon)
