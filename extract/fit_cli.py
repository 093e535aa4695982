"""``swell fit packets`` and ``swell fit mmpp``: packet-level and MMPP fits.

``swell fit packets TRACE -o MODEL`` fits, per flow class, the inter-departure
time and packet size distributions (:mod:`swell.extract.packetfit`), writes
the packet model directory, prints one row per class and quantity (chosen
family, parameters with 95 % intervals, KS statistic, Monte-Carlo p-value,
D-ITG options) and draws each fitted density over the data's histogram.

``swell fit mmpp LOG_OR_TRACE -o MODEL`` counts session starts (or requests)
per interval from a web log, a count CSV or a trace's TCP SYNs
(:mod:`swell.extract.weblogs`), fits the multiscale MMPP
(:mod:`swell.extract.mmpp`), writes the model directory, prints the time
scales, the marginal, IC, KS and their references, and draws the
autocovariance of data against model and the two count histograms.
``--check`` adds the re-fit check (arrivals generated from the model, counted
and fitted again).

Outputs never destroy: an OUTPUT that exists and is not a previous model of the
same kind (a file, a directory with other files, the current directory) is
refused before the fit (``--force`` replaces it; :func:`swell.fsutil.check_output`),
and the model is written beside it and swapped in. Damage the reader met in a
capture is printed and stored in the model's provenance (``reader.damage``),
as ``swell extract`` does.

Both model kinds carry ``kind`` in ``model.json``; :func:`peek_kind` reads it
and :func:`show` prints and plots either kind, for ``swell model show``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.extract import mmpp, modeldir, packetfit, weblogs
from swell.extract.reader import last_damage
from swell.fsutil import check_output, input_file

# -- tables -------------------------------------------------------------------------------------


def _f(x: float) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    a = abs(x)
    return f"{x:.4g}" if a == 0 or 1e-3 <= a < 1e6 else f"{x:.3e}"


def format_packet_table(model: packetfit.PacketModel) -> str:
    m = model.meta
    out = [
        f"packet model of {m['provenance'].get('source', '?')}",
        f"  {len(model.classes)} classes fitted; KS test p-values by Monte Carlo "
        f"({m['settings']['mc_reps']} refits), alpha {m['settings']['alpha']}",
        "",
    ]
    out.append(
        f"{'class':<16}{'app':<10}{'pkts':>7}{'flows':>6}  {'qty':<5}{'family':<12}"
        f"{'KS D':>7}{'p':>6}  parameters [95% CI]; D-ITG"
    )
    for name in model.classes:
        c = m["classes"][name]
        for q in ("idt", "size"):
            fr = model.fit(name, q)
            params = ", ".join(
                f"{k}={_f(v)} [{_f(fr.ci[k][0])}, {_f(fr.ci[k][1])}]"
                for k, v in fr.chosen.params.items()
            )
            flag = " REJECTED" if fr.rejected else ""
            ditg = " ".join(fr.chosen.ditg_args(q) or ["(none)"])
            head = (
                f"{name:<16}{c['app']:<10}{c['packets']:>7}{c['flows']:>6}"
                if q == "idt"
                else (" " * 39)
            )
            out.append(
                f"{head}  {q:<5}{fr.chosen.family:<12}{fr.statistic:>7.3f}"
                f"{fr.pvalue:>6.2f}  {params} {packetfit.UNITS[q]}; {ditg}{flag}"
            )
    if m.get("skipped"):
        out.append("")
        for k, v in m["skipped"].items():
            out.append(f"  not fitted: {k}: {v}")
    return "\n".join(out)


def format_mmpp_table(model: mmpp.MMPPModel, meta: dict[str, Any]) -> str:
    r = model.report
    prov = meta.get("provenance", {})
    out = [
        f"MMPP of {prov.get('source', '?')} ({prov.get('what', '?')} per "
        f"{model.interval_s:g} s interval)",
        f"  {r['intervals']:,} intervals in {r['segments']} segment(s); "
        f"{model.n_states} states = {len(model.marg_rates)} (marginal) x 2^{len(model.scales)}"
        " (time scales)",
        "",
        f"{'time scale':<12}{'tau (s)':>12}{'theta':>10}{'psi':>12}{'P(high)':>9}{'rate high':>11}",
    ]
    for i, s in enumerate(model.scales):
        tau = -model.interval_s / math.log(s.theta)
        out.append(
            f"{i + 1:<12}{_f(tau):>12}{s.theta:>10.4f}{_f(s.psi):>12}{s.pi:>9.2f}{_f(s.rate):>11}"
        )
    out.append(
        "marginal: "
        + ", ".join(
            f"{_f(a)} w.p. {p:.3f}" for a, p in zip(model.marg_rates, model.marg_probs, strict=True)
        )
    )
    out += [
        "",
        f"mean per interval     data {_f(r['mean_data'])}  model {_f(r['mean_model'])}",
        f"variance              data {_f(r['var_data'])}  model {_f(r['var_model'])}",
        f"IC autocovariance     {100 * r['ic']:.2f} % over lags 0..{r['max_lag']} "
        f"({100 * r['ic_lags_1']:.2f} % over lags 1..{r['max_lag']}); RPS reached 2.35 %",
    ]
    if "ic_floor" in r:
        out.append(
            f"IC of an exact model {100 * r['ic_floor']:.2f} % on logs of this length "
            "(median of simulations): the noise floor"
        )
    if "ic_selffit" in r:
        lo, hi = r["ic_selffit_range"]
        out.append(
            f"IC of this fit on an exact model's logs of this length {100 * r['ic_selffit']:.2f} %"
            f" (10-90 %: {100 * lo:.2f}-{100 * hi:.2f} %): what the data's length allows"
        )
    out.append(f"KS count histogram   {r['ks']:.4f}")
    for n in list(prov.get("notes", [])) + list(r.get("notes", [])):
        out.append(f"  note: {n}")
    return "\n".join(out)


def format_check(c: dict[str, Any]) -> str:
    return (
        f"re-fit check ({c['intervals']:,} intervals generated"
        f"{' as arrival times' if c['from_times'] else ' as counts'}): IC against the data "
        f"{100 * c['ic_refit_vs_data']:.2f} % (original {100 * c['ic_original']:.2f} %, "
        f"difference {100 * abs(c['ic_refit_vs_data'] - c['ic_original']):.2f} points), "
        f"against the model {100 * c['ic_refit_vs_model']:.2f} %, KS {c['ks_refit_vs_data']:.4f}"
        + (
            f"; expected noise of one path this long {100 * c['path_noise']:.2f} % (IC)"
            if math.isfinite(c.get("path_noise", math.nan))
            else ""
        )
    )


# -- plots --------------------------------------------------------------------------------------


def plot_packet_model(model: packetfit.PacketModel, dest: str | os.PathLike[str]) -> list[Path]:
    """One figure per class: IDT and size histograms with the fitted densities."""
    from swell.analysis.plots import plt, save

    dest = Path(dest)
    files: list[Path] = []
    for name in model.classes:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, q in zip(axes, ("idt", "size"), strict=True):
            x = model.samples(name, q)
            fr = model.fit(name, q)
            d = fr.chosen
            if q == "idt":
                x = np.maximum(x, packetfit.MIN_IDT_S)
                bins = np.geomspace(x.min(), x.max() * 1.0001, 50) if x.max() > x.min() else 10
                ax.set_xscale("log")
            else:
                bins = 50
            ax.hist(x, bins=bins, density=True, alpha=0.5, label=f"data ({len(x):,})")
            if d.family == "constant":
                ax.axvline(d.params["value"], color="r", label="constant")
            elif d.family != "discrete":
                lo, hi = float(np.min(x)), float(np.max(x))
                g = np.geomspace(lo, hi, 400) if q == "idt" and lo > 0 else np.linspace(lo, hi, 400)
                ax.plot(
                    g,
                    d.frozen().pdf(g),
                    "r-",
                    label=f"{d.family} (p={fr.pvalue:.2f}{', rejected' if fr.rejected else ''})",
                )
            ax.set_xlabel("inter-departure time (s)" if q == "idt" else "payload size (bytes)")
            ax.set_ylabel("density")
            ax.legend(fontsize=8)
        fig.suptitle(f"{name}: fitted densities over histograms")
        files += save(fig, dest / f"packets_{name}")
    return files


def plot_mmpp_model(model: mmpp.MMPPModel, dest: str | os.PathLike[str]) -> list[Path]:
    """Autocovariance of data against model; count histograms of data and model."""
    from swell.analysis.plots import plt, save

    dest = Path(dest)
    K = int(model.report["max_lag"])
    fig, ax = plt.subplots(figsize=(7, 4))
    lags = np.arange(K + 1) * model.interval_s
    ax.plot(lags, model.data["acov_data"], "o", ms=3, label="data")
    ax.plot(lags, model.autocov(K), "r-", label=f"model (IC {100 * model.report['ic']:.2f} %)")
    ax.set_xlabel("lag (s)")
    ax.set_ylabel("autocovariance of counts")
    ax.set_title(f"autocovariance, {model.interval_s:g} s intervals")
    ax.legend()
    files = save(fig, dest / "mmpp_autocov")
    counts = model.data["counts"]
    fig, ax = plt.subplots(figsize=(7, 4))
    n_max = int(counts.max())
    if n_max <= 200:
        ax.bar(
            np.arange(n_max + 1) - 0.2,
            np.bincount(counts, minlength=n_max + 1) / len(counts),
            width=0.4,
            label="data",
        )
        ax.bar(np.arange(n_max + 1) + 0.2, model.count_pmf(n_max), width=0.4, label="model")
    else:
        grid = np.linspace(0, n_max, 400)
        ax.plot(np.sort(counts), np.arange(1, len(counts) + 1) / len(counts), label="data")
        ax.plot(grid, model.count_cdf(np.floor(grid)), label="model")
        ax.set_ylabel("cumulative probability")
    ax.set_xlabel("arrivals per interval")
    ax.set_title(f"count distribution (KS {model.report['ks']:.3f})")
    ax.legend()
    files += save(fig, dest / "mmpp_histogram")
    return files


# -- commands -----------------------------------------------------------------------------------


def peek_kind(model_dir: str | os.PathLike[str]) -> str | None:
    """``kind`` of a model directory (``packet``, ``mmpp``, ``swing``, ...; None if unreadable)."""
    return modeldir.peek_kind(model_dir)


def show(
    model_dir: str | os.PathLike[str],
    plots: str | os.PathLike[str] | None = None,
    no_plots: bool = False,
) -> int:
    """Print a packet or MMPP model's table and draw its plots (``swell model show``)."""
    kind = peek_kind(model_dir)
    dest = Path(plots) if plots else Path(model_dir) / "plots"
    if kind == packetfit.KIND:
        pm = packetfit.load_packet_model(model_dir)
        print(format_packet_table(pm))
        files = [] if no_plots else plot_packet_model(pm, dest)
    elif kind == mmpp.KIND:
        mm, meta = mmpp.load_mmpp_model(model_dir)
        print(format_mmpp_table(mm, meta))
        files = [] if no_plots else plot_mmpp_model(mm, dest)
    else:
        raise SwellError(model_dir, f"not a packet or MMPP model (kind {kind!r})")
    if files:
        print(f"\nwrote {len(files)} plot files to {dest}")
    return 0


def _check_paths(args: argparse.Namespace, kind: str, what: str, source: str) -> None:
    """Before the fit: OUTPUT may be replaced (missing, empty, a previous model of this
    kind, or ``--force``), ``--plots`` is a directory, the input a readable file."""
    check_output(args.output, is_previous=lambda p: peek_kind(p) == kind, what=what,
                 force=args.force)
    if args.plots and not args.no_plots and args.plots.exists() and not args.plots.is_dir():
        raise SwellError(args.plots, "exists and is not a directory; give a directory for "
                                     "the plots")
    input_file(source, "capture" if kind == packetfit.KIND else "web log, count CSV or capture")


def report_damage(path: str | os.PathLike[str], meta: dict[str, Any]) -> None:
    """Say on stderr what the reader could not use in ``path`` and record it in ``meta``
    (as ``swell extract`` does; its CLI module imports this one, so not from there)."""
    damage = last_damage(path)
    if damage:
        print(f"swell: warning: {damage.one_line()}", file=sys.stderr)
        meta["damage"] = damage.to_json()


def _cmd_packets(args: argparse.Namespace) -> int:
    _check_paths(args, packetfit.KIND, "swell packet model directory", args.trace)
    model = packetfit.fit_trace(
        args.trace,
        max_classes=args.max_classes,
        seed=args.seed,
        alpha=args.alpha,
        mc_reps=args.mc_reps,
        ci_reps=args.ci_reps,
        max_samples=args.max_samples,
    )
    report_damage(args.trace, model.meta["provenance"].setdefault("reader", {}))
    packetfit.save_packet_model(model, args.output)
    print(format_packet_table(model))
    print(f"\nwrote {args.output}")
    if not args.no_plots:
        dest = args.plots or Path(args.output) / "plots"
        print(f"wrote {len(plot_packet_model(model, dest))} plot files to {dest}")
    return 0


def _cmd_mmpp(args: argparse.Namespace) -> int:
    _check_paths(args, mmpp.KIND, "swell MMPP model directory", args.source)
    ev = weblogs.read_events(args.source)
    series = weblogs.count_series(
        ev, args.interval_s, args.count, args.session_timeout, args.max_gap_s
    )
    model = mmpp.fit_counts(
        series.segments,
        series.interval_s,
        max_lag=args.max_lag,
        max_scales=args.max_scales,
        where=args.source,
    )
    prov = {
        "source": os.path.abspath(args.source),
        "format": ev.format,
        "what": series.what,
        "lines": ev.lines,
        "unparseable": ev.unparseable,
        "session_timeout_s": args.session_timeout,
        "notes": series.notes,
    }
    if ev.format == "pcap":  # a capture: say what the reader could not use
        report_damage(args.source, prov.setdefault("reader", {}))
    if args.check:
        model.report["refit_check"] = mmpp.refit_check(model, seed=args.seed)
    mmpp.save_mmpp_model(model, args.output, prov)
    print(format_mmpp_table(model, {"provenance": prov}))
    if args.check:
        print(format_check(model.report["refit_check"]))
    print(f"\nwrote {args.output}")
    if not args.no_plots:
        dest = args.plots or Path(args.output) / "plots"
        print(f"wrote {len(plot_mmpp_model(model, dest))} plot files to {dest}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="fit packet-level (D-ITG) or MMPP arrival models",
        description="Fit packet-level distributions or an MMPP of arrivals.",
    )
    fsub = p.add_subparsers(dest="fit_cmd", metavar="WHAT")
    pk = fsub.add_parser(
        "packets",
        help="inter-departure time and size per flow class of a trace",
        description="Fit IDT and packet size per flow class (transport, server port, "
        "direction) among D-ITG's families; choose by a Monte-Carlo KS test.",
    )
    pk.add_argument("trace", help="pcap or pcapng file")
    pk.add_argument("-o", "--output", required=True, help="model directory to write")
    pk.add_argument("--force", action="store_true",
                    help="replace OUTPUT even when it is not a previous model of this kind")
    pk.add_argument("--plots", type=Path, help="plot directory (default MODEL/plots)")
    pk.add_argument("--no-plots", action="store_true", help="print the table only")
    pk.add_argument("--max-classes", type=int, default=12, help="largest classes fitted (12)")
    pk.add_argument("--alpha", type=float, default=0.05, help="test level (0.05)")
    pk.add_argument("--mc-reps", type=int, default=99, help="Monte-Carlo refits per test (99)")
    pk.add_argument("--ci-reps", type=int, default=99, help="bootstrap refits for CIs (99)")
    pk.add_argument(
        "--max-samples",
        type=int,
        default=1000,
        help="samples per fit (a seeded random subset beyond; 1000)",
    )
    pk.add_argument("--seed", type=int, default=0, help="random seed (0)")
    pk.set_defaults(func=_cmd_packets)

    mm = fsub.add_parser(
        "mmpp",
        help="MMPP of session arrivals from a web log or trace",
        description="Count session starts (or requests) per interval from a web log "
        "(Common/Combined, NASA TSV, per-interval count CSV) or a trace's TCP SYNs and "
        "fit a multiscale MMPP (Salvador, Valadas, Pacheco).",
    )
    mm.add_argument("source", help="web log, count CSV, or pcap/pcapng")
    mm.add_argument("-o", "--output", required=True, help="model directory to write")
    mm.add_argument("--force", action="store_true",
                    help="replace OUTPUT even when it is not a previous model of this kind")
    mm.add_argument("--interval-s", type=float, default=60.0, help="counting interval (60 s)")
    mm.add_argument(
        "--count",
        choices=("sessions", "requests"),
        default="sessions",
        help="what arrives: session starts (default) or every request",
    )
    mm.add_argument(
        "--session-timeout",
        type=float,
        default=weblogs.DEFAULT_SESSION_TIMEOUT_S,
        metavar="S",
        help="idle time that ends a session (1800 s)",
    )
    mm.add_argument(
        "--max-gap-s",
        type=float,
        metavar="S",
        help="longer gaps without any request are unrecorded time "
        "(default max(10 intervals, 600 s); 0: never split)",
    )
    mm.add_argument("--max-lag", type=int, metavar="K", help="autocovariance lags fitted")
    mm.add_argument("--max-scales", type=int, default=5, help="most time scales (5)")
    mm.add_argument(
        "--check", action="store_true", help="also generate arrivals from the model and refit them"
    )
    mm.add_argument("--seed", type=int, default=1, help="seed of the re-fit check (1)")
    mm.add_argument("--plots", type=Path, help="plot directory (default MODEL/plots)")
    mm.add_argument("--no-plots", action="store_true", help="print the table only")
    mm.set_defaults(func=_cmd_mmpp)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
