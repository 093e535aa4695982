"""The video stream's part of ``swell report``: inter-arrival CDFs, stalls, received rate.

Drawn from ``results.json`` alone (the foreground entries the video kind
wrote, :func:`swell.generators.video.video_metrics`):

* ``video-interarrival.png``: the CDF of packet inter-arrival times at the
  client, one line per configuration (repetitions pooled through their stored
  quantiles), log time axis: the study's Figures 10 and 11;
* ``video-rate.png``: received rate per second against the stream rate
  (repetition 0 of each configuration);
* a table: late frames, stalls and stall time with the configured buffer,
  stall time over the buffer ladder measured on the same arrivals, loss,
  RFC 3550 jitter, seconds below the stream rate and startup delay (means over
  repetitions).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis import plots as P
from swell.generators.kind import ReportPart


def _fg(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("foreground") or {}


def _mean(runs: list[dict[str, Any]], get: Any) -> float:
    vals = [get(_fg(r)) for r in runs]
    vals = [float(v) for v in vals if v is not None]
    return float(np.mean(vals)) if vals else float("nan")


def _fmt(x: float, digits: int = 2) -> str:
    return "-" if not np.isfinite(x) else f"{x:.{digits}f}"


def _table(groups: dict[str, list[dict[str, Any]]]) -> str:
    ladder = sorted({b["buffer_s"] for runs in groups.values() for r in runs
                     for b in _fg(r).get("by_buffer", [])})
    head = ["configuration", "transport", "buffer (s)", "late frames", "stalls", "stall time (s)",
            *[f"stall s @ {b:g} s" for b in ladder], "loss (%)", "jitter p50 / p99 (ms)",
            "frame gap median (ms)", "received (kbit/s)", "seconds below rate",
            "startup (s)", "runs"]
    rows = []
    for label, runs in groups.items():
        f0 = _fg(runs[0])

        def at(b: float) -> Any:
            return lambda f: next((x["stall_s"] for x in f.get("by_buffer", [])
                                   if x["buffer_s"] == b), None)

        cells = [label, str(f0.get("transport", "-")), _fmt(_mean(runs, lambda f: f.get(
            "buffer_s")), 1),
                 _fmt(_mean(runs, lambda f: f.get("late_frames")), 1),
                 _fmt(_mean(runs, lambda f: f.get("stalls")), 1),
                 _fmt(_mean(runs, lambda f: f.get("stall_s"))),
                 *[_fmt(_mean(runs, at(b))) for b in ladder],
                 _fmt(100 * _mean(runs, lambda f: f.get("loss")), 2),
                 f"{_fmt(_mean(runs, lambda f: (f.get('jitter_ms') or {}).get('p50')))} / "
                 f"{_fmt(_mean(runs, lambda f: (f.get('jitter_ms') or {}).get('p99')))}",
                 _fmt(_mean(runs, lambda f: (f.get("frame_interarrival_ms") or {}).get("p50"))),
                 _fmt(_mean(runs, lambda f: f.get("rate_kbps_mean")), 1)
                 + f" of {_fmt(_mean(runs, lambda f: f.get('stream_kbps')), 1)}",
                 f"{_fmt(_mean(runs, lambda f: f.get('seconds_below_rate')), 1)} of "
                 f"{_fmt(_mean(runs, lambda f: f.get('seconds')), 0)}",
                 _fmt(_mean(runs, lambda f: f.get("startup_delay_s"))), str(len(runs))]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (f"<h2>Video stream</h2><p>Late frames complete after their deadline (first "
            f"frame + buffer + media time) or never; a stall is a run of late frames, its "
            f"time the run's media length. The ladder re-plays the same arrivals with other "
            f"buffers. A second is below the rate when it brings less than 95% of the stream "
            f"rate.</p><table><tr>{th}</tr>{''.join(rows)}</table>")


def video_report(groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
    """Figures and the stall table for the configurations that ran the video kind."""
    colors = [P.COLORS[i % len(P.COLORS)] for i in range(len(groups))]
    figures: list[tuple[Path, str]] = []
    samples = []
    for label, runs in groups.items():
        q = [np.asarray((_fg(r).get("series") or {}).get("interarrival_ms_q", []), float)
             for r in runs]
        pooled = np.concatenate(q) if q else np.zeros(0)
        samples.append((label, pooled[pooled > 0]))
    if any(s.size for _, s in samples):
        fig = P.plot_cdfs(samples, title="Packet inter-arrival at the video client",
                          xlabel="inter-arrival time (ms)", logx=True, colors=colors)
        figures += [(p, "Inter-arrival times of the stream's packets at the client (kernel "
                        "stamps), one CDF per configuration (201 stored quantiles per run, "
                        "so n counts quantiles, not packets).")
                    for p in P.save(fig, out / "video-interarrival") if p.suffix == ".png"]
    series = []
    stream = float("nan")
    for label, runs in groups.items():
        rate = np.asarray((_fg(runs[0]).get("series") or {}).get("rate_kbps", []), float)
        stream = _mean(runs, lambda f: f.get("stream_kbps"))
        if rate.size:
            series.append((label, np.arange(rate.size, dtype=float), rate))
    if series:
        fig = P.plot_time_series(series, title="Received video rate per second",
                                 ylabel="received (kbit/s)", scale=1.0, colors=colors)
        if np.isfinite(stream):
            fig.axes[0].axhline(stream, color="0.3", linestyle="--", linewidth=0.8)
        figures += [(p, "Stream bytes received per second at the client (repetition 0); "
                        "dashed: the stream rate.")
                    for p in P.save(fig, out / "video-rate") if p.suffix == ".png"]
    return ReportPart(figures, _table(groups))
