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


def _by_transport(groups: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Configuration labels per transport (in study order)."""
    out: dict[str, list[str]] = {}
    for label, runs in groups.items():
        out.setdefault(str(_fg(runs[0]).get("transport", "-")), []).append(label)
    return out


def _cdf_figure(groups: dict[str, list[dict[str, Any]]]) -> Any:
    """Inter-arrival CDFs, one panel per transport (None when no run has any)."""
    panels = _by_transport(groups)
    fig, axes = P.plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False,
                               sharey=True)
    drawn = False
    for ax, (transport, labels) in zip(axes[0], panels.items(), strict=True):
        for i, label in enumerate(labels):
            q = [np.asarray((_fg(r).get("series") or {}).get("interarrival_ms_q", []), float)
                 for r in groups[label]]
            x = np.sort(np.concatenate(q)) if q else np.zeros(0)
            x = x[x > 0]
            if x.size:
                drawn = True
                ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=label,
                        color=P.COLORS[i % len(P.COLORS)])
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("inter-arrival time (ms)")
        ax.set_title(f"Packet inter-arrival at the video client ({transport})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    axes[0][0].set_ylabel("fraction <= x")
    fig.tight_layout()
    if not drawn:
        P.plt.close(fig)
        return None
    return fig


def _rate_figure(groups: dict[str, list[dict[str, Any]]]) -> Any:
    """Received rate per second (repetition 0), one panel per transport."""
    panels = _by_transport(groups)
    fig, axes = P.plt.subplots(len(panels), 1, figsize=(9, 3.6 * len(panels)), squeeze=False,
                               sharex=True)
    drawn = False
    for ax, (transport, labels) in zip(axes[:, 0], panels.items(), strict=True):
        for i, label in enumerate(labels):
            rate = np.asarray((_fg(groups[label][0]).get("series") or {}).get("rate_kbps", []),
                              float)
            if rate.size:
                drawn = True
                ax.plot(np.arange(rate.size), rate, label=label, linewidth=1.0,
                        drawstyle="steps-post", color=P.COLORS[i % len(P.COLORS)])
        stream = _mean([r for lb in labels for r in groups[lb]], lambda f: f.get("stream_kbps"))
        if np.isfinite(stream):
            ax.axhline(stream, color="0.3", linestyle="--", linewidth=0.8)
        ax.set_ylabel("received (kbit/s)")
        ax.set_title(f"Received video rate per second ({transport})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[-1][0].set_xlabel("time since the first packet (s)")
    fig.tight_layout()
    if not drawn:
        P.plt.close(fig)
        return None
    return fig


def video_report(groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
    """Figures and the stall table for the configurations that ran the video kind."""
    figures: list[tuple[Path, str]] = []
    fig = _cdf_figure(groups)
    if fig is not None:
        figures += [(p, "Inter-arrival times of the stream's packets at the client (kernel "
                        "stamps; over TCP, when a packet's last byte was in order), one CDF "
                        "per configuration and a panel per transport (201 stored quantiles "
                        "per run, repetitions pooled).")
                    for p in P.save(fig, out / "video-interarrival") if p.suffix == ".png"]
    fig = _rate_figure(groups)
    if fig is not None:
        figures += [(p, "Stream bytes (RTP payload) received per second at the client "
                        "(repetition 0), a panel per transport; dashed: the stream rate.")
                    for p in P.save(fig, out / "video-rate") if p.suffix == ".png"]
    return ReportPart(figures, _table(groups))
