"""docs/video.md's Figure 10 and 11 tables are the stored runs' results.

``bench/video_doc_tables.py`` prints the tables (and the line naming their
results file, git revision and run times) from
``docs/paper/fig10_video/results.json`` and
``docs/paper/fig11_video_buffering/results.json``; every line it prints must
be on the page, so a number edited by hand, or a re-run stored without the
page regenerated, fails here. The check is also shown to fail on an edited
copy of the page.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "video.md"
SCRIPT = REPO / "bench" / "video_doc_tables.py"


def _generated() -> list[str]:
    res = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert res.returncode == 0, f"{SCRIPT}: {res.stderr.strip()}"
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith(("|", "From `"))]
    assert sum(ln.startswith("| ") and "---" not in ln for ln in lines) == 2 + 12 + 8, lines
    return lines


def _missing(page: str, lines: list[str]) -> list[str]:
    have = set(page.splitlines())
    return [ln for ln in lines if ln not in have]


def test_page_holds_the_generated_tables() -> None:
    missing = _missing(PAGE.read_text(), _generated())
    assert not missing, f"{PAGE}: not as bench/video_doc_tables.py prints it:\n" + "\n".join(
        missing)


def test_an_edited_number_is_caught() -> None:
    lines = _generated()
    page = PAGE.read_text()
    row = next(ln for ln in lines if ln.startswith("| 3.5 |"))
    assert row.endswith(" |") and row in page
    assert _missing(page.replace(row, row[:-2] + "0 |"), lines) == [row]
