"""The Mawi and Mawi2 stand-ins of the paper's figure files, for the tests that need them.

``experiments/paper/make_traces.sh`` builds the composites into
out/paper/traces/ from the shared captures (``SHARED_DATA``, default
../shared/data beside the checkout). :func:`composites` builds them when they
are missing or older than the script, and answers False when the shared
captures are absent (the script exits 2 naming the missing file), so a test
can skip saying so; any other failure of the script fails the test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "experiments" / "paper"
TRACES = ROOT / "out" / "paper" / "traces"
SHARED = Path(os.environ.get("SHARED_DATA", ROOT.parent / "shared" / "data"))
SCRIPT = PAPER / "make_traces.sh"
NAMES = ("mawi.pcap", "mawi2.pcap")


def needs_composites(figure_file: Path) -> bool:
    """Whether a figure file names a composite."""
    return "out/paper/traces" in figure_file.read_text()


def _current() -> bool:
    built = [TRACES / n for n in NAMES]
    return all(p.is_file() and p.stat().st_mtime >= SCRIPT.stat().st_mtime for p in built)


def composites() -> bool:
    """The composite traces, built when missing or older than make_traces.sh; False when
    the shared captures they come from are absent."""
    if _current():
        return True
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True,
                          env={**os.environ, "SWELL": str(ROOT / ".venv" / "bin" / "swell"),
                               "SHARED_DATA": str(SHARED)})
    if proc.returncode == 2 and "missing" in proc.stderr:
        return False
    assert proc.returncode == 0, f"{SCRIPT.name} failed: {proc.stderr[-1000:]}"
    return True
