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

* Hosts and endpoints: each address gets a host id (a 64-bit hash of the
  128-bit address, checked for collisions); an endpoint is ``host << 16 | port``.
  A connection's canonical key puts the lower endpoint first; ``dir`` is 0 for
  packets sent by the lower endpoint, 1 otherwise. Orientation (which side is
  the client) is decided at the end: the SYN sender is the client; without a
  SYN, the SYN/ACK receiver; without either, the side whose port is *not* a
  well-known service (ties: the higher port) and the connection is marked
  ``client_inferred``.
* Connection splitting: a pure SYN whose ISN differs from the current
  connection's client ISN on the same 5-tuple starts a new TCP connection; a UDP
  packet after more than ``udp_idle_s`` of silence starts a new UDP flow.
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
* Packet pairs: consecutive data segments of one direction with the same size,
  equal to the largest size seen so far in that direction (at least
  ``PAIR_MIN_PAYLOAD`` bytes), with a positive gap, give a dispersion estimate
  ``8 * ip_len / gap``; estimates go straight into a sparse per-host
  log-binned histogram (see :mod:`swell.extract.network`).

:func:`finish` turns the state into a :class:`ConnTable` (one row per
connection, oriented client/server) plus its request/response pairs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TCP, UDP = 6, 17
FIN, SYN, RST, ACK = 1, 2, 4, 16
PAIR_MIN_PAYLOAD = 500
# Packet-pair histogram: log-spaced bins from 10 kbit/s to 100 Gbit/s.
CAP_BINS_PER_DECADE = 40
CAP_LOG_MIN, CAP_LOG_MAX = 4.0, 11.0
CAP_NBINS = int((CAP_LOG_MAX - CAP_LOG_MIN) * CAP_BINS_PER_DECADE)
_NEG = np.int64(-(1 << 62))

WELL_KNOWN: dict[tuple[int, int], str] = {
    (TCP, 20): "ftp-data",
    (TCP, 21): "ftp",
    (TCP, 22): "ssh",
    (TCP, 23): "telnet",
    (TCP, 25): "smtp",
    (TCP, 53): "dns",
    (UDP, 53): "dns",
    (UDP, 67): "dhcp",
    (UDP, 68): "dhcp",
    (TCP, 80): "http",
    (TCP, 110): "pop3",
    (UDP, 123): "ntp",
    (UDP, 137): "netbios",
    (UDP, 138): "netbios",
    (TCP, 139): "netbios",
    (TCP, 143): "imap",
    (UDP, 161): "snmp",
    (TCP, 179): "bgp",
    (TCP, 389): "ldap",
    (TCP, 443): "https",
    (UDP, 443): "quic",
    (TCP, 445): "smb",
    (TCP, 465): "smtps",
    (UDP, 500): "ike",
    (UDP, 514): "syslog",
    (TCP, 554): "rtsp",
    (TCP, 587): "smtp",
    (TCP, 631): "ipp",
    (TCP, 853): "dot",
    (TCP, 993): "imaps",
    (TCP, 995): "pop3s",
    (TCP, 1194): "openvpn",
    (UDP, 1194): "openvpn",
    (TCP, 1433): "mssql",
    (UDP, 1900): "ssdp",
    (TCP, 1935): "rtmp",
    (TCP, 3306): "mysql",
    (TCP, 3389): "rdp",
    (UDP, 3478): "stun",
    (UDP, 4500): "ike",
    (TCP, 5222): "xmpp",
    (TCP, 5228): "gcm",
    (UDP, 5353): "mdns",
    (TCP, 5432): "postgres",
    (UDP, 5355): "llmnr",
    (TCP, 5900): "vnc",
    (TCP, 6379): "redis",
    (TCP, 8000): "http-alt",
    (TCP, 8080): "http-alt",
    (TCP, 8443): "https-alt",
    (TCP, 9000): "http-alt",
}
_KNOWN_PORTS = np.zeros((256, 65536), dtype=bool)
for _p, _port in WELL_KNOWN:
    _KNOWN_PORTS[_p, _port] = True


def app_name(proto: int, server_port: int) -> str:
    """Application label: ``<service>-<transport>`` or ``other-<transport>``."""
    transport = "tcp" if proto == TCP else "udp"
    return f"{WELL_KNOWN.get((proto, server_port), 'other')}-{transport}"


@dataclass
class ConnTable:
    """Finished connections (one row each, oriented) and their request/response pairs.

    Times are seconds since ``t0`` (the first packet's timestamp, ``t0_ns``).
    Handshake legs are NaN where the packets were not seen.
    """

    t0_ns: int
    hosts: list[str]  # host id -> address text
    cols: dict[str, np.ndarray]  # per connection
    pairs: dict[str, np.ndarray]  # per request/response pair (``conn`` = row)
    stats: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["proto"])


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


def addr_text(hi: int, lo: int) -> str:
    """Address text for the reader's (hi, lo) pair (IPv4 as ``::ffff:a.b.c.d``)."""
    if hi == 0 and (lo >> 32) == 0xFFFF:
        return str(ipaddress.IPv4Address(lo & 0xFFFFFFFF))
    return str(ipaddress.IPv6Address((hi << 64) | lo))


def _hash_addr(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    h = hi.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return h ^ lo.astype(np.uint64)


class ConnectionBuilder:
    """Streaming reconstruction: ``add(chunk)`` for each chunk, then :meth:`finish`."""

    def __init__(self, udp_idle_s: float = 60.0, tcp_idle_s: float = 600.0) -> None:
        self.udp_idle_ns = int(udp_idle_s * 1e9)
        self.tcp_idle_ns = int(tcp_idle_s * 1e9)
        self.host_of: dict[int, int] = {}
        self.host_addr: list[tuple[int, int]] = []
        self.cur_of_key: dict[int, int] = {}
        self.conn = GrowArrays(
            {
                "proto": np.uint8,
                "ep_lo": np.int64,
                "ep_hi": np.int64,
                "first_ns": np.int64,
                "last_ns": np.int64,
                "syn_ns": np.int64,
                "synack_ns": np.int64,
                "ack_ns": np.int64,
                "syn_dir": np.int8,
                "synack_dir": np.int8,
                "first_dir": np.int8,
                "client_isn": np.int64,
                "rst": np.bool_,
                "run_open": np.bool_,
                "run_dir": np.int8,
                "run_bytes": np.int64,
                "run_t0": np.int64,
                "run_t1": np.int64,
                "run_seq": np.int64,
                "run_pkts": np.int64,
            }
        )
        self.gdir = GrowArrays(
            {
                "pkts": np.int64,
                "wire": np.int64,
                "data_pkts": np.int64,
                "retx": np.int64,
                "new_bytes": np.int64,
                "base": np.int64,
                "has_base": np.bool_,
                "max_end": np.int64,
                "fin": np.bool_,
                "max_pl": np.int64,
                "prev_ts": np.int64,
                "prev_pl": np.int64,
            }
        )
        self.runs: list[dict[str, np.ndarray]] = []
        self.run_counter = 0
        self.pair_hist: dict[int, int] = {}  # host * CAP_NBINS + bin -> count
        self.t0_ns: int | None = None
        self.skipped = {"non_ip": 0, "not_tcp_udp": 0, "no_l4": 0, "fragment": 0}
        self.packets = 0

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
        ep_lo: np.ndarray,
        ep_hi: np.ndarray,
        d: np.ndarray,
    ) -> np.ndarray:
        """Connection id per packet, splitting on new SYNs (TCP) and idle gaps (UDP)."""
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
            c["ep_lo"][nid] = ep_lo[order][sidx]
            c["ep_hi"][nid] = ep_hi[order][sidx]
            c["first_ns"][nid] = tss[sidx]
            c["first_dir"][nid] = d[order][sidx]
        gend = np.r_[np.flatnonzero(gstart)[1:], len(ks)] - 1
        for k, c in zip(ukeys.tolist(), cid_sorted[gend].tolist(), strict=True):
            self.cur_of_key[k] = c
        if np.any(self.conn["ep_lo"][cid] != ep_lo) or np.any(self.conn["ep_hi"][cid] != ep_hi):
            raise RuntimeError("connection key hash collision")
        return cid

    # -- per chunk -------------------------------------------------------------------------
    def add(self, chunk: Any) -> None:
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
        src = self._host_ids(np.asarray(chunk.saddr_hi)[idx], np.asarray(chunk.saddr_lo)[idx])
        dst = self._host_ids(np.asarray(chunk.daddr_hi)[idx], np.asarray(chunk.daddr_lo)[idx])
        ep_s = (src << 16) | np.asarray(chunk.sport)[idx].astype(np.int64)
        ep_d = (dst << 16) | np.asarray(chunk.dport)[idx].astype(np.int64)
        d = (ep_s > ep_d).astype(np.int64)
        ep_lo, ep_hi = np.minimum(ep_s, ep_d), np.maximum(ep_s, ep_d)
        key = (
            ep_lo.view(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
            + ep_hi.view(np.uint64) * np.uint64(0x94D049BB133111EB)
            + proto.astype(np.uint64)
        ).view(np.int64)
        flags = np.asarray(chunk.tcp_flags)[idx].astype(np.int64)
        flags[proto != TCP] = 0
        seq = np.asarray(chunk.seq)[idx].astype(np.int64)
        cid = self._assign(key, ts, flags, seq, proto, ep_lo, ep_hi, d)
        pkt = {
            "ts": ts,
            "cid": cid,
            "dir": d,
            "g": 2 * cid + d,
            "flags": flags,
            "seq": seq,
            "ack": np.asarray(chunk.ack)[idx].astype(np.int64),
            "src": src,
            "pl": np.asarray(chunk.payload_len)[idx].astype(np.int64),
            "iplen": np.asarray(chunk.ip_len)[idx].astype(np.int64),
            "wire": np.asarray(chunk.wirelen)[idx].astype(np.int64),
            "tcp": proto == TCP,
        }
        self._counters(pkt)
        self._handshake(pkt)
        order = np.argsort(pkt["g"], kind="stable")
        new_bytes, retx = self._seqspace(pkt, order)
        self._runs(pkt, order, new_bytes)
        self._pairs(pkt, order, retx)

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
        sel = np.flatnonzero(tcp & (pl > 0))
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
        """Cut data into same-direction runs per connection; carry the open run."""
        c = self.conn
        sel = np.flatnonzero(new_bytes > 0)
        if len(sel) == 0:
            return
        o = sel[np.argsort(p["cid"][sel], kind="stable")]
        cid, d, ts, nb = p["cid"][o], p["dir"][o], p["ts"][o], new_bytes[o]
        brk = np.ones(len(o), dtype=bool)
        brk[1:] = (cid[1:] != cid[:-1]) | (d[1:] != d[:-1])
        b = np.flatnonzero(brk)
        r_cid, r_dir = cid[b], d[b]
        r_bytes = np.add.reduceat(nb, b)
        r_pkts = np.diff(np.r_[b, len(o)])
        r_t0 = ts[b]
        r_t1 = ts[np.r_[b[1:], len(o)] - 1]
        nr = len(b)
        r_seq = self.run_counter + np.arange(nr, dtype=np.int64)
        self.run_counter += nr
        cfirst = np.ones(nr, dtype=bool)
        cfirst[1:] = r_cid[1:] != r_cid[:-1]
        clast = np.r_[cfirst[1:], True]
        # merge first runs with the carried open run of the same direction
        fi = np.flatnonzero(cfirst)
        fc = r_cid[fi]
        has_open = c["run_open"][fc]
        merge = has_open & (c["run_dir"][fc] == r_dir[fi])
        mi, mc = fi[merge], fc[merge]
        r_bytes[mi] += c["run_bytes"][mc]
        r_pkts[mi] += c["run_pkts"][mc]
        r_t0[mi] = c["run_t0"][mc]
        r_seq[mi] = c["run_seq"][mc]
        emit_open = fc[has_open & ~merge]
        out = {
            "cid": np.r_[c["run_open"][emit_open] * 0 + emit_open, r_cid[~clast]],
            "dir": np.r_[c["run_dir"][emit_open].astype(np.int64), r_dir[~clast]],
            "bytes": np.r_[c["run_bytes"][emit_open], r_bytes[~clast]],
            "pkts": np.r_[c["run_pkts"][emit_open], r_pkts[~clast]],
            "t0": np.r_[c["run_t0"][emit_open], r_t0[~clast]],
            "t1": np.r_[c["run_t1"][emit_open], r_t1[~clast]],
            "seq": np.r_[c["run_seq"][emit_open], r_seq[~clast]],
        }
        if len(out["cid"]):
            self.runs.append(out)
        li = np.flatnonzero(clast)
        lc = r_cid[li]
        c["run_open"][lc] = True
        c["run_dir"][lc] = r_dir[li]
        c["run_bytes"][lc] = r_bytes[li]
        c["run_pkts"][lc] = r_pkts[li]
        c["run_t0"][lc] = r_t0[li]
        c["run_t1"][lc] = r_t1[li]
        c["run_seq"][lc] = r_seq[li]

    def _pairs(self, p: dict[str, np.ndarray], order: np.ndarray, retx: np.ndarray) -> None:
        """Packet-pair dispersion of back-to-back full-size segments into the histogram."""
        gd = self.gdir
        sel = order[(p["pl"][order] > 0) & p["tcp"][order]]
        if len(sel) < 1:
            return
        g, ts, pl = p["g"][sel], p["ts"][sel], p["pl"][sel]
        st = np.ones(len(sel), dtype=bool)
        st[1:] = g[1:] != g[:-1]
        prev_ts = np.empty(len(sel), dtype=np.int64)
        prev_pl = np.empty(len(sel), dtype=np.int64)
        prev_ts[1:], prev_pl[1:] = ts[:-1], pl[:-1]
        prev_ts[st], prev_pl[st] = gd["prev_ts"][g[st]], gd["prev_pl"][g[st]]
        gap = ts - prev_ts
        mx = gd["max_pl"][g]
        ok = (
            (prev_ts >= 0)
            & (gap > 0)
            & (pl == prev_pl)
            & (pl == mx)
            & (pl >= PAIR_MIN_PAYLOAD)
            & ~retx[sel]
        )
        last = np.r_[np.flatnonzero(st)[1:], len(sel)] - 1
        gd["prev_ts"][g[last]] = ts[last]
        gd["prev_pl"][g[last]] = pl[last]
        if not ok.any():
            return
        bps = p["iplen"][sel][ok] * 8e9 / gap[ok]
        b = ((np.log10(bps) - CAP_LOG_MIN) * CAP_BINS_PER_DECADE).astype(np.int64)
        b = np.clip(b, 0, CAP_NBINS - 1)
        codes, counts = np.unique(p["src"][sel][ok] * CAP_NBINS + b, return_counts=True)
        for k, v in zip(codes.tolist(), counts.tolist(), strict=True):
            self.pair_hist[k] = self.pair_hist.get(k, 0) + v

    # -- the end -----------------------------------------------------------------------------
    def finish(self) -> ConnTable:
        """Flush open runs and orient every connection (client/server)."""
        return _finish_table(self)


def build_connections(chunks: Iterable[Any], **kwargs: float) -> ConnTable:
    """Reconstruct every connection of a chunk stream (convenience wrapper)."""
    b = ConnectionBuilder(**kwargs)
    for ch in chunks:
        b.add(ch)
    return b.finish()


def _client_dir(b: ConnectionBuilder) -> tuple[np.ndarray, np.ndarray]:
    """Canonical direction of the client per connection, and whether it was inferred."""
    c = b.conn
    syn_dir, sa_dir = c.view("syn_dir").astype(np.int64), c.view("synack_dir").astype(np.int64)
    proto = c.view("proto").astype(np.int64)
    p_lo, p_hi = c.view("ep_lo") & 0xFFFF, c.view("ep_hi") & 0xFFFF
    k_lo, k_hi = _KNOWN_PORTS[proto, p_lo], _KNOWN_PORTS[proto, p_hi]
    by_port = np.where(k_lo & ~k_hi, 1, np.where(k_hi & ~k_lo, 0, (p_lo < p_hi).astype(np.int64)))
    udp_guess = np.where(k_lo != k_hi, by_port, c.view("first_dir").astype(np.int64))
    guess = np.where(proto == UDP, udp_guess, by_port)
    cdir = np.where(syn_dir >= 0, syn_dir, np.where(sa_dir >= 0, 1 - sa_dir, guess))
    inferred = (syn_dir < 0) & (sa_dir < 0)
    return cdir, inferred


def _all_runs(b: ConnectionBuilder) -> dict[str, np.ndarray]:
    c = b.conn
    op = np.flatnonzero(c.view("run_open"))
    last = {
        "cid": op,
        "dir": c["run_dir"][op].astype(np.int64),
        "bytes": c["run_bytes"][op],
        "pkts": c["run_pkts"][op],
        "t0": c["run_t0"][op],
        "t1": c["run_t1"][op],
        "seq": c["run_seq"][op],
    }
    parts = [*b.runs, last]
    runs = {k: np.concatenate([r[k] for r in parts]) for k in last}
    o = np.lexsort((runs["seq"], runs["cid"]))
    return {k: v[o] for k, v in runs.items()}


def _pairs_from_runs(
    runs: dict[str, np.ndarray], cdir: np.ndarray, t0: int
) -> dict[str, np.ndarray]:
    """Request/response pairs: a client run opens a pair, the server run after it closes it."""
    n = len(runs["cid"])
    cid = runs["cid"]
    is_req = runs["dir"] == cdir[cid]
    first = np.ones(n, dtype=bool)
    first[1:] = cid[1:] != cid[:-1]
    new_pair = is_req | first
    pid = np.cumsum(new_pair) - 1
    npairs = int(pid[-1]) + 1 if n else 0
    req = np.bincount(pid, weights=np.where(is_req, runs["bytes"], 0), minlength=npairs)
    rsp = np.bincount(pid, weights=np.where(is_req, 0, runs["bytes"]), minlength=npairs)
    nan = np.full(npairs, np.nan)
    req_t0, req_t1, rsp_t0, rsp_t1 = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    sec = 1e-9
    req_t0[pid[is_req]] = (runs["t0"][is_req] - t0) * sec
    req_t1[pid[is_req]] = (runs["t1"][is_req] - t0) * sec
    rsp_t0[pid[~is_req]] = (runs["t0"][~is_req] - t0) * sec
    rsp_t1[pid[~is_req]] = (runs["t1"][~is_req] - t0) * sec
    pconn = np.zeros(npairs, dtype=np.int64)
    pconn[pid] = cid
    pfirst = np.ones(npairs, dtype=bool)
    pfirst[1:] = pconn[1:] != pconn[:-1]
    think = np.full(npairs, np.nan)
    think[1:] = req_t0[1:] - rsp_t1[:-1]
    think[pfirst] = np.nan
    return {
        "conn": pconn,
        "req_size": req.astype(np.int64),
        "rsp_size": rsp.astype(np.int64),
        "req_t0": req_t0,
        "req_t1": req_t1,
        "rsp_t0": rsp_t0,
        "rsp_t1": rsp_t1,
        "think_before": think,
    }


def _finish_table(b: ConnectionBuilder) -> ConnTable:
    c, gd = b.conn, b.gdir
    t0 = b.t0_ns if b.t0_ns is not None else 0
    n = c.n
    cdir, inferred = _client_dir(b)
    ar = np.arange(n, dtype=np.int64)
    gc, gs = 2 * ar + cdir, 2 * ar + 1 - cdir
    ep_lo, ep_hi = c.view("ep_lo"), c.view("ep_hi")
    ep_c = np.where(cdir == 0, ep_lo, ep_hi)
    ep_s = np.where(cdir == 0, ep_hi, ep_lo)
    sec = 1e-9

    def tsec(x: np.ndarray) -> np.ndarray:
        return np.where(x >= 0, (x - t0) * sec, np.nan)

    syn, sa, ack = c.view("syn_ns"), c.view("synack_ns"), c.view("ack_ns")
    server_leg = np.where((syn >= 0) & (sa >= syn), (sa - syn) * sec, np.nan)
    client_leg = np.where((sa >= 0) & (ack >= sa), (ack - sa) * sec, np.nan)
    one_sided = np.where((sa < 0) & (syn >= 0) & (ack >= syn), (ack - syn) * sec, np.nan)
    proto = c.view("proto").astype(np.int64)
    fin_c, fin_s = gd["fin"][gc], gd["fin"][gs]
    closed = c.view("rst") | (fin_c & fin_s)
    is_tcp = proto == TCP
    cols = {
        "proto": proto,
        "client": ep_c >> 16,
        "server": ep_s >> 16,
        "cport": ep_c & 0xFFFF,
        "sport": ep_s & 0xFFFF,
        "start": tsec(c.view("first_ns")),
        "end": tsec(c.view("last_ns")),
        "client_inferred": inferred,
        "open_at_start": is_tcp & (syn < 0),
        "open_at_end": is_tcp & ~closed,
        "rst": c.view("rst").copy(),
        "fin_c2s": fin_c,
        "fin_s2c": fin_s,
        "server_leg": server_leg,
        "client_leg": client_leg,
        "one_sided_rtt": one_sided,
    }
    for name in ("pkts", "wire", "data_pkts", "retx", "new_bytes"):
        cols[f"{name}_c2s"] = gd[name][gc]
        cols[f"{name}_s2c"] = gd[name][gs]
    cols["one_way"] = (cols["pkts_c2s"] == 0) | (cols["pkts_s2c"] == 0)
    cols["lower_bound"] = (cols["open_at_start"] | cols["open_at_end"]) & is_tcp
    runs = _all_runs(b)
    pairs = _pairs_from_runs(runs, cdir, t0)
    cols["num_pairs"] = np.bincount(pairs["conn"], minlength=n).astype(np.int64)
    hosts = [addr_text(hi, lo) for hi, lo in b.host_addr]
    stats = {
        "packets": b.packets,
        "skipped": dict(b.skipped),
        "connections": n,
        "tcp": int(is_tcp.sum()),
        "udp": int((proto == UDP).sum()),
    }
    return ConnTable(t0_ns=t0, hosts=hosts, cols=cols, pairs=pairs, stats=stats)


def app_labels(table: ConnTable) -> np.ndarray:
    """Application label per connection (see :func:`app_name`)."""
    proto, sport = table.cols["proto"], table.cols["sport"]
    codes = proto * 65536 + sport
    uc, inv = np.unique(codes, return_inverse=True)
    names = np.array([app_name(int(k) // 65536, int(k) % 65536) for k in uc], dtype=object)
    return names[inv] if len(uc) else np.array([], dtype=object)
