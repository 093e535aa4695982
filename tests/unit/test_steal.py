"""swell.steal reads the hypervisor's steal time from /proc/stat's cpu line."""

from __future__ import annotations

import os
from pathlib import Path

from swell.steal import steal_ns


def test_steal_reads_the_eighth_value(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  2721942 45984 2000370 8644280 21734 0 145528 2110 0 0\n"
                    "cpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert steal_ns(str(stat)) == 2110 * 1e9 / os.sysconf("SC_CLK_TCK")


def test_steal_without_the_field_or_file_is_zero(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  1 2 3 4\n")
    assert steal_ns(str(stat)) == 0.0
    assert steal_ns(str(tmp_path / "missing")) == 0.0


def test_steal_on_this_machine_never_falls() -> None:
    a = steal_ns()
    b = steal_ns()
    assert a >= 0 and b >= a
