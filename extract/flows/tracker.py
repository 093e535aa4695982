"""A pcap's flows from swell's own connection tracker (:mod:`swell.extract.connections`).

The tracker reconstructs bidirectional connections (TCP split at a new SYN
with another ISN or after 600 s idle, UDP after 60 s idle; see the connections
module). NetFlow records are unidirectional, so each connection becomes up to
two flow records, client->server and server->client (a direction with no
packet gives none). What differs from an exporter's (or nfpcapd's) records:

* Bytes: the tracker counts wire bytes per direction (the frame); NetFlow
  counts IP bytes. The link header is subtracted per packet when the trace has
  one link type (Ethernet 14, Linux SLL 16, SLL2 20, loopback 4, raw IP 0).
  Ethernet padding of short frames (to 60 bytes) and 802.1Q tags stay in:
  a bare 40-byte TCP ACK counts 46 bytes here.
* Times: both directions carry the connection's first and last packet times.
* TCP flags are rebuilt from the tracker's state, not OR-ed per packet: SYN
  where the client's SYN (c2s) or the SYN/ACK (s2c) was seen, FIN per direction,
  RST on the client's record when the connection was reset, ACK on every TCP
  record after the first packet. PSH/URG/ECE/CWR are not kept by the tracker.
* Splitting: exporters and nfpcapd cut long flows at an active timeout and idle
  flows at an inactive one (nfpcapd: 300 s and 60 s) and close TCP flows at
  FIN/RST; the tracker has no active timeout (numbers: ``docs/flows.md``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swell.extract.connections import ConnectionBuilder
from swell.extract.flows.table import FlowBuilder, FlowTable, parse_addresses
from swell.extract.reader import DEFAULT_CHUNK, open_trace

LINK_HEADER = {1: 14, 113: 16, 276: 20, 0: 4, 108: 4, 12: 0, 14: 0, 101: 0, 228: 0, 229: 0}
TCP = 6
FIN, SYN, RST, ACK = 1, 2, 4, 16


def read_pcap_via_tracker(path: Path, engine: str | None = None) -> FlowTable:
    """Flow records (two per bidirectional connection) from swell's connection tracker."""
    b = ConnectionBuilder(engine=engine)
    with open_trace(path) as tr:
        b.add_trace(tr, DEFAULT_CHUNK)
        linktypes = set(tr.info.linktypes.values())
    ct = b.finish()
    out = FlowBuilder()
    hdr = LINK_HEADER.get(next(iter(linktypes)), 0) if len(linktypes) == 1 else 0
    if len(linktypes) != 1 or next(iter(linktypes)) not in LINK_HEADER:
        out.notes["link header not subtracted (several or unknown link types)"] += 1
    c = ct.cols
    n = len(ct)
    if n == 0:
        return out.table("pcap-flows (tracker)")
    host_hi, host_lo = parse_addresses(np.array(ct.hosts or ["::"], dtype=object))
    start = ct.t0_ns + np.round(c["start"] * 1e9).astype(np.int64)
    end = ct.t0_ns + np.round(c["end"] * 1e9).astype(np.int64)
    tcp = c["proto"] == TCP
    syn_s2c = ~np.isnan(c["server_leg"]) | ~np.isnan(c["client_leg"])
    exp = out.exporter("swell tracker")
    for d, (a, z, pa, pz) in enumerate(
        (("client", "server", "cport", "sport"), ("server", "client", "sport", "cport"))
    ):
        sfx = "c2s" if d == 0 else "s2c"
        pk = c[f"pkts_{sfx}"].astype(np.int64)
        keep = pk > 0
        wire = c[f"wire_{sfx}"].astype(np.int64) - hdr * pk
        flags = np.where(c[f"fin_{sfx}"], FIN, 0) | np.where(tcp & (pk > 1) | (d == 1), ACK, 0)
        if d == 0:
            flags |= np.where(~c["open_at_start"], SYN, 0) | np.where(c["rst"], RST, 0)
        else:
            flags |= np.where(syn_s2c, SYN, 0)
        flags = np.where(tcp, flags, 0)
        out.add_block(
            {
                "start_ns": start[keep],
                "end_ns": end[keep],
                "src_hi": host_hi[c[a][keep]],
                "src_lo": host_lo[c[a][keep]],
                "dst_hi": host_hi[c[z][keep]],
                "dst_lo": host_lo[c[z][keep]],
                "sport": c[pa][keep],
                "dport": c[pz][keep],
                "proto": c["proto"][keep],
                "tcp_flags": flags[keep],
                "packets": pk[keep],
                "bytes": np.maximum(wire[keep], 0),
                "exporter": np.full(int(keep.sum()), exp),
                "domain": np.zeros(int(keep.sum())),
                "sampling": np.ones(int(keep.sum())),
            }
        )
    out.notes.update({f"tracker skipped: {k}": v for k, v in ct.stats["skipped"].items() if v})
    return out.table("pcap-flows (tracker)")
