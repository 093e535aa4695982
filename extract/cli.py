"""``swell extract`` and ``swell model show|variant``.

``swell extract TRACE -o MODEL`` refuses an OUTPUT that exists and is not a
previous model (``--force`` replaces it; never the current directory), streams
the trace through the reader into the connection builder (progress bar over
the file's bytes), fits the Swing model (:func:`swell.extract.model.fit_model`)
and writes the model directory atomically; it then prints what could not be
estimated and what was assumed, and any damage the reader met (records skipped,
a cut end: count and first offset, also stored in the model's provenance).
``--sensitivity`` adds the threshold sensitivity table (also stored in the
model). The same thing as a function, for library code, is
:func:`swell.extract.pipeline.extract_model` (no module imports this CLI module).

``swell model show MODEL [--plots DIR]`` prints the summary table and writes
CDF plots; ``swell model variant MODEL --rsp 2 -o OUT`` (and ``--scale``,
``--target-mbps``, ``--hb-rtt-ms``, ``--zero-think``, ``--cap-mbps``, which
combine in that order) writes a transformed model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.extract import variants
from swell.extract.model import FORMAT as MODEL_FORMAT
from swell.extract.model import RRE_DRAW_TEXT, SwingModel, load_model, save_model
from swell.extract.network import NET_PARAMS, SIDES
from swell.extract.pipeline import extract_model
from swell.extract.reader import last_damage
from swell.extract.sessions import (
    APP_PARAMS,
    DEFAULT_RRE_GAP_S,
    DEFAULT_SESSION_TIMEOUT_S,
    WAIT_PARAMS,
    Thresholds,
)
from swell.fsutil import check_output, input_file


def _fmt(x: float) -> str:
    if x != x:  # NaN
        return "-"
    a = abs(x)
    if a == 0 or 0.01 <= a < 1e5:
        return f"{x:.3g}" if a < 1000 else f"{x:,.0f}"
    return f"{x:.2e}"


def _q(v: np.ndarray, q: float) -> float:
    return float(np.quantile(v, q)) if len(v) else float("nan")


def format_notes(model: SwingModel) -> str:
    lines = []
    for title, items in (("not estimated", model.not_estimated), ("assumed", model.assumed)):
        for it in items:
            lines.append(f"  {title}: {it}")
    fb = {k: v for k, v in model.meta.get("fallback_counts", {}).items() if v}
    if fb:
        lines.append(
            "  fallback (drawn from other hosts): "
            + ", ".join(f"{k} {v}" for k, v in sorted(fb.items()))
        )
    return "\n".join(lines)


def format_summary(model: SwingModel) -> str:
    """The human summary table of a model."""
    t = model.meta["trace"]
    out = [
        f"model of {model.meta['provenance'].get('source', '?')}",
        f"  {t.get('packets', 0):,} packets, {t.get('connections', 0):,} connections "
        f"({t.get('tcp', 0):,} TCP, {t.get('udp', 0):,} UDP), {model.duration_s:.1f} s, "
        f"{model.session_rate():.3g} sessions/s, mean {model.mean_rate_bps() / 1e6:.3g} Mbit/s",
        f"  thresholds: {model.meta['provenance'].get('thresholds')}",
    ]
    if model.meta.get("variants"):
        out.append(f"  variants: {model.meta['variants']}")
    out.append(f"  RRE draw: {model.rre_draw()} ({RRE_DRAW_TEXT[model.rre_draw()]})")
    out.append("")
    out.append(
        f"{'application':<16}{'conns':>7}{'bytes c->s':>13}{'bytes s->c':>13}"
        f"{'sessions':>9}{'sess/s':>9}{'clients':>8}{'servers':>8}"
    )
    for app in model.apps:
        a = model.app_info(app)
        out.append(
            f"{app:<16}{a['connections']:>7,}{a['bytes_c2s']:>13,}{a['bytes_s2c']:>13,}"
            f"{a['sessions']:>9,}{a['sessions_per_s']:>9.3g}{a['clients']:>8}"
            f"{a['servers']:>8}"
        )
    out.append("")
    out.append(f"{'parameter (median / p90)':<26}" + "".join(f"{a[:14]:>16}" for a in model.apps))
    for p in (*APP_PARAMS, *WAIT_PARAMS):
        if p in ("sessionStart", "rreServer"):
            continue
        if p in WAIT_PARAMS and not any(f"app/{a}/{p}" in model.arrays for a in model.apps):
            continue  # a model written before the servers' waits
        cells = []
        for app in model.apps:
            v = model.arrays.get(f"app/{app}/{p}", np.zeros(0))
            cells.append(f"{_fmt(_q(v, 0.5))}/{_fmt(_q(v, 0.9))}" if len(v) else "-")
        out.append(f"{p:<26}" + "".join(f"{c:>16}" for c in cells))
    out.append("")
    out.append(f"{'network (q10/q50/q90)':<24}{'hosts':>6}{'measured':>9}  values")
    for side in SIDES:
        for p in NET_PARAMS:
            v, m = model.net(side, p), model.arrays[f"net/{side}/{p}_measured"]
            qs = "/".join(_fmt(_q(v, q)) for q in (0.1, 0.5, 0.9)) if len(v) else "-"
            out.append(f"{side + ' ' + p:<24}{len(v):>6}{int(m.sum()):>9}  {qs}")
    notes = format_notes(model)
    if notes:
        out += ["", notes]
    return "\n".join(out)


def format_sensitivity(rows: list[dict[str, Any]]) -> str:
    cols = (
        "varied",
        "factor",
        "rre_gap_s",
        "session_timeout_s",
        "sessions",
        "rres",
        "mean_numConn",
        "median_numRRE",
        "median_interRRE",
        "sessions_per_s",
    )
    lines = ["".join(f"{c[:15]:>16}" for c in cols)]
    for r in rows:
        lines.append("".join(f"{r[c] if isinstance(r[c], str) else _fmt(r[c]):>16}" for c in cols))
    return "\n".join(lines)


def is_model_dir(path: Path) -> bool:
    """Whether ``path`` holds a swell model (a previous ``-o`` of these commands)."""
    try:
        meta = json.loads((path / "model.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == MODEL_FORMAT


def _output(args: argparse.Namespace) -> Path:
    return check_output(args.output, is_previous=is_model_dir, what="swell model directory",
                        force=args.force)


def report_damage(path: str | Path, meta: dict[str, Any] | None = None) -> None:
    """Say on stderr what the reader could not use in ``path`` (and record it in ``meta``)."""
    damage = last_damage(path)
    if damage:
        print(f"swell: warning: {damage.one_line()}", file=sys.stderr)
        if meta is not None:
            meta["damage"] = damage.to_json()


def _cmd_extract(args: argparse.Namespace) -> int:
    th = Thresholds(args.rre_gap, args.session_timeout)
    _output(args)
    input_file(args.trace, "capture")
    model = extract_model(args.trace, th, with_sensitivity=args.sensitivity)
    report_damage(args.trace, model.meta["provenance"].setdefault("reader", {}))
    save_model(model, args.output)
    print(
        f"wrote {args.output}: {len(model.apps)} applications, "
        f"{model.meta['trace']['connections']:,} connections"
    )
    notes = format_notes(model)
    if notes:
        print(notes)
    if args.sensitivity:
        print("\nthreshold sensitivity:\n" + format_sensitivity(model.meta["sensitivity"]))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from swell.extract import harpoon_model

    if harpoon_model.is_harpoon(args.model):  # the model's "kind" decides
        return harpoon_model.show(args.model, args.plots, args.no_plots)
    from swell.extract import fit_cli

    if fit_cli.peek_kind(args.model) in ("packet", "mmpp"):
        return fit_cli.show(args.model, args.plots, args.no_plots)
    model = load_model(args.model)
    print(format_summary(model))
    if model.meta.get("sensitivity"):
        print("\nthreshold sensitivity:\n" + format_sensitivity(model.meta["sensitivity"]))
    plots = args.plots if args.plots else Path(args.model) / "plots"
    if not args.no_plots:
        from swell.extract.modelplots import plot_model

        files = plot_model(model, plots)
        print(f"\nwrote {len(files)} plot files to {plots}")
    return 0


def _cmd_variant(args: argparse.Namespace) -> int:
    m = load_model(args.model)
    n0 = len(m.meta.get("variants", []))
    m = variants.apply(
        m,
        scale=args.scale,
        target_mbps=args.target_mbps,
        rsp=args.rsp,
        hb_rtt_ms=args.hb_rtt_ms,
        zero_think_times=args.zero_think,
        cap_mbps=args.cap_mbps,
    )
    if len(m.meta.get("variants", [])) == n0:
        raise SwellError(args.model, "no transformation given (see swell model variant --help)")
    _output(args)
    save_model(m, args.output)
    print(
        f"wrote {args.output}: variants {[v['name'] for v in m.meta['variants']]}, "
        f"mean {m.mean_rate_bps() / 1e6:.3g} Mbit/s, {m.session_rate():.3g} sessions/s"
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "extract",
        help="fit a Swing model (users, applications, network)",
        description="Read a pcap/pcapng trace and write a Swing model directory.",
    )
    p.add_argument("trace", help="pcap or pcapng file")
    p.add_argument("-o", "--output", required=True, help="model directory to write")
    p.add_argument("--force", action="store_true",
                   help="replace OUTPUT even when it is not a previous model")
    p.add_argument(
        "--rre-gap",
        type=float,
        default=DEFAULT_RRE_GAP_S,
        metavar="S",
        help=f"idle gap that closes an RRE (default {DEFAULT_RRE_GAP_S} s)",
    )
    p.add_argument(
        "--session-timeout",
        type=float,
        default=DEFAULT_SESSION_TIMEOUT_S,
        metavar="S",
        help=f"idle gap that closes a session (default {DEFAULT_SESSION_TIMEOUT_S} s)",
    )
    p.add_argument(
        "--sensitivity",
        action="store_true",
        help="also report how the distributions move when the thresholds change",
    )
    p.set_defaults(func=_cmd_extract)

    m = sub.add_parser("model", help="inspect or transform a Swing model")
    msub = m.add_subparsers(dest="model_cmd", metavar="ACTION")
    s = msub.add_parser("show", help="summary table and CDF plots of a model")
    s.add_argument("model", help="model directory")
    s.add_argument("--plots", type=Path, help="plot directory (default MODEL/plots)")
    s.add_argument("--no-plots", action="store_true", help="print the table only")
    s.set_defaults(func=_cmd_show)
    v = msub.add_parser("variant", help="write a transformed model (DESIGN 2.1 variants)")
    v.add_argument("model", help="model directory")
    v.add_argument("-o", "--output", required=True, help="model directory to write")
    v.add_argument("--force", action="store_true",
                   help="replace OUTPUT even when it is not a previous model")
    v.add_argument("--scale", type=float, metavar="K", help="session arrival rate times K")
    v.add_argument(
        "--target-mbps",
        type=float,
        metavar="X",
        help="scale the session rate to a mean load of X Mbit/s",
    )
    v.add_argument("--rsp", type=float, metavar="K", help="response sizes times K")
    v.add_argument(
        "--hb-rtt-ms", type=float, metavar="MS", help="every RTT set to MS (high-burst variant: 4)"
    )
    v.add_argument("--zero-think", action="store_true", help="think times set to 0")
    v.add_argument("--cap-mbps", type=float, metavar="X", help="cap access capacities at X")
    v.set_defaults(func=_cmd_variant)
    m.set_defaults(func=lambda a: (m.print_help(sys.stderr), 2)[1])
