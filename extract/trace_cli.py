"""CLI of the trace tools: ``swell trace info FILE [--json]`` and
``swell trace compose OUT SRC... [--copies K] [--span S] [--seed N]``.

``info`` is a thin layer over :func:`swell.extract.traceinfo.summarize`;
unusable files surface as the reader's one-line
:class:`~swell.extract.reader.TraceError`. ``compose`` merges single-user
captures into a many-user composite (:mod:`swell.extract.compose`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from swell.extract.traceinfo import format_table, summarize

INFO_EPILOG = """\
Counts come from one streaming pass (bounded memory, native parser). Anomalies
(truncated last record, timestamps going backwards or jumping by more than a
day, packets shorter than their headers, unknown link types) are listed as
warnings with counts; reasons marked "packets not returned" count packets the
reader could not deliver. Direction: "bidirectional" when most TCP/UDP
conversations were seen both ways, "one-directional" when (almost) none were.

examples:
  swell trace info data/pcap/example.pcap
  swell trace info capture.pcapng --json | jq .tcp_syn
"""


def register(subparsers: Any) -> None:
    trace = subparsers.add_parser(
        "trace", help="inspect packet traces (pcap, pcapng)", description="Inspect packet traces."
    )
    sub = trace.add_subparsers(dest="trace_command", metavar="SUBCOMMAND")
    info = sub.add_parser(
        "info",
        help="packets, duration, link types, protocols, handshakes, direction, warnings",
        description="Summarise a pcap or pcapng trace, like capinfos plus what swell needs.",
        epilog=INFO_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info.add_argument("file", metavar="FILE", help="pcap or pcapng capture")
    info.add_argument("--json", action="store_true", help="print one JSON object instead")
    info.set_defaults(func=cmd_info)
    comp = sub.add_parser(
        "compose",
        help="merge captures into a many-user composite (copies, own addresses, time-shifted)",
        description="Merge real single-user captures into a many-user composite: each "
        "source appears COPIES times, each copy renumbered into 10.0.0.0/8 with its own "
        "addresses and shifted as a whole to a random offset inside SPAN seconds. Keeps "
        "Ethernet/IPv4 TCP and UDP packets.",
        epilog="example:\n  swell trace compose lan.pcap data/pcap/example.pcap --copies 24 "
        "--span 60\n  swell extract lan.pcap -o lan-model",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    comp.add_argument("out", metavar="OUT", help="composite to write (pcap)")
    comp.add_argument("sources", metavar="SRC", nargs="+", help="source captures (pcap, pcapng)")
    comp.add_argument("--copies", type=int, default=16, help="copies of each source (16)")
    comp.add_argument("--span", type=float, default=120.0, help="composite length, s (120)")
    comp.add_argument("--seed", type=int, default=7, help="seed of the time offsets (7)")
    comp.set_defaults(func=cmd_compose)
    trace.set_defaults(func=lambda _args: (trace.print_help(), 2)[1])


def cmd_info(args: argparse.Namespace) -> int:
    s = summarize(args.file)
    if args.json:
        json.dump(s.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_table(s))
    return 0


def cmd_compose(args: argparse.Namespace) -> int:
    from pathlib import Path

    from swell.extract.compose import build

    info = build(Path(args.out), [Path(p) for p in args.sources], args.copies, args.span,
                 args.seed)
    for src in info["sources"]:
        print(f"{src['name']:<28} {src['packets']:>9,} packets  {src['duration_s']:8.1f} s  "
              f"x {info['copies']}" + (f"  ({src['dropped_non_ipv4']:,} non-IPv4 dropped)"
                                       if src["dropped_non_ipv4"] else ""))
    print(f"wrote {info['path']}: {info['packets']:,} packets over {info['span_s']:g} s")
    return 0
