"""The numbers docs/paper.md quotes for Figures 10 and 11, from a video study's ``results.json``.

``bench/paper_video.py STUDY [--json OUT]``, after ``swell run
experiments/paper/fig10_video.yaml -o STUDY`` (or ``fig11_video_buffering.yaml``).

One row per run, in study order: the bottleneck's rate, the client's
buffer and the transport (``rtp`` or ``tcp``, RTSP-interleaved), the
background's delivered rate towards the clients (server -> client IP rate
at the bottleneck) and its share of the asked load as the run reports it,
the stream's packet inter-arrival percentiles, its loss, late frames,
stalls and stall time (longest stall) with the configured buffer, the late
frames the same arrivals would give with no buffer and with 10 s (the
``by_buffer`` ladder the video kind stores), the seconds that brought less
than 95% of the stream rate, and the problems the run reports. Everything is
read from what the video kind wrote (``swell.generators.video.video_metrics``);
the plots are the report's (``video-interarrival.png``, ``video-rate.png``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paper_common import study_rows  # noqa: E402


def _late_at(fg: dict[str, Any], buffer_s: float) -> int | None:
    return next((b["late_frames"] for b in fg.get("by_buffer", [])
                 if float(b["buffer_s"]) == buffer_s), None)


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per run with the stream's metrics and the background's load."""
    rows = []
    for run in data["runs"]:
        fg = run.get("foreground") or {}
        share = ((run.get("load") or {}).get("reverse") or {}).get("delivered_share")
        rows.append({
            "label": run["label"], "repetition": run.get("repetition", 0),
            "background_kind": run.get("background_kind"),
            "bottleneck_mbps": run["spec"]["topology"]["bottleneck"]["rate_mbps"],
            "buffer_s": fg.get("buffer_s"), "transport": fg.get("transport"),
            "retransmitted": fg.get("retransmitted"),
            "bg_s2c_mbps": float(run["bottleneck"]["reverse"]["bg_mean_mbps"]),
            "bg_c2s_mbps": float(run["bottleneck"]["forward"]["bg_mean_mbps"]),
            "delivered_share": share,
            "interarrival_ms": fg.get("interarrival_ms", {}),
            "loss": fg.get("loss"), "late_frames": fg.get("late_frames"),
            "frames": fg.get("frames"), "stalls": fg.get("stalls"),
            "stall_s": fg.get("stall_s"), "longest_stall_s": fg.get("longest_stall_s"),
            "late_frames_d0": _late_at(fg, 0.0), "late_frames_d10": _late_at(fg, 10.0),
            "seconds_below_rate": fg.get("seconds_below_rate"), "seconds": fg.get("seconds"),
            "problems": run.get("problems", []),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    rows = study_rows(__doc__, rows_of, argv)
    print("| run | link | buffer | transport | bg s->c (share) | "
          "inter-arrival p50 / p90 / p99 (ms) | loss | late frames | stalls / time (longest) | "
          "late at D=0 / D=10 | s below rate | problems |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ia = r["interarrival_ms"]
        share = f" ({100 * r['delivered_share']:.0f}%)" if r["delivered_share"] is not None else ""
        loss = f"{100 * r['loss']:.2f}%" if r["loss"] is not None else "-"
        print(f"| {r['label']} #{r['repetition']} | {r['bottleneck_mbps']:g} | {r['buffer_s']:g} | "
              f"{r['transport']} | {r['bg_s2c_mbps']:.2f}{share} | "
              f"{ia.get('p50', 0):.2f} / {ia.get('p90', 0):.1f} / {ia.get('p99', 0):.1f} | "
              f"{loss} | {r['late_frames']} of {r['frames']} | "
              f"{r['stalls']} / {r['stall_s']:.2f} s ({r['longest_stall_s']:.2f} s) | "
              f"{r['late_frames_d0']} / {r['late_frames_d10']} | "
              f"{r['seconds_below_rate']} of {r['seconds']} | "
              f"{'; '.join(r['problems'])[:300] or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
