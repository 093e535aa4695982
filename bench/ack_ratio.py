"""ACKs per data segment of captures' TCP receivers (``swell.analysis.acks``), no root.

    .venv/bin/python bench/ack_ratio.py CAPTURE [CAPTURE ...] [--by-size] [--json OUT]

A generated run's bottleneck is two files (forward and reverse): pass both,
they are merged by time. Issue 19 compares the trace's receivers with the
Swing generator's (docs/scale.md, "Client -> server bytes").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swell.analysis.acks import measure  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--by-size", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    res = measure(a.captures, a.by_size)
    text = json.dumps(res, indent=1)
    if a.json:
        a.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
