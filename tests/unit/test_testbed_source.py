"""``swell testbed native-source``: the native programs' source with vendored crates.

The bundle must be all a machine needs to build offline: the workspace's manifest and
lock file, its four member crates without build folders, every locked dependency under
``vendor/`` and a ``.cargo/config.toml`` that points cargo there. Checked by unpacking
it and asking cargo to resolve the whole workspace with ``--offline --locked`` and an
empty CARGO_HOME (no registry cache to fall back on).
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.topologies.testbed_source import find_cargo, workspace_members, write_source_bundle

REPO = Path(__file__).resolve().parents[2]
CARGO = find_cargo()
pytestmark = pytest.mark.skipif(CARGO is None, reason="no cargo on this machine")


def test_the_bundle_builds_offline_from_itself(tmp_path):
    out = tmp_path / "render" / "native-src.tar.gz"
    try:
        write_source_bundle(REPO, out)
    except SwellError as exc:
        if "download" in str(exc) or "network" in str(exc):
            pytest.skip(f"cargo vendor cannot reach crates.io here: {exc}")
        raise
    assert out.stat().st_mode & 0o777 == 0o644
    assert not list(out.parent.glob(".swell-src-*"))  # the temporary folder is gone
    with tarfile.open(out) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "src")  # our own archive (3.11.2 has no filter=)
    members = workspace_members(REPO)
    assert len(members) == 4
    for m in members:
        assert f"{m}/Cargo.toml" in names and any(n.startswith(f"{m}/src/") for n in names)
    assert not [n for n in names if "/target/" in f"/{n}/" and not n.startswith("vendor/")]
    assert {"Cargo.toml", "Cargo.lock", ".cargo/config.toml"} <= set(names)
    assert any(n.startswith("vendor/serde-") for n in names)
    env = {**os.environ, "CARGO_HOME": str(tmp_path / "cargo-home")}
    res = subprocess.run([CARGO, "metadata", "--offline", "--locked", "--format-version", "1"],
                         cwd=tmp_path / "src", env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert '"name":"swell-gen"' in res.stdout


def test_not_a_workspace_is_one_line(tmp_path):
    (tmp_path / "Cargo.toml").write_text("[package]\nname = 'x'\n")
    with pytest.raises(SwellError, match="not swell's cargo workspace"):
        write_source_bundle(tmp_path, tmp_path / "out.tar.gz")
    assert not (tmp_path / "out.tar.gz").exists()
