"""``swell report``: plots and a self-contained HTML page from a results file alone.

Reads only ``results.json`` (:mod:`swell.experiments.results`), so any past
study can be re-plotted. Writes into ``<study>/report/``:

* ``energy-<direction>.png/.svg``: the background's energy plot per
  configuration (repetition 0), with 95% intervals: a flat line is
  Poisson-like traffic, a rising one is traffic bursty at large time scales;
* ``timeseries-<direction>.png/.svg``: background throughput over time;
* ``response-cdf.png/.svg``: foreground response times, one CDF per
  configuration (all repetitions pooled);
* ``slowdown.png/.svg``: response-time slowdown against the baseline (no
  background) at the 5th, 50th, 90th, 95th percentiles and the mean, mean and
  standard deviation over repetitions;
* when the sweep varies a number besides the background, or the study has two
  backgrounds with energy: ``slowdown-vs-<axis>``, ``response-cdf-by-<axis>``
  and ``energy-diff`` (:mod:`swell.experiments.report_sweep` says how);
* each traffic kind's own figures and tables (its ``report()`` classmethod,
  :class:`~swell.generators.kind.TrafficKind`), for the configurations it ran
  in: this module has no per-kind code;
* ``index.html``: every plot (PNG embedded as data, so the page is one file)
  and a table of the numbers, with what the study was and where it ran.

The whole directory is built beside its place and swapped in at the end
(:func:`swell.fsutil.atomic_dir`): Ctrl-C or a kill while plotting leaves the
previous report, and no temporary survives the next report.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis import plots as P
from swell.analysis.energy import EnergyPlot, hurst_estimate
from swell.analysis.metrics import SLOWDOWN_STATS, summary
from swell.experiments.report_sweep import slowdowns, sweep_figures
from swell.experiments.results import baseline_for, group_runs, load_results
from swell.fsutil import atomic_dir, check_output
from swell.generators import registry
from swell.generators.kind import ReportPart

DIRECTIONS = {"reverse": "server -> client (downloads)", "forward": "client -> server"}


def _rts(runs: list[dict[str, Any]]) -> list[np.ndarray]:
    return [np.asarray((r.get("foreground") or {}).get("response_times_s", []), float)
            for r in runs]


def _palette(groups: dict) -> dict[str, str]:
    """One colour per configuration, the same in every figure."""
    return {label: P.COLORS[i % len(P.COLORS)] for i, label in enumerate(groups)}


def _energy_plots(groups: dict, out: Path, direction: str) -> list[Path]:
    curves, colors = [], []
    pal = _palette(groups)
    for label, runs in groups.items():
        e = runs[0]["bottleneck"][direction].get("energy")
        if e:
            mbps = np.mean([r["bottleneck"][direction]["bg_mean_mbps"] for r in runs])
            curves.append((f"{label} [{mbps:.2f} Mbit/s]", EnergyPlot.from_dict(e)))
            colors.append(pal[label])
    if not curves:
        return []
    fig = P.plot_energy(curves, title=f"Background energy plot, {DIRECTIONS[direction]}",
                        colors=colors)
    return P.save(fig, out / f"energy-{direction}")


def _series_plot(groups: dict, out: Path, direction: str) -> list[Path]:
    lines, colors = [], []
    pal = _palette(groups)
    for label, runs in groups.items():
        d = runs[0]["bottleneck"][direction]
        v = np.asarray(d.get("series_mbps", []), float)
        if v.size:
            lines.append((label, np.arange(v.size) * d.get("series_bin_s", 0.1), v))
            colors.append(pal[label])
    if not lines:
        return []
    fig = P.plot_time_series(lines, title=f"Background throughput, {DIRECTIONS[direction]} "
                             "(100 ms bins, repetition 0)", scale=1.0, colors=colors)
    return P.save(fig, out / f"timeseries-{direction}")


def _slowdowns(data: dict, groups: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """Per configuration, slowdown against its own baseline (same sweep point):
    ``{stat: (mean, sd)}`` over repetitions (:func:`report_sweep.slowdowns`)."""
    return {label: {s: (v.mean, v.std) for s, v in sd.items()}
            for label, sd in slowdowns(data, groups).items()}


def slowdown_title(data: dict, slow: dict) -> str:
    """One baseline for every configuration, or each against the no-background run of its
    own sweep point (a capacity sweep: each capacity's own)."""
    bases = {baseline_for(data, label) for label in slow}
    if len(bases) == 1:
        return f"Slowdown against {next(iter(bases)) or 'no background'}"
    return "Slowdown against no background at the same point"


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.{digits}g}"


def _table(groups: dict, slow: dict) -> str:
    head = ["configuration", "reps", "background Mbit/s (down / up)", "requests",
            "response time median (s)", "p90 (s)", "slowdown median", "slowdown p90",
            "capture drops"]
    rows = []
    for label, runs in groups.items():
        down = np.mean([r["bottleneck"]["reverse"]["bg_mean_mbps"] for r in runs])
        up = np.mean([r["bottleneck"]["forward"]["bg_mean_mbps"] for r in runs])
        pooled = np.concatenate(_rts(runs)) if runs else np.zeros(0)
        s = summary(pooled) if pooled.size else {}
        drops = sum(int(c.get("dropped", 0)) for r in runs for c in r.get("captures", []))
        sd = slow.get(label, {})
        rows.append([label, str(len(runs)), f"{down:.2f} / {up:.2f}", str(pooled.size),
                     _fmt(s.get("p50", float("nan"))), _fmt(s.get("p90", float("nan"))),
                     _fmt(sd.get("p50", (float("nan"), 0))[0]),
                     _fmt(sd.get("p90", (float("nan"), 0))[0]), str(drops)])
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _findings(groups: dict) -> list[str]:
    """What the numbers say, one sentence per configuration (computed, not written by hand).

    Burstiness: the weighted slope of the downloads-direction energy plot from octave 3
    (8 ms) up: 0 for Poisson-like traffic (Hurst 0.5), 1 for Hurst 1; "nearly flat"
    below 0.25 (Hurst < 0.63), "rising" above. Response times: the spread p90/p10 (1.0
    for a vertical CDF).
    """
    out = []
    for label, runs in groups.items():
        parts = []
        e = runs[0]["bottleneck"]["reverse"].get("energy")
        if e:
            plot = EnergyPlot.from_dict(e)
            try:
                h = hurst_estimate(plot, 3)
                shape = ("nearly flat (Poisson-like)" if abs(h.slope) < 0.25 else
                         "rising with the time scale (bursty at large scales)" if h.slope > 0
                         else "falling with the time scale")
                parts.append(f"background energy {shape}: slope {h.slope:+.2f} per octave "
                             f"over octaves {h.j1}-{h.j2} (Hurst {h.hurst:.2f})")
            except ValueError:
                pass
        rts = np.concatenate(_rts(runs)) if runs else np.zeros(0)
        if rts.size >= 5:
            p10, p50, p90 = np.percentile(rts, [10, 50, 90])
            parts.append(f"response times median {p50:.3f} s, spread p90/p10 = {p90 / p10:.2f}")
        if parts:
            out.append(f"{label}: " + "; ".join(parts) + ".")
    return out


def _kind_parts(groups: dict, out: Path) -> list[ReportPart]:
    """Each traffic kind's own report part, for the configurations it ran in."""
    parts = []
    for role in ("background", "foreground"):
        for name, cls in registry.kinds(role).items():
            mine = {label: runs for label, runs in groups.items()
                    if ((runs[0].get("spec") or {}).get(role) or {}).get("kind") == name}
            if mine:
                parts.append(cls.report(mine, out))
    return parts


def _problems(groups: dict) -> str:
    """Every run's problems and warnings, visible at the top of the page."""
    items = []
    for label, runs in groups.items():
        for r in runs:
            for kind, texts in (("problem", r.get("problems") or []),
                                ("warning", r.get("warnings") or [])):
                items += [f"{label} rep {r.get('repetition', 0)}: {kind}: {t}" for t in texts]
    if not items:
        return ""
    lis = "".join(f"<li>{html.escape(x)}</li>" for x in items)
    return f"<div class='problems'><h2>Problems and warnings</h2><ul>{lis}</ul></div>"


def _notes(notes: list[str]) -> str:
    """What a sweep view left out, and why."""
    lis = "".join(f"<li>{html.escape(x)}</li>" for x in notes)
    return f"<ul class='meta'>{lis}</ul>" if notes else ""


def _img(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    svg = path.with_suffix(".svg").name
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f'<figcaption>{html.escape(caption)} (<a href="{svg}">SVG</a>)</figcaption></figure>')


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px}
th{background:#f3f3f3}figure{margin:1.5em 0}img{max-width:100%}figcaption{color:#555}
.meta{color:#555;font-size:13px}
.problems{background:#fff4e5;border:1px solid #e0a040;padding:0 1em;margin:1em 0}"""

CAPTIONS = {
    "energy": "Energy plot (Abry-Veitch log-scale diagram) of the background at the "
              "bottleneck, 1 ms bins, 95% intervals. Flat: no burstiness beyond Poisson; "
              "rising with the time scale: bursty at large time scales.",
    "timeseries": "Background throughput at the bottleneck over time.",
    "cdf": "Foreground response times (SYN to last response byte, measured at the client).",
    "slowdown": "Response time relative to the baseline; bars are the mean over "
                "repetitions, whiskers one standard deviation.",
}


def _is_report(path: Path) -> bool:
    return (path / "index.html").is_file()


def make_report(results: str | Path, out: str | Path | None = None,
                force: bool = False) -> Path:
    """Plots and ``index.html`` for a study; returns the page's path.

    The report is written into a temporary directory beside ``out`` and swapped in
    whole, so an interrupted report leaves the previous one (or none), never half
    of one. An ``out`` that holds something other than a report is refused unless
    ``force``."""
    data = load_results(results)
    study = Path(results) if Path(results).is_dir() else Path(results).parent
    if out is None:
        out = study / "report"  # the study's own: always replaced
    else:
        out = check_output(out, is_previous=_is_report, what="swell report", force=force)
    out = Path(out)
    with atomic_dir(out) as work:
        _write_report(data, work)
    return out / "index.html"


def _write_report(data: dict[str, Any], out: Path) -> None:
    """Every figure and the page, into ``out`` (a fresh directory)."""
    groups = group_runs(data)
    wanted = set((data.get("experiment") or {}).get("plots") or ("energy", "timeseries", "cdf",
                                                                  "slowdown"))
    figures: list[tuple[Path, str]] = []
    for d in ("reverse", "forward") if "energy" in wanted else ():
        figures += [(p, CAPTIONS["energy"]) for p in _energy_plots(groups, out, d)
                    if p.suffix == ".png"]
    for d in ("reverse", "forward") if "timeseries" in wanted else ():
        figures += [(p, CAPTIONS["timeseries"]) for p in _series_plot(groups, out, d)
                    if p.suffix == ".png"]
    samples = [(label, np.concatenate(_rts(runs))) for label, runs in groups.items()]
    if "cdf" in wanted and any(s.size for _, s in samples):
        pal = _palette(groups)
        fig = P.plot_cdfs([(lab, s) for lab, s in samples if s.size],
                          title="Foreground response times",
                          colors=[pal[lab] for lab, s in samples if s.size])
        figures += [(p, CAPTIONS["cdf"]) for p in P.save(fig, out / "response-cdf")
                    if p.suffix == ".png"]
    slow = _slowdowns(data, groups)
    if slow and "slowdown" in wanted:
        fig = P.plot_slowdown_bars(list(slow.items()), SLOWDOWN_STATS,
                                   title=slowdown_title(data, slow))
        figures += [(p, CAPTIONS["slowdown"]) for p in P.save(fig, out / "slowdown")
                    if p.suffix == ".png"]
    sweep, notes = sweep_figures(data, groups, out, wanted, slowdowns(data, groups))
    figures += sweep
    parts = _kind_parts(groups, out)
    for part in parts:
        figures += part.figures
    exp = data.get("experiment", {})
    host = data.get("host", {})
    meta = (f"{len(data['runs'])} runs; duration {exp.get('duration_s')} s after a "
            f"{exp.get('warmup_s')} s warm-up; seed {exp.get('seed')}; engine "
            f"{', '.join(sorted({str(r.get('engine')) for r in data['runs']}))}; kernel "
            f"{host.get('kernel')}; swell {host.get('swell_version')} "
            f"({(host.get('git_revision') or 'no git')[:10]}"
            f"{', modified' if host.get('git_dirty') else ''})")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>swell: "
            f"{html.escape(str(exp.get('name')))}</title><style>{CSS}</style></head><body>"
            f"<h1>{html.escape(str(exp.get('name')))}</h1>"
            f"<p>{html.escape(str(exp.get('description') or ''))}</p>"
            f"<p class='meta'>{html.escape(meta)}</p>{_problems(groups)}"
            f"<h2>What the numbers say</h2><ul>"
            f"{''.join(f'<li>{html.escape(x)}</li>' for x in _findings(groups))}</ul>"
            f"<h2>Numbers</h2>{_table(groups, slow)}{''.join(p.html for p in parts)}"
            f"<h2>Plots</h2>{_notes(notes)}{''.join(_img(p, c) for p, c in figures)}"
            f"</body></html>\n")
    (out / "index.html").write_text(page, encoding="utf-8")
