"""The one model-directory writer/reader every model kind uses (swell.extract.modeldir)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.mmpp import MMPPModel, Scale, load_mmpp_model, save_mmpp_model
from swell.extract.packetfit import load_packet_model


def _mmpp(tmp: Path) -> Path:
    m = MMPPModel(60.0, [Scale(0.9, 4.0, 0.5, 4.0)], np.array([3.0]), np.array([1.0]))
    return save_mmpp_model(m, tmp / "mm", {"source": "test"})


def test_round_trip_and_kind(tmp_path: Path) -> None:
    d = modeldir.save(tmp_path / "m", {"format": "f", "format_version": 2, "kind": "k",
                                       "x": np.float64(1.5)}, {"a": np.arange(3)})
    meta, arrays = modeldir.load(d, "f", 2, "k")
    assert meta["x"] == 1.5 and arrays["a"].tolist() == [0, 1, 2]
    assert modeldir.peek_kind(d) == "k" and modeldir.peek_kind(tmp_path) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # no temporary left


def test_other_kind_is_named_in_one_line(tmp_path: Path) -> None:
    d = _mmpp(tmp_path)
    assert load_mmpp_model(d)[0].n_states == 2
    with pytest.raises(SwellError, match="a mmpp model .*not a packet model") as e:
        load_packet_model(d)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("damage", ["version", "json", "arrays", "missing"])
def test_damaged_directory_is_one_error(tmp_path: Path, damage: str) -> None:
    d = _mmpp(tmp_path)
    mj = d / "model.json"
    if damage == "version":
        meta = json.loads(mj.read_text())
        mj.write_text(json.dumps({**meta, "format_version": 99}))
        want = "format version 99 is not supported"
    elif damage == "json":
        mj.write_text("{not json")
        want = "unreadable JSON"
    elif damage == "arrays":
        (d / "arrays.npz").write_bytes(b"PK\x03\x04garbage")
        want = "unreadable arrays"
    else:
        (d / "arrays.npz").unlink()
        want = "not a swell model directory"
    with pytest.raises(SwellError, match=want) as e:
        load_mmpp_model(d)
    assert "\n" not in str(e.value)


def test_failed_write_keeps_the_old_directory(tmp_path: Path) -> None:
    d = _mmpp(tmp_path)
    before = (d / "model.json").read_text()
    with pytest.raises(TypeError):  # an object JSON cannot take, default refusing it
        modeldir.save(d, {"bad": object()}, {}, default=lambda o: (_ for _ in ()).throw(
            TypeError("no")))
    assert (d / "model.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mm"]
