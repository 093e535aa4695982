"""The Figure 10 and 11 tables of docs/video.md, made from the stored study results.

``bench/video_doc_tables.py [FIG10_RESULTS FIG11_RESULTS]`` prints both
tables in Markdown; without arguments it reads the studies stored in the
repository (``docs/paper/fig10_video/results.json`` and
``docs/paper/fig11_video_buffering/results.json``, the runs docs/paper.md
also quotes). ``tests/unit/test_video_doc_tables.py`` checks that every line
it prints is in docs/video.md, so the page cannot drift from the stored runs.

Every number is read from ``results.json`` as ``swell run`` wrote it: the
stream's metrics from the video kind
(:func:`swell.generators.video.video_metrics`), the background's delivered
load server -> client from the run's ``load.reverse`` (payload delivered in
the measurement window against the rate asked of that direction, as
``experiments/delivery.py`` computes it) and its IP rate at the bottleneck
(``bottleneck.reverse.bg_mean_mbps``), and the study's git revision and run
times from ``host`` and each run's ``timing``.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.experiments.results import load_results  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIG10 = REPO / "docs" / "paper" / "fig10_video" / "results.json"
FIG11 = REPO / "docs" / "paper" / "fig11_video_buffering" / "results.json"


def _late_at(fg: dict[str, Any], buffer_s: float) -> int:
    """Late frames the run's own arrivals give with a buffer of ``buffer_s`` (the ladder)."""
    return next(b["late_frames"] for b in fg["by_buffer"] if float(b["buffer_s"]) == buffer_s)


def _background(run: dict[str, Any]) -> str:
    """Name, then delivered / asked server -> client (Mbit/s, payload) and the share."""
    name = run["point"]["background"]
    rev = (run.get("load") or {}).get("reverse")
    if run.get("background_kind") == "none" or not rev:
        return f"{name} (none)"
    share = 100 * rev["delivered_share"]
    mark = "**" if abs(share - 100) > 10 else ""
    return (f"{name}: {rev['delivered_mbps']:.2f} of {rev['asked_mbps']:.2f} "
            f"({mark}{share:.0f}%{mark}); {run['bottleneck']['reverse']['bg_mean_mbps']:.2f} "
            f"at the link")


def _stream(fg: dict[str, Any]) -> list[str]:
    """The cells both tables share, after the background's."""
    ia, jit = fg["interarrival_ms"], fg["jitter_ms"]
    return [f"{ia['p50']:.2f} / {ia['p90']:.1f} / {ia['p99']:.1f}",
            f"{jit['p50']:.2f} / {jit['p99']:.2f}", f"{100 * fg['loss']:.2f}%"]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _provenance(data: dict[str, Any], path: Path) -> str:
    host = data["host"]
    starts = [r["timing"]["background_start"] for r in data["runs"]]
    first, last = (datetime.fromtimestamp(t, UTC) for t in (min(starts), max(starts)))
    dirty = ", with uncommitted changes" if host.get("git_dirty") else ""
    cache = {r["spec"].get("tcp_ssthresh_cache") for r in data["runs"]}
    cached = "ssthresh cache on" if cache == {True} else f"ssthresh cache {sorted(cache)}"
    try:
        where = path.resolve().relative_to(REPO)
    except ValueError:
        where = path
    return (f"From `{where}`: git {host['git_revision'][:7]}{dirty}; runs started "
            f"{first:%Y-%m-%d %H:%M}-{last:%H:%M} UTC; one run per row, {cached}.")


def fig10_table(data: dict[str, Any], path: Path = FIG10) -> str:
    """Link, background, then the stream with a 10 s buffer and its own arrivals at D = 0."""
    head = ["link (Mbit/s)", "background s->c: delivered of asked, Mbit/s (share); IP rate",
            "inter-arrival p50 / p90 / p99 (ms)", "jitter p50 / p99 (ms)", "loss",
            "frame gap median (ms)", "late frames (D = 10 s)", "stalls / stall time",
            "same arrivals, D = 0: late frames", "seconds below 450 kbit/s"]
    runs = sorted(data["runs"], key=lambda r: (float(r["point"]["topology.bottleneck.rate_mbps"]),
                                               r.get("background_kind") != "none"))
    lines = [_provenance(data, path), "", _row(head), _row(["---"] * len(head))]
    for run in runs:
        fg = run["foreground"]
        lines.append(_row([
            f"{float(run['point']['topology.bottleneck.rate_mbps']):g}", _background(run),
            *_stream(fg), f"{fg['frame_interarrival_ms']['p50']:.2f}",
            f"{fg['late_frames']} of {fg['frames']}",
            f"{fg['stalls']} / {fg['stall_s']:.2f} s", str(_late_at(fg, 0.0)),
            f"{fg['seconds_below_rate']} of {fg['seconds']}"]))
    return "\n".join(lines)


def fig11_table(data: dict[str, Any], path: Path = FIG11) -> str:
    """Buffer, background, then the stream and its own arrivals re-played at D = 0 and 10."""
    head = ["buffer", "background s->c: delivered of asked, Mbit/s (share); IP rate",
            "inter-arrival p50 / p90 / p99 (ms)", "jitter p50 / p99 (ms)", "loss",
            "late frames", "stalls / stall time (longest)",
            "same arrivals, D = 0 / D = 10: late frames", "seconds below 450 kbit/s"]
    runs = sorted(data["runs"], key=lambda r: (-float(r["foreground"]["buffer_s"]),
                                               r["point"]["background"]))
    lines = [_provenance(data, path), "", _row(head), _row(["---"] * len(head))]
    for run in runs:
        fg = run["foreground"]
        lines.append(_row([
            f"{float(fg['buffer_s']):g} s", _background(run), *_stream(fg),
            f"{fg['late_frames']} of {fg['frames']}",
            f"{fg['stalls']} / {fg['stall_s']:.2f} s ({fg['longest_stall_s']:.2f} s)",
            f"{_late_at(fg, 0.0)} / {_late_at(fg, 10.0)}",
            f"{fg['seconds_below_rate']} of {fg['seconds']}"]))
    return "\n".join(lines)


def tables(fig10: Path = FIG10, fig11: Path = FIG11) -> str:
    """Both tables, each under its figure's name."""
    return (f"Figure 10\n\n{fig10_table(load_results(fig10), fig10)}\n\n"
            f"Figure 11\n\n{fig11_table(load_results(fig11), fig11)}\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (0, 2):
        print("usage: bench/video_doc_tables.py [FIG10_RESULTS FIG11_RESULTS]", file=sys.stderr)
        return 2
    print(tables(*map(Path, args)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
