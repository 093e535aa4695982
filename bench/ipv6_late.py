"""Why some downloads end one round trip late: client captures read per download.

The IPv6 study saw a third to a half of its 1 MB downloads end about 19 ms (one
RTT) late, the IPv4 control none; but the client differs with the family
(httperf over IPv4, ApacheBench over IPv6: ``generators/web.py``). The httperf
kind's ``client`` option runs ab over IPv4 too, which separates the two. For
every finished run given (``runs/*/rep*/foreground/fg-client.pcap``) this reads
each download from the client's own capture and prints one row per study:

* downloads, median / p90 response time (SYN to the last payload byte);
* **late**: the last data segment came more than 15 ms after the one before it
  and filled a hole (a retransmission still missing at the end);
* retransmitted segments per download (data segments ending at or below the
  highest sequence already received: hole fills at the client);
* the client's advertised window (raw 16-bit field, median of its ACKs in the
  download's second half; the scale is in the SYN, which the 96-byte snap cuts)
  and the highest flight seen at the client (highest sequence received minus
  the client's last ACK, kB).

Usage::

    python bench/ipv6_late.py STUDY_DIR [STUDY_DIR ...]

Nothing here runs traffic.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from swell.extract.reader import ACK, SYN, read_all

LATE_GAP_S = 0.015


def downloads(pcap: Path, port: int = 80) -> list[dict[str, Any]]:
    """One dict per complete download in a client capture."""
    pk = read_all(pcap)
    tcp = pk.proto == 6
    out = []
    down = tcp & (pk.sport == port)
    up = tcp & (pk.dport == port)
    for cport in np.unique(pk.dport[down]):
        d = np.flatnonzero(down & (pk.dport == cport))
        u = np.flatnonzero(up & (pk.sport == cport))
        syn = u[(pk.tcp_flags[u] & SYN) != 0]
        data = d[pk.payload_len[d] > 0]
        if not syn.size or data.size < 10:
            continue
        isn = int(pk.seq[d[(pk.tcp_flags[d] & SYN) != 0][0]]) if (
            (pk.tcp_flags[d] & SYN) != 0).any() else int(pk.seq[data[0]]) - 1
        ends = (pk.seq[data].astype(np.int64) - isn) % (1 << 32) + pk.payload_len[data]
        high = np.maximum.accumulate(np.concatenate([[0], ends[:-1]]))
        retx = ends <= high
        t = pk.ts_ns[data].astype(np.float64) / 1e9
        acks = u[(pk.tcp_flags[u] & ACK) != 0]
        ack_t = pk.ts_ns[acks].astype(np.float64) / 1e9
        ack_v = (pk.ack[acks].astype(np.int64) - isn) % (1 << 32)
        last_ack = np.searchsorted(ack_t, t, side="right") - 1
        flight = np.maximum.accumulate(ends) - np.where(last_ack >= 0, ack_v[last_ack], 0)
        half = acks[ack_t >= (t[0] + t[-1]) / 2]
        out.append({
            "rt": t[-1] - float(pk.ts_ns[syn[0]]) / 1e9,
            "late": bool(t[-1] - t[-2] > LATE_GAP_S and retx[-1]),
            "retx": int(retx.sum()),
            "win": float(np.median(pk.win[half])) if half.size else float("nan"),
            "flight_kb": float(flight.max()) / 1000,
            "bytes": int(ends.max()),
        })
    return out


def study(path: Path) -> list[dict[str, Any]]:
    pcaps = sorted(path.glob("runs/*/rep*/foreground/fg-client.pcap"))
    if not pcaps:
        sys.exit(f"{path}: no runs/*/rep*/foreground/fg-client.pcap")
    rows = []
    for p in pcaps:
        found = downloads(p)
        full = max((r["bytes"] for r in found), default=0)
        rows += [r for r in found if r["bytes"] >= full]  # complete downloads only
    return rows


def main() -> None:
    print("| study | downloads | median | p90 | late (> 15 ms gap, hole fill last) | "
          "retransmitted / download | client window (raw) | peak flight kB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for arg in sys.argv[1:]:
        rows = study(Path(arg))
        rts = [r["rt"] for r in rows]
        late = sum(r["late"] for r in rows)
        q = statistics.quantiles(rts, n=10)[-1] if len(rts) > 1 else float("nan")
        print(f"| {arg} | {len(rows)} | {statistics.median(rts):.3f} s | {q:.3f} s | "
              f"{late} ({late / len(rows):.0%}) | "
              f"{statistics.median(r['retx'] for r in rows):.0f} | "
              f"{statistics.median(r['win'] for r in rows):.0f} | "
              f"{statistics.median(r['flight_kb'] for r in rows):.0f} |")


if __name__ == "__main__":
    main()
