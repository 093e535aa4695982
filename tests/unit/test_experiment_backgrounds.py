"""Swing schedules calibrated to a target load, from a model of a real capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from swell.extract.model import save_model
from swell.extract.pipeline import extract_model
from swell.generators.models import VariantSpec, apply_variant
from swell.generators.schedule import load_app_samples
from swell.generators.swing import calibrated_schedule, offered_mbps

DATA = Path(__file__).resolve().parents[2] / "data" / "pcap"


@pytest.fixture(scope="module")
def model33(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("models")
    base = save_model(extract_model(DATA / "example.pcap", label="test"), tmp / "base")
    return apply_variant(base, VariantSpec(target_mbps=3.3), tmp)


def test_calibrated_schedule_meets_the_target_and_repeats(model33: Path):
    apps, scale = load_app_samples(model33)
    clients, servers = [f"10.0.0.{i}" for i in range(1, 9)], ["10.0.1.1", "10.0.1.2"]
    seeds = set()
    for seed in (1, 2, 3):
        a = calibrated_schedule(apps, clients, servers, 40.0, seed, scale, 3.3)
        b = calibrated_schedule(apps, clients, servers, 40.0, seed, scale, 3.3)
        assert abs(offered_mbps(a) / 3.3 - 1) <= 0.10
        assert a.meta["calibration_base_seed"] == seed
        assert [s.rres for s in a.sessions] == [s.rres for s in b.sessions]  # repeatable
        seeds.add(a.meta["calibration_seed"])
    assert len(seeds) == 3  # repetitions draw different schedules


def test_without_target_the_first_draw_is_used(model33: Path):
    apps, scale = load_app_samples(model33)
    s = calibrated_schedule(apps, ["10.0.0.1"], ["10.0.1.1"], 20.0, 5, scale, None)
    assert s.seed == 5 and "calibration_seed" not in s.meta


def test_variant_cache_reuses_the_same_directory(model33: Path, tmp_path: Path):
    again = apply_variant(model33.parent / "base", VariantSpec(target_mbps=3.3), model33.parent)
    assert again == model33
