"""Model variants (DESIGN 2.1) as transformations: each changes exactly what it says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import variants
from swell.extract.model import SwingModel, load_model, save_model
from swell.extract.pipeline import extract_model
from tests.conftest import DATA


@pytest.fixture(scope="module")
def model() -> SwingModel:
    return extract_model(DATA / "pcap" / "example.pcap")


def _same_except(a: SwingModel, b: SwingModel, changed: set[str]) -> None:
    for k, v in a.arrays.items():
        if k.split("/")[-1] in changed:
            continue
        assert np.array_equal(v, b.arrays[k]), k


def test_scale_sessions(model: SwingModel) -> None:
    v = variants.scale_sessions(model, 3.3)
    assert v.session_rate() == pytest.approx(3.3 * model.session_rate())
    assert v.mean_rate_bps() == pytest.approx(3.3 * model.mean_rate_bps())
    app = "http-tcp"
    assert np.allclose(v.samples(app, "interSession") * 3.3, model.samples(app, "interSession"))
    _same_except(model, v, {"interSession"})
    assert model.meta["variants"] == []  # input untouched


def test_scale_to_rate(model: SwingModel) -> None:
    v = variants.scale_to_rate(model, 20e6)
    assert v.mean_rate_bps() == pytest.approx(20e6)
    with pytest.raises(SwellError):
        variants.scale_to_rate(model, -1)


def test_rsp(model: SwingModel) -> None:
    v = variants.scale_responses(model, 2)
    for app in model.apps:
        assert np.array_equal(v.samples(app, "rspSize"), 2 * model.samples(app, "rspSize"))
        assert np.array_equal(v.samples(app, "reqSize"), model.samples(app, "reqSize"))
        if model.has_sessions(app):  # the whole sessions' responses scale with them
            assert np.array_equal(v.samples(app, "pairRsp"), 2 * model.samples(app, "pairRsp"))
    _same_except(model, v, {"rspSize", "pairRsp"})


def test_req(model: SwingModel) -> None:
    v = variants.scale_requests(model, 10)
    for app in model.apps:
        assert np.array_equal(v.samples(app, "reqSize"), 10 * model.samples(app, "reqSize"))
        assert np.array_equal(v.samples(app, "rspSize"), model.samples(app, "rspSize"))
        assert v.meta["apps"][app]["bytes_c2s"] == 10 * model.meta["apps"][app]["bytes_c2s"]
        if model.has_sessions(app):  # the whole sessions' requests scale with them
            assert np.array_equal(v.samples(app, "pairReq"), 10 * model.samples(app, "pairReq"))
    _same_except(model, v, {"reqSize", "pairReq"})
    both = variants.apply(model, target_mbps=10, req=10)
    assert both.meta["variants"][-1]["name"] == "scale_requests"


def test_hb_zero_think_cap(model: SwingModel, tmp_path: Path) -> None:
    v = variants.constant_rtt(model, 0.004)
    for side in ("client", "server"):
        assert np.allclose(v.net(side, "delay_s"), 0.001)
    # a client link plus a server link, both ways: 4 ms
    assert 2 * (v.net("client", "delay_s")[0] + v.net("server", "delay_s")[0]) == pytest.approx(
        0.004
    )
    z = variants.zero_think(v)
    for app in model.apps:
        assert not z.samples(app, "interRRE").any() and not z.samples(app, "reqThink").any()
        if model.has_sessions(app):
            assert not z.samples(app, "sessGaps").any() and not z.samples(app, "pairThink").any()
        assert len(z.samples(app, "reqThink")) == len(model.samples(app, "reqThink"))
    c = variants.cap_capacity(z, 2e6)
    for side in ("client", "server"):
        assert c.net(side, "capacity_bps").max() <= 2e6
        low = model.net(side, "capacity_bps") < 2e6
        assert np.array_equal(
            c.net(side, "capacity_bps")[low], model.net(side, "capacity_bps")[low]
        )
    save_model(c, tmp_path / "v")
    back = load_model(tmp_path / "v")
    assert [x["name"] for x in back.meta["variants"]] == [
        "constant_rtt",
        "zero_think",
        "cap_capacity",
    ]
