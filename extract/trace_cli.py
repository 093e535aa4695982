"""CLI of the trace tools: ``swell trace info FILE [--json]`` and
``swell trace compose OUT SRC... [--copies K] [--span S] [--seed N]``.

``info`` is a thin layer over :func:`swell.extract.traceinfo.summarize`;
unusable files (and FIFOs, devices) surface as the reader's one-line
:class:`~swell.extract.reader.TraceError`; the offset of the first damaged
record is printed below the warnings. ``compose`` refuses an OUT that exists
and is not a capture (``--force`` replaces it). ``compose`` merges single-user
captures into a many-user composite (:mod:`swell.extract.compose`); damage the
reader met in a source (records skipped, a cut end) is printed as ``swell
extract`` prints it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from swell.extract.reader import last_damage
from swell.extract.traceinfo import format_table, summarize
from swell.fsutil import check_output

# pcap (both byte orders, micro- and nanosecond) and pcapng section header.
PCAP_MAGICS = {bytes.fromhex(h) for h in ("d4c3b2a1", "a1b2c3d4", "4d3cb2a1", "a1b23c4d",
                                          "0a0d0d0a")}

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
    comp.add_argument("--force", action="store_true",
                      help="replace OUT even when it is not a capture")
    comp.set_defaults(func=cmd_compose)
    trace.set_defaults(func=lambda _args: (trace.print_help(), 2)[1])


def cmd_info(args: argparse.Namespace) -> int:
    s = summarize(args.file)
    damage = last_damage(args.file)
    if args.json:
        out = s.to_json()
        if damage:
            out["damage"] = damage.to_json()
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        table = format_table(s)
        print(table)
        if damage and damage.first_offset is not None:
            first = table.splitlines()[0]
            width = len(first) - len(first.split()[-1]) if first.split() else 32
            print(f"{'first damage at byte':<{width}}{damage.first_offset:,}")
    return 0


def _is_capture(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError:
        return False
    return magic in PCAP_MAGICS


def cmd_compose(args: argparse.Namespace) -> int:
    from swell.extract.cli import report_damage
    from swell.extract.compose import build

    check_output(args.out, is_previous=_is_capture, what="capture", force=args.force,
                 directory=False)
    info = build(Path(args.out), [Path(p) for p in args.sources], args.copies, args.span,
                 args.seed)
    for src in info["sources"]:
        print(f"{src['name']:<28} {src['packets']:>9,} packets  {src['duration_s']:8.1f} s  "
              f"x {info['copies']}" + (f"  ({src['ipv6_packets']:,} IPv6)"
                                       if src["ipv6_packets"] else "")
              + (f"  ({src['dropped']:,} not TCP/UDP over IP dropped)" if src["dropped"]
                 else ""))
    for path, src in zip(args.sources, info["sources"], strict=True):
        report_damage(path, src)  # on stderr, as swell extract does
        if src["unconverted"]:
            print(f"swell: warning: {path}: editcap converted it to pcap only up to its "
                  f"damage: {src['unconverted']:,} packets the reader returns are not in the "
                  "composite", file=sys.stderr)
    print(f"wrote {info['path']}: {info['packets']:,} packets over {info['span_s']:g} s")
    return 0
