"""Packet-level kind: options, departure plans from presets and fits, per-flow statistics."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from swell.errors import SwellError
from swell.extract.ditg_presets import preset
from swell.extract.packetfit import Dist
from swell.generators.packets import (
    FLOW_SHIFT,
    FlowClass,
    PacketsKind,
    PacketsSpec,
    draw_plan,
    flow_stats,
)


def test_spec_needs_exactly_one_source() -> None:
    with pytest.raises(ValidationError):
        PacketsSpec(kind="packets")
    with pytest.raises(ValidationError):
        PacketsSpec(kind="packets", preset="DNS", model="m")
    with pytest.raises(ValidationError):
        PacketsSpec(kind="packets", preset="VoIP:G.999")
    with pytest.raises(ValidationError):
        PacketsSpec(kind="packets", preset="DNS", colour="red")  # type: ignore[call-arg]


def test_preset_transport_is_checked() -> None:
    kind = PacketsKind(PacketsSpec(kind="packets", preset="VoIP:G.711.1:RTP", proto="tcp"))
    with pytest.raises(SwellError, match="udp"):
        kind.flow_classes()


@pytest.mark.parametrize("name", ["VoIP:G.711.1:RTP", "VoIP:G.729.3:CRTP:VAD",
                                  "VoIP:G.723.1:RTP:VAD"])
def test_voip_plan_has_ditgs_rate_and_size(name: str) -> None:
    p = preset(name)
    fc = FlowClass(p.name, "udp", "s2c", p.idt, p.size)
    plan, fixes = draw_plan([(0, fc), (1, fc)], 10.0, seed=4, proto="udp")
    assert not any(fixes.values())
    for fid in (0, 1):
        mine = plan[plan["flow"] == fid]
        assert set(mine["size"].tolist()) == {p.size_bytes}
        gaps = np.diff(mine["t_ns"].astype(np.int64))
        assert np.abs(gaps - 1e9 / p.rate_pps).max() <= 1  # ns rounding only
    assert np.all(np.diff(plan["t_ns"].astype(np.int64)) >= 0)
    assert plan.dtype.itemsize == 16


def test_fitted_families_are_drawn_faithfully() -> None:
    idt = Dist("weibull", {"shape": 0.7, "scale": 0.004})
    size = Dist("uniform", {"low": 100.0, "high": 400.0})
    plan, _ = draw_plan([(0, FlowClass("x", "udp", "s2c", idt, size))], 60.0, seed=9,
                        proto="udp")
    gaps = np.diff(plan["t_ns"].astype(np.float64)) / 1e9
    assert stats.kstest(gaps, idt.frozen().cdf).statistic < 0.02
    # sizes are int(X): X = size + U[0, 1) is uniform again
    assert stats.kstest(plan["size"] + np.random.default_rng(1).uniform(size=plan.size),
                        size.frozen().cdf).statistic < 0.02


def test_sizes_below_the_stamp_are_raised_and_counted() -> None:
    fc = FlowClass("x", "tcp", "s2c", Dist("constant", {"value": 0.01}),
                   Dist("constant", {"value": 5.0}))
    plan, fixes = draw_plan([(0, fc)], 1.0, seed=1, proto="tcp")
    assert set(plan["size"].tolist()) == {20}
    assert fixes["size_raised"] == plan.size


def test_flow_stats_the_ditgdec_set() -> None:
    n = 100
    tx = np.arange(n) * 0.01
    delay = 0.005 + np.where(np.arange(n) % 2, 0.001, 0.0)
    keep = np.arange(n) != 50  # one lost
    log = {"flow": np.full(keep.sum(), 3), "seq": np.arange(n)[keep], "tx_s": tx[keep],
           "rx_s": (tx + delay)[keep], "size": np.full(keep.sum(), 100)}
    (row,) = flow_stats(log, {3: n})
    assert row["lost"] == 1 and row["received"] == n - 1
    assert row["pps"] == pytest.approx(100 * (n - 2) / (n - 1), rel=1e-9)
    assert row["delay_ms"] == pytest.approx(5.5, abs=0.01)
    assert row["jitter_ms"] == pytest.approx(1.0, abs=0.05)
    assert row["idt_std_us"] == pytest.approx(0.0, abs=1e-3)
    assert row["delay_kind"] == "one-way"


def test_flow_id_is_in_the_top_bits() -> None:
    assert (5 << FLOW_SHIFT) >> FLOW_SHIFT == 5
    assert FLOW_SHIFT + 15 <= 64


def test_ditg_script_lines(tmp_path) -> None:
    from swell.generators.packets import Leg, PacketsConfig, PacketsGenerator

    logn = FlowClass("x", "udp", "s2c", Dist("lognormal", {"mu": -5.0, "sigma": 0.5}),
                     Dist("normal", {"mean": 300.0, "std": 20.0}))
    voip = preset("VoIP:G.729.3:CRTP:VAD")
    vc = FlowClass(voip.name, "udp", "s2c", voip.idt, voip.size, voip.ditg_args)
    gen = PacketsGenerator(PacketsConfig(legs=[], out_dir=tmp_path, duration_s=2.0,
                                         engine="ditg"))
    leg = Leg("s2c", "udp", [(0, logn), (1, vc)])
    plan, _ = draw_plan(leg.flows, 2.0, seed=1, proto="udp")
    line = gen._ditg_line(leg, 0, logn, "10.0.0.1", "10.0.0.2", plan, 9010)
    assert line[:4] == ["-a", "10.0.0.1", "-Sdp", "9010"] and "-poll" in line
    assert "-Ft" in line and line[-3:] == ["-n", "300", "20"]  # D-ITG has no lognormal
    ms = np.loadtxt(line[line.index("-Ft") + 1])  # the very draws, in ms
    assert ms.size == (plan["flow"] == 0).sum()
    line = gen._ditg_line(leg, 1, vc, "10.0.0.1", None, plan, 9010)
    assert line[-6:] == ["VoIP", "-x", "G.729.3", "-h", "CRTP", "-VAD"]


def test_report_table_from_stored_results() -> None:
    from swell.generators.packets import report_table

    flow = {"flow": 0, "sent": 100, "received": 99, "lost": 1, "throughput_bps": 8000.0,
            "pps": 99.0, "asked_pps": 100.0, "idt_std_us": 3.0, "delay_ms": 1.0,
            "jitter_ms": 0.1}
    runs = [{"generator": {"name": "packets", "summary": {"engine": "swell",
                                                          "flows": [flow, flow]}}}]
    html = report_table({"VoIP x2": runs})
    assert "VoIP x2" in html and "<td>200</td>" in html and "<td>1.000</td>" in html
    assert report_table({"empty": [{"generator": None}]}) == ""
