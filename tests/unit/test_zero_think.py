"""Zero think time is the paper's Traffic1 and nothing else (seed 004, section 5.2).

"We set Swing's user think time distribution to 0 for all requests; meaning ...
requests for subsequent objects will be initiated immediately after the
previous request completes." In Swing's model the think times are the user's
(``interRRE``: from an RRE's end to the next RRE of the session) and the
request think time inside a connection (``reqThink``: from a response's end to
the next request). The schedule drawn from the zero-think variant must be the
base model's schedule, same seed, with exactly those set to 0: the same
sessions at the same times, the same connections at the same offsets in their
RREs (``interConn`` is not a think time) with the same sizes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from swell.extract.model import save_model
from swell.extract.pipeline import extract_model
from swell.generators.models import VariantSpec, apply_variant
from swell.generators.schedule import Schedule, load_app_samples
from swell.generators.swing import swing_schedule
from tests.conftest import DATA


def _draw(model: Path, seed: int) -> Schedule:
    apps, scale = load_app_samples(model)
    return swing_schedule(apps, [f"10.1.0.{i}" for i in range(1, 41)],
                          [f"10.2.0.{i}" for i in range(1, 11)], 60.0, seed, scale, 3.3,
                          arrivals="stationary", start="empty")  # the same draw: sessions
    # carried in from before the run would be cut by their own (zero or not) think times


def test_zero_think_zeroes_exactly_the_think_times(tmp_path: Path) -> None:
    base_dir = save_model(extract_model(DATA / "pcap" / "example.pcap"), tmp_path / "m")
    base = apply_variant(base_dir, VariantSpec(target_mbps=3.3), tmp_path)
    zero = apply_variant(base_dir, VariantSpec(target_mbps=3.3, zero_think=True), tmp_path)
    for seed in (1, 2):
        b, z = _draw(base, seed), _draw(zero, seed)
        assert len(b.sessions) == len(z.sessions) > 10
        thinks = 0
        for sb, sz in zip(b.sessions, z.sessions, strict=True):
            assert (sb.t, sb.client) == (sz.t, sz.client)
            assert len(sb.rres) == len(sz.rres)
            for rb, rz in zip(sb.rres, sz.rres, strict=True):
                assert rz.gap == 0.0
                thinks += rb.gap > 0
                assert len(rb.conns) == len(rz.conns)
                for cb, cz in zip(rb.conns, rz.conns, strict=True):
                    assert all(k == 0.0 for _, _, k in cz.pairs)
                    thinks += sum(k > 0 for _, _, k in cb.pairs)
                    zeroed = tuple((q, a, 0.0) for q, a, _ in cb.pairs)
                    assert replace(cb, pairs=zeroed) == cz
        assert thinks > 0  # the base schedule had think times to remove
