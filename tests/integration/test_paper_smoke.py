"""Smoke runs of the paper's figure files: one configuration of each, a few seconds of traffic.

For every file in experiments/paper/ (Figures 2-14) one `swell run` of one of
its configurations, through the file itself: a small experiment that
``extends:`` the figure file and only shortens it (duration, warm-up, one
repetition) and keeps one value of each of its sweeps. The configuration
picked is the figure's most demanding kind (playback at a target rate, the
composite-trace Swing backgrounds, TCP Poisson, ...). Each run must deliver
background traffic at the bottleneck (the figure's background is not `none`)
and produce the figure's metric: response times (httperf), the background's
energy plot (Figures 2-3), the stream's packets and late frames (video),
estimates against the truth (bandwidth estimation).

The Mawi and Mawi2 composites are built by experiments/paper/make_traces.sh
from the shared captures; the figures that need them are skipped, saying so,
when those are absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from swell.cli import main as swell_main
from tests.paper_composites import PAPER, SHARED, composites, needs_composites

# figure file -> {sweep key: label of the value to run (or the value)}, foreground override
PICK: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "fig02_03_backgrounds": ({"background": "Auck (trace)"}, {}),
    "fig04_simple_models": ({"background": "TPB"}, {}),
    "fig05_fixed_loss": ({"background": "Mawi2 (Swing)"}, {}),
    "fig06_poisson": ({"background": "Poisson4"}, {}),
    "fig07_swing": ({"background": "AuckRSP4"}, {}),
    # 10 Mbit/s: at 5 a 1 MB download beside 3.4 Mbit/s of Swing takes about 5 s, longer
    # than a smoke run's window (CI once measured none)
    "fig08_capacity": ({"topology.bottleneck.rate_mbps": 10, "background": "Auck"}, {}),
    "fig09_bursty": ({"background": "Mawi2HB"}, {}),
    "fig10_video": ({"topology.bottleneck.rate_mbps": 3.5, "background": "Auck",
                     "foreground.transport": "tcp"},
                    {"duration_s": 4}),
    "fig11_video_buffering": ({"foreground.buffer_s": 0, "background": "AuckHB",
                               "foreground.transport": "rtp"},
                              {"duration_s": 4}),
    # SLoPS: a few ranges in seconds; the chirp needs 11 usable chirps, which a busy
    # host spoils in short runs (docs/bwest.md)
    "fig12_bwest": ({"background": "CBR30", "foreground": "SLoPS"}, {}),
    "fig13_reverse": ({"topology.bottleneck.rate_mbps": 20, "background": "Rev10"}, {}),
    "fig14_timescales": ({"foreground.object_bytes": 4096, "background": "ZeroThink"}, {}),
}


def _one_of(values: list[Any], want: Any) -> Any:
    for v in values:
        if (isinstance(v, dict) and v.get("label") == want) or v == want:
            return v
    raise AssertionError(f"no sweep value {want!r} in {values}")


def _smoke_file(name: str, tmp: Path) -> Path:
    """A short one-configuration experiment extending the figure file."""
    from swell.experiments.schema import load_experiment

    fig = PAPER / f"{name}.yaml"
    exp = load_experiment(fig)  # sweep values with their paths made absolute
    pick, fg = PICK[name]
    assert set(pick) == set(exp.sweep), (name, list(exp.sweep))
    doc: dict[str, Any] = {
        "extends": str(fig), "name": f"smoke-{name}",
        "duration_s": 6 if fg else 8 if name.startswith(("fig08", "fig12")) else 5,
        "warmup_s": 2, "repetitions": 1,
        "sweep": {k: [_one_of(exp.sweep[k], v)] for k, v in pick.items()},
    }
    if fg:
        doc["foreground"] = fg
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _check_metric(name: str, run: dict[str, Any]) -> None:
    fg = run.get("foreground") or {}
    kind = (run.get("spec") or {}).get("foreground", {}).get("kind")
    if name.startswith("fig02"):
        assert run["bottleneck"]["reverse"].get("energy"), "no energy plot of the background"
    elif kind == "httperf":
        rts = fg.get("response_times_s") or []
        assert len(rts) >= 1 and min(rts) > 0, f"{name}: no response times"
    elif kind == "video":
        assert fg.get("packets", 0) > 0, f"{name}: no packet of the stream arrived"
        assert "late_frames" in fg, f"{name}: no late-frame count"
    elif kind in ("slops", "chirp"):
        est = [e for e in fg.get("estimates", []) if e.get("estimate_mbps") is not None]
        assert est, f"{name}: no estimate"
        assert all(e.get("truth_mbps") is not None for e in est), f"{name}: no truth"
    else:
        raise AssertionError(f"{name}: no metric check for foreground {kind!r}")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PICK))
def test_figure_smoke(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if needs_composites(PAPER / f"{name}.yaml") and not composites():
        pytest.skip(f"{name}: the Mawi/Mawi2 composites need the shared captures under {SHARED}")
    monkeypatch.setenv("SWELL_QUIET", "1")
    exp = _smoke_file(name, tmp_path)
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study), "--no-report"]) == 0
    runs = json.loads((study / "results.json").read_text())["runs"]
    assert len(runs) == 1
    run = runs[0]
    bg = run["bottleneck"]["reverse"]["bg_mean_mbps"]
    assert bg > 0.05, f"{name} ({run['label']}): the background delivered nothing ({bg} Mbit/s)"
    _check_metric(name, run)
