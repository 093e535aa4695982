"""The report's sweep views (experiments/report_sweep.py) on small synthetic studies and
on the paper's stored results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swell.analysis.energy import EnergyPlot, energy_plot
from swell.experiments.report import _slowdowns, make_report
from swell.experiments.report_sweep import (
    axis_rows,
    background_order,
    energy_against_baseline,
    log_axis,
    sweep_axes,
)
from swell.experiments.results import group_runs, load_results

RATE = "topology.bottleneck.rate_mbps"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "paper"
# the sweep's order (NBG, Smooth, Bursty) differs from the runs' (Bursty first)
SWEEP_BG = [{"kind": "none", "label": "NBG"}, {"kind": "poisson", "label": "Smooth"},
            {"kind": "swing", "label": "Bursty"}]


def _bottleneck(rng: np.random.Generator, energy: bool, burst: float) -> dict:
    x = rng.poisson(50, 4096).astype(float) * (1 + burst * np.repeat(rng.random(16), 256))
    return {"bg_mean_mbps": 3.3, "all_mean_mbps": 8.0, "series_bin_s": 0.1,
            "series_mbps": rng.uniform(2, 4, 20).tolist(),
            "energy": energy_plot(x, 1e-3).to_dict() if energy else None}


def _results(tmp: Path, rates=(5, 50, 100), reps: int = 2, skip=(), no_energy=(),
             extra_point: dict | None = None) -> Path:
    """A results.json with NBG, Bursty and Smooth at every rate (``skip``: (rate, bg) pairs
    left out; ``no_energy``: (rate, bg) pairs without energy)."""
    rng = np.random.default_rng(7)
    runs = []
    for rate in rates or (None,):
        for bg, kind, scale in (("Bursty", "swing", 1.8), ("NBG", "none", 1.0),
                                ("Smooth", "poisson", 1.3)):
            if (rate, bg) in skip:
                continue
            for rep in range(reps):
                point = {"background": bg, **({RATE: str(rate)} if rate else {}),
                         **(extra_point or {})}
                label = f"{rate} / {bg}" if rate else bg
                rts = rng.lognormal(np.log(scale * 10 / (rate or 10)), 0.3, 30)
                burst = 0.0 if kind != "swing" else 2.0
                d = _bottleneck(rng, kind != "none" and (rate, bg) not in no_energy, burst)
                runs.append({"key": label.replace(" ", ""), "label": label, "repetition": rep,
                             "seed": rep, "background_kind": kind, "engine": "native",
                             "point": point, "bottleneck": {"forward": d, "reverse": d},
                             "foreground": {"response_times_s": rts.tolist()}, "captures": []})
    doc = {"format": "swell-results", "version": 1, "host": {},
           "experiment": {"name": "sweep-test", "duration_s": 5, "warmup_s": 1, "seed": 1,
                          "sweep": {"background": SWEEP_BG,
                                    **({RATE: list(rates)} if rates else {})}},
           "runs": runs}
    path = tmp / "results.json"
    path.write_text(json.dumps(doc))
    return path


def test_sweep_axis_is_detected_only_when_a_number_varies(tmp_path: Path):
    groups = group_runs(load_results(_results(tmp_path)))
    assert sweep_axes(groups) == [RATE]
    (tmp_path / "b").mkdir()
    # backgrounds alone: no axis
    groups = group_runs(load_results(_results(tmp_path / "b", rates=())))
    assert sweep_axes(groups) == []
    (tmp_path / "c").mkdir()
    # a number that does not vary is no axis either
    groups = group_runs(load_results(_results(tmp_path / "c", rates=(20,))))
    assert sweep_axes(groups) == []
    (tmp_path / "d").mkdir()
    # a text key beside the numeric one is no axis
    groups = group_runs(load_results(_results(tmp_path / "d", extra_point={"x.loss": "ge"})))
    assert sweep_axes(groups) == [RATE]


def test_log_axis_when_the_values_span_more_than_a_decade():
    assert log_axis([5.0, 10.0, 20.0, 50.0, 100.0]) and log_axis([4096.0, 1e6])
    assert not log_axis([20.0, 100.0]) and not log_axis([0.0, 100.0]) and not log_axis([])


def test_slowdown_per_point_is_the_report_table_s(tmp_path: Path):
    data = load_results(_results(tmp_path))
    groups = group_runs(data)
    rows = axis_rows(data, groups, RATE)
    table = _slowdowns(data, groups)
    assert {r["label"] for r in rows} == {f"{c} / {b}" for c in (5, 50, 100)
                                          for b in ("Bursty", "Smooth")}
    for r in rows:
        assert r["x"] == float(r["label"].split()[0])
        assert r["baseline"] == f"{r['label'].split()[0]} / NBG"
        for stat in ("p50", "p90"):
            assert r["slowdown"][stat] == pytest.approx(table[r["label"]][stat])
    # and by hand: each repetition's median over the pooled baseline's, mean and sd
    base = np.concatenate([run["foreground"]["response_times_s"] for run in groups["50 / NBG"]])
    ratios = [np.median(run["foreground"]["response_times_s"]) / np.median(base)
              for run in groups["50 / Bursty"]]
    got = next(r for r in rows if r["label"] == "50 / Bursty")["slowdown"]["p50"]
    assert got == pytest.approx((np.mean(ratios), np.std(ratios, ddof=1)))
    assert got[0] > 1.3  # the synthetic bursty runs are slower than NBG
    # a spec's baseline is every point's, as in the report's table
    data["experiment"]["baseline"] = "100 / NBG"
    rows = axis_rows(data, groups, RATE)
    table = _slowdowns(data, groups)
    assert {r["baseline"] for r in rows} == {"100 / NBG"}
    assert all(r["slowdown"]["p90"] == pytest.approx(table[r["label"]]["p90"]) for r in rows)
    assert next(r for r in rows if r["label"] == "5 / Smooth")["slowdown"]["p50"][0] > 5


def test_point_without_baseline_is_left_out_with_a_note(tmp_path: Path):
    path = _results(tmp_path, skip={(100, "NBG")})
    data = load_results(path)
    rows = axis_rows(data, group_runs(data), RATE)
    assert [r["label"] for r in rows if r["slowdown"] is None] == ["100 / Bursty",
                                                                   "100 / Smooth"]
    page = make_report(path, tmp_path / "report").read_text()
    assert "100 / Bursty left out, no run without background at rate_mbps = 100" in page
    assert (tmp_path / "report" / "slowdown-vs-rate_mbps.png").is_file()


def test_energy_baseline_is_the_first_background_of_the_sweep(tmp_path: Path):
    data = load_results(_results(tmp_path))
    groups = group_runs(data)
    assert background_order(data, groups) == ["NBG", "Smooth", "Bursty"]
    diffs = energy_against_baseline(data, groups, "reverse")
    assert [(e["background"], e["baseline"], dict(e["point"])[RATE]) for e in diffs] == [
        ("Bursty", "Smooth", r) for r in ("5", "50", "100")]
    e = diffs[0]
    a = EnergyPlot.from_dict(groups["5 / Bursty"][0]["bottleneck"]["reverse"]["energy"])
    b = EnergyPlot.from_dict(groups["5 / Smooth"][0]["bottleneck"]["reverse"]["energy"])
    j = e["per_octave"][3]
    assert j["diff"] == pytest.approx(a.y[a.at(j["octave"])] - b.y[b.at(j["octave"])])
    assert j["ci"] == pytest.approx(np.hypot(a.ci[a.at(j["octave"])], b.ci[b.at(j["octave"])]))
    # burstier at large time scales than the smooth one, beyond the interval
    top = e["per_octave"][-3]
    assert top["diff"] > top["ci"]
    # where the first has no energy, the next one is that point's baseline
    (tmp_path / "b").mkdir()
    data = load_results(_results(tmp_path / "b", rates=(5, 50, 100, 200),
                                 no_energy={(5, "Smooth")},
                                 skip={(200, "Smooth")} | {(200, "NBG")}))
    got = {dict(e["point"])[RATE]: e["baseline"]
           for e in energy_against_baseline(data, group_runs(data), "forward")}
    assert got == {"50": "Smooth", "100": "Smooth"}  # 5 and 200: Bursty alone


def test_energy_diff_needs_two_backgrounds_with_energy(tmp_path: Path):
    path = _results(tmp_path, no_energy={(r, "Smooth") for r in (5, 50, 100)})
    data = load_results(path)
    assert energy_against_baseline(data, group_runs(data), "reverse") == []
    make_report(path, tmp_path / "report")
    assert not (tmp_path / "report" / "energy-diff.png").exists()
    assert (tmp_path / "report" / "slowdown-vs-rate_mbps.png").is_file()


def test_report_draws_and_references_the_sweep_views(tmp_path: Path):
    page = make_report(_results(tmp_path), tmp_path / "report").read_text()
    for name in ("slowdown-vs-rate_mbps", "response-cdf-by-rate_mbps", "energy-diff"):
        assert (tmp_path / "report" / f"{name}.png").stat().st_size > 10_000
        assert (tmp_path / "report" / f"{name}.svg").is_file()
        assert f'href="{name}.svg"' in page
    assert "against topology.bottleneck.rate_mbps: points are the mean" in page
    assert "baseline background&#x27;s (Smooth)" in page
    (tmp_path / "flat").mkdir()
    page = make_report(_results(tmp_path / "flat", rates=(20,)),
                       tmp_path / "flat" / "report").read_text()
    assert "slowdown-vs-" not in page and "response-cdf-by-" not in page


@pytest.mark.parametrize("results, axis", [
    ("fig08_capacity/results.json", "rate_mbps"),
    ("fig13-results.json", "rate_mbps"),
    ("fig14-results.json", "object_bytes")])
def test_report_of_the_paper_s_stored_results(tmp_path: Path, results: str, axis: str):
    if not (DOCS / results).is_file():
        pytest.skip(f"docs/paper/{results} is not in this checkout")
    page = make_report(DOCS / results, tmp_path / "report").read_text()
    for name in (f"slowdown-vs-{axis}", f"response-cdf-by-{axis}", "energy-diff"):
        assert (tmp_path / "report" / f"{name}.png").is_file()
        assert f'href="{name}.svg"' in page
