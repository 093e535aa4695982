"""CLI of the trace reader: ``swell trace info FILE [--json]``.

A thin layer over :func:`swell.extract.traceinfo.summarize`; unusable files
surface as the reader's one-line :class:`~swell.extract.reader.TraceError`.
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
    trace.set_defaults(func=lambda _args: (trace.print_help(), 2)[1])


def cmd_info(args: argparse.Namespace) -> int:
    s = summarize(args.file)
    if args.json:
        json.dump(s.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(format_table(s))
    return 0
