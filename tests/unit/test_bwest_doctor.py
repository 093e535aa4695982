"""``swell doctor`` lists the real bandwidth estimators (pathload, pathChirp).

They are not packaged, so doctor is where a user learns whether the
``pathload``/``pathchirp`` foreground kinds can run: each of the four programs
is looked up on PATH, shown with its path when found and as missing, with
where to read how to build it, when not.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swell.topologies import doctor

PROGRAMS = ("pathload_snd", "pathload_rcv", "pathchirp_snd", "pathchirp_rcv")


def _render(tools: dict[str, str | None]) -> str:
    return doctor.render({
        "kernel": "6.1", "root": False, "qdiscs": {}, "tun": True, "af_packet": None,
        "veth_offload_defaults": None, "tools": tools, "mininet_module": False,
        "native_engine": {"usable": True, "why_not": None}, "auto_engine": "native"})


def test_doctor_finds_the_estimators_on_path_or_says_they_are_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    found = doctor.tools_found()
    assert all(found[p] is None for p in PROGRAMS), found
    text = _render(found)
    for prog in PROGRAMS:
        line = next(x for x in text.splitlines() if x.split()[:1] == [prog])
        assert "MISSING (not packaged" in line and "docs/bwest.md" in line, line
    for prog in PROGRAMS:  # doctor only looks the programs up: any executable will do
        (tmp_path / prog).symlink_to("/bin/true")
    (tmp_path / "pathchirp_rcv").unlink()
    found = doctor.tools_found()
    assert [found[p] for p in PROGRAMS] == [
        str(tmp_path / p) for p in PROGRAMS[:3]] + [None]
    text = _render(found)
    assert f"pathload_snd       {tmp_path / 'pathload_snd'}" in text
    assert "pathchirp_rcv      MISSING (not packaged" in text
    assert os.access(found["pathload_rcv"], os.X_OK)
