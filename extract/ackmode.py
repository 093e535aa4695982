"""Who acknowledged every data segment it received, per application and side.

A TCP receiver's pure ACKs are most of the packets of the direction opposite its
data, and how many it sends per segment is its stack's: a delayed-ACK receiver
acknowledges every second full-sized segment, a receiver in quick-ack mode every
one. The campus trace's HTTPS hosts acknowledged 0.82 (clients) and 0.84 (servers)
of the segments they got, its HTTP clients 0.51; Linux with its defaults 0.53 as a
client (docs/fidelity.md, "Who acknowledges every segment"). So a model keeps, per
application and side, the share of the trace's hosts that acknowledged every
segment, and the topology makes that share of the emulated hosts do so for that
application's port (a route with ``quickack``: :mod:`swell.topologies.quickack`).

From the connection table alone (no second pass over the trace): a side's pure
ACKs of a two-way TCP connection whose handshake was seen are its packets less its
data packets, its SYN (or SYN/ACK) and its FIN; the segments it received
are the other side's data packets. Per (application, host): both summed over the
host's connections of that application; a host that received
:data:`HOST_MIN_SEGMENTS` or more is judged, and acknowledged every segment when
its ACKs are :data:`EVERY_CUT` of its segments or more (the cut and minimum that
:mod:`swell.analysis.acks` imports from here for its per-port table on the packets
themselves, which is the check: ``tests/unit/test_ackmode.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swell.extract.conntypes import TCP

__all__ = ["EVERY_CUT", "HOST_MIN_SEGMENTS", "ack_shares"]

EVERY_CUT = 0.75  # a host acknowledging this share of its data segments or more ACKs each
HOST_MIN_SEGMENTS = 10  # fewer data segments received: the host is not judged

# side -> (its host column, the data it received, its own packets, its own data, its FIN)
_SIDES = {
    "client": ("client", "data_pkts_s2c", "pkts_c2s", "data_pkts_c2s", "fin_c2s"),
    "server": ("server", "data_pkts_c2s", "pkts_s2c", "data_pkts_s2c", "fin_s2c"),
}


def ack_shares(c: dict[str, np.ndarray], code: np.ndarray,
               napps: int) -> list[dict[str, dict[str, Any]]]:
    """Per application code (``0..napps-1``), per side (``client``, ``server``): the
    hosts judged, the share of them that acknowledged every segment (None: none
    judged) and the side's pure ACKs per data segment received over all its
    connections. UDP applications, one-directional connections and connections whose
    handshake was not seen (the roles guessed) count nothing; a table without the
    packet counts (built by hand) judges no host."""
    need = {"proto", "one_way", "open_at_start"} | {c for cols in _SIDES.values()
                                                     for c in cols}
    if not need <= set(c):  # a table built without the packet counts: nothing judged
        return [{side: {"hosts_judged": 0, "every_segment_share": None,
                        "acks_per_segment": None} for side in _SIDES} for _ in range(napps)]
    out: list[dict[str, dict[str, Any]]] = [{} for _ in range(napps)]
    keep = (c["proto"] == TCP) & ~c["one_way"] & ~c["open_at_start"]
    syn = 1
    app = code[keep].astype(np.int64)
    for side, (host_col, got_col, pkts_col, data_col, fin_col) in _SIDES.items():
        host = c[host_col][keep].astype(np.int64)
        got = c[got_col][keep].astype(np.int64)
        acks = np.maximum(c[pkts_col][keep].astype(np.int64) - c[data_col][keep]
                          - syn - c[fin_col][keep].astype(np.int64), 0)
        span = int(host.max()) + 1 if host.size else 1
        keys, inv = np.unique(app * span + host, return_inverse=True)
        segs = np.bincount(inv.ravel(), weights=got, minlength=keys.size)
        ack = np.bincount(inv.ravel(), weights=acks, minlength=keys.size)
        judged = segs >= HOST_MIN_SEGMENTS
        every = judged & (ack >= EVERY_CUT * segs)
        key_app = keys // span
        n_judged = np.bincount(key_app[judged], minlength=napps)
        n_every = np.bincount(key_app[every], minlength=napps)
        seg_sum = np.bincount(key_app, weights=segs, minlength=napps)
        ack_sum = np.bincount(key_app, weights=ack, minlength=napps)
        for ai in range(napps):
            out[ai][side] = {
                "hosts_judged": int(n_judged[ai]),
                "every_segment_share": round(float(n_every[ai] / n_judged[ai]), 4)
                if n_judged[ai] else None,
                "acks_per_segment": round(float(ack_sum[ai] / seg_sum[ai]), 4)
                if seg_sum[ai] else None,
            }
    return out
