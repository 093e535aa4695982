"""CLI of the flow input: ``swell flows read INPUT...`` and ``swell flows collect``.

``read`` is a thin layer over :func:`swell.extract.flows.read_flows`: it reads
every input (nfcapd files, export pcaps, raw datagram files or directories,
packet captures turned into flows), prints a summary table (flows, packets,
bytes, exporters, templates, what was undecodable and why) and, with ``-o``,
writes the records as ``.npz`` or ``.csv``. ``collect`` binds a UDP address,
decodes the export datagrams that arrive for N seconds, and writes the same.

Bad input is one line naming the file (``swell: FILE#3: malformed NetFlow
datagram: ...``) and exit status 2; output is written only after every input
was read, atomically, so a failed read leaves no file behind. Outputs never
destroy: ``-o`` refuses an existing file that is not a previous flow file
(``--force`` replaces it; :func:`swell.fsutil.check_output`), checked before
anything is read. A damaged capture (cut or corrupt records) is read and the
loss reported on stderr (``swell: warning: FILE: damaged capture: ...``), as
``swell extract`` does; records with implausible times (bogus exporter clocks,
``swell.extract.flows.timecheck``) are counted in the summary, not dropped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from swell.extract.flows import FORMATS, ExportDecoder, FlowTable, read_flows, timecheck
from swell.extract.flows.sources import collect
from swell.extract.flows.table import is_flow_file
from swell.fsutil import check_output

READ_EPILOG = """\
formats (--format auto decides per input):
  nfcapd       nfcapd files or directories (read through Debian's nfdump)
  pcap-export  captures of NetFlow v5/v9/IPFIX export traffic (UDP payloads)
  datagrams    raw export datagrams, one per file (files or directories; the
               exporter is the file name less its _tpl/_data suffix)
  pcap-flows   packet captures turned into flows: --engine tracker (swell's
               connection tracker, default) or nfpcapd
  npz          a flow file written by swell flows read|collect -o FILE.npz

Export inputs given together share one template cache: pass the template
capture and the data capture in one command. A malformed datagram stops the
read with a one-line error unless --skip-bad is given; data whose template
never came is always listed under "undecodable".

examples:
  swell flows read /var/cache/nfdump/nfcapd.202401011200 -o flows.npz
  swell flows read templates.pcap data.pcap
  swell flows read ../shared/data/netflow/logstash_codec_netflow_dat --skip-bad --datagrams
  swell flows read data/pcap/example.pcap --engine nfpcapd -o flows.csv
"""

COLLECT_EPILOG = """\
It prints "listening on ADDR:PORT" on stderr once bound (port 0: a free one).
--idle S stops S seconds after the last datagram (once one came).

examples:
  swell flows collect --listen 0.0.0.0:2055 --seconds 300 -o flows.npz
  swell flows collect --listen 127.0.0.1:0 --seconds 60 --idle 2 -o flows.npz
  swell harpoon extract flows.npz -o model      # the collector's output is a flow input
  softflowd -r trace.pcap -n 127.0.0.1:9995 -v 10 &   # in another shell
  swell flows collect --listen 127.0.0.1:9995 --seconds 30 -o flows.csv
"""


def register(subparsers: Any) -> None:
    flows = subparsers.add_parser(
        "flows",
        help="read flow records (nfcapd, NetFlow v5/v9/IPFIX, pcaps) or collect them over UDP",
        description="Flow input: NetFlow/IPFIX records from what you have.",
    )
    sub = flows.add_subparsers(dest="flows_command", metavar="SUBCOMMAND")
    rd = sub.add_parser(
        "read",
        help="read flow inputs, print a summary, optionally write .npz/.csv",
        description="Read flow records from nfcapd files, export packets or packet captures.",
        epilog=READ_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rd.add_argument("inputs", metavar="INPUT", nargs="+", help="files or directories")
    rd.add_argument("--format", choices=FORMATS, default="auto", help="input format (auto)")
    rd.add_argument(
        "--engine",
        choices=("tracker", "nfpcapd"),
        default="tracker",
        help="how pcap-flows become flows (tracker)",
    )
    rd.add_argument("-o", "--output", metavar="FILE", help="write the flows (.npz or .csv)")
    rd.add_argument("--force", action="store_true",
                    help="replace an existing -o file that is not a previous flow file")
    rd.add_argument(
        "--skip-bad",
        action="store_true",
        help="count malformed datagrams as undecodable instead of stopping",
    )
    rd.add_argument(
        "--datagrams", action="store_true", help="list every export datagram and its outcome"
    )
    rd.add_argument("--json", action="store_true", help="print the summary as JSON")
    rd.set_defaults(func=cmd_read)
    co = sub.add_parser(
        "collect",
        help="receive NetFlow/IPFIX over UDP for N seconds, decode, write",
        description="Run a UDP collector for a given time and decode what arrives.",
        epilog=COLLECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    co.add_argument("--listen", required=True, metavar="ADDR:PORT", help="e.g. 0.0.0.0:2055")
    co.add_argument("--seconds", type=float, required=True, help="how long to collect")
    co.add_argument("--idle", type=float, metavar="S",
                    help="stop S seconds after the last datagram (once one arrived)")
    co.add_argument("-o", "--output", required=True, metavar="FILE", help=".npz or .csv")
    co.add_argument("--force", action="store_true",
                    help="replace an existing -o file that is not a previous flow file")
    co.add_argument("--json", action="store_true", help="print the summary as JSON")
    co.set_defaults(func=cmd_collect)
    flows.set_defaults(func=lambda _args: (flows.print_help(), 2)[1])


def _check_output(path: str | None, force: bool) -> None:
    from swell.errors import SwellError

    if not path:
        return
    if Path(path).suffix.lower() not in (".npz", ".csv"):
        raise SwellError(path, "output must end in .npz or .csv")
    check_output(path, is_previous=is_flow_file, what="swell flow file", force=force,
                 directory=False)


def report_damage(table: FlowTable) -> None:
    """One stderr line per damaged capture (what the reader skipped; see reader.py)."""
    for d in table.damage.values():
        print(f"swell: warning: {d['line']}", file=sys.stderr)


def cmd_read(args: argparse.Namespace) -> int:
    _check_output(args.output, args.force)
    table = read_flows(args.inputs, fmt=args.format, strict=not args.skip_bad, engine=args.engine)
    report_damage(table)
    if args.output:
        table.save(args.output)
    _report(table, args.json, args.datagrams)
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from swell.errors import SwellError

    _check_output(args.output, args.force)
    if args.idle is not None and not args.idle > 0:
        raise SwellError(str(args.idle), "--idle must be positive seconds")
    dec = ExportDecoder(strict=False)  # network input: malformed datagrams are counted

    def ready(addr: tuple[str, int]) -> None:
        host = f"[{addr[0]}]" if ":" in addr[0] else addr[0]
        print(f"swell: listening on {host}:{addr[1]}", file=sys.stderr, flush=True)

    n = collect(dec, args.listen, args.seconds, ready, idle_s=args.idle)
    table = dec.finish(kind="udp")
    table.save(args.output)
    if not args.json:
        print(f"received {n} datagrams on {args.listen}")
    _report(table, args.json, False)
    return 0


def _ts(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def format_summary(table: FlowTable) -> str:
    s = table.summary()
    rows = [
        ("kind", s["kind"]),
        ("flows", f"{s['flows']:,}"),
        ("packets", f"{s['packets']:,}"),
        ("bytes", f"{s['bytes']:,}"),
        ("exporters", f"{s['exporters']}"),
        ("templates", f"{s['templates']}"),
        ("datagrams", f"{s['datagrams']}"),
        ("sampled flows", f"{s['sampled_flows']:,}"),
        ("first start", _ts(s["first_ns"])),
        ("last end", _ts(s["last_ns"])),
    ]
    tc = timecheck.check(table)
    if len(table):
        rows.append(("span", timecheck.human_span((s["last_ns"] - s["first_ns"]) / 1e9)))
    lines = [f"  {k:<14} {v}" for k, v in rows]
    if tc.n_dropped or tc.span_s > timecheck.DEFAULT_MAX_SPAN_S:
        lines.append("  implausible times (swell harpoon extract drops these records, and "
                     "refuses a span over 31 days):")
        lines += [f"    {n:>8,}  {r}" for r, n in sorted(tc.dropped.items())]
        if tc.span_s > timecheck.DEFAULT_MAX_SPAN_S:
            lines.append(f"    the rest spans {timecheck.human_span(tc.span_s)}: exporter "
                         f"{tc.first[1]} to exporter {tc.last[1]}")
    bad = [d for d in table.datagrams if not d.ok]
    if table.undecodable or bad:
        lines.append("  undecodable:")
        lines += [f"    {n:>8,}  {r}" for r, n in sorted(table.undecodable.items())]
        reasons = Counter(r.split(" (exporter")[0] for d in bad for r in d.reasons)
        lines += [f"    {n:>8,}  datagram: {r}" for r, n in reasons.most_common(10)]
    if table.notes:
        lines.append("  notes:")
        lines += [f"    {n:>8,}  {r}" for r, n in sorted(table.notes.items())]
    return "\n".join(lines)


def _report(table: FlowTable, as_json: bool, datagrams: bool) -> None:
    if as_json:
        s = table.summary()
        if datagrams:
            s["datagram_results"] = [d.one_line() for d in table.datagrams]
        json.dump(s, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    print(format_summary(table))
    if datagrams:
        for d in table.datagrams:
            print(f"  {d.one_line()}")
