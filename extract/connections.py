"""Connection and flow reconstruction from the trace reader's columns.

Design (one pass, vectorised, bounded memory)
---------------------------------------------
The reader yields columnar :class:`~swell.extract.reader.PacketChunk` objects
in file order. :class:`ConnectionBuilder` consumes them one at a time and keeps
only *per-connection* state (growable numpy arrays indexed by a connection id
``cid``, and per-direction arrays indexed by ``g = 2 * cid + dir``), never
per-packet state, so memory grows with the number of connections and
request/response runs, not with the number of packets. Every per-packet step is
a numpy operation over the chunk; Python loops run only over the SYN packets
of a chunk and over the distinct connections of a chunk (dictionary look-ups).

* Keys and hosts: an endpoint is (64-bit hash of the 128-bit address, port);
  a connection's key hashes both endpoints, the lower one first, and ``dir`` is
  0 for packets sent by the lower endpoint. Only the first packet of a new
  connection looks its addresses up in the host table (host id per address;
  hash collisions are checked and raise). Orientation (which side is
  the client) is decided at the end: the SYN sender is the client; without a
  SYN, the SYN/ACK receiver; without either, the side whose port is *not* a
  well-known service (ties: the higher port) and the connection is marked
  ``client_inferred``.
* Connection splitting: a pure SYN whose ISN differs from the current
  connection's client ISN on the same 5-tuple starts a new TCP connection; a UDP
  packet after more than ``udp_idle_s`` (60 s) of silence starts a new UDP flow, a
  TCP packet after ``tcp_idle_s`` (600 s) a new TCP connection.
* Sequence space: per direction, sequence numbers are taken relative to the
  first one seen (signed 32-bit wrap). A data segment whose end lies at or below
  the highest end already seen in that direction is a retransmission (group-wise
  running maximum with a rank offset, plus the carried maximum); new payload
  bytes are what a segment adds beyond that maximum.
* Request/response runs (Tmix's a-b-t view): the non-retransmitted data
  segments of a connection in file order are cut where the sending direction
  changes; a run's bytes, first and last time are reduced with ``reduceat``.
  The last run of each connection stays open across chunks and is merged with
  the next chunk's first run when the direction is the same.
* Handshake: first SYN, first SYN/ACK, and the client's first ACK after it give
  the monitor-server leg (SYN -> SYN/ACK) and the monitor-client leg
  (SYN/ACK -> ACK). Without a SYN/ACK (one direction captured), the client's
  first ACK with sequence number ISN+1 is kept so that the full round trip can be used
  for the server leg (an assumption the model records).
* One direction captured: while a connection has shown only one direction, the
  advances of that direction's acknowledgement numbers are turned into virtual
  data events of the other direction (timed at the acknowledging packet) in a
  second run stream; it replaces the real-data runs for connections that stay
  one-directional to the end (``acked_c2s``/``acked_s2c`` hold those bytes).
* Packet pairs: consecutive data segments of one direction with the same size,
  equal to the largest size seen so far in that direction (at least
  ``PAIR_MIN_PAYLOAD`` bytes), with a positive gap, give a dispersion estimate
  ``8 * ip_len / gap``; estimates go straight into a sparse per-host
  log-binned histogram (see :mod:`swell.extract.network`).

:func:`finish` turns the state into a :class:`ConnTable` (one row per
connection, oriented client/server) plus its request/response pairs.

Engines: by default the per-chunk work runs in the native tracker
(:mod:`swell.extract.conntrack`, same semantics, about 5x faster, tested identical);
``engine="numpy"`` or ``SWELL_CONNTRACK=numpy`` selects this module's numpy code,
the reference. Both share :func:`finish`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from swell.extract.conntable import finish_table
from swell.extract.conntrack import NativeTracker

# The table's types and the shared constants live in the leaf module ``conntypes``, so
# that conntable and sessions need not import this module (imports go one way).
from swell.extract.conntypes import (
    CAP_BINS_PER_DECADE,
    CAP_LOG_MIN,
    CAP_NBINS,
    TCP,
    UDP,
    ConnTable,
)

FIN, SYN, RST, ACK = 1, 2, 4, 16
PAIR_MIN_PAYLOAD = 500
DUP_NS = 200_000  # capture duplicates arrive within 200 us of the original
_NEG = np.int64(-(1 << 62))
ENGINES = ("native", "numpy")  # native: extract/conntrack.py; numpy: this module (reference)
RUN_STATE: dict[str, Any] = {
    "open": np.bool_,
    "dir": np.int8,
    "bytes": np.int64,
    "t0": np.int64,
    "t1": np.int64,
    "seq": np.int64,
    "pkts": np.int64,
}


class GrowArrays:
    """Named numpy columns of equal length that grow by doubling."""

    def __init__(self, dtypes: dict[str, Any]) -> None:
        self.n = 0
        self.cap = 1024
        self.a = {k: np.zeros(self.cap, dtype=t) for k, t in dtypes.items()}

    def extend(self, k: int) -> None:
        need = self.n + k
        if need > self.cap:
            while self.cap < need:
                self.cap *= 2
            for name, arr in self.a.items():
                new = np.zeros(self.cap, dtype=arr.dtype)
                new[: self.n] = arr[: self.n]
                self.a[name] = new
        self.n = need

    def __getitem__(self, name: str) -> np.ndarray:
        return self.a[name]

    def view(self, name: str) -> np.ndarray:
        return self.a[name][: self.n]


ADDR_COLS = ("saddr_hi", "saddr_lo", "daddr_hi", "daddr_lo", "sport", "dport")


def _hash_addr(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    h = hi.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ lo.astype(np.uint64)


class ConnectionBuilder:
    """Streaming reconstruction: ``add(chunk)`` for each chunk, then :meth:`finish`."""

    def __init__(
        self, udp_idle_s: float = 60.0, tcp_idle_s: float = 600.0, engine: str | None = None
    ) -> None:
        self.udp_idle_ns = int(udp_idle_s * 1e9)
        self.tcp_idle_ns = int(tcp_idle_s * 1e9)
        self.engine = engine or os.environ.get("SWELL_CONNTRACK", "native")
        if self.engine not in ENGINES:
            raise ValueError(f"unknown connection tracker {self.engine!r} (one of {ENGINES})")
        self._native: Any = None
        if self.engine == "native":
            self._native = NativeTracker(self.udp_idle_ns, self.tcp_idle_ns)
        self.host_of: dict[int, int] = {}
        self.host_addr: list[tuple[int, int]] = []
        self.cur_of_key: dict[int, int] = {}
        # fmt: off
        i64, i8, b1 = np.int64, np.int8, np.bool_
        self.conn = GrowArrays({
            "proto": np.uint8, "ep_lo": i64, "ep_hi": i64, "first_ns": i64, "last_ns": i64,
            "syn_ns": i64, "synack_ns": i64, "ack_ns": i64, "syn_dir": i8, "synack_dir": i8,
            "first_dir": i8, "client_isn": i64, "rst": b1, "h_lo": i64, "ports": i64,
            **{f"run_{k}": t for k, t in RUN_STATE.items()},
            **{f"vrun_{k}": t for k, t in RUN_STATE.items()},
        })
        self.gdir = GrowArrays({
            "pkts": i64, "wire": i64, "data_pkts": i64, "retx": i64, "new_bytes": i64,
            "base": i64, "has_base": b1, "max_end": i64, "fin": b1, "max_pl": i64,
            "prev_ts": i64, "prev_pl": i64, "intr": b1, "ack_base": i64, "has_ack_base": b1,
            "max_ack": i64, "ack_adv": i64,
        })
        # fmt: on
        self.runs: list[dict[str, np.ndarray]] = []
        self.vruns: list[dict[str, np.ndarray]] = []
        self.run_counter = 0
        self.pair_hist: dict[int, int] = {}  # host * CAP_NBINS + bin -> count
        self.t0_ns: int | None = None
        self.skipped = {"non_ip": 0, "not_tcp_udp": 0, "no_l4": 0, "fragment": 0}
        self.packets = 0
        self.duplicates = 0

    # -- ids -------------------------------------------------------------------------------
    def _host_ids(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        h = _hash_addr(hi, lo)
        uh, first, inv = np.unique(h, return_index=True, return_inverse=True)
        ids = np.empty(len(uh), dtype=np.int64)
        for i, (hv, fi) in enumerate(zip(uh.tolist(), first.tolist(), strict=True)):
            hid = self.host_of.get(hv)
            if hid is None:
                hid = len(self.host_addr)
                self.host_of[hv] = hid
                self.host_addr.append((int(hi[fi]), int(lo[fi])))
            elif self.host_addr[hid] != (int(hi[fi]), int(lo[fi])):
                raise RuntimeError("host address hash collision")
            ids[i] = hid
        return ids[inv]

    def _new_conns(self, n: int) -> np.ndarray:
        start = self.conn.n
        self.conn.extend(n)
        self.gdir.extend(2 * n)
        c = self.conn
        sl = slice(start, start + n)
        for name in ("syn_ns", "synack_ns", "ack_ns", "first_ns", "client_isn"):
            c[name][sl] = -1
        c["syn_dir"][sl] = -1
        c["synack_dir"][sl] = -1
        gsl = slice(2 * start, 2 * (start + n))
        self.gdir["max_end"][gsl] = _NEG
        self.gdir["prev_ts"][gsl] = -1
        return np.arange(start, start + n, dtype=np.int64)

    def _assign(
        self,
        key: np.ndarray,
        ts: np.ndarray,
        flags: np.ndarray,
        seq: np.ndarray,
        proto: np.ndarray,
        d: np.ndarray,
        hosts_of: Any,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Connection id per packet (splitting on new SYNs for TCP, idle gaps for UDP), and
        the packet order grouped by connection, file order within."""
        order = np.argsort(key, kind="stable")
        ks = key[order]
        gstart = np.ones(len(ks), dtype=bool)
        gstart[1:] = ks[1:] != ks[:-1]
        ukeys = ks[gstart]
        cur = np.array([self.cur_of_key.get(k, -1) for k in ukeys.tolist()], dtype=np.int64)
        grp = np.cumsum(gstart) - 1
        cur_p = cur[grp]
        starts = np.zeros(len(ks), dtype=bool)
        # a key never seen before: its first packet creates the connection
        starts[gstart & (cur_p < 0)] = True
        tss = ts[order]
        is_udp = proto[order] == UDP
        # idle splitting (UDP by udp_idle, TCP by tcp_idle)
        prev_ts = np.empty(len(ks), dtype=np.int64)
        prev_ts[1:] = tss[:-1]
        known = gstart & (cur_p >= 0)
        prev_ts[known] = self.conn["last_ns"][cur_p[known]]
        limit = np.where(is_udp, self.udp_idle_ns, self.tcp_idle_ns)
        idle = (tss - prev_ts > limit) & ~(gstart & (cur_p < 0))
        starts |= idle
        # TCP: a pure SYN with a new ISN on a used 5-tuple
        fl = flags[order]
        syn_idx = np.flatnonzero((fl & (SYN | ACK)) == SYN)
        if len(syn_idx):
            isn_now: dict[int, int] = {}
            seqs = seq[order]
            gidx = grp[syn_idx].tolist()
            for i, gi in zip(syn_idx.tolist(), gidx, strict=True):
                s = int(seqs[i])
                if gi not in isn_now:
                    c = int(cur[gi])
                    isn_now[gi] = int(self.conn["client_isn"][c]) if c >= 0 else -1
                prev = isn_now[gi]
                if starts[i]:
                    isn_now[gi] = s
                    continue
                has_prior = (not gstart[i]) or cur[gi] >= 0
                if has_prior and prev != s:
                    starts[i] = True
                isn_now[gi] = s
        nstart = int(starts.sum())
        new_ids = self._new_conns(nstart)
        rank = np.cumsum(starts) - 1
        # segment index within the key group: starts seen so far in this group
        seg_in_grp = np.cumsum(starts) - np.repeat(
            np.cumsum(starts)[gstart] - starts[gstart],
            np.diff(np.r_[np.flatnonzero(gstart), len(ks)]),
        )
        cid_sorted = np.where(seg_in_grp > 0, new_ids[np.maximum(rank, 0)] if nstart else -1, cur_p)
        cid = np.empty(len(ks), dtype=np.int64)
        cid[order] = cid_sorted
        if nstart:
            sidx = np.flatnonzero(starts)
            nid = new_ids
            c = self.conn
            c["proto"][nid] = proto[order][sidx]
            first = order[sidx]
            c["ep_lo"][nid], c["ep_hi"][nid], c["h_lo"][nid], c["ports"][nid] = hosts_of(first)
            c["first_ns"][nid] = tss[sidx]
            c["first_dir"][nid] = d[order][sidx]
        gend = np.r_[np.flatnonzero(gstart)[1:], len(ks)] - 1
        self.cur_of_key.update(zip(ukeys.tolist(), cid_sorted[gend].tolist(), strict=True))
        return cid, order

    # -- per chunk -------------------------------------------------------------------------
    def add_trace(self, trace: Any, max_packets: int) -> int:
        """Read the next up to ``max_packets`` packets of an open ``trace`` and add
        them; the number read, 0 at its end. The native tracker takes them from the
        reader directly (no columns, see ``NativeTracker.add_read``); the results are
        those of ``add`` on ``trace.chunks(max_packets)``."""
        if self._native is not None:
            n = self._native.add_read(trace, max_packets)
            self.packets += n
            return n
        chunk = trace.read_chunk(max_packets)
        if chunk is None:
            return 0
        self.add(chunk)
        return len(chunk)

    def add(self, chunk: Any) -> None:
        if self._native is not None:
            self._native.add(chunk)
            self.packets += len(chunk)
            return
        n = len(chunk)
        if n == 0:
            return
        self.packets += n
        ipver, proto = np.asarray(chunk.ipver), np.asarray(chunk.proto)
        is_ip = ipver != 0
        l4 = is_ip & ((proto == TCP) | (proto == UDP))
        later_frag = (np.asarray(chunk.frag) & 4) != 0
        ok = l4 & np.asarray(chunk.l4_ok, dtype=bool) & ~later_frag
        self.skipped["non_ip"] += int(n - is_ip.sum())
        self.skipped["not_tcp_udp"] += int(is_ip.sum() - l4.sum())
        self.skipped["fragment"] += int((l4 & later_frag).sum())
        self.skipped["no_l4"] += int((l4 & ~later_frag).sum() - ok.sum())
        idx = np.flatnonzero(ok)
        if len(idx) == 0:
            return
        ts = np.asarray(chunk.ts_ns)[idx].astype(np.int64)
        if self.t0_ns is None:
            self.t0_ns = int(ts[0])
        proto = proto[idx]
        # endpoints as (address hash, port); dir 0 = sent by the endpoint with the lower pair.
        # Host ids (a dictionary look-up) are only needed for new connections.
        raw = {k: np.asarray(getattr(chunk, k))[idx] for k in ADDR_COLS}
        hs = _hash_addr(raw["saddr_hi"], raw["saddr_lo"])
        hd = _hash_addr(raw["daddr_hi"], raw["daddr_lo"])
        sp, dp = raw["sport"].astype(np.int64), raw["dport"].astype(np.int64)
        d = ((hs > hd) | ((hs == hd) & (sp > dp))).astype(np.int64)
        h_lo, h_hi = np.where(d == 0, hs, hd), np.where(d == 0, hd, hs)
        ports = np.where(d == 0, sp << 16 | dp, dp << 16 | sp)
        key = (
            h_lo * np.uint64(0xBF58476D1CE4E5B9)
            + h_hi * np.uint64(0x94D049BB133111EB)
            + ports.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
            + proto.astype(np.uint64)
        ).view(np.int64)

        def hosts_of(i: np.ndarray) -> tuple[np.ndarray, ...]:
            """Endpoints (host id << 16 | port), address hash and ports of packets ``i``."""
            src = self._host_ids(raw["saddr_hi"][i], raw["saddr_lo"][i])
            dst = self._host_ids(raw["daddr_hi"][i], raw["daddr_lo"][i])
            lo = np.where(d[i] == 0, src, dst) << 16 | (ports[i] >> 16)
            hi = np.where(d[i] == 0, dst, src) << 16 | (ports[i] & 0xFFFF)
            return lo, hi, h_lo[i].view(np.int64), ports[i]

        flags = np.asarray(chunk.tcp_flags)[idx].astype(np.int64)
        flags[proto != TCP] = 0
        seq = np.asarray(chunk.seq)[idx].astype(np.int64)
        cid, order = self._assign(key, ts, flags, seq, proto, d, hosts_of)
        c = self.conn
        if np.any(c["h_lo"][cid] != h_lo.view(np.int64)) or np.any(c["ports"][cid] != ports):
            raise RuntimeError("connection key hash collision")
        col = {
            k: np.asarray(getattr(chunk, k))[idx].astype(np.int64)
            for k in ("ack", "payload_len", "ip_len", "wirelen")
        }
        # fmt: off
        pkt = {
            "ts": ts, "cid": cid, "dir": d, "g": 2 * cid + d, "flags": flags, "seq": seq,
            "ack": col["ack"], "pl": col["payload_len"], "iplen": col["ip_len"],
            "wire": col["wirelen"], "tcp": proto == TCP,
        }
        # fmt: on
        self._counters(pkt)
        self._handshake(pkt)
        # ``order`` groups packets by connection in file order; split by direction it
        # groups them by (connection, direction): no second sort needed
        do = d[order]
        gorder = np.concatenate([order[do == 0], order[do == 1]])
        # capture duplicates: same direction, seq, ack, length and flags within DUP_NS of
        # the previous packet (one packet recorded twice); they are no data segments
        same = [pkt[k][gorder[1:]] == pkt[k][gorder[:-1]] for k in ("g", "seq", "ack", "pl")]
        gap = pkt["ts"][gorder[1:]] - pkt["ts"][gorder[:-1]]
        dup = np.zeros(len(ts), dtype=bool)
        dup[gorder[1:]] = (
            np.logical_and.reduce(same)
            & (np.abs(gap) <= DUP_NS)
            & (pkt["flags"][gorder[1:]] == pkt["flags"][gorder[:-1]])
        )
        pkt["dup"] = dup
        self.duplicates += int(dup.sum())
        new_bytes, retx = self._seqspace(pkt, gorder)
        self._runs(pkt, order, new_bytes)
        self._ack_inferred(pkt, order, gorder, new_bytes)
        self._pairs(pkt, order, gorder, retx)

    def _counters(self, p: dict[str, np.ndarray]) -> None:
        c, gd = self.conn, self.gdir
        np.add.at(gd["pkts"], p["g"], 1)
        np.add.at(gd["wire"], p["g"], p["wire"])
        np.maximum.at(c["last_ns"], p["cid"], p["ts"])
        fin = (p["flags"] & FIN) != 0
        gd["fin"][p["g"][fin]] = True
        c["rst"][p["cid"][(p["flags"] & RST) != 0]] = True
        data = p["pl"] > 0
        np.maximum.at(gd["max_pl"], p["g"][data], p["pl"][data])

    def _first_per(self, ids: np.ndarray) -> np.ndarray:
        """Index of the first occurrence of each distinct id (file order)."""
        _, first = np.unique(ids, return_index=True)
        return first

    def _handshake(self, p: dict[str, np.ndarray]) -> None:
        c = self.conn
        fl, cid, ts, d = p["flags"], p["cid"], p["ts"], p["dir"]
        pos = np.arange(len(ts))
        syn = np.flatnonzero(((fl & (SYN | ACK)) == SYN) & p["tcp"])
        syn = syn[c["syn_ns"][cid[syn]] < 0]
        if len(syn):
            syn = syn[self._first_per(cid[syn])]
            c["syn_ns"][cid[syn]] = ts[syn]
            c["syn_dir"][cid[syn]] = d[syn]
            c["client_isn"][cid[syn]] = p["seq"][syn]
        sa = np.flatnonzero(((fl & (SYN | ACK)) == (SYN | ACK)) & p["tcp"])
        sa = sa[c["synack_ns"][cid[sa]] < 0]
        sa_pos = np.zeros(0, dtype=np.int64)
        if len(sa):
            sa = sa[self._first_per(cid[sa])]
            c["synack_ns"][cid[sa]] = ts[sa]
            c["synack_dir"][cid[sa]] = d[sa]
            sa_pos = sa
        ack = np.flatnonzero(((fl & (SYN | ACK)) == ACK) & p["tcp"])
        ack = ack[c["ack_ns"][cid[ack]] < 0]
        if len(ack) == 0:
            return
        ca = cid[ack]
        sdir, ydir = c["synack_dir"][ca], c["syn_dir"][ca]
        after = np.full(c.n, -1, dtype=np.int64)
        after[cid[sa_pos]] = sa_pos
        # after SYN/ACK: the client is the SYN/ACK receiver
        ok_sa = (sdir >= 0) & (d[ack] != sdir) & (pos[ack] > after[ca])
        # no SYN/ACK seen: the client's first ACK with seq ISN + 1 (one direction captured)
        isn1 = (c["client_isn"][ca] + 1) & 0xFFFFFFFF
        ok_one = (sdir < 0) & (ydir >= 0) & (d[ack] == ydir) & (p["seq"][ack] == isn1)
        ack = ack[ok_sa | ok_one]
        if len(ack):
            ack = ack[self._first_per(cid[ack])]
            c["ack_ns"][cid[ack]] = ts[ack]

    def _seqspace(
        self, p: dict[str, np.ndarray], order: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """New payload bytes and retransmission flag per packet (TCP sequence space)."""
        gd = self.gdir
        g = p["g"][order]
        n = len(g)
        gstart = np.ones(n, dtype=bool)
        gstart[1:] = g[1:] != g[:-1]
        # relative sequence base: first packet of a direction (+1 for a SYN)
        fs = np.flatnonzero(gstart)
        need = fs[~gd["has_base"][g[fs]]]
        if len(need):
            o = order[need]
            gd["base"][g[need]] = p["seq"][o] + ((p["flags"][o] & SYN) != 0)
            gd["has_base"][g[need]] = True
        pl = p["pl"][order]
        tcp = p["tcp"][order]
        new_bytes = np.zeros(len(order), dtype=np.int64)
        retx = np.zeros(len(order), dtype=bool)
        udp_data = ~tcp & (pl > 0)
        new_bytes[order[udp_data]] = pl[udp_data]
        np.add.at(gd["data_pkts"], g[udp_data], 1)
        np.add.at(gd["new_bytes"], g[udp_data], pl[udp_data])
        sel = np.flatnonzero(tcp & (pl > 0) & ~p["dup"][order])
        if len(sel) == 0:
            return new_bytes, retx
        gs = g[sel]
        rel = ((p["seq"][order[sel]] - gd["base"][gs] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        end = rel + pl[sel]
        st = np.ones(len(sel), dtype=bool)
        st[1:] = gs[1:] != gs[:-1]
        rank = np.cumsum(st) - 1
        off = rank << 34
        cm = np.maximum.accumulate(off + end + (1 << 33))
        prev = np.empty(len(sel), dtype=np.int64)
        prev[1:] = cm[:-1] - off[1:] - (1 << 33)
        prev[st] = _NEG
        prev = np.maximum(prev, gd["max_end"][gs])
        keepalive = (pl[sel] == 1) & (end == prev)
        is_retx = (end <= prev) & ~keepalive
        nb = np.where(end <= prev, 0, end - np.maximum(rel, prev))
        last = np.r_[np.flatnonzero(st)[1:], len(sel)] - 1
        gd["max_end"][gs[last]] = np.maximum(gd["max_end"][gs[last]], (cm - off)[last] - (1 << 33))
        new_bytes[order[sel]] = nb
        retx[order[sel]] = is_retx
        np.add.at(gd["data_pkts"], gs[~keepalive], 1)
        np.add.at(gd["retx"], gs[is_retx], 1)
        np.add.at(gd["new_bytes"], gs, nb)
        return new_bytes, retx

    def _runs(self, p: dict[str, np.ndarray], order: np.ndarray, new_bytes: np.ndarray) -> None:
        """Cut the real data of every connection into same-direction runs."""
        o = order[new_bytes[order] > 0]
        if len(o):
            self._cut(p["cid"][o], p["dir"][o], p["ts"][o], new_bytes[o], "run", self.runs)

    def _cut(
        self,
        cid: np.ndarray,
        d: np.ndarray,
        ts: np.ndarray,
        nb: np.ndarray,
        pre: str,
        sink: list[dict[str, np.ndarray]],
    ) -> None:
        """Runs of events grouped by connection (file order within); carry the open run.

        ``pre`` names the state columns (``run`` for real data, ``vrun`` for the stream
        with acknowledgement-inferred data); finished runs are appended to ``sink``.
        """
        c = self.conn
        brk = np.ones(len(cid), dtype=bool)
        brk[1:] = (cid[1:] != cid[:-1]) | (d[1:] != d[:-1])
        b = np.flatnonzero(brk)
        r_cid, r_dir = cid[b], d[b]
        r_bytes = np.add.reduceat(nb, b)
        r_pkts = np.diff(np.r_[b, len(cid)])
        r_t0 = ts[b]
        r_t1 = ts[np.r_[b[1:], len(cid)] - 1]
        nr = len(b)
        r_seq = self.run_counter + np.arange(nr, dtype=np.int64)
        self.run_counter += nr
        cfirst = np.ones(nr, dtype=bool)
        cfirst[1:] = r_cid[1:] != r_cid[:-1]
        clast = np.r_[cfirst[1:], True]
        # merge first runs with the carried open run of the same direction
        fi = np.flatnonzero(cfirst)
        fc = r_cid[fi]
        has_open = c[f"{pre}_open"][fc]
        merge = has_open & (c[f"{pre}_dir"][fc] == r_dir[fi])
        mi, mc = fi[merge], fc[merge]
        r_bytes[mi] += c[f"{pre}_bytes"][mc]
        r_pkts[mi] += c[f"{pre}_pkts"][mc]
        r_t0[mi] = c[f"{pre}_t0"][mc]
        r_seq[mi] = c[f"{pre}_seq"][mc]
        eo = fc[has_open & ~merge]
        nl = ~clast
        out = {
            "cid": np.r_[eo, r_cid[nl]],
            "dir": np.r_[c[f"{pre}_dir"][eo].astype(np.int64), r_dir[nl]],
            "bytes": np.r_[c[f"{pre}_bytes"][eo], r_bytes[nl]],
            "pkts": np.r_[c[f"{pre}_pkts"][eo], r_pkts[nl]],
            "t0": np.r_[c[f"{pre}_t0"][eo], r_t0[nl]],
            "t1": np.r_[c[f"{pre}_t1"][eo], r_t1[nl]],
            "seq": np.r_[c[f"{pre}_seq"][eo], r_seq[nl]],
        }
        if len(out["cid"]):
            sink.append(out)
        li = np.flatnonzero(clast)
        lc = r_cid[li]
        c[f"{pre}_open"][lc] = True
        c[f"{pre}_dir"][lc] = r_dir[li]
        c[f"{pre}_bytes"][lc] = r_bytes[li]
        c[f"{pre}_pkts"][lc] = r_pkts[li]
        c[f"{pre}_t0"][lc] = r_t0[li]
        c[f"{pre}_t1"][lc] = r_t1[li]
        c[f"{pre}_seq"][lc] = r_seq[li]

    def _ack_inferred(
        self, p: dict[str, np.ndarray], order: np.ndarray, gorder: np.ndarray, new_bytes: np.ndarray
    ) -> None:
        """For connections seen in one direction only so far: the unseen direction's data
        from the advance of the seen direction's acknowledgement numbers.

        Each such packet contributes a virtual event of the opposite direction (bytes newly
        acknowledged; it happened before the packet was sent) and its own real data. The
        events go into a separate run stream (``vrun``), used at the end only for the
        connections that stayed one-directional.
        """
        gd = self.gdir
        g = p["g"]
        one = p["tcp"] & (gd["pkts"][g ^ 1] == 0)
        if not one.any():
            return
        fl = p["flags"]
        acking = one & ((fl & (SYN | ACK)) == ACK)
        sel = gorder[acking[gorder]]
        vb = np.zeros(len(g), dtype=np.int64)
        if len(sel):
            gs = g[sel]
            st = np.ones(len(sel), dtype=bool)
            st[1:] = gs[1:] != gs[:-1]
            need = np.flatnonzero(st)[~gd["has_ack_base"][gs[st]]]
            gd["ack_base"][gs[need]] = p["ack"][sel[need]]
            gd["has_ack_base"][gs[need]] = True
            rel = ((p["ack"][sel] - gd["ack_base"][gs] + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
            rank = np.cumsum(st) - 1
            off = rank << 34
            cm = np.maximum.accumulate(off + rel + (1 << 33))
            prev = np.empty(len(sel), dtype=np.int64)
            prev[1:] = cm[:-1] - off[1:] - (1 << 33)
            prev[st] = 0
            prev = np.maximum(prev, gd["max_ack"][gs])
            adv = np.maximum(rel - prev, 0)
            # an advance of one is the peer's FIN, once a FIN is around: not data
            fin_near = ((fl[sel] & FIN) != 0) | gd["fin"][gs]
            adv[(adv == 1) & fin_near] = 0
            last = np.r_[np.flatnonzero(st)[1:], len(sel)] - 1
            top = (cm - off)[last] - (1 << 33)
            gd["max_ack"][gs[last]] = np.maximum(gd["max_ack"][gs[last]], top)
            np.add.at(gd["ack_adv"], gs, adv)
            vb[sel] = adv
        o = order[one[order] & ((vb[order] > 0) | (new_bytes[order] > 0))]
        if len(o) == 0:
            return
        # per packet: the virtual (acknowledged) event first, then the packet's own data
        rv, rr = o[vb[o] > 0], o[new_bytes[o] > 0]
        rank = np.empty(len(g), dtype=np.int64)
        rank[o] = np.arange(len(o))
        key = np.r_[2 * rank[rv], 2 * rank[rr] + 1]
        e = np.argsort(key, kind="stable")
        cid = np.r_[p["cid"][rv], p["cid"][rr]][e]
        d = np.r_[1 - p["dir"][rv], p["dir"][rr]][e]
        ts = np.r_[p["ts"][rv], p["ts"][rr]][e]
        nb = np.r_[vb[rv], new_bytes[rr]][e]
        self._cut(cid, d, ts, nb, "vrun", self.vruns)

    def _pairs(
        self, p: dict[str, np.ndarray], order: np.ndarray, gorder: np.ndarray, retx: np.ndarray
    ) -> None:
        """Packet-pair dispersion of back-to-back full-size segments into the histogram.

        Back to back: consecutive data segments of a direction with no packet of the
        other direction in between (an ACK in between makes them ACK-clocked, their
        gap the round trip, not the dispersion). ``gdir["intr"]`` carries "the other
        direction sent a packet since this direction's last data segment" across chunks;
        ``other`` counts, per packet, the other direction's earlier packets in the chunk.
        """
        gd = self.gdir
        sel = gorder[(p["pl"][gorder] > 0) & p["tcp"][gorder] & ~p["dup"][gorder]]
        g = p["g"][sel]
        st = np.ones(len(sel), dtype=bool)
        st[1:] = g[1:] != g[:-1]
        intr_st = gd["intr"][g[st]]  # as it was before this chunk
        gd["intr"][p["g"] ^ 1] = True  # a packet interrupts the other direction
        if len(sel) < 1:
            return
        other, other_tot = _other_before(p["cid"], p["dir"], order)
        ob = other[sel]
        ts, pl = p["ts"][sel], p["pl"][sel]
        prev_ts = np.empty(len(sel), dtype=np.int64)
        prev_pl = np.empty(len(sel), dtype=np.int64)
        prev_ts[1:], prev_pl[1:] = ts[:-1], pl[:-1]
        prev_ts[st], prev_pl[st] = gd["prev_ts"][g[st]], gd["prev_pl"][g[st]]
        back_to_back = np.empty(len(sel), dtype=bool)
        back_to_back[1:] = ob[1:] == ob[:-1]
        back_to_back[st] = ~intr_st & (ob[st] == 0)
        gap = ts - prev_ts
        mx = gd["max_pl"][g]
        ok = (
            (prev_ts >= 0)
            & back_to_back
            & (gap > 0)
            & (pl == prev_pl)
            & (pl == mx)
            & (pl >= PAIR_MIN_PAYLOAD)
            & ~retx[sel]
        )
        last = np.r_[np.flatnonzero(st)[1:], len(sel)] - 1
        gd["prev_ts"][g[last]] = ts[last]
        gd["prev_pl"][g[last]] = pl[last]
        gd["intr"][g[last]] = other_tot[sel[last]] > ob[last]
        if not ok.any():
            return
        bps = p["iplen"][sel[ok]] * 8e9 / gap[ok]
        b = ((np.log10(bps) - CAP_LOG_MIN) * CAP_BINS_PER_DECADE).astype(np.int64)
        b = np.clip(b, 0, CAP_NBINS - 1)
        so = sel[ok]
        ep = np.where(
            p["dir"][so] == 0, self.conn["ep_lo"][p["cid"][so]], self.conn["ep_hi"][p["cid"][so]]
        )
        codes, counts = np.unique((ep >> 16) * CAP_NBINS + b, return_counts=True)
        for k, v in zip(codes.tolist(), counts.tolist(), strict=True):
            self.pair_hist[k] = self.pair_hist.get(k, 0) + v

    # -- the end -----------------------------------------------------------------------------
    def finish(self) -> ConnTable:
        """Flush open runs and orient every connection (client/server)."""
        return finish_table(self)


def _other_before(cid: np.ndarray, d: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per packet of a chunk: how many packets of the other direction of its connection
    came before it in the chunk, and how many the chunk has in all (``order``: the
    packets grouped by connection, file order within)."""
    n = len(order)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    co, do = cid[order], d[order].astype(np.int64)
    st = np.ones(n, dtype=bool)
    st[1:] = co[1:] != co[:-1]
    first = np.flatnonzero(st)
    grp = np.cumsum(st) - 1
    c1 = np.cumsum(do) - do  # dir-1 packets before, from the chunk's start
    c1 -= c1[first][grp]
    c0 = np.arange(n) - first[grp] - c1
    last = np.r_[first[1:], n] - 1
    t1 = c1[last] + do[last]
    t0 = last - first + 1 - t1
    other, tot = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    other[order] = np.where(do == 0, c1, c0)
    tot[order] = np.where(do == 0, t1[grp], t0[grp])
    return other, tot


def build_connections(chunks: Iterable[Any], **kwargs: Any) -> ConnTable:
    """Reconstruct every connection of a chunk stream (convenience wrapper)."""
    b = ConnectionBuilder(**kwargs)
    for ch in chunks:
        b.add(ch)
    return b.finish()
