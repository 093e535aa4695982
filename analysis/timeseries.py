"""Byte and packet time series per direction.

The core is pure: :func:`bin_counts` turns arrays of timestamps (ns) and sizes
into bytes and packets per bin of width ``bin_ns`` (100 us and up), and the
``*_directions`` functions give one boolean mask per direction. The I/O edge:
:func:`load_packets` reads a capture through :mod:`swell.extract.reader` into
a :class:`Packets` bundle of the few columns analysis needs;
:func:`load_window` also splits directions (on the whole capture, so a SYN
before the window still counts) and cuts a time window; :func:`capture_series`
does all of it in one call for other stages (experiment runner, report).

Directions. A rule maps each packet to one of two named directions or to
neither:

* ``syn`` (default): per transport connection (5-tuple, both ways), the host
  that sent a bare SYN is the client; packets client -> server are ``c2s``,
  server -> client ``s2c``. Without a SYN the SYN/ACK receiver is the client;
  without either (mid-stream, UDP) the endpoint with the lower port is the
  server (ties: the smaller address). This matches a trace's monitor and a dumbbell's
  bottleneck alike, so an original and a generated capture line up.
* ``src=NET[,NET...]``: packets whose source address lies in the given
  networks/addresses are ``out``, those whose destination does are ``in``;
  packets touching neither side are dropped.

Bins are aligned to ``start_ns`` (default: first packet) and cover
``[start_ns, end_ns)``; the last partial bin is kept only when asked.

Addresses. IPv4 and IPv6 packets are read alike: each address is two
``uint64`` words (``hi``, ``lo``) of its 128-bit form, IPv4 mapped as
``::ffff:a.b.c.d`` (:func:`address_words`), so directions, connection keys,
``src=`` rules and host filters work on both families, and a packet's size
is its frame length (``wirelen``) or its IP length (IPv6: payload + 40).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swell.errors import SwellError

MIN_BIN_NS = 100_000  # 100 us
MAX_BINS = 1 << 27  # 134M bins (1 GiB per float64 column): beyond this, ask for a window
V4_PREFIX_HI = 0
V4_PREFIX_LO = 0xFFFF << 32  # ::ffff:a.b.c.d in the low 64 bits


@dataclass(frozen=True)
class Packets:
    """Columns of a capture needed for analysis (one row per IP packet)."""

    ts_ns: np.ndarray  # int64
    size: np.ndarray  # int64, bytes on the wire (frame length)
    saddr_hi: np.ndarray  # uint64
    saddr_lo: np.ndarray
    daddr_hi: np.ndarray
    daddr_lo: np.ndarray
    sport: np.ndarray  # uint16
    dport: np.ndarray
    proto: np.ndarray  # uint8
    tcp_flags: np.ndarray  # uint8

    def __len__(self) -> int:
        return int(self.ts_ns.size)

    def take(self, sel: np.ndarray) -> Packets:
        """Rows selected by a boolean mask or index array."""
        return Packets(**{k: getattr(self, k)[sel] for k in self.__dataclass_fields__})

    @property
    def duration_s(self) -> float:
        if len(self) == 0:
            return 0.0
        return float(self.ts_ns.max() - self.ts_ns.min()) / 1e9


@dataclass(frozen=True)
class Series:
    """Bytes and packets per bin; bin ``i`` covers ``start_ns + i*bin_ns``."""

    start_ns: int
    bin_ns: int
    bytes: np.ndarray  # float64 per bin
    packets: np.ndarray  # float64 per bin

    @property
    def bin_s(self) -> float:
        return self.bin_ns / 1e9

    @property
    def times_s(self) -> np.ndarray:
        """Start of each bin, seconds from ``start_ns``."""
        return np.arange(self.bytes.size) * self.bin_s

    @property
    def bits_per_s(self) -> np.ndarray:
        return self.bytes * 8.0 / self.bin_s

    @property
    def mean_bps(self) -> float:
        if not self.bytes.size:
            return 0.0
        return float(self.bytes.sum() * 8.0 / (self.bytes.size * self.bin_s))

    def values(self, unit: str) -> np.ndarray:
        if unit == "bytes":
            return self.bytes
        if unit == "packets":
            return self.packets
        raise ValueError(f"unit must be 'bytes' or 'packets', got {unit!r}")

    def halves(self) -> tuple[Series, Series]:
        """First and second half (equal numbers of bins)."""
        h = self.bytes.size // 2
        second_start = self.start_ns + h * self.bin_ns
        return (
            Series(self.start_ns, self.bin_ns, self.bytes[:h], self.packets[:h]),
            Series(second_start, self.bin_ns, self.bytes[h : 2 * h], self.packets[h : 2 * h]),
        )


def bin_counts(
    ts_ns: np.ndarray,
    sizes: np.ndarray,
    bin_ns: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
    keep_partial: bool = False,
) -> Series:
    """Bytes and packets per bin of ``bin_ns`` over ``[start_ns, end_ns)``.

    ``start_ns``/``end_ns`` default to the first packet and just past the last.
    Without ``keep_partial`` only whole bins are returned (a trailing bin that
    ``end_ns`` cuts short is dropped, so rates are not biased low).
    """
    if bin_ns < MIN_BIN_NS:
        raise ValueError(f"bin must be at least {MIN_BIN_NS} ns (100 us), got {bin_ns}")
    ts = np.asarray(ts_ns, dtype=np.int64)
    sz = np.asarray(sizes, dtype=np.float64)
    if ts.shape != sz.shape:
        raise ValueError("timestamps and sizes differ in length")
    if start_ns is None:
        start_ns = int(ts.min()) if ts.size else 0
    if end_ns is None:
        end_ns = int(ts.max()) + 1 if ts.size else start_ns
    span = max(0, end_ns - start_ns)
    nbins = -(-span // bin_ns) if keep_partial else span // bin_ns
    if nbins > MAX_BINS:
        raise ValueError(f"{nbins} bins of {bin_ns} ns is too many (limit {MAX_BINS}); "
                         "choose a shorter window or wider bins")
    sel = (ts >= start_ns) & (ts < start_ns + nbins * bin_ns)
    idx = (ts[sel] - start_ns) // bin_ns
    return Series(
        start_ns=int(start_ns),
        bin_ns=int(bin_ns),
        bytes=np.bincount(idx, weights=sz[sel], minlength=nbins).astype(float),
        packets=np.bincount(idx, minlength=nbins).astype(float),
    )


def direction_series(
    packets: Packets,
    directions: dict[str, np.ndarray],
    bin_ns: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> dict[str, Series]:
    """One :class:`Series` per direction, all on the same bin grid."""
    if start_ns is None:
        start_ns = int(packets.ts_ns.min()) if len(packets) else 0
    if end_ns is None:
        end_ns = int(packets.ts_ns.max()) + 1 if len(packets) else start_ns
    return {
        name: bin_counts(packets.ts_ns[m], packets.size[m], bin_ns, start_ns, end_ns)
        for name, m in directions.items()
    }


# ---------------------------------------------------------------- directions


def _endpoint_less(
    a_hi: np.ndarray, a_lo: np.ndarray, a_port: np.ndarray,
    b_hi: np.ndarray, b_lo: np.ndarray, b_port: np.ndarray,
) -> np.ndarray:
    """Elementwise (addr, port) of a < (addr, port) of b."""
    return (a_hi < b_hi) | ((a_hi == b_hi) & (
        (a_lo < b_lo) | ((a_lo == b_lo) & (a_port < b_port))))


def _mix64(*cols: np.ndarray) -> np.ndarray:
    """A 64-bit hash of several uint64 columns (splitmix64 finaliser, chained).

    Used as the connection key: with n distinct connections a collision has
    probability about n^2 / 2^65 (1e-7 for a million connections).
    """
    h = np.full(cols[0].shape, 0x9E3779B97F4A7C15, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h = (h ^ np.asarray(c, np.uint64)) * np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(29)
    return h


def syn_directions(p: Packets, udp: str = "port") -> dict[str, np.ndarray]:
    """``c2s``/``s2c`` masks: the bare-SYN sender of a connection is its client; without
    a SYN the SYN/ACK receiver; without either the higher port. With ``udp="first"`` a
    UDP flow's client is decided as the extractor decides it (``extract/conntable.py``):
    the side of a well-known port is the server, else the first packet's sender is the
    client (``p`` in time order; flows by their 5-tuple, idle splits ignored), so the
    trace's directions are the roles its model gives the generator."""
    sport = p.sport.astype(np.int64)
    dport = p.dport.astype(np.int64)
    # Canonical connection key: the smaller endpoint first.
    src_first = _endpoint_less(p.saddr_hi, p.saddr_lo, sport, p.daddr_hi, p.daddr_lo, dport)
    ka_hi = np.where(src_first, p.saddr_hi, p.daddr_hi)
    ka_lo = np.where(src_first, p.saddr_lo, p.daddr_lo)
    kb_hi = np.where(src_first, p.daddr_hi, p.saddr_hi)
    kb_lo = np.where(src_first, p.daddr_lo, p.saddr_lo)
    ka_p = np.where(src_first, sport, dport)
    kb_p = np.where(src_first, dport, sport)
    key = _mix64(p.proto.astype(np.uint64), ka_hi, ka_lo, ka_p.astype(np.uint64),
                 kb_hi, kb_lo, kb_p.astype(np.uint64))
    _, conn = np.unique(key, return_inverse=True)
    conn = conn.ravel()
    # Client side per connection: +1 = the canonical first endpoint, -1 = second, 0 = unknown.
    syn = (p.proto == 6) & ((p.tcp_flags & 0x12) == 0x02)
    client = np.zeros(int(conn.max()) + 1 if conn.size else 0, dtype=np.int8)
    syn_idx = np.flatnonzero(syn)
    # The first SYN of a connection decides (later retransmissions agree).
    first = syn_idx[np.unique(conn[syn_idx], return_index=True)[1]]
    client[conn[first]] = np.where(src_first[first], 1, -1)
    # No SYN: the SYN/ACK receiver is the client.
    synack = (p.proto == 6) & ((p.tcp_flags & 0x12) == 0x12)
    sa_idx = np.flatnonzero(synack)
    sa_first = sa_idx[np.unique(conn[sa_idx], return_index=True)[1]]
    sa_conn = conn[sa_first]
    unknown = client[sa_conn] == 0
    client[sa_conn[unknown]] = np.where(src_first[sa_first[unknown]], -1, 1)
    # Neither: the endpoint with the higher port is the client (ties: larger address).
    fallback = np.where(ka_p > kb_p, 1, -1).astype(np.int8)
    if udp == "first":
        fallback = np.where(p.proto == 17, _udp_first_client(p, conn, src_first, sport, dport),
                            fallback).astype(np.int8)
    elif udp != "port":
        raise ValueError(f"udp must be 'port' or 'first', not {udp!r}")
    side = client[conn]
    side = np.where(side == 0, fallback, side)
    from_client = np.where(side == 1, src_first, ~src_first)
    return {"c2s": from_client, "s2c": ~from_client}


def _udp_first_client(p: Packets, conn: np.ndarray, src_first: np.ndarray, sport: np.ndarray,
                      dport: np.ndarray) -> np.ndarray:
    """Per packet, +1 when its connection's client is the canonical first endpoint, -1
    when the second: by the connection's first packet, whose sender is the client
    unless only its own port is well known (then it serves)."""
    from swell.extract.conntypes import WELL_KNOWN

    _, first = np.unique(conn, return_index=True)  # the first occurrence: the first packet
    known = {port for proto, port in WELL_KNOWN if proto == 17}
    ks = np.isin(sport[first], list(known))
    kd = np.isin(dport[first], list(known))
    sender_is_client = ~(ks & ~kd)
    client_is_first = np.zeros(int(conn.max()) + 1 if conn.size else 0, dtype=bool)
    client_is_first[conn[first]] = sender_is_client == src_first[first]
    return np.where(client_is_first[conn], 1, -1)


def parse_networks(spec: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``"10.0.0.0/8,192.168.1.5"`` -> networks; raises ``SwellError`` on bad input."""
    nets = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise SwellError("--direction", f"not an address or network: {item!r}") from exc
    if not nets:
        raise SwellError("--direction", "src= needs at least one address or network")
    return nets


def in_networks(
    hi: np.ndarray, lo: np.ndarray, nets: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> np.ndarray:
    """Mask of addresses (as reader hi/lo words, IPv4 mapped) inside any of ``nets``."""
    hi = np.asarray(hi, np.uint64)
    lo = np.asarray(lo, np.uint64)
    out = np.zeros(hi.shape, dtype=bool)
    for net in nets:
        if net.version == 4:
            base = int(net.network_address)
            mask = int(net.netmask)
            is_v4 = (hi == np.uint64(V4_PREFIX_HI)) & ((lo >> np.uint64(32)) == np.uint64(0xFFFF))
            v4 = (lo & np.uint64(0xFFFFFFFF)).astype(np.uint64)
            out |= is_v4 & ((v4 & np.uint64(mask)) == np.uint64(base))
        else:
            base = int(net.network_address)
            mask = int(net.netmask)
            b_hi, b_lo = np.uint64(base >> 64), np.uint64(base & (2**64 - 1))
            m_hi, m_lo = np.uint64(mask >> 64), np.uint64(mask & (2**64 - 1))
            out |= ((hi & m_hi) == b_hi) & ((lo & m_lo) == b_lo)
    return out


def address_directions(p: Packets, spec: str) -> dict[str, np.ndarray]:
    """``out`` (source in the set) and ``in`` (destination in it) masks."""
    nets = parse_networks(spec)
    src_in = in_networks(p.saddr_hi, p.saddr_lo, nets)
    dst_in = in_networks(p.daddr_hi, p.daddr_lo, nets)
    return {"out": src_in & ~dst_in, "in": dst_in & ~src_in}


def directions_by_rule(p: Packets, rule: str = "roles") -> dict[str, np.ndarray]:
    """Direction masks by ``rule``: ``roles`` (as ``syn``, and a UDP flow's client as
    the extractor decides it: :func:`syn_directions` with ``udp="first"``), ``syn``
    (UDP: the higher port is the client), ``src=NETS`` or ``all`` (one direction)."""
    if rule == "roles":
        return syn_directions(p, udp="first")
    if rule == "syn":
        return syn_directions(p)
    if rule == "all":
        return {"all": np.ones(len(p), dtype=bool)}
    if rule.startswith("src="):
        return address_directions(p, rule[4:])
    raise SwellError("--direction",
                     f"unknown rule {rule!r}; use roles, syn, all or src=NET[,NET...]")


# ---------------------------------------------------------------- I/O edge


def load_packets(path: str | Path, size_field: str = "wirelen") -> Packets:
    """Read the IP packets of a capture (all chunks) through ``swell.extract.reader``.

    ``size_field`` is ``wirelen`` (frame bytes on the wire, as tshark counts)
    or ``ip_len`` (IP datagram bytes).
    """
    try:
        from swell.extract.reader import open_trace
    except ModuleNotFoundError as exc:  # the reader is part of swell.extract
        raise SwellError(path, "swell.extract.reader is not available in this build") from exc
    cols: dict[str, list[np.ndarray]] = {k: [] for k in Packets.__dataclass_fields__}
    with open_trace(path) as tr:
        for ch in tr.chunks(max_packets=1 << 18):
            ip = np.asarray(ch.ipver) != 0
            cols["ts_ns"].append(np.asarray(ch.ts_ns, np.int64)[ip])
            cols["size"].append(np.asarray(getattr(ch, size_field), np.int64)[ip])
            for k in ("saddr_hi", "saddr_lo", "daddr_hi", "daddr_lo"):
                cols[k].append(np.asarray(getattr(ch, k), np.uint64)[ip])
            for k, dt in (("sport", np.uint16), ("dport", np.uint16), ("proto", np.uint8),
                          ("tcp_flags", np.uint8)):
                cols[k].append(np.asarray(getattr(ch, k), dt)[ip])
    arrays = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}
    if arrays["ts_ns"].size == 0:
        raise SwellError(path, "no IP packets in this capture")
    order = np.argsort(arrays["ts_ns"], kind="stable")
    return Packets(**{k: v[order] for k, v in arrays.items()})


def load_window(
    path: str | Path,
    rule: str = "roles",
    bin_s: float = 0.001,
    start_s: float = 0.0,
    duration_s: float | None = None,
) -> tuple[Packets, dict[str, np.ndarray], tuple[int, int | None]]:
    """Read a capture, split directions on the whole of it, then cut the window.

    Returns the packets in the window, their direction masks and the bin grid
    ``(start_ns, end_ns)``: the window itself (``end_ns`` None: the last packet).
    Raises :class:`SwellError` for a missing file, an empty window, or a span
    that would need more than ``MAX_BINS`` bins (timestamps that jump years).
    """
    path = Path(path)
    if not path.is_file():
        raise SwellError(path, "no such file")
    if start_s < 0 or (duration_s is not None and duration_s <= 0):
        raise SwellError(path, "a window needs start >= 0 and duration > 0")
    pk = load_packets(path)
    dirs = directions_by_rule(pk, rule)
    t0 = int(pk.ts_ns.min()) + int(round(start_s * 1e9))
    sel = pk.ts_ns >= t0
    if duration_s is not None:
        sel &= pk.ts_ns < t0 + int(round(duration_s * 1e9))
    if not sel.any():
        raise SwellError(path, f"no packets in the window starting {start_s} s after the first")
    pk = pk.take(sel)
    span_s = pk.duration_s
    if span_s / bin_s > MAX_BINS:
        raise SwellError(path, f"the packets span {span_s:,.0f} s ({span_s / 86400:.1f} days; "
                         "timestamps jump?): that is too many bins; choose a window with "
                         "--start/--duration or wider bins with --bin-ms")
    end = None if duration_s is None else t0 + int(round(duration_s * 1e9))
    return pk, {k: m[sel] for k, m in dirs.items()}, (t0, end)


def capture_series(
    path: str | Path,
    bin_s: float = 0.001,
    rule: str = "roles",
    start_s: float = 0.0,
    duration_s: float | None = None,
) -> dict[str, Series]:
    """Per-direction :class:`Series` of a capture (the one-call form for other stages)."""
    pk, dirs, (start_ns, end_ns) = load_window(path, rule, bin_s, start_s, duration_s)
    return direction_series(pk, dirs, int(round(bin_s * 1e9)), start_ns, end_ns)


def address_words(
    addrs: Iterable[ipaddress.IPv4Address | ipaddress.IPv6Address],
) -> tuple[np.ndarray, np.ndarray]:
    """The (hi, lo) ``uint64`` words of addresses as the reader gives them (IPv4 mapped)."""
    values = [int(a) | V4_PREFIX_LO if a.version == 4 else int(a) for a in addrs]
    hi = np.array([v >> 64 for v in values], np.uint64)
    lo = np.array([v & (2**64 - 1) for v in values], np.uint64)
    return hi, lo


def make_packets(
    ts_ns: np.ndarray,
    size: np.ndarray,
    saddr_v4: np.ndarray | None = None,
    daddr_v4: np.ndarray | None = None,
    sport: np.ndarray | None = None,
    dport: np.ndarray | None = None,
    proto: np.ndarray | None = None,
    tcp_flags: np.ndarray | None = None,
    saddr: list[str] | None = None,
    daddr: list[str] | None = None,
) -> Packets:
    """Build :class:`Packets` from plain arrays.

    Addresses are IPv4 integers (``saddr_v4``/``daddr_v4``) or, for either
    family, text (``saddr``/``daddr``, one per packet; they take precedence).
    """
    n = np.asarray(ts_ns).size

    def col(a: np.ndarray | None, dt: type) -> np.ndarray:
        return np.zeros(n, dt) if a is None else np.asarray(a).astype(dt)

    def words(text: list[str] | None, v4: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if text is not None:
            return address_words(ipaddress.ip_address(t) for t in text)
        return np.zeros(n, np.uint64), col(v4, np.uint64) | np.uint64(V4_PREFIX_LO)

    s_hi, s_lo = words(saddr, saddr_v4)
    d_hi, d_lo = words(daddr, daddr_v4)
    return Packets(
        ts_ns=np.asarray(ts_ns, np.int64),
        size=np.asarray(size, np.int64),
        saddr_hi=s_hi,
        saddr_lo=s_lo,
        daddr_hi=d_hi,
        daddr_lo=d_lo,
        sport=col(sport, np.uint16),
        dport=col(dport, np.uint16),
        proto=col(proto, np.uint8),
        tcp_flags=col(tcp_flags, np.uint8),
    )
