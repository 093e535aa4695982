"""``swell energy`` and ``swell fidelity``: the analysis commands.

The I/O edge of :mod:`swell.analysis`: read captures (through
``swell.extract.reader``), call the pure functions, print a table, and write
``*.json`` results and PNG/SVG plots into ``-o DIR``. Inputs are checked
first (a directory, FIFO or device is refused by name); ``-o`` must be a
directory or not exist; files in it other than this command's are left alone,
and this command's own (``energy.json``, ``energy.png``, ...) are replaced only
when the directory holds a previous result of the command (its JSON reads as
one) or with ``--force``, so a user's ``energy.json`` is never overwritten;
damage the reader met in a capture (skipped records, a cut end) is
said on stderr and stored in the JSON under ``damage``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from swell.analysis import plots
from swell.analysis.energy import EnergyPlot, energy_plot, hurst_estimate
from swell.analysis.fidelity import (
    FidelityConfig,
    FidelityResult,
    add_ks,
    fidelity,
    format_table,
    model_distributions,
    reextracted_distributions,
)
from swell.analysis.timeseries import direction_series, load_window
from swell.errors import SwellError
from swell.fsutil import check_output_files, input_file, write_json

DIRECTION_HELP = (
    "how packets are split into two directions: 'roles' (the SYN sender is the client: "
    "c2s/s2c; a UDP flow's client as swell extract decides it: the side of a well-known "
    "port serves, else the first sender is the client; default), 'syn' (as roles, but a "
    "UDP flow's client is its higher port), 'src=NET[,NET..]' (source in NETs: out, "
    "destination in NETs: in) or 'all' (no split)"
)

ENERGY_EPILOG = """\
reading the plot:
  octave j is the time scale 2^j x D (D = --bin-ms); y is log2 of the mean
  squared wavelet detail at that scale. A flat line is Poisson-like traffic;
  a line rising with j is bursty at large time scales (slope 2H-1, H the
  Hurst parameter); a hump marks a periodicity near that time scale.

examples:
  swell energy trace.pcap -o out/            # both directions, 1 ms bins
  swell energy trace.pcap --bin-ms 0.5 --hurst 8:14
  swell energy bottleneck.pcap --direction src=10.1.0.0/16 --start 30 --duration 300
"""

FIDELITY_EPILOG = """\
judging:
  throughput passes within --tolerance percent of the original. An octave
  passes when |y_generated - y_original| is within the floor: the larger of
  the original's first-half-vs-second-half difference and the 95% bound for
  two halves. KS distances compare Swing distributions re-extracted from the
  generated capture with the model (--model) or with the original's.

example:
  swell fidelity trace.pcap run/bottleneck.pcap --skip 10 --model model/ -o fid/
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "energy", help="wavelet energy plot (log-scale diagram) of a capture",
        description="Energy plot of a capture: bytes (or packets) per bin, per direction,\n"
        "Daubechies wavelet, bias-corrected log2 energy per octave with 95% intervals.",
        epilog=ENERGY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("pcap", type=Path, help="capture file (pcap or pcapng)")
    p.add_argument("-o", "--out", type=Path, help="write energy.json and energy.png/.svg here")
    _force(p)
    _common(p)
    p.add_argument("--start", type=float, default=0.0, metavar="S",
                   help="start S seconds after the first packet")
    p.add_argument("--duration", type=float, metavar="S", help="use S seconds (default: all)")
    p.add_argument("--hurst", metavar="J1:J2",
                   help="also estimate the Hurst parameter over octaves J1..J2")
    p.set_defaults(func=cmd_energy)

    f = subparsers.add_parser(
        "fidelity", help="compare a generated capture with the original trace",
        description="Per direction: mean throughput (and % difference), energy per octave\n"
        "against the original with the original's first-half-vs-second-half floor,\n"
        "pass/fail per octave, KS distances of Swing distributions, overlay plots.",
        epilog=FIDELITY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("original", type=Path, help="the original trace")
    f.add_argument("generated", type=Path, help="the capture of generated traffic")
    f.add_argument("-o", "--out", type=Path, help="write fidelity.json and plots here")
    _force(f)
    _common(f)
    f.add_argument("--skip", type=float, default=0.0, metavar="S",
                   help="drop the first S seconds of the generated capture (warm-up)")
    f.add_argument("--start", type=float, default=0.0, metavar="S",
                   help="start the original S seconds after its first packet")
    f.add_argument("--duration", type=float, metavar="S",
                   help="use S seconds of each capture (default: all)")
    f.add_argument("--model", type=Path, metavar="DIR",
                   help="model directory the traffic was generated from: KS distances of the "
                   "generated capture's re-extracted distributions against it (default: "
                   "against the original's re-extraction)")
    f.add_argument("--no-ks", action="store_true",
                   help="skip the Swing re-extraction and KS distances")
    f.add_argument("--tolerance", type=float, default=10.0, metavar="PCT",
                   help="mean throughput tolerance in percent (default 10)")
    f.set_defaults(func=cmd_fidelity)


def _force(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true",
                   help="replace files of this command's names in -o DIR even when they are "
                   "not from a previous run of it")


# what each command writes into -o DIR, and the JSON keys that say a result is its own
OUTPUTS = {
    "energy": (("energy.json", "energy.png", "energy.svg"), ("source", "series")),
    "fidelity": (("fidelity.json", "energy_*.png", "energy_*.svg", "throughput_*.png",
                  "throughput_*.svg"), ("config", "directions")),
}


def _previous(command: str, out: Path) -> bool:
    """Whether ``out`` holds a previous result of ``command`` (its JSON reads as one)."""
    names, keys = OUTPUTS[command]
    try:
        data = json.loads((out / names[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and all(k in data for k in keys)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bin-ms", type=float, default=1.0,
                   help="bin width D in milliseconds (>= 0.1; default 1)")
    p.add_argument("--direction", default="roles", help=DIRECTION_HELP)
    p.add_argument("--unit", choices=("bytes", "packets"), default="bytes",
                   help="count bytes (default) or packets per bin")
    p.add_argument("--vanishing-moments", "-N", type=int, default=3,
                   help="Daubechies wavelet db N (default 3)")


def _bin_s(args: argparse.Namespace) -> float:
    if args.bin_ms < 0.1:
        raise SwellError("--bin-ms", f"bins must be at least 0.1 ms, got {args.bin_ms}")
    if not 1 <= args.vanishing_moments <= 38:
        raise SwellError("--vanishing-moments", "must be between 1 and 38")
    return args.bin_ms / 1e3


def _inputs(args: argparse.Namespace, *paths: Path) -> None:
    """Refuse unusable inputs and outputs before any work: a capture that is a
    directory, FIFO or device; an ``-o`` that exists and is not a directory, or that
    holds files of this command's names that it did not write."""
    for p in paths:
        input_file(p, "capture")
    if args.out is not None:
        command = args.func.__name__.removeprefix("cmd_")
        check_output_files(args.out, OUTPUTS[command][0], what=f"swell {command} result",
                           is_previous=lambda d: _previous(command, d), force=args.force)


def _damage(*paths: Path) -> dict[str, dict]:
    """Damage the reader met in each capture: said on stderr, returned for the JSON."""
    from swell.extract.reader import last_damage

    out = {}
    for p in paths:
        d = last_damage(p)
        if d:
            print(f"swell: warning: {d.one_line()}", file=sys.stderr)
            out[str(p)] = d.to_json()
    return out


def cmd_energy(args: argparse.Namespace) -> int:
    bin_s = _bin_s(args)
    _inputs(args, args.pcap)
    pk, dirs, (start_ns, end_ns) = load_window(args.pcap, args.direction, bin_s, args.start,
                                         args.duration)
    damage = _damage(args.pcap)
    series = direction_series(pk, dirs, int(round(bin_s * 1e9)), start_ns, end_ns)
    results: dict[str, dict] = {}
    curves = []
    for name, s in series.items():
        ep = energy_plot(s.values(args.unit), bin_s, args.vanishing_moments)
        results[name] = {"mean_bps": s.mean_bps, "bins": int(s.bytes.size),
                         "energy": ep.to_dict()}
        print(f"\n{name}: {s.mean_bps / 1e6:.3f} Mbit/s mean over {s.bytes.size} bins of "
              f"{args.bin_ms:g} ms")
        if ep.octaves.size == 0:
            print("  too short for an energy plot (no octave has 4 coefficients); "
                  "use a longer window or narrower bins")
            continue
        _print_energy(ep)
        if args.hurst:
            results[name]["hurst"] = _hurst(ep, args.hurst)
        curves.append((f"{plots.direction_label(name)} [{plots.human_rate(s.mean_bps)}]", ep))
    if args.out:
        write_json(args.out / "energy.json", {"source": str(args.pcap), "unit": args.unit,
                                              "direction": args.direction, "bin_s": bin_s,
                                              "start_s": args.start, "duration_s": args.duration,
                                              "series": results, "damage": damage})
        print(f"wrote {args.out / 'energy.json'}")
        if curves:
            fig = plots.plot_energy(curves, title=f"Energy plot: {args.pcap.name}",
                                    unit=args.unit)
            for p in plots.save(fig, args.out / "energy"):
                print(f"wrote {p}")
    return 0


def _print_energy(ep: EnergyPlot) -> None:
    print(f"{'j':>3} {'scale':>9} {'n_j':>8} {'y_j':>8} {'95% CI':>8}")
    for i, j in enumerate(ep.octaves):
        print(f"{j:>3} {plots.human_seconds(ep.time_scale_s[i]):>9} {ep.n_coeffs[i]:>8} "
              f"{ep.y[i]:>8.2f} {ep.ci[i]:>8.2f}")


def _hurst(ep: EnergyPlot, text: str) -> dict[str, float]:
    j1, j2 = _octave_range(text)
    try:
        h = hurst_estimate(ep, j1, j2)
    except ValueError as exc:
        raise SwellError("--hurst", str(exc)) from exc
    print(f"Hurst over octaves {h.j1}..{h.j2}: H = {h.hurst:.3f} "
          f"(slope {h.slope:.3f} +- {1.96 * h.slope_stderr:.3f})")
    return dict(h.__dict__)


def _octave_range(text: str) -> tuple[int, int]:
    try:
        a, b = text.split(":")
        return int(a), int(b)
    except ValueError as exc:
        raise SwellError("--hurst", f"expected J1:J2 (two octaves), got {text!r}") from exc


def cmd_fidelity(args: argparse.Namespace) -> int:
    cfg = FidelityConfig(bin_s=_bin_s(args), vanishing_moments=args.vanishing_moments,
                         unit=args.unit, direction=args.direction, tolerance_pct=args.tolerance)
    _inputs(args, args.original, args.generated)
    orig, dirs_o, grid_o = load_window(args.original, args.direction, cfg.bin_s, args.start,
                                 args.duration)
    gen, dirs_g, grid_g = load_window(args.generated, args.direction, cfg.bin_s, args.skip,
                                args.duration)
    damage = _damage(args.original, args.generated)
    result = fidelity(orig, gen, cfg, directions=(dirs_o, dirs_g), grids=(grid_o, grid_g))
    _ks(result, args)
    result.meta.update({"original": str(args.original), "generated": str(args.generated),
                        "skip_s": args.skip, "start_s": args.start,
                        "duration_s": args.duration, "damage": damage})
    print(format_table(result))
    if args.out:
        write_json(args.out / "fidelity.json", result.to_dict())
        for d in result.directions:
            _fidelity_plots(args.out, d, args)
        print(f"\nwrote {args.out}/fidelity.json and plots")
    return 0


def _ks(result: FidelityResult, args: argparse.Namespace) -> None:
    if args.no_ks:
        add_ks(result, None, None, "KS distances skipped (--no-ks)")
        return
    d_gen, note = reextracted_distributions(args.generated)
    if d_gen is None:
        add_ks(result, None, None, note)
    elif args.model is not None:
        add_ks(result, model_distributions(args.model), d_gen,
               f"generated capture re-extracted vs model {args.model}")
    else:
        d_orig, note_o = reextracted_distributions(args.original)
        add_ks(result, d_orig, d_gen, note_o if d_orig is None
               else "generated vs original, both re-extracted")


def _fidelity_plots(out: Path, d: object, args: argparse.Namespace) -> None:
    from swell.analysis.fidelity import DirectionFidelity

    assert isinstance(d, DirectionFidelity)
    fig = plots.plot_energy(
        [(f"original [{plots.human_rate(d.throughput.original_bps)}]", d.original),
         (f"generated [{plots.human_rate(d.throughput.generated_bps)}]", d.generated)],
        title=f"Energy plot: {plots.direction_label(d.direction)}", unit=args.unit,
        floor=(d.original, d.floor),
    )
    plots.save(fig, out / f"energy_{d.direction}")
    fig = plots.plot_energy_difference(
        d.comparison, title=f"Generated minus original: {plots.direction_label(d.direction)}\n"
        f"({d.octaves_passed}/{d.octaves_judged} octaves within the floor)")
    plots.save(fig, out / f"energy_diff_{d.direction}")
    series = []
    for label, s in (("original", d.original_series), ("generated", d.generated_series)):
        k = max(1, int(round(1.0 / s.bin_s)))  # 1 s bins for the time series
        n = s.bytes.size // k
        per_s = s.bytes[: n * k].reshape(n, k).sum(axis=1) * 8.0
        series.append((label, np.arange(n, dtype=float), per_s))
    fig = plots.plot_time_series(
        series, title=f"Throughput per 1 s: {plots.direction_label(d.direction)}")
    plots.save(fig, out / f"throughput_{d.direction}")
