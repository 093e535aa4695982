"""``swell harpoon extract INPUT... -o MODEL``: a Harpoon model from flow records.

A sibling command group rather than more options on ``swell extract``: that
command fits the Swing model from one packet trace with Swing's thresholds,
while Harpoon takes any number of flow inputs of several formats (nfcapd
files, NetFlow/IPFIX export captures or datagram files, pcaps through swell's
tracker or nfpcapd; :func:`swell.extract.flows.read_flows`) and has its own
knobs (interval, inter-connection bound, file floor, trials). ``swell model
show MODEL`` works on either model (it dispatches on ``model.json``'s
``kind``).

``--profile CSV`` shapes the per-interval targets as one day of a real volume
log (e.g. the WorldCup98 per-minute bytes) at the flow data's mean level, for
flow data shorter than a day (:func:`swell.extract.harpoon.reshape`).

Bad input is one line (``SwellError``), exit 2; the model directory is
written atomically after everything was read and fitted. Outputs never
destroy: ``-o`` must be new, an empty directory or a previous Harpoon model
(``--force`` replaces anything else; :func:`swell.fsutil.check_output`),
checked before anything is read. Damaged captures are read and the loss is
reported on stderr and kept in the model's provenance (``damage``); records
with bogus exporter clocks are dropped and counted (``note: dropped ...``),
and flows spanning more than ``--max-span-days`` (31) are an error
(:mod:`swell.extract.flows.timecheck`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from swell.extract import harpoon, harpoon_model
from swell.extract.flows import FORMATS, read_flows
from swell.extract.flows_cli import report_damage
from swell.fsutil import check_output

EPILOG = """\
examples:
  swell harpoon extract /var/cache/nfdump/nfcapd.* -o harpoon-model
  swell harpoon extract trace.pcap --engine nfpcapd --interval 60 -o m
  swell harpoon extract trace.pcap --profile wc98_per_minute_merged.csv -o day
  swell flows collect --listen 0.0.0.0:2055 --seconds 600 -o flows.npz
  swell harpoon extract flows.npz -o harpoon-model   # the collector's flow file
  swell model show harpoon-model
"""


def _cmd_extract(args: argparse.Namespace) -> int:
    params = harpoon.HarpoonParams(interval_s=args.interval, max_ict_s=args.max_ict,
                                   min_file_bytes=args.min_file, coalesce_gap_s=args.coalesce_gap,
                                   trials=args.trials, seed=args.seed,
                                   max_span_s=args.max_span_days * 86400.0)
    params.check()
    check_output(args.output, is_previous=harpoon_model.is_harpoon,
                 what="swell Harpoon model directory", force=args.force)
    table = read_flows(args.inputs, fmt=args.format, strict=not args.skip_bad,
                       engine=args.engine)
    report_damage(table)
    fit = harpoon.fit(table, params)
    prov: dict[str, Any] = {"inputs": [str(p) for p in args.inputs], "format": args.format,
                            "engine": args.engine, "flow_kind": table.kind,
                            "undecodable": table.undecodable, "damage": table.damage}
    if args.profile:
        prof = harpoon.read_profile(args.profile, params.interval_s, args.profile_day)
        fit = harpoon.reshape(fit, params, prof, Path(args.profile).name)
        prov["profile"] = {"file": str(args.profile), "day": args.profile_day}
    model = harpoon_model.build(fit, params, prov)
    harpoon_model.save(model, args.output)
    c = model.meta["counts"]
    print(f"wrote {args.output}: {c['files']:,} files, {c['ict_samples']:,} inter-connection "
          f"times, {model.intervals} intervals of {params.interval_s:g} s, "
          f"{model.mean_rate_bps() / 1e6:.4g} Mbit/s mean")
    for note in model.meta["notes"]:
        print(f"note: {note}")
    return 0


def register(sub: Any) -> None:
    h = sub.add_parser("harpoon", help="Harpoon flow-level models from flow records")
    hs = h.add_subparsers(dest="harpoon_cmd", metavar="ACTION")
    p = hs.add_parser("extract", help="fit a Harpoon model from flows (NetFlow, IPFIX, pcap)",
                      epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                      description="Harpoon's self-configuration (IMC 2004, section 3): file "
                      "sizes, inter-connection times, address pools, active sessions per "
                      "interval, UDP sources.")
    p.add_argument("inputs", nargs="+", type=Path, help="flow inputs (see swell flows read)")
    p.add_argument("-o", "--output", required=True, type=Path, help="model directory to write")
    p.add_argument("--force", action="store_true",
                   help="replace an existing -o that is not a previous Harpoon model")
    p.add_argument("--format", choices=FORMATS, default="auto")
    p.add_argument("--engine", choices=("tracker", "nfpcapd"), default="tracker",
                   help="how packet captures become flows (default tracker)")
    p.add_argument("--skip-bad", action="store_true", help="skip malformed export datagrams")
    p.add_argument("--interval", type=float, default=300.0, metavar="S",
                   help="interval of the byte targets and session counts (default 300)")
    p.add_argument("--max-ict", type=float, default=60.0, metavar="S",
                   help="bound on inter-connection times (default 60)")
    p.add_argument("--min-file", type=int, default=100, metavar="B",
                   help="smaller flows are ACK flows or requests, dropped (default 100)")
    p.add_argument("--coalesce-gap", type=float, default=1.0, metavar="S",
                   help="records of one 5-tuple this close are one flow (default 1)")
    p.add_argument("--max-span-days", type=float, default=31.0, metavar="D",
                   help="flows spanning more are an error (bogus exporter clocks, inputs "
                        "of different periods; default 31)")
    p.add_argument("--trials", type=int, default=100, help="Figure 4 repetitions (default 100)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", help="CSV of timestamp,bytes: shape targets as one day of it")
    p.add_argument("--profile-day", metavar="YYYY-MM-DD", help="which day (default first full)")
    p.set_defaults(func=_cmd_extract)
    h.set_defaults(func=lambda a: (h.print_help(), 2)[1])
