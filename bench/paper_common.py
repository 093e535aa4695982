"""What the paper's table scripts share (``paper_table.py``, ``paper_fig02_03.py``,
``paper_video.py``, ``paper_fig08.py``).

Each reads one study's ``results.json`` and turns it into rows with its own
``rows_of``; the command line (a study directory or its ``results.json``, and
``--json OUT`` to store the rows) and a run's download response times are the
same for all of them and live here. The scripts import it as a sibling module
(``bench/`` is the script's own folder on ``sys.path``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.experiments.results import load_results  # noqa: E402

Rows = list[dict[str, Any]]


def response_times(run: dict[str, Any]) -> np.ndarray:
    """The foreground's download response times of one run (s; empty without any)."""
    return np.asarray((run.get("foreground") or {}).get("response_times_s") or [], float)


def study_rows(doc: str, rows_of: Callable[[dict[str, Any]], Rows],
               argv: list[str] | None = None) -> Rows:
    """Parse ``STUDY [--json OUT]``, read the study's results, make its rows and store
    them with ``--json``."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("study", help="study directory or its results.json")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    rows = rows_of(load_results(args.study))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return rows
