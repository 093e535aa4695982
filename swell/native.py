"""Where the native (Rust) artefacts are.

The Cargo workspace at the repository root builds into ``target/release``
(``scripts/bootstrap.sh`` runs ``cargo build --release``). ``SWELL_NATIVE_DIR``
overrides the location. A missing artefact is an :class:`EnvironmentProblem`
that says how to build it.
"""

from __future__ import annotations

import os
from pathlib import Path

from swell.errors import EnvironmentProblem

REPO_ROOT = Path(__file__).resolve().parent.parent


def native_dir() -> Path:
    env = os.environ.get("SWELL_NATIVE_DIR")
    return Path(env) if env else REPO_ROOT / "target" / "release"


def native_artifact(name: str) -> Path:
    """Path of a built native file (``libswell_pcap.so``, ``swell-link``)."""
    path = native_dir() / name
    if not path.exists():
        raise EnvironmentProblem(
            path, "native component not built; run scripts/bootstrap.sh (cargo build --release)"
        )
    return path
