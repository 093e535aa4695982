"""A many-user composite capture, made by merging real captures of single users.

The shared captures are each one user (a phone, a browser, one LAN's web
traffic) for seconds to minutes: one or two sessions per application. A
Swing model fitted to one of them has too few sessions for a run's mean
throughput to be anything but luck (``docs/fidelity.md``). Issue 5 allows
merging or scaling captures to get enough flows; this module does both, and
says exactly how:

* **sources**: real captures with complete TCP handshakes and one Ethernet
  link type (pcap or pcapng; pcapng is converted with ``editcap -F pcap``,
  which stops at a damaged block: the packets the reader returns beyond it
  are counted as ``unconverted`` and said); only their Ethernet TCP and UDP
  packets over IPv4 or IPv6 are kept (ARP, VLAN tags, IPv6 extension headers
  and the rest are dropped and counted);
* **damage**: the records are those swell's reader returns (the reader
  ``swell extract`` uses: after a damaged record length it resyncs at the
  next plausible record, so one bad length costs one packet); what it could
  not return is left for :func:`swell.extract.reader.last_damage` under the
  source's name, for the command to report;
* **copies**: each source appears ``copies`` times; copy ``k`` of source
  ``s`` is one more "user": its addresses are renumbered, address ``i`` of
  the source (IPv4 ones first, each family in sorted order) becoming
  ``10.0.0.0 + (id << 12) + i`` (IPv4) or ``fd00:: + (id << 12) + i``
  (IPv6, under ``fd00::/96``) with an ``id`` unique to
  ``(s, k)``, so copies never share a host, a connection or a server, each
  copy keeps its own host structure (the renumbering is one to one) and its
  address family;
* **time**: copy ``k`` is rebased to start at a uniform random offset in
  ``[0, span - d_s]`` (``d_s`` the source's duration), so every copy lies
  whole inside ``[0, span)`` and users overlap the way independent users do;
* packets are written in time order as one microsecond Ethernet pcap, full
  records (no snap cut), through a temporary file renamed at the end.

IP and transport checksums are not recomputed (swell's reader, like most
capture analysis, does not check them); timestamps are shifted, never
reordered within a copy. One seed makes the composite reproducible.

``swell trace compose OUT.pcap SRC... --copies K --span S`` writes one
(:func:`build`; the fidelity bench calls it too). Errors are one line
(:class:`~swell.errors.SwellError`) naming the file; nothing is left behind.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swell.errors import SwellError
from swell.extract.reader import open_trace
from swell.fsutil import atomic_path, input_file

ETH, IPV4, IPV6, HDR = 14, 0x0800, 0x86DD, 16  # Ethernet header, its types, pcap record header
ADDRS, NET = 4096, 10 << 24  # addresses per copy; copies are renumbered into 10.0.0.0/8
NET6 = bytes.fromhex("fd00" + "00" * 10)  # IPv6 copies: NET6 + the 32 bits an IPv4 one gets
# where an address starts in the IP header (source; destination after it) and its length
ADDR_AT = {4: (12, 4), 6: (8, 16)}


@dataclass
class Source:
    """One source capture's kept records: raw bytes, record starts, lengths, times (us)."""

    name: str
    data: np.ndarray  # the kept records, back to back (record header included)
    starts: np.ndarray
    lens: np.ndarray
    t_us: np.ndarray  # rebased to 0
    dropped: int
    src_idx: np.ndarray  # per record: index of its source address in the source's table
    dst_idx: np.ndarray
    v6: np.ndarray  # per record: an IPv6 packet
    unconverted: int = 0  # packets the reader returns that editcap did not convert

    @property
    def duration_us(self) -> int:
        return int(self.t_us.max()) if self.t_us.size else 0


def _as_pcap(path: Path, tmp: Path) -> Path:
    """``path`` as a little-endian microsecond Ethernet pcap (converted when needed)."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:4] == b"\xd4\xc3\xb2\xa1" and int.from_bytes(head[20:24], "little") == 1:
        return path
    out = tmp / (path.stem + ".pcap")
    r = subprocess.run(["editcap", "-F", "pcap", str(path), str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        raise SwellError(path, f"editcap cannot convert it to pcap: {r.stderr.strip()}")
    with open(out, "rb") as f:
        head = f.read(24)
    if head[:4] != b"\xd4\xc3\xb2\xa1" or int.from_bytes(head[20:24], "little") != 1:
        raise SwellError(path, "not an Ethernet capture (swell trace compose needs Ethernet)")
    return out


def _headers(ts_ns: np.ndarray, caplen: np.ndarray, wirelen: np.ndarray) -> np.ndarray:
    """The records' pcap headers (seconds, microseconds, lengths) as the reader saw them."""
    return np.stack([ts_ns // 1_000_000_000, ts_ns % 1_000_000_000 // 1000, caplen, wirelen],
                    axis=1).astype(np.int64)


def _find_record(data: bytes, raw: np.ndarray, pos: int, want: np.ndarray) -> int:
    """The first offset at or after ``pos`` holding a record header equal to ``want``
    (the lengths found by byte search, the time checked as the reader reads it)."""
    lens = np.array(want[2:], dtype="<u4").tobytes()
    at = data.find(lens, pos + 8)
    while at >= 0:
        h = raw[at - 8: at + 8].view("<u4").astype(np.int64)
        if h[0] * 1_000_000 + h[1] == want[0] * 1_000_000 + want[1]:
            return at - 8
        at = data.find(lens, at + 1)
    return -1


def record_starts(path: Path, data: bytes) -> np.ndarray:
    """Where the records the reader returns start in a classic pcap (``data``: its bytes).

    The reader (the one ``swell extract`` uses) decides which records are real:
    after a damaged length it resyncs at the next plausible record, so one bad
    length costs one packet. Its packets are then located in ``data``: records
    follow one another (checked by comparing headers, a block at a time); where
    one does not (bytes the reader skipped), its header is searched for from
    the end of the previous record. The damage is left for
    :func:`swell.extract.reader.last_damage` (``path``'s name)."""
    with open_trace(path) as tr:
        cols = [(c.ts_ns, c.caplen, c.wirelen) for c in tr.chunks()]
    if not cols:
        return np.zeros(0, dtype=np.int64)
    want = _headers(*(np.concatenate(x) for x in zip(*cols, strict=True)))
    raw = np.frombuffer(data, dtype=np.uint8)
    ln = HDR + want[:, 2]
    starts = np.empty(len(want), dtype=np.int64)
    i, pos, block = 0, 24, 1 << 16
    while i < len(want):
        j = min(len(want), i + block)
        st = pos + np.r_[0, np.cumsum(ln[i: j - 1])]
        fits = st + HDR <= raw.size
        got = raw[np.where(fits, st, 0)[:, None] + np.arange(HDR)].view("<u4").astype(np.int64)
        same = fits & ((got[:, 0] * 1_000_000 + got[:, 1]
                        == want[i:j, 0] * 1_000_000 + want[i:j, 1])
                       & (got[:, 2:] == want[i:j, 2:]).all(axis=1))
        k = int(np.argmin(same)) if not same.all() else j - i
        starts[i: i + k] = st[:k]
        if k == j - i:
            pos, i = int(st[-1] + ln[j - 1]), j
            continue
        at = _find_record(data, raw, int(st[k]), want[i + k])
        if at < 0:  # the reader returned a record that is not in the file: a reader bug
            raise SwellError(path, f"record {i + k + 1} read but not found in the file")
        starts[i + k] = at
        pos, i = at + int(ln[i + k]), i + k + 1
    return starts


def load_source(path: Path, tmp: Path) -> Source:
    """Read a source capture's Ethernet TCP and UDP records over IPv4 or IPv6."""
    pcap = _as_pcap(path, tmp)
    data = pcap.read_bytes()
    st = record_starts(pcap, data)
    unconverted = 0
    if pcap != path:  # converted: the damage of the user's file, under its name
        with open_trace(path) as tr:
            unconverted = max(0, sum(len(c) for c in tr.chunks()) - st.size)
    raw = np.frombuffer(data, dtype=np.uint8)
    if not st.size:
        raise SwellError(path, "no packets")
    hdr = raw[st[:, None] + np.arange(HDR)].view("<u4").reshape(-1, 4)
    t_us = hdr[:, 0].astype(np.int64) * 1_000_000 + hdr[:, 1]
    caplen = hdr[:, 2].astype(np.int64)
    def byte(at: np.ndarray) -> np.ndarray:
        return raw[np.minimum(at, len(raw) - 1)].astype(np.int64)

    etype = np.where(caplen >= ETH, byte(st + HDR + 12) << 8 | byte(st + HDR + 13), 0)
    v6 = (etype == IPV6) & (caplen >= ETH + 40)
    v4 = (etype == IPV4) & (caplen >= ETH + 20)
    proto = np.where(v6, byte(st + HDR + ETH + 6), byte(st + HDR + ETH + 9))
    keep = (v4 | v6) & ((proto == 6) | (proto == 17))
    st, ln, t, v6 = st[keep], caplen[keep] + HDR, t_us[keep], v6[keep]
    if not st.size:
        raise SwellError(path, "no Ethernet TCP or UDP packets over IPv4 or IPv6 (VLAN-tagged "
                         "packets and IPv6 extension headers are not composed)")
    order = np.argsort(t, kind="stable")
    st, ln, t, v6 = st[order], ln[order], t[order], v6[order]
    idx = np.repeat(st - np.r_[0, np.cumsum(ln)[:-1]], ln) + np.arange(ln.sum())
    # every address as 17 bytes (family, then 16 address bytes, IPv4 left-aligned)
    both = np.r_[st, st]
    fam = np.r_[v6, v6]
    off = np.where(fam, ADDR_AT[6][0], ADDR_AT[4][0]) + np.r_[np.zeros(st.size, np.int64),
                                                               np.where(v6, 16, 4)]
    addr = np.zeros((both.size, 17), dtype=np.uint8)
    addr[:, 0] = np.where(fam, 6, 4)
    cols = raw[np.minimum((both + HDR + ETH + off)[:, None] + np.arange(16), len(raw) - 1)]
    addr[:, 1:] = np.where(fam[:, None] | (np.arange(16) < 4), cols, 0)
    table, inv = np.unique(addr, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    if len(table) > ADDRS:
        raise SwellError(path, f"{len(table)} addresses, at most {ADDRS} per source")
    return Source(path.name, raw[idx], np.r_[0, np.cumsum(ln)[:-1]], ln, t - t[0],
                  int((~keep).sum()), inv[: st.size], inv[st.size:], v6, unconverted)


def _put_u32(buf: np.ndarray, at: np.ndarray, val: np.ndarray) -> None:
    for i in range(4):
        buf[at + i] = (val >> (8 * i)) & 0xFF


def build(out: Path, sources: list[Path], copies: int, span_s: float, seed: int = 7
          ) -> dict:
    """Write the composite (see the module docstring); returns its description."""
    if copies < 1 or copies * len(sources) >= (1 << 24) // ADDRS:
        raise SwellError("--copies", "must be 1.."
                         f"{((1 << 24) // ADDRS - 1) // max(1, len(sources))}")
    if not span_s > 0:
        raise SwellError("--span", f"must be positive, not {span_s}")
    if not sources:
        raise SwellError("compose", "no source captures")
    for p in sources:
        input_file(p, "capture")
    span_us = int(span_s * 1e6)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="swell-composite-") as td:
        srcs = [load_source(Path(p), Path(td)) for p in sources]
    for s in srcs:
        if s.duration_us >= span_us:
            raise SwellError(s.name, f"lasts {s.duration_us / 1e6:.1f} s, not shorter than "
                                     f"the span {span_s} s")
    # all sources' records back to back; a record is (global start, length)
    data = np.concatenate([s.data for s in srcs])
    base = np.cumsum([0] + [s.data.size for s in srcs])[:-1]
    g_start = np.concatenate([b0 + s.starts for b0, s in zip(base, srcs, strict=True)])
    g_len = np.concatenate([s.lens for s in srcs])
    g_src = np.concatenate([s.src_idx for s in srcs])
    g_dst = np.concatenate([s.dst_idx for s in srcs])
    g_v6 = np.concatenate([s.v6 for s in srcs])
    first = np.cumsum([0] + [s.t_us.size for s in srcs])[:-1]
    tt, cid, rec = [], [], []  # every (source, copy): its packets' times, copy id, record
    for si, s in enumerate(srcs):
        offs = rng.integers(0, span_us - s.duration_us, copies)
        for k in range(copies):
            tt.append(offs[k] + s.t_us)
            cid.append(np.full(s.t_us.size, 1 + si * copies + k, dtype=np.int64))
            rec.append(first[si] + np.arange(s.t_us.size))
    t, c, r = (np.concatenate(x) for x in (tt, cid, rec))
    o = np.argsort(t, kind="stable")
    t, c, r = t[o], c[o], r[o]
    with atomic_path(out) as tmp:
        _write(tmp, t, c, r, data, g_start, g_len, g_src, g_dst, g_v6)
    return {"path": str(out), "span_s": span_s, "copies": copies, "seed": seed,
            "packets": int(t.size),
            "sources": [{"name": s.name, "packets": int(s.t_us.size),
                         "duration_s": s.duration_us / 1e6, "dropped": s.dropped,
                         "ipv6_packets": int(s.v6.sum()), "unconverted": s.unconverted}
                        for s in srcs]}


def _write(tmp: Path, t: np.ndarray, c: np.ndarray, r: np.ndarray, data: np.ndarray,
           g_start: np.ndarray, g_len: np.ndarray, g_src: np.ndarray, g_dst: np.ndarray,
           g_v6: np.ndarray) -> None:
    """The records in time order: new times, copy addresses, as one pcap."""
    base_us = 1_600_000_000 * 1_000_000
    with open(tmp, "wb") as f:
        f.write(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + bytes(8)
                + (262144).to_bytes(4, "little") + (1).to_bytes(4, "little"))
        for a in range(0, t.size, 200_000):  # bounded memory per block of records
            ri, kk, tb = r[a: a + 200_000], c[a: a + 200_000], base_us + t[a: a + 200_000]
            ln = g_len[ri]
            ostart = np.r_[0, np.cumsum(ln)[:-1]]
            buf = data[np.repeat(g_start[ri] - ostart, ln) + np.arange(ln.sum())]
            _put_u32(buf, ostart, tb // 1_000_000)
            _put_u32(buf, ostart + 4, tb % 1_000_000)
            six = g_v6[ri]
            for side, idx in ((0, g_src[ri]), (1, g_dst[ri])):
                low = (kk << 12) + idx
                for fam, m in ((4, ~six), (6, six)):
                    if not m.any():
                        continue
                    at, size = ADDR_AT[fam]
                    where = ostart[m] + HDR + ETH + at + side * size
                    new = (NET if fam == 4 else 0) + low[m]
                    for j in range(size - 4):  # the IPv6 prefix
                        buf[where + j] = NET6[j]
                    for j in range(4):  # the last 32 bits, network byte order
                        buf[where + size - 4 + j] = (new >> (24 - 8 * j)) & 0xFF
            f.write(buf.tobytes())
