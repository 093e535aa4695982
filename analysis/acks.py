"""ACKs per data segment of a capture's TCP receivers, per direction.

A TCP receiver's pure ACKs are most of the packets going the other way; how
many it sends per data segment is a property of its stack (Linux acknowledges
every segment in quick-ack mode, a delayed-ACK receiver every second one), and
it sets the small direction's bytes. Issue 19: a Swing run's client -> server
bytes came out 11.7% above the trace's, partly from the generator's receivers
acknowledging more segments than the trace's did (docs/scale.md).

``measure(paths)``:

* direction by the handshake: the host that sent the pure SYN is the client
  (connections whose SYN is not in the capture are left out; a new SYN on a
  4-tuple starts a new connection);
* per direction: the data segments (TCP payload > 0), the pure ACKs (no
  payload, no SYN/FIN/RST) the receiver of that data sent, and their ratio;
  the IP bytes of the direction and the share of them that are pure ACKs;
* ``by_size``: the server -> client data split by the connection's response
  size in segments (1, 2-4, 5-16, 17-64, 65+), the ratio in each (handshake
  and FIN ACKs included, so short connections read above 1).

Several files (a bottleneck's forward and reverse captures) are merged by time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swell.extract.reader import read_all

SYN, FIN, RST = 2, 1, 4
BINS = ((1, 1), (2, 4), (5, 16), (17, 64), (65, 1 << 30))


def load_tcp(paths: list[str]) -> dict[str, np.ndarray]:
    cols: dict[str, list[np.ndarray]] = {}
    for p in paths:
        ch = read_all(p)
        keep = (ch.proto == 6) & ch.l4_ok
        for name in ("ts_ns", "saddr_hi", "saddr_lo", "daddr_hi", "daddr_lo", "sport",
                     "dport", "tcp_flags", "ip_len", "payload_len"):
            cols.setdefault(name, []).append(np.asarray(getattr(ch, name))[keep])
    out = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(out["ts_ns"], kind="stable")
    return {k: v[order] for k, v in out.items()}


def measure(paths: list[str], by_size: bool = False) -> dict[str, Any]:
    """Per direction: data segments, pure ACKs of its receiver, bytes."""
    c = load_tcp(paths)
    n = len(c["ts_ns"])
    src = list(zip(*(c[k].tolist() for k in ("saddr_hi", "saddr_lo", "sport")), strict=True))
    dst = list(zip(*(c[k].tolist() for k in ("daddr_hi", "daddr_lo", "dport")), strict=True))
    flags = c["tcp_flags"].astype(np.int64)
    pay = c["payload_len"].astype(np.int64)
    ipl = c["ip_len"].astype(np.int64)
    client_of: dict[tuple, tuple] = {}
    conn = np.full(n, -1, dtype=np.int64)
    is_c2s = np.zeros(n, dtype=bool)
    ids: dict[tuple, int] = {}
    next_id = 0
    for i in range(n):
        key = (src[i], dst[i]) if src[i] < dst[i] else (dst[i], src[i])
        if (flags[i] & (SYN | 16)) == SYN:
            client_of[key] = src[i]
            ids[key] = next_id  # a reused 4-tuple starts a new connection
            next_id += 1
        cl = client_of.get(key)
        if cl is None:
            continue
        conn[i] = ids[key]
        is_c2s[i] = src[i] == cl
    known = conn >= 0
    data = known & (pay > 0)
    pure_ack = known & (pay == 0) & ((flags & (SYN | FIN | RST)) == 0) & ((flags & 16) != 0)
    out: dict[str, Any] = {"captures": paths, "packets_tcp": int(n),
                           "packets_with_handshake": int(known.sum())}
    for name, fwd in (("c2s", True), ("s2c", False)):
        d = data & (is_c2s == fwd)
        a = pure_ack & (is_c2s != fwd)  # the receiver of this direction's data
        own_ack = pure_ack & (is_c2s == fwd)
        # full-sized: the largest payload of this direction in its connection
        mx = np.zeros(int(conn.max()) + 1 if known.any() else 1, dtype=np.int64)
        np.maximum.at(mx, conn[d], pay[d])
        full = d & (pay == mx[np.where(conn >= 0, conn, 0)])
        dirmask = known & (is_c2s == fwd)
        row = {
            "data_segments": int(d.sum()),
            "full_segments": int(full.sum()),
            "payload_bytes": int(pay[d].sum()),
            "acks_by_receiver": int(a.sum()),
            "acks_per_data_segment": round(float(a.sum()) / max(int(d.sum()), 1), 4),
            "ip_bytes": int(ipl[dirmask].sum()),
            "pure_ack_ip_bytes": int(ipl[own_ack].sum()),
            "pure_acks_sent": int(own_ack.sum()),
        }
        row["pure_ack_share_of_ip_bytes"] = round(row["pure_ack_ip_bytes"]
                                                  / max(row["ip_bytes"], 1), 4)
        out[name] = row
    if by_size:
        out["s2c_by_response_segments"] = _by_size(conn, data & ~is_c2s,
                                                   pure_ack & is_c2s)
    return out


def _by_size(conn: np.ndarray, d: np.ndarray, a: np.ndarray) -> list[dict[str, Any]]:
    m = int(conn.max()) + 1
    segs = np.bincount(conn[d], minlength=m)
    acks = np.bincount(conn[a], minlength=m)
    rows = []
    for lo, hi in BINS:
        sel = (segs >= lo) & (segs <= hi)
        rows.append({"segments": f"{lo}-{hi}" if hi < 1 << 30 else f"{lo}+",
                     "connections": int(sel.sum()), "data_segments": int(segs[sel].sum()),
                     "acks": int(acks[sel].sum()),
                     "acks_per_segment": round(float(acks[sel].sum())
                                               / max(int(segs[sel].sum()), 1), 3)})
    return rows
