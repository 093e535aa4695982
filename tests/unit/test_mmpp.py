"""The multiscale MMPP: its Kronecker form, simulation against the analytic
moments, recovery of a known model, the RPS targets on the shared logs, the
re-fit check, bad inputs, the model directory and the CLI."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import fit_cli
from swell.extract.mmpp import (
    MMPPModel,
    Scale,
    empirical_autocov,
    fit_counts,
    ic_selffit,
    inequality_coefficient,
    ks_counts,
    load_mmpp_model,
    refit_check,
    refit_length,
    save_mmpp_model,
    simulate,
)
from swell.extract.weblogs import count_series, read_events


def _model(taus=(60.0, 5.0), pis=(0.3, 0.5), rates=(8.0, 4.0), marg=((2.0, 6.0), (0.6, 0.4))):
    scales = []
    for tau, pi, r in zip(taus, pis, rates, strict=True):
        scales.append(Scale(math.exp(-1 / tau), pi * (1 - pi) * r * r, pi, r))
    return MMPPModel(10.0, scales, np.array(marg[0]), np.array(marg[1]))


def test_kronecker_form_agrees_with_the_components():
    m = _model(marg=((1.0, 3.0, 9.0), (0.5, 0.3, 0.2)))
    P, lam, pi = m.transition_matrix(), m.rates(), m.stationary()
    assert P.shape == (12, 12) and m.n_states == 12
    np.testing.assert_allclose(P.sum(1), 1.0)
    np.testing.assert_allclose(pi @ P, pi, atol=1e-12)
    assert pi @ lam == pytest.approx(m.mean())
    np.testing.assert_allclose(m.autocov_matrix(30), m.autocov(30), rtol=1e-9)
    # lags >= 1: exactly the sum of the scales' exponentials
    k = np.arange(1, 31)
    expected = sum(s.psi * s.theta**k for s in m.scales)
    np.testing.assert_allclose(m.autocov(30)[1:], expected, rtol=1e-12)
    assert m.count_pmf(200).sum() == pytest.approx(1.0, abs=1e-9)


def test_simulation_matches_the_analytic_moments():
    m = _model()
    sim = simulate(m, 200_000, seed=4, times=False)
    assert sim.counts.mean() == pytest.approx(m.mean(), rel=0.02)
    emp = empirical_autocov([sim.counts], 40)
    ana = m.autocov(40)
    assert inequality_coefficient(ana, emp) < 0.06
    assert ks_counts(sim.counts, m) < 0.01


def test_arrival_times_are_the_counts():
    m = _model()
    sim = simulate(m, 5000, seed=2)
    assert np.all(np.diff(sim.times) >= 0)
    assert sim.times.min() >= 0 and sim.times.max() < 5000 * m.interval_s
    again = np.bincount((sim.times // m.interval_s).astype(int), minlength=5000)
    np.testing.assert_array_equal(again, sim.counts)
    # the same seed gives the same arrivals
    np.testing.assert_array_equal(simulate(m, 5000, seed=2).times, sim.times)


def test_fit_recovers_a_known_mmpp_and_reaches_the_rps_mark():
    true = _model()
    counts = simulate(true, 50_000, seed=11, times=False).counts
    fit = fit_counts([counts], 10.0)
    r = fit.report
    assert r["ic"] <= 0.05 and r["ks"] <= 0.05
    assert fit.mean() == pytest.approx(true.mean(), rel=0.03)
    K = r["max_lag"]
    assert inequality_coefficient(true.autocov(K), fit.autocov(K)) < 0.10
    assert fit.n_states == len(fit.marg_rates) * 2 ** len(fit.scales)
    c = refit_check(fit, seed=3)
    assert c["from_times"]
    assert abs(c["ic_refit_vs_data"] - c["ic_original"]) <= 0.02
    assert c["ic_refit_vs_model"] <= 0.05


def test_refit_length_holds_the_path_noise_under_one_point():
    """The re-fit check's path is long enough that its own autocovariance is within
    1 IC point of the model's (a path too short is one noisy sample, not a test)."""
    fast = _model(taus=(3.0,), pis=(0.5,), rates=(4.0,), marg=((2.0,), (1.0,)))
    slow = _model(taus=(400.0,), pis=(0.5,), rates=(4.0,), marg=((2.0,), (1.0,)))
    for m in (fast, slow):
        m.report = {"intervals": 200, "max_lag": 40}
    n_fast, noise_fast = refit_length(fast)
    n_slow, noise = refit_length(slow)
    assert n_fast > 20000 and noise_fast <= 0.0101  # 40 lags of small covariances: long
    assert n_slow > 20000 and noise <= 0.0101
    for m, n in ((fast, n_fast), (slow, n_slow)):
        sim = simulate(m, n, seed=8, times=False).counts
        assert inequality_coefficient(m.autocov(40), empirical_autocov([sim], 40)) < 0.02


def test_iid_counts_have_no_time_scale():
    counts = np.random.default_rng(1).poisson(5.0, 3000)
    fit = fit_counts([counts], 60.0)
    assert fit.mean() == pytest.approx(counts.mean(), rel=1e-3)
    assert fit.report["ks"] <= 0.05
    assert all(s.psi < 0.05 * counts.var() for s in fit.scales)


def test_bad_inputs():
    with pytest.raises(SwellError, match="short.log: 10 intervals; .* at least 24"):
        fit_counts([np.arange(10)], 60.0, where="short.log")
    with pytest.raises(SwellError, match="no arrivals"):
        fit_counts([np.zeros(100, int)], 60.0)
    under = np.tile([4, 5, 6], 100)  # variance below the mean
    fit = fit_counts([under], 60.0)
    assert any("not over-dispersed" in n for n in fit.report["notes"])


def test_model_directory_round_trip(tmp_path):
    counts = simulate(_model(), 3000, seed=5, times=False).counts
    fit = fit_counts([counts], 10.0, floor_reps=0)
    save_mmpp_model(fit, tmp_path / "m", {"source": "synthetic"})
    back, meta = load_mmpp_model(tmp_path / "m")
    assert meta["kind"] == "mmpp" and fit_cli.peek_kind(tmp_path / "m") == "mmpp"
    np.testing.assert_allclose(back.autocov(20), fit.autocov(20))
    np.testing.assert_array_equal(back.data["counts"], counts)
    bad = (
        (tmp_path / "m" / "model.json")
        .read_text()
        .replace('"format_version": 1', '"format_version": 9')
    )
    (tmp_path / "m" / "model.json").write_text(bad)
    with pytest.raises(SwellError, match="version 9"):
        load_mmpp_model(tmp_path / "m")


# -- the shared logs (RPS targets) ------------------------------------------------------------

# (file, what, interval): NASA with the CLI's defaults; the Apache sample is one
# minute per hour, so only 1 s intervals give counts within its windows
SHARED = [
    ("nasa_19950701.tsv", "sessions", 60.0),
    ("elastic_examples_apache_logs.log", "requests", 1.0),
]


@pytest.fixture(scope="module")
def shared_fits(shared_data):
    out = {}
    for name, what, iv in SHARED:
        s = count_series(read_events(shared_data / "weblogs" / name), iv, what)
        out[name] = fit_counts(s.segments, iv, where=name)
    return out


@pytest.mark.parametrize("name", [s[0] for s in SHARED])
def test_shared_logs_histogram_and_refit(shared_fits, name):
    fit = shared_fits[name]
    assert fit.report["ks"] <= 0.05
    assert fit.mean() == pytest.approx(fit.report["mean_data"], rel=0.02)
    c = refit_check(fit, seed=1)
    assert abs(c["ic_refit_vs_data"] - c["ic_original"]) <= 0.02


@pytest.mark.parametrize("name", [s[0] for s in SHARED])
@pytest.mark.xfail(
    strict=True,
    reason="not met: measured IC 30.5 % (NASA sessions per minute, 189 intervals: the same "
    "procedure on an exactly right MMPP's logs of this length reaches a median 43.5 %, "
    "10-90 % 34.7-47.1 %) and 7.2 % (Apache: variance below the mean, which no MMPP "
    "reaches, costs 3.9 points at lag 0; self-fit median 5.2 %); see docs/packet-mmpp.md",
)
def test_shared_logs_reach_ic_5_percent(shared_fits, name):
    assert shared_fits[name].report["ic"] <= 0.05


@pytest.mark.parametrize("name", [s[0] for s in SHARED])
def test_shared_logs_fit_as_well_as_their_length_allows(shared_fits, name):
    """The data's IC is no worse than the 90th percentile of what the procedure reaches
    on logs of the same length drawn from an exactly right model, plus (in quadrature)
    the lag-0 miss forced when the counts vary less than Poisson (an MMPP cannot)."""
    fit = shared_fits[name]
    r = fit.report
    acov = fit.data["acov_data"]
    forced = max(0.0, r["mean_data"] - r["var_data"]) / float(np.linalg.norm(acov))
    assert r["ic"] <= math.hypot(r["ic_selffit_range"][1], forced)
    assert r["ic_selffit_range"][0] <= r["ic_selffit"] <= r["ic_selffit_range"][1]


def test_nasa_model_reaches_the_rps_mark_at_the_rps_length(shared_fits):
    """IC <= 5 % is a matter of the log's length: the NASA sessions model, fitted again
    by the same procedure from logs as long as the RPS paper's (17,280 intervals),
    reaches it, with the NASA fit's own lags."""
    fit = shared_fits["nasa_19950701.tsv"]
    p10, p50, p90 = ic_selffit(fit, [17_280], reps=5)
    assert p90 <= 0.05
    assert ic_selffit(fit, [189], reps=5)[1] > 0.20  # and at NASA's 189 intervals it cannot


def test_trend_is_reported():
    rng = np.random.default_rng(3)
    ramp = rng.poisson(np.linspace(6.0, 2.0, 2000))
    fit = fit_counts([ramp], 60.0, floor_reps=0)
    assert fit.report["trend_var"] == pytest.approx(4.0 / 3.0, rel=0.15)  # (6-2)^2/12
    assert any("not stationary" in n for n in fit.report["notes"])
    level = rng.poisson(np.repeat(rng.gamma(4.0, 1.0, 40), 10))  # stationary, over-dispersed
    fit = fit_counts([level], 60.0, floor_reps=0)
    assert not any("not stationary" in n for n in fit.report["notes"])


def test_cli_fit_mmpp_and_show(shared_data, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="swell")
    fit_cli.register(parser.add_subparsers(dest="command"))
    out = tmp_path / "nasa"
    args = parser.parse_args(
        [
            "fit",
            "mmpp",
            str(shared_data / "weblogs" / "nasa_19950701.tsv"),
            "-o",
            str(out),
            "--count",
            "requests",
            "--interval-s",
            "30",
        ]
    )
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "IC autocovariance" in text and "KS count histogram" in text
    assert (out / "plots" / "mmpp_autocov.png").is_file()
    assert (out / "plots" / "mmpp_histogram.svg").is_file()
    assert fit_cli.show(out, no_plots=True) == 0
    assert "MMPP of" in capsys.readouterr().out
