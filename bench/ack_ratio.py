"""ACKs per data segment of captures' TCP receivers (``swell.analysis.acks``), no root.

    .venv/bin/python bench/ack_ratio.py CAPTURE [CAPTURE ...] [--by-size] [--by-port N]
        [--json OUT]

A generated run's bottleneck is two files (forward and reverse): pass both,
they are merged by time. Issue 19 compares the trace's receivers with the
Swing generator's (docs/scale.md, "Client -> server bytes"). ``--by-port N``
adds a table per server port (the N busiest, then the rest): each side's ACKs
per data segment received and the share of its hosts that acknowledge every
segment (docs/fidelity.md, "Who acknowledges every segment").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from swell.analysis.acks import measure  # noqa: E402
from swell.errors import SwellError  # noqa: E402


def by_port_table(rows: list[dict]) -> list[str]:
    """``measure(..., by_port=N)["by_port"]`` as a table: per server port, each side's
    ACKs per data segment received and its hosts that ACK every segment."""
    out = [f"{'port':>6} {'client acks/seg':>16} {'clients every':>14} "
           f"{'server acks/seg':>16} {'servers every':>14}"]
    for r in rows:
        s2c, c2s = r["s2c"], r["c2s"]  # a client receives s2c data, a server c2s
        if not (s2c["data_segments"] or c2s["data_segments"]):
            continue
        every = [f"{x['receivers_every_segment']:.2f} of {x['receivers_judged']}"
                 if x["receivers_judged"] else "-" for x in (s2c, c2s)]
        out.append(f"{r['port']:>6} {s2c['acks_per_data_segment']:>16.3f} {every[0]:>14} "
                   f"{c2s['acks_per_data_segment']:>16.3f} {every[1]:>14}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+")
    ap.add_argument("--by-size", action="store_true")
    ap.add_argument("--by-port", type=int, default=0, metavar="N")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    try:
        res = measure(a.captures, a.by_size, a.by_port)
    except SwellError as exc:
        print(f"ack_ratio: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(res, indent=1)
    if a.json:
        a.json.write_text(text + "\n")
    if not a.by_port:
        print(text)
        return 0
    print(f"{', '.join(a.captures)}: ACKs per data segment received, and the share of "
          "receiving hosts (10+ segments) that ACK 0.75 or more of them")
    print("\n".join(by_port_table(res["by_port"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
