"""Test layers and shared fixtures.

Layers (markers applied by folder): ``tests/unit`` needs no root;
``tests/integration`` needs root and network namespaces and is skipped with a
visible reason when not root. Tests that need ``sch_netem`` carry the
``netem`` marker and are skipped with a reason on kernels without it; on such
a host ``./test.sh`` runs them in a QEMU guest with a stock kernel instead
(``scripts/vmtest.sh``, the VM layer), and the skip reason says so.

Shared data: ``SHARED_DATA`` is ``../shared/data`` beside the checkout (the
real captures); ``DATA`` is the project's own ``data/`` folder (the
permissively licensed captures copied in).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "data"
SHARED_DATA = Path(os.environ.get("SWELL_SHARED_DATA", REPO.parent / "shared" / "data"))


NO_NETEM = (
    "kernel has no sch_netem (the tc probe failed); ./test.sh runs the netem tests in a "
    "QEMU guest with a stock kernel (scripts/vmtest.sh) when this host can boot one"
)


def _has_netem() -> bool:
    try:
        from swell.topologies.probe import kernel_has_qdisc

        return kernel_has_qdisc("netem")
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    is_root = os.geteuid() == 0
    netem = None
    for item in items:
        path = Path(str(item.fspath))
        if "integration" in path.parts:
            item.add_marker(pytest.mark.integration)
            if not is_root:
                item.add_marker(pytest.mark.skip(reason="integration test needs root"))
        elif "unit" in path.parts:
            item.add_marker(pytest.mark.unit)
        if item.get_closest_marker("netem"):
            if netem is None:
                netem = _has_netem()
            if not netem:
                item.add_marker(pytest.mark.skip(reason=NO_NETEM))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared captures not found at {SHARED_DATA}")
    return SHARED_DATA


def have_tool(name: str) -> bool:
    return subprocess.run(["which", name], capture_output=True).returncode == 0
