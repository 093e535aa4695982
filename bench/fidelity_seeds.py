"""Five seeds and more: their mean and spread against the original (``bench/fidelity.py``).

Issue 19: no seed is selected; every seed's run is kept and the table gives the
mean over seeds with each seed's spread. :func:`seeds_summary` reduces the per-seed
:class:`~swell.analysis.fidelity.FidelityResult` objects (throughput per direction,
the energy per octave of the mean over seeds against the original's floor),
:func:`seeds_table` prints it, :func:`seeds_plots` overlays every seed's energy on
the original's with its floor band.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis.fidelity import FidelityResult
from swell.generators.samples import ANCHOR_THINK_S


def seeds_summary(results: list[FidelityResult], settings: dict[str, Any]) -> dict[str, Any]:
    """Per direction: throughput of each seed and their mean against the original; the
    energy per octave of each seed and of their mean against the original's floor.
    ``settings``: the bench's draw settings (calibrated, rre_draw, start, server_wait,
    server_match, client_match, pair_wait, anchor_think_s, early_requests), recorded as they are."""
    m = results[0].meta
    out: dict[str, Any] = {"seeds": [r.meta.get("seed") for r in results], **settings,
                           "server_delay_ms": m.get("server_delay_ms"),
                           "client_rate_mbps": m.get("client_rate_mbps"),
                           "client_pairing": m.get("client_pairing"),
                           "monitor": m.get("monitor", "bottleneck"),
                           "monitor_why": m.get("monitor_why", ""),
                           "congestion_control": m.get("congestion_control"),
                           "tcp_rmem": m.get("tcp_rmem"),
                           "capacity_scale": m.get("capacity_scale", 1.0),
                           "run_s": m.get("run_s"),
                           "warmup_s": m.get("warmup_s"), "window_s": m.get("window_s"),
                           "model_mean_mbps": m.get("model_mean_mbps"),
                           "offered_in_window_mbps": [r.meta.get("offered_in_window_mbps")
                                                      for r in results],
                           "connections_cut": [r.meta.get("connections_cut") for r in results],
                           "connections": [r.meta.get("connections") for r in results],
                           "directions": {}}
    for k, d in enumerate(results[0].directions):
        gen = [r.directions[k].throughput.generated_bps for r in results]
        orig = d.throughput.original_bps
        octs = [(r.directions[k].octaves_passed, r.directions[k].octaves_judged)
                for r in results]
        mean = float(np.mean(gen))
        cmp = d.comparison
        ys = np.array([r.directions[k].comparison.y_b for r in results])
        y_mean = ys.mean(axis=0)
        diff = y_mean - cmp.y_a
        judged = np.isfinite(diff) & np.isfinite(cmp.floor)
        passed = judged & (np.abs(np.where(judged, diff, 0)) <= np.where(judged, cmp.floor, 0))
        out["directions"][d.direction] = {
            "original_mbps": orig / 1e6, "generated_mbps": [g / 1e6 for g in gen],
            "mean_mbps": mean / 1e6, "mean_diff_pct": 100 * (mean / orig - 1),
            "sd_mbps": float(np.std(gen, ddof=1)) / 1e6 if len(gen) > 1 else 0.0,
            "min_max_diff_pct": [100 * (min(gen) / orig - 1), 100 * (max(gen) / orig - 1)],
            "within_10pct": bool(abs(mean / orig - 1) <= 0.10),
            "octaves_passed_judged": octs,
            "mean_energy": {"octaves_passed": int(passed.sum()),
                            "octaves_judged": int(judged.sum()),
                            "rows": [{"octave": int(j), "time_scale_s": float(ts),
                                      "y_original": float(ya), "y_mean": float(ym),
                                      "y_min": float(lo), "y_max": float(hi),
                                      "diff": float(df), "floor": float(fl), "pass": bool(ok)}
                                     for j, ts, ya, ym, lo, hi, df, fl, ok in zip(
                                         cmp.octaves, cmp.time_scale_s, cmp.y_a, y_mean,
                                         ys.min(axis=0), ys.max(axis=0), diff, cmp.floor,
                                         passed, strict=True)]},
        }
    return out


# early_requests -> its words in a table's header (true: the opt-in's first form, pairs)
_EARLY = {"pairs": ", early requests where the trace's responses were not replies",
          "True": ", early requests where the trace's responses were not replies",
          "connections": ", early connections (every request of a connection with a "
                         "not-reply pair on the trace's clock)",
          "all": ", every request on the trace's clock (early_requests all)"}


def seeds_table(name: str, summary: dict[str, Any]) -> str:
    seeds = summary["seeds"]
    lines = [f"{name}: seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}, no selection)"
             + (", target by construction" if summary["calibrated"] else "")
             + f", RRE draw {summary.get('rre_draw', 'independent')}"
             + f", start {summary.get('start', 'empty (before 2026-11-30)')}"
             + (", servers' waits" if summary.get("server_wait") else ", no servers' waits")
             + (", servers on their own paths" if summary.get("server_match") == "delay"
                else ", servers on any host")
             + (", pairs' own waits" if summary.get("rre_draw") == "session"
                and summary.get("server_wait") and summary.get("pair_wait") == "own" else "")
             + (f", requests after {summary['anchor_think_s']:g} s pauses anchored"
                if summary.get("rre_draw") == "session"
                and summary.get("anchor_think_s", ANCHOR_THINK_S) != ANCHOR_THINK_S else "")
             + (_EARLY.get(str(summary.get("early_requests")), "")
                if summary.get("rre_draw") == "session" else "")
             + "".join(f", {app}: " + " ".join(f"{k} {v}" for k, v in own.items())
                       for app, own in (summary.get("per_app") or {}).items())
             + (", whole sessions behind their clients' links"
                if summary.get("rre_draw") == "session" and summary.get("client_match") == "link"
                else "")
             + (", receivers ACK as the trace's per application (quickack)"
                if summary.get("acks") == "model" else "")
             + f", TCP {summary.get('congestion_control') or 'bbr (host default)'}"
             + (f", tcp_rmem {summary['tcp_rmem']}" if summary.get("tcp_rmem") else "")
             + (f", client links pairing {summary['client_pairing']:g}"
                if summary.get("client_pairing") else "")
             + (f", access links x{summary['capacity_scale']:g}"
                if summary.get("capacity_scale", 1.0) != 1.0 else "")
             + (f", every server {summary['server_delay_ms']:g} ms away"
                if summary.get("server_delay_ms") is not None else "")
             + (f", every client link {summary['client_rate_mbps']:g} Mbit/s"
                if summary.get("client_rate_mbps") is not None else "")
             + f"; measured at the {summary.get('monitor', 'bottleneck')}"
             + (f" ({summary['monitor_why']})" if summary.get("monitor_why") else "")
             + f"; generated {summary['run_s']:.0f} s, measured the last "
               f"{summary['window_s']:.0f} s; offered in the window (Mbit/s): "
             + ", ".join(f"{x:.2f}" for x in summary["offered_in_window_mbps"])
             + f" (model mean {summary['model_mean_mbps']:.2f})",
             "direction  original    mean over seeds (sd)    diff    spread (min..max)   "
             "octaves per seed / of the mean"]
    for d, v in summary["directions"].items():
        lo, hi = v["min_max_diff_pct"]
        octs = " ".join(f"{p}/{j}" for p, j in v["octaves_passed_judged"])
        me = v["mean_energy"]
        lines.append(f"{d:<9}  {v['original_mbps']:7.3f}   {v['mean_mbps']:7.3f} "
                     f"({v['sd_mbps']:.3f}) Mb/s  {v['mean_diff_pct']:+5.1f}% "
                     f"{'pass' if v['within_10pct'] else 'FAIL'}  {lo:+5.1f}%..{hi:+5.1f}%  "
                     f"{octs} / {me['octaves_passed']}/{me['octaves_judged']}")
    for d, v in summary["directions"].items():
        lines.append(f"\nenergy per octave, {d}: mean over seeds against the original")
        lines.append("  j     scale  y_orig  y_mean  (min..max)      diff  floor  result")
        for r in v["mean_energy"]["rows"]:
            res = "n/a" if not np.isfinite(r["floor"]) else ("pass" if r["pass"] else "FAIL")
            lines.append(f" {r['octave']:2d}  {_scale_s(r['time_scale_s']):>8}  "
                         f"{r['y_original']:6.2f}  {r['y_mean']:6.2f}  "
                         f"({r['y_min']:5.2f}..{r['y_max']:5.2f})  {r['diff']:+5.2f}  "
                         f"{r['floor']:5.2f}  {res}")
    return "\n".join(lines)


def _scale_s(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.3g} s"


def seeds_plots(out: Path, results: list[FidelityResult]) -> None:
    """Per direction: the original's energy with its floor band and every seed's."""
    from swell.analysis import plots

    for k, d in enumerate(results[0].directions):
        curves = [(f"original [{plots.human_rate(d.throughput.original_bps)}]", d.original)]
        curves += [(f"seed {r.meta.get('seed')} "
                    f"[{plots.human_rate(r.directions[k].throughput.generated_bps)}]",
                    r.directions[k].generated) for r in results]
        fig = plots.plot_energy(curves, title=f"Energy plot, {len(results)} seeds: "
                                f"{plots.direction_label(d.direction)}",
                                unit=results[0].config.unit, floor=(d.original, d.floor))
        plots.save(fig, out / f"seeds_energy_{d.direction}", formats=("png",))
