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


def _reps(runs: list[dict[str, Any]], get: Any, fmt: str = "{}") -> str:
    """One value per repetition, in repetition order, ``a / b / c``."""
    return " / ".join(fmt.format(get(r)) for r in runs)


def _mean(runs: list[dict[str, Any]], get: Any) -> float:
    return sum(float(get(r)) for r in runs) / len(runs)


def _background(runs: list[dict[str, Any]]) -> str:
    """Name, then per repetition the share of its asked load server -> client it
    delivered (bold when more than 10 points off), the mean delivered of asked
    (Mbit/s payload) and its mean IP rate at the bottleneck."""
    name = runs[0]["point"]["background"]
    revs = [(r.get("load") or {}).get("reverse") for r in runs]
    if runs[0].get("background_kind") == "none" or not all(revs):
        return f"{name} (none)"
    shares = []
    for rev in revs:
        share = 100 * rev["delivered_share"]
        mark = "**" if abs(share - 100) > 10 else ""
        shares.append(f"{mark}{share:.0f}%{mark}")
    delivered = sum(rev["delivered_mbps"] for rev in revs) / len(revs)
    ip = _mean(runs, lambda r: r["bottleneck"]["reverse"]["bg_mean_mbps"])
    return (f"{name}: {' / '.join(shares)}; {delivered:.2f} of {revs[0]['asked_mbps']:.2f}, "
            f"{ip:.2f} at the link")


def _stream(runs: list[dict[str, Any]]) -> list[str]:
    """The cells both tables share, after the background's: means over repetitions."""
    def fg(key: str, sub: str | None = None) -> float:
        return _mean(runs, lambda r: r["foreground"][key][sub] if sub
                     else r["foreground"][key])

    retx = (f"{fg('retransmitted'):.0f}" if runs[0]["foreground"]["transport"] == "tcp"
            else "-")
    return [f"{fg('interarrival_ms', 'p50'):.2f} / {fg('interarrival_ms', 'p90'):.1f} / "
            f"{fg('interarrival_ms', 'p99'):.1f}",
            f"{fg('jitter_ms', 'p50'):.2f} / {fg('jitter_ms', 'p99'):.2f}",
            f"{100 * fg('loss'):.2f}%", retx]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _groups(data: dict[str, Any], order: Any) -> list[list[dict[str, Any]]]:
    """The runs of each configuration (repetitions in order), configurations by ``order``."""
    by: dict[str, list[dict[str, Any]]] = {}
    for run in data["runs"]:
        by.setdefault(run["label"], []).append(run)
    groups = [sorted(g, key=lambda r: r.get("repetition", 0)) for g in by.values()]
    return sorted(groups, key=lambda g: order(g[0]))


def _provenance(data: dict[str, Any], path: Path) -> str:
    host = data["host"]
    starts = [r["timing"]["background_start"] for r in data["runs"]]
    first, last = (datetime.fromtimestamp(t, UTC) for t in (min(starts), max(starts)))
    dirty = ", with uncommitted changes" if host.get("git_dirty") else ""
    cache = {r["spec"].get("tcp_ssthresh_cache") for r in data["runs"]}
    cached = "ssthresh cache on" if cache == {True} else f"ssthresh cache {sorted(cache)}"
    reps = max(r.get("repetition", 0) for r in data["runs"]) + 1
    stream = {r["foreground"]["frames"] for r in data["runs"]}
    try:
        where = path.resolve().relative_to(REPO)
    except ValueError:
        where = path
    return (f"From `{where}`: git {host['git_revision'][:7]}{dirty}; runs started "
            f"{first:%Y-%m-%d %H:%M}-{last:%H:%M} UTC; {reps} repetitions per row "
            f"(per-repetition values as a / b / c, other columns their means), "
            f"{'/'.join(map(str, sorted(stream)))} frames per stream, {cached}.")


COMMON = ["background s->c: delivered share of asked per repetition; mean delivered of asked, "
          "IP rate (Mbit/s)", "transport", "inter-arrival p50 / p90 / p99 (ms)",
          "jitter p50 / p99 (ms)", "loss", "TCP segments resent"]


def fig10_table(data: dict[str, Any], path: Path = FIG10) -> str:
    """Link, background, transport, then the stream with a 10 s buffer and at D = 0."""
    head = ["link (Mbit/s)", *COMMON, "frame gap median (ms)", "late frames (D = 10 s)",
            "stall time (s)", "same arrivals, D = 0: late frames",
            "seconds below 95% of the stream rate"]
    groups = _groups(data, lambda r: (float(r["point"]["topology.bottleneck.rate_mbps"]),
                                      r.get("background_kind") != "none",
                                      r["foreground"]["transport"]))
    lines = [_provenance(data, path), "", _row(head), _row(["---"] * len(head))]
    for runs in groups:
        fg0 = runs[0]["foreground"]
        lines.append(_row([
            f"{float(runs[0]['point']['topology.bottleneck.rate_mbps']):g}", _background(runs),
            fg0["transport"], *_stream(runs),
            f"{_mean(runs, lambda r: r['foreground']['frame_interarrival_ms']['p50']):.2f}",
            _reps(runs, lambda r: r["foreground"]["late_frames"]) + f" of {fg0['frames']}",
            _reps(runs, lambda r: r["foreground"]["stall_s"], "{:.2f}"),
            _reps(runs, lambda r: _late_at(r["foreground"], 0.0)),
            _reps(runs, lambda r: f"{r['foreground']['seconds_below_rate']} of "
                                  f"{r['foreground']['seconds']}")]))
    return "\n".join(lines)


def fig11_table(data: dict[str, Any], path: Path = FIG11) -> str:
    """Buffer, background, transport, then the stream and its arrivals at D = 0 and 10."""
    head = ["buffer", *COMMON, "late frames", "stall time (s)", "longest stall (s)",
            "same arrivals, D = 0 / D = 10: late frames (mean)",
            "seconds below 95% of the stream rate"]
    groups = _groups(data, lambda r: (-float(r["foreground"]["buffer_s"]),
                                      r["point"]["background"], r["foreground"]["transport"]))
    lines = [_provenance(data, path), "", _row(head), _row(["---"] * len(head))]
    for runs in groups:
        fg0 = runs[0]["foreground"]
        lines.append(_row([
            f"{float(fg0['buffer_s']):g} s", _background(runs), fg0["transport"],
            *_stream(runs),
            _reps(runs, lambda r: r["foreground"]["late_frames"]) + f" of {fg0['frames']}",
            _reps(runs, lambda r: r["foreground"]["stall_s"], "{:.2f}"),
            f"{max(r['foreground']['longest_stall_s'] for r in runs):.2f}",
            f"{_mean(runs, lambda r: _late_at(r['foreground'], 0.0)):.0f} / "
            f"{_mean(runs, lambda r: _late_at(r['foreground'], 10.0)):.0f}",
            _reps(runs, lambda r: f"{r['foreground']['seconds_below_rate']} of "
                                  f"{r['foreground']['seconds']}")]))
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
