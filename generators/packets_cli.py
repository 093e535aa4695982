"""``swell gen packets`` / ``swell gen rps``: packet-level flows and RPS sessions by hand.

``swell gen packets --preset VoIP:G.729.3:CRTP:VAD --flows 4 --client A --server B``
(or ``--model DIR [--classes c1,c2]``, a ``swell fit packets`` model) runs the
flows of :mod:`swell.generators.packets` between two addresses: ``s2c``
classes and presets from the server address (in ``--dst-ns``) to the client
address (in ``--src-ns``), ``c2s`` classes the other way; engine ``swell``
(swell-gen psend/precv) or ``ditg`` (ITGSend/ITGRecv). When the senders are
done it prints one line per flow with D-ITG's ITGDec set (packets sent and
received, loss, throughput, packet rate against the asked one,
inter-departure spread, delay, jitter) and the totals on stderr, and the
whole summary as one JSON line on stdout.

``swell gen rps --model MMPP_DIR --server B --clients A1,A2,... --duration 30``
runs RPS-style HTTP sessions (:mod:`swell.generators.rps`): Apache on the
server address, session starts from one path of the MMPP, each session from
one of the client addresses (all in ``--src-ns``). It prints the sessions
(due, started), requests (answered, failed, cut by the stop), response times
and the session starts per interval on stderr, the summary as JSON on
stdout.

Both reuse the kinds' own option models (``PacketsSpec``, ``RpsSpec``), so
a bad option gets the same one-line error as in an experiment file.
Registered through ``PacketsKind.cli`` and ``RpsKind.cli``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from swell.errors import SwellError
from swell.generators.base import run_generator
from swell.generators.cli_common import add_places, out_dir, place, split
from swell.placement import Endpoint


def _address(text: str, what: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise SwellError(what, f"{text!r} is not an IP address") from None


def _spec(cls: type, what: str, **kw: Any) -> Any:
    """A kind's option model from command-line values; errors in one line."""
    try:
        return cls(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or what
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise SwellError(f"gen {what}", f"--{loc.replace('_', '-')}: {msg}"
                         if err["loc"] else msg) from None


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be positive")
    return v


# -- packets ------------------------------------------------------------------------------------


def packets_config(args: argparse.Namespace) -> Any:
    """The generator's configuration from the arguments (nothing started or written)."""
    from swell.generators.packets import PacketsConfig, PacketsKind, PacketsSpec

    client = _address(args.client, "--client")
    server = _address(args.server, "--server")
    spec = _spec(PacketsSpec, "packets", model=args.model, preset=args.preset,
                 classes=split(args.classes) if args.classes else None, flows=args.flows,
                 proto=args.proto, engine=args.engine, realtime=args.rt)
    kind = PacketsKind(spec)
    if args.model is not None:
        kind.model = Path(args.model)
    legs = kind.legs()  # reads the model or preset: bad names fail here
    cplace, splace = place(args.src_ns), place(args.dst_ns)
    ends = {"s2c": (client, cplace, server, splace), "c2s": (server, splace, client, cplace)}
    return PacketsConfig(legs=legs, out_dir=out_dir(args.out, "packets", args.force),
                         duration_s=args.duration, warmup_s=args.warmup, engine=args.engine,
                         seed=args.seed, realtime=args.rt, ends=ends,
                         signal_port=args.signal_port)


def _f(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def flow_table(summary: dict[str, Any]) -> str:
    """The per-flow receiver statistics (ITGDec's set) and the totals, as text."""
    head = (f"{'flow':>4} {'class':<24} {'sent':>7} {'recv':>7} {'loss %':>7} "
            f"{'kbit/s':>9} {'pkt/s (asked)':>17} {'IDT sd us':>9} {'delay ms':>9} "
            f"{'jitter ms':>9}")
    lines = [head]
    for f in summary["flows"]:
        asked = f.get("asked_pps")
        rate = f"{_f(f.get('pps'), '.3f')} ({_f(asked, '.3f')})"
        tput = f.get("throughput_bps")
        lines.append(
            f"{f['flow']:>4} {f['class'][:24]:<24} {f['sent']:>7} {f['received']:>7} "
            f"{100 * f['loss']:>7.3f} {_f(None if tput is None else tput / 1e3, '.2f'):>9} "
            f"{rate:>17} {_f(f.get('idt_std_us'), '.1f'):>9} {_f(f.get('delay_ms'), '.3f'):>9} "
            f"{_f(f.get('jitter_ms'), '.3f'):>9}")
    kinds = {f.get("delay_kind") for f in summary["flows"] if f.get("delay_kind")}
    lines.append(
        f"total: {summary['n_flows']} flows ({summary['engine']}), sent {summary['sent']}, "
        f"received {summary['received']}, lost {summary['lost']} "
        f"({100 * summary['loss']:.3f} %), {summary['throughput_bps'] / 1e3:.2f} kbit/s, "
        f"delay {_f(summary['delay_ms'], '.3f')} ms, jitter {_f(summary['jitter_ms'], '.3f')} ms"
        + (f" ({', '.join(sorted(kinds))})" if kinds else ""))
    lines += [f"problem: {p}" for p in summary.get("problems", [])]
    return "\n".join(lines)


def cmd_packets(args: argparse.Namespace) -> int:
    from swell.generators.packets import PacketsGenerator

    cfg = packets_config(args)
    res = run_generator(PacketsGenerator(cfg), duration_s=None, warmup_s=args.warmup,
                        label=f"packets/{args.engine}")
    print(flow_table(res.summary), file=sys.stderr)
    print(json.dumps({**res.summary, "out": str(cfg.out_dir)}, default=str))
    return 0


# -- rps ----------------------------------------------------------------------------------------


def rps_generator(args: argparse.Namespace) -> Any:
    from swell.extract.mmpp import load_mmpp_model
    from swell.generators.rps import RpsGenerator, RpsSpec

    server = _address(args.server, "--server")
    clients = [_address(a, "--clients") for a in split(args.clients)]
    if not clients:
        raise SwellError("--clients", "give at least one client address")
    sizes = [int(x) for x in split(args.object_bytes)] if args.object_bytes else None
    spec = _spec(RpsSpec, "rps", model=str(args.model), clients=len(clients),
                 interval_s=args.interval_s, scale=args.scale, requests=args.requests,
                 think_s=args.think_s, object_bytes=sizes, port=args.port)
    model, _ = load_mmpp_model(args.model)
    cplace = place(args.src_ns)
    ends = [Endpoint(ip, cplace, "clients") for ip in clients]
    return RpsGenerator(spec, model, Endpoint(server, place(args.dst_ns), "server"), ends,
                        out_dir(args.out, "rps", args.force), args.duration, args.seed)


def session_table(summary: dict[str, Any], starts: list[float]) -> str:
    """Sessions, requests and response times, and the session starts per interval."""
    s = summary
    rt = s.get("response_s_mean")
    p95 = s.get("response_s_p95")
    return "\n".join([
        f"sessions: {s['sessions_planned']} planned, {s['sessions_due']} due, "
        f"{s['sessions_started']} started, from {s['sources_used']} sources",
        f"requests: {s['requests']} attempted, {s['requests_ok']} answered, "
        f"{s['errors']} failed, {s['requests_cut']} cut by the stop",
        f"response time: mean {_f(None if rt is None else rt * 1e3, '.1f')} ms, "
        f"p95 {_f(None if p95 is None else p95 * 1e3, '.1f')} ms",
        f"session starts per {s['interval_s']:g} s: "
        + (" ".join(str(int(c)) for c in starts) or "none"),
    ])


def cmd_rps(args: argparse.Namespace) -> int:
    gen = rps_generator(args)
    res = run_generator(gen, duration_s=args.duration, warmup_s=args.warmup, label="rps")
    starts = [float(x) for x in res.series.get("session_starts", [])]
    print(session_table(res.summary, starts), file=sys.stderr)
    print(json.dumps({**res.summary, "session_starts": starts, "out": str(gen.out)},
                     default=str))
    return 0


# -- parsers ------------------------------------------------------------------------------------


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """``swell gen packets`` and ``swell gen rps``."""
    p = sub.add_parser("packets", help="packet-level flows from a fitted model or a D-ITG "
                                       "preset, with per-flow receiver statistics")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--preset", help="VoIP:<codec>[:RTP|CRTP][:VAD], Telnet, DNS")
    src.add_argument("--model", help="packet model directory (swell fit packets)")
    p.add_argument("--classes", help="model classes to run, comma separated (default: all)")
    p.add_argument("--client", required=True, help="client address (receives s2c flows)")
    p.add_argument("--server", required=True, help="server address (receives c2s flows)")
    p.add_argument("--flows", type=int, default=1, help="flows per class")
    p.add_argument("--proto", choices=("udp", "tcp"), help="override the transport")
    p.add_argument("--duration", type=_positive, default=10.0, help="seconds")
    p.add_argument("--engine", choices=("swell", "ditg"), default="swell")
    p.add_argument("--signal-port", type=int, default=9010, help="D-ITG signalling port")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rt", action="store_true", help="SCHED_FIFO senders (root)")
    add_places(p)
    p.set_defaults(func=cmd_packets)

    r = sub.add_parser("rps", help="RPS-style HTTP sessions with MMPP arrivals from many "
                                   "source addresses to Apache")
    r.add_argument("--model", required=True, help="MMPP model directory (swell fit mmpp)")
    r.add_argument("--server", required=True, help="Apache's address")
    r.add_argument("--clients", required=True, help="source addresses, comma separated")
    r.add_argument("--duration", type=_positive, default=30.0, help="seconds")
    r.add_argument("--interval-s", type=_positive,
                   help="run seconds per model interval (default: the model's)")
    r.add_argument("--scale", type=float, default=1.0, help="sessions x this")
    r.add_argument("--requests", type=float, default=3.0, help="mean requests per session")
    r.add_argument("--think-s", type=float, default=1.0, help="mean think time")
    r.add_argument("--object-bytes", help="page sizes, comma separated (2000,10000,50000)")
    r.add_argument("--port", type=int, default=80)
    r.add_argument("--seed", type=int, default=1)
    add_places(r)
    r.set_defaults(func=cmd_rps)
