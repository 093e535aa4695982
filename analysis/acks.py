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
  and FIN ACKs included, so short connections read above 1);
* ``by_port``: per server port (the ``top`` busiest by data segments, the rest
  as "other"), both directions' ratios and, per receiving host, the share of
  hosts that acknowledged at least :data:`EVERY_CUT` of the segments they got
  (:data:`HOST_MIN_SEGMENTS` or more): a stack that ACKs every segment (Linux
  with a route's ``quickack``; campus's HTTPS hosts) against one that delays
  every second ACK (its HTTP hosts: 0.51; docs/fidelity.md, "Who acknowledges
  every segment").

Several files (a bottleneck's forward and reverse captures) are merged by time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# the cut and minimum the model's shares use (one definition: extract/ackmode.py)
from swell.extract.ackmode import EVERY_CUT, HOST_MIN_SEGMENTS
from swell.extract.reader import read_all

__all__ = ["EVERY_CUT", "HOST_MIN_SEGMENTS", "load_tcp", "measure"]

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


def measure(paths: list[str], by_size: bool = False, by_port: int = 0) -> dict[str, Any]:
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
    if by_port:
        shost = np.array([hash(x[:2]) for x in src], dtype=np.int64)
        dhost = np.array([hash(x[:2]) for x in dst], dtype=np.int64)
        port = np.where(is_c2s, c["dport"], c["sport"]).astype(np.int64)
        out["by_port"] = _by_port(port, shost, dhost, is_c2s, data, pure_ack, by_port)
    return out


def _by_port(port: np.ndarray, shost: np.ndarray, dhost: np.ndarray, is_c2s: np.ndarray,
             data: np.ndarray, ack: np.ndarray, top: int) -> list[dict[str, Any]]:
    """Per server port (the ``top`` busiest by data segments, then "other"): per
    direction the receiver's ACKs per data segment, and the share of receiving hosts
    that ACK every segment (at least :data:`EVERY_CUT` of the :data:`HOST_MIN_SEGMENTS`
    or more they got). A host's segments are the data sent to it (``dhost``), its ACKs
    the pure ACKs it sent (``shost``), both on the port's connections."""
    ports_seen, n_seen = np.unique(port[data], return_counts=True)
    ports = ports_seen[np.argsort(-n_seen, kind="stable")][:top].tolist()
    rows = []
    for name, sel in [*((str(p), port == p) for p in ports),
                      ("other", ~np.isin(port, ports))]:
        row: dict[str, Any] = {"port": name}
        for d, fwd in (("c2s", True), ("s2c", False)):
            seg = sel & data & (is_c2s == fwd)
            got = sel & ack & (is_c2s != fwd)
            acks_of = dict(zip(*np.unique(shost[got], return_counts=True), strict=True))
            judged = [(int(acks_of.get(h, 0)), int(n))
                      for h, n in zip(*np.unique(dhost[seg], return_counts=True), strict=True)
                      if n >= HOST_MIN_SEGMENTS]
            row[d] = {"data_segments": int(seg.sum()), "acks_by_receiver": int(got.sum()),
                      "acks_per_data_segment": round(float(got.sum())
                                                     / max(int(seg.sum()), 1), 3),
                      "receivers_judged": len(judged),
                      "receivers_every_segment": round(
                          sum(a >= EVERY_CUT * n for a, n in judged) / len(judged), 3)
                      if judged else None}
        rows.append(row)
    return rows


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
