"""The link engine's transmit lateness, folded and judged per run (no root)."""

from __future__ import annotations

from swell.experiments.emulation import lateness, lateness_warning


def _stats(*ports: dict[str, int]) -> dict:
    return {"ports": {f"p{i}": {"tx_frames": sum(b.values()), "tx_late_us": b}
                      for i, b in enumerate(ports)}}


def test_ports_are_summed_and_shares_counted_from_each_buckets_lower_bound() -> None:
    late = lateness(_stats({"<10": 900, "20-50": 40, "50-100": 5},
                           {"<10": 40, "200-500": 10, "1000-10000": 4, ">=10000": 1}))
    assert late is not None and late["frames"] == 1000
    assert late["share_over_50us"] == (5 + 10 + 4 + 1) / 1000
    assert late["share_over_1ms"] == 5 / 1000
    assert list(late["buckets_us"]) == ["<10", "20-50", "50-100", "200-500", "1000-10000",
                                        ">=10000"]


def test_a_run_warns_only_above_one_percent_late_by_50_us() -> None:
    on_time = lateness(_stats({"<10": 990, "50-100": 10}))  # exactly 1%: no warning
    assert lateness_warning(on_time) is None
    held = lateness(_stats({"<10": 980, "50-100": 5, "1000-10000": 15}))
    msg = lateness_warning(held)
    assert msg is not None and msg.startswith("the link engine sent 2.0% of 1,000 frames 50 us")
    assert "1.5% 1 ms or more" in msg


def test_engines_without_the_counter_give_none() -> None:
    assert lateness(None) is None
    assert lateness({"ports": {"p0": {"tx_frames": 3}}}) is None  # an older swell-link
    assert lateness_warning(None) is None
    assert lateness_warning(lateness(_stats({}))) is None
