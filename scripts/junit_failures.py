"""Print every failed or erroring test of some JUnit XML files, one short block each.

The last lines of the test command's output: a CI log may keep only its head and
tail, and the failures' messages sit in the middle of pytest's output. For each
failure: the test's id, its message's first line and the last lines of the
assertion or traceback (what pytest prints after ``E``), cut to a few hundred
characters. Files that do not exist are skipped (a layer that did not run).
A ``.txt`` argument is a re-run log (tests/integration/conftest.py): the tests
that failed once and were run again, with their first failure, printed as is.

    python scripts/junit_failures.py out/pytest-junit.xml out/vmtest/junit.xml \
        out/pytest-reruns.txt
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TAIL_LINES = 6
CUT = 600


def failures(path: Path) -> list[str]:
    """One block per failed or erroring test case in ``path``."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        return [f"{path}: unreadable ({exc})"] if path.exists() else []
    out = []
    for case in root.iter("testcase"):
        for bad in [*case.findall("failure"), *case.findall("error")]:
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            message = (bad.get("message") or "").splitlines()[:1]
            text = [ln for ln in (bad.text or "").splitlines() if ln.startswith("E ")]
            lines = message + text[-TAIL_LINES:]
            body = "\n    ".join(ln[:CUT] for ln in lines)
            out.append(f"{bad.tag.upper()} {name}\n    {body}")
    return out


def main(argv: list[str]) -> int:
    logs = [Path(a) for a in argv if a.endswith(".txt") and Path(a).exists()]
    reruns = [ln for p in logs for ln in p.read_text().splitlines() if ln.strip()]
    if reruns:
        print(f"== re-run once after a failure ({len(reruns)}), the first failure in short")
        print("\n".join(reruns))
    blocks = [b for a in argv if not a.endswith(".txt") for b in failures(Path(a))]
    if blocks:
        print(f"== failures and errors ({len(blocks)}), in short")
        print("\n".join(blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
