"""Plots are written as PNG and SVG and survive awkward inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swell.analysis import plots
from swell.analysis.compare import compare_energy, halves_floor
from swell.analysis.energy import energy_plot


def test_labels() -> None:
    assert plots.human_seconds(0.004) == "4 ms"
    assert plots.human_seconds(2.048) == "2.05 s"
    assert plots.human_seconds(0.0002) == "200 us"
    assert plots.human_rate(6.6e6) == "6.6 Mbit/s"
    assert plots.direction_label("s2c") == "s2c, server to client"
    assert plots.direction_label("x") == "x"


def test_every_plot_writes_png_and_svg(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x = rng.poisson(20, 2**13).astype(float)
    a = energy_plot(x, 0.001)
    b = energy_plot(2 * x, 0.001)
    zero = energy_plot(np.zeros(2**10), 0.001)  # all -inf: skipped, not an error
    floor = halves_floor(x, 0.001)
    figs = {
        "energy": plots.plot_energy([("a", a), ("b", b), ("zero", zero)], floor=(a, floor)),
        "diff": plots.plot_energy_difference(compare_energy(a, b).with_floor(floor)),
        "diff_nofloor": plots.plot_energy_difference(compare_energy(a, b)),
        "series": plots.plot_time_series([("a", np.arange(10.0), rng.random(10) * 1e6)]),
        "cdf": plots.plot_cdfs([("a", rng.random(50)), ("empty", np.array([]))], logx=True),
        "bars": plots.plot_slowdown_bars([("P", {"p50": (1.5, 0.1)}), ("S", {"p5": (0.8, 0.05)})]),
    }
    for name, fig in figs.items():
        written = plots.save(fig, tmp_path / name)
        assert [p.suffix for p in written] == [".png", ".svg"]
        assert all(p.stat().st_size > 5_000 for p in written)
        assert written[0].read_bytes()[:4] == b"\x89PNG"
        assert b"<svg" in written[1].read_bytes()[:2000]
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind
