"""Which responses were replies: pairs whose response began before its request could
have reached the server (no root).

    .venv/bin/python bench/pair_gating.py TRACE [TRACE ...] [--json OUT] [--cut F]

Issue 19 (docs/fidelity.md, "Responses that were not replies"): Swing's model, and
swell-gen, make every response wait for its request: a client writes request i, the
server reads it and only then writes response i, and the client's next request waits
for the response's end. A connection's pairs come from its runs of data in one
direction (``extract.sessions.pairs_from_runs``), so a connection whose two sides
stream at once (a tunnel, a TLS connection pushing data) is cut into pairs too, and
replaying them one after the other adds a round trip per pair and serializes what
overlapped.

For each TCP pair with a request, a response and a measured round trip from the
monitor to the server (SYN to SYN/ACK, ``server_leg``), the gap from the request's
last packet to the response's first, minus that round trip, over the round trip:
about 0 or more for a reply (the server's own time is the rest); below ``-cut``
(default 0.5) the response's first packet left the server before the request's
last could have arrived: it was not a reply to this request. Per class (port 80,
other TCP) the table gives the pairs, the share that were not replies and their
share of the request and response bytes, and the percentiles of the gap over the
round trip. A trace's table against a generated capture's (``capture/clients-*.pcap``
of a run) shows what the replay lost. The trace is read as ``swell extract`` reads
it (``extract.pipeline.read_connections``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from swell.extract.pipeline import read_connections  # noqa: E402
from swell.extract.sessions import reply_gaps  # noqa: E402

TCP = 6


def gating(trace: Path, cut: float) -> dict[str, Any]:
    """Per class: pairs, not-replies and their byte shares, gap/RTT percentiles."""
    got = read_connections(trace)
    table = got[0] if isinstance(got, tuple) else got
    p, c = table.pairs, table.cols
    sport, proto = c["sport"][p["conn"]], c["proto"][p["conn"]]
    gap, leg = reply_gaps(p, c["server_leg"])  # what the extractor's not_replies judges
    ok = (proto == TCP) & np.isfinite(gap) & (leg > 0)
    out: dict[str, Any] = {"trace": str(trace), "cut": cut, "classes": {}}
    for name, m in (("tcp", ok), ("port 80", ok & (sport == 80)),
                    ("other tcp", ok & (sport != 80))):
        rel = gap[m] / leg[m]
        nr = m & (gap < -cut * leg)
        req, rsp = p["req_size"], p["rsp_size"]
        out["classes"][name] = {
            "pairs": int(m.sum()), "not_replies": int(nr.sum()),
            "share": float(nr.sum() / m.sum()) if m.any() else 0.0,
            "req_bytes_share": float(req[nr].sum() / max(req[m].sum(), 1)),
            "rsp_bytes_share": float(rsp[nr].sum() / max(rsp[m].sum(), 1)),
            "rtt_ms_p50": float(np.median(leg[m]) * 1e3) if m.any() else None,
            "gap_over_rtt": {f"p{q}": float(np.percentile(rel, q)) for q in (10, 25, 50, 75, 90)}
            if m.any() else {},
            "ports": _top_ports(sport[nr]),
        }
    return out


def _top_ports(ports: np.ndarray, k: int = 5) -> list[list[int]]:
    u, n = np.unique(ports, return_counts=True)
    order = np.argsort(-n)[:k]
    return [[int(u[i]), int(n[i])] for i in order]


def table(res: dict[str, Any]) -> str:
    lines = [f"{res['trace']}: a response that began more than {res['cut']:g} round trips "
             "before its request could have reached the server is not a reply",
             f"{'class':10s} {'pairs':>7s} {'not replies':>14s} {'req bytes':>9s} "
             f"{'rsp bytes':>9s} {'RTT p50':>8s}  gap/RTT p10 p25 p50 p75 p90"]
    for name, r in res["classes"].items():
        g = r["gap_over_rtt"]
        qs = " ".join(f"{g[k]:+.2f}" for k in ("p10", "p25", "p50", "p75", "p90")) if g else ""
        rtt = f"{r['rtt_ms_p50']:.1f} ms" if r["rtt_ms_p50"] is not None else "-"
        lines.append(f"{name:10s} {r['pairs']:7d} {r['not_replies']:7d} ({100 * r['share']:4.1f}%)"
                     f" {100 * r['req_bytes_share']:8.1f}% {100 * r['rsp_bytes_share']:8.1f}%"
                     f" {rtt:>8s}  {qs}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--cut", type=float, default=0.5,
                    help="a response earlier than this many round trips is not a reply")
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    results = []
    for t in a.traces:
        if not t.is_file():
            print(f"{t}: no such file", file=sys.stderr)
            return 2
        res = gating(t, a.cut)
        results.append(res)
        print(table(res) + "\n")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
