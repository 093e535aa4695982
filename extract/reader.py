"""Streaming trace reader: pcap/pcapng in, columnar numpy chunks out.

Design: the parsing happens in the Rust crate ``extract/native``
(``libswell_pcap.so``), loaded here with :mod:`ctypes`. Python allocates one
numpy array per column for a chunk, hands the pointers to
``swell_pcap_read``, which fills up to N packets straight from a large read
buffer (no per-packet allocation, no Python per packet) and returns the count.
Memory is bounded by the chunk size, so a multi-GB trace is never loaded
whole.

The columns, their dtypes and the warning reasons are the contract of
``docs/architecture.md`` section 1. Addresses are 128-bit, split in two
``uint64`` columns (``hi``, ``lo``); IPv4 is stored as ``::ffff:a.b.c.d``.

Bad input: a file that cannot be read as a capture at all raises
:class:`TraceError` (one line naming the file); so does a FIFO, socket or
device (a pipe with no writer would block forever). Everything else is a counted
warning in :attr:`Trace.warnings`; reasons in :data:`SKIP_REASONS` count
packets that were *not* returned (truncated last record, corrupt record,
unknown pcapng interface), all others annotate packets that were returned.
Timestamps are left as recorded.

Warning reasons (``tr.warnings`` keys; only those that occurred):

- packets not returned: ``truncated_last_record`` (file ends inside a
  record), ``corrupt_record`` (impossible record length, or a pcapng packet
  block whose length is damaged: the reader resumes at the next offset within
  1 MiB where a chain of plausible records (four pcap record headers, three
  pcapng blocks with matching trailing lengths) follows, counting
  ``resync_skipped_bytes``, or stops, leaving ``size - offset`` bytes unread),
  ``bad_interface_id`` (pcapng packet naming an interface that was never
  described);
- file structure: ``truncated_block``, ``corrupt_block`` (pcapng framing: a
  damaged length, skipped as above; a damaged trailing length alone is
  counted and the block read), ``no_timestamp`` (pcapng simple packet block:
  previous timestamp used);
- packets returned with a note: ``non_ip`` (``ipver == 0``),
  ``unknown_linktype`` (``ipver == 0``), ``short_packet`` (a header is cut
  before its fields; ``l4_ok`` False), ``bad_ip_header``, ``bad_tcp_header``,
  ``ip_len_exceeds_frame``, ``caplen_exceeds_wirelen``, ``ts_backwards``
  (earlier than the previous packet), ``ts_jump`` (more than a day from the
  previous packet, either way).

:attr:`Trace.damage` sums it up for the commands' warning line and their JSON:
the packets not returned, the bytes lost (skipped by a resync, and
``unread_bytes``: what was left unread at the end when the reader stopped) and
an estimate of the packets in the unread bytes. :func:`read_with_offsets` also
gives the file offset of each packet's bytes (what a raw replay copies).

Column semantics beyond the names: ``l4_ok`` means every transport field in
the chunk was captured (TCP through the window field, UDP's 8 bytes, ICMP's
8), so a 52-byte snap length still gives ``l4_ok``; ``payload_len`` is
IP length minus IP, extension and transport header lengths (for later
fragments: the fragment's share of the IP payload, ports 0); IPv4 total
length 0 (segmentation offload) is taken from the frame length.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.fsutil import input_file
from swell.native import native_artifact

# Packets per chunk: bounds memory; 2^17 reads and extracts a few % faster than 2^18
# on the 2-core VM (fresh memory per chunk; docs/extract-speed.md, fourth round).
DEFAULT_CHUNK = 1 << 17

# Column name -> dtype. The order is the C ABI (struct CColumns in columns.rs).
COLUMNS: tuple[tuple[str, type[np.generic]], ...] = (
    ("ts_ns", np.int64),
    ("caplen", np.uint32),
    ("wirelen", np.uint32),
    ("iface", np.uint16),
    ("linktype", np.uint16),
    ("ipver", np.uint8),
    ("proto", np.uint8),
    ("frag", np.uint8),
    ("saddr_hi", np.uint64),
    ("saddr_lo", np.uint64),
    ("daddr_hi", np.uint64),
    ("daddr_lo", np.uint64),
    ("sport", np.uint16),
    ("dport", np.uint16),
    ("tcp_flags", np.uint8),
    ("seq", np.uint32),
    ("ack", np.uint32),
    ("win", np.uint16),
    ("ip_len", np.uint32),
    ("payload_len", np.uint32),
    ("vlan", np.uint16),
    ("l4_ok", np.bool_),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)

# TCP flag bits and fragment bits of the ``tcp_flags`` and ``frag`` columns.
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 1, 2, 4, 8, 16, 32, 64, 128
FRAG_ANY, FRAG_FIRST, FRAG_LATER = 1, 2, 4

V4_MAPPED_HI_OF_LO = 0xFFFF  # lo >> 32 for an IPv4-mapped address (hi == 0)


class TraceError(SwellError):
    """A capture file that cannot be read (missing, empty, not a capture, I/O error)."""


@dataclass(eq=False)
class PacketChunk:
    """Up to N packets as parallel numpy columns (see :data:`COLUMNS`)."""

    ts_ns: np.ndarray
    caplen: np.ndarray
    wirelen: np.ndarray
    iface: np.ndarray
    linktype: np.ndarray
    ipver: np.ndarray
    proto: np.ndarray
    frag: np.ndarray
    saddr_hi: np.ndarray
    saddr_lo: np.ndarray
    daddr_hi: np.ndarray
    daddr_lo: np.ndarray
    sport: np.ndarray
    dport: np.ndarray
    tcp_flags: np.ndarray
    seq: np.ndarray
    ack: np.ndarray
    win: np.ndarray
    ip_len: np.ndarray
    payload_len: np.ndarray
    vlan: np.ndarray
    l4_ok: np.ndarray

    def __len__(self) -> int:
        return int(self.ts_ns.shape[0])

    @classmethod
    def empty(cls, n: int = 0) -> PacketChunk:
        return cls(**{name: np.zeros(n, dtype=dt) for name, dt in COLUMNS})

    @classmethod
    def concat(cls, chunks: Sequence[PacketChunk]) -> PacketChunk:
        if not chunks:
            return cls.empty()
        return cls(**{n: np.concatenate([getattr(c, n) for c in chunks]) for n in COLUMN_NAMES})

    def select(self, index: Any) -> PacketChunk:
        """Rows picked by a boolean mask, an index array or a slice."""
        return PacketChunk(**{n: getattr(self, n)[index] for n in COLUMN_NAMES})

    def columns(self) -> dict[str, np.ndarray]:
        return {n: getattr(self, n) for n in COLUMN_NAMES}

    @property
    def ts_s(self) -> np.ndarray:
        """Timestamps as float seconds since the epoch."""
        return self.ts_ns.astype(np.float64) / 1e9

    def forward(self) -> np.ndarray:
        """True where (saddr, sport) < (daddr, dport): a direction bit per packet.

        Both directions of a connection get opposite values, so
        ``(lower endpoint, higher endpoint, forward)`` names a connection side.
        """
        s = (self.saddr_hi, self.saddr_lo, self.sport)
        d = (self.daddr_hi, self.daddr_lo, self.dport)
        lt = s[0] < d[0]
        eq = s[0] == d[0]
        lt |= eq & (s[1] < d[1])
        eq &= s[1] == d[1]
        lt |= eq & (s[2] < d[2])
        return lt


@dataclass
class TraceInfo:
    """What the file says about itself, plus totals over the packets read so far.

    ``packets``, ``bytes``, ``bytes_captured`` and the timestamps are complete
    once the chunks have been read to the end (``complete`` is then True).
    ``first_ts_ns``/``last_ts_ns`` are the earliest and latest timestamps (not
    file order; see the ``ts_backwards`` warning). ``iface`` ids are global
    across pcapng sections.
    """

    path: str
    format: str
    ts_resolution: float
    snaplen: int
    linktypes: dict[int, int]
    packets: int
    bytes: int
    first_ts_ns: int
    last_ts_ns: int
    bytes_captured: int = 0
    complete: bool = False
    tsresol: dict[int, float] = field(default_factory=dict)
    snaplens: dict[int, int] = field(default_factory=dict)


class _CInfo(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_uint32),
        ("snaplen", ctypes.c_uint32),
        ("n_ifaces", ctypes.c_uint32),
        ("done", ctypes.c_uint32),
        ("packets", ctypes.c_uint64),
        ("bytes_wire", ctypes.c_uint64),
        ("bytes_cap", ctypes.c_uint64),
        ("min_ts_ns", ctypes.c_int64),
        ("max_ts_ns", ctypes.c_int64),
    ]


class _CIface(ctypes.Structure):
    _fields_ = [
        ("linktype", ctypes.c_uint32),
        ("snaplen", ctypes.c_uint32),
        ("tsres_s", ctypes.c_double),
        ("ts_offset_s", ctypes.c_int64),
    ]


class _CColumns(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name, _ in COLUMNS]


_LIB: ctypes.CDLL | None = None
_ERRLEN = 512


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(str(native_artifact("libswell_pcap.so")))
        vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        sigs: dict[str, tuple[list[Any], Any]] = {
            "swell_pcap_open": ([cp, cp, sz], vp),
            "swell_pcap_open_mem": ([cp, sz, cp, sz], vp),
            "swell_pcap_read": ([vp, ctypes.POINTER(_CColumns), sz], ctypes.c_int64),
            "swell_pcap_error": ([vp, cp, sz], None),
            "swell_pcap_info": ([vp, ctypes.POINTER(_CInfo)], ctypes.c_int32),
            "swell_pcap_iface": ([vp, ctypes.c_uint32, ctypes.POINTER(_CIface)], ctypes.c_int32),
            "swell_pcap_n_warnings": ([], ctypes.c_uint32),
            "swell_pcap_warning_name": ([ctypes.c_uint32], cp),
            "swell_pcap_warning_skips": ([ctypes.c_uint32], ctypes.c_int32),
            "swell_pcap_warnings": (
                [vp, ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32],
                ctypes.c_int32,
            ),
            "swell_pcap_offset": ([vp], ctypes.c_uint64),
            "swell_pcap_first_damage": ([vp], ctypes.c_uint64),
            "swell_pcap_keep_offsets": ([vp, ctypes.c_int32], ctypes.c_int32),
            "swell_pcap_offsets": ([vp, ctypes.POINTER(ctypes.c_uint64), sz], ctypes.c_int64),
            "swell_pcap_digest": ([vp, vp, ctypes.POINTER(ctypes.c_uint64)], ctypes.c_int32),
            "swell_pcap_close": ([vp], None),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = res
        _LIB = lib
    return _LIB


def warning_reasons() -> list[str]:
    """Every warning reason the native reader can count, in ABI order."""
    lib = _lib()
    return [lib.swell_pcap_warning_name(i).decode() for i in range(lib.swell_pcap_n_warnings())]


def _skip_reasons() -> frozenset[str]:
    lib = _lib()
    names = warning_reasons()
    return frozenset(n for i, n in enumerate(names) if lib.swell_pcap_warning_skips(i))


class Trace:
    """An open capture file; use :func:`open_trace`."""

    def __init__(self, path: str, handle: int, size: int | None = None) -> None:
        self.path = path
        self._h: int | None = handle
        self._lib = _lib()
        if size is None:
            size = os.path.getsize(path) if os.path.exists(path) else 0
        self.size = size

    def __enter__(self) -> Trace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "_h", None) is not None:
            with contextlib.suppress(Exception):
                _LAST_DAMAGE[self.path] = self.damage
            self._lib.swell_pcap_close(self._h)
            self._h = None

    def _handle(self) -> int:
        if self._h is None:
            raise ValueError(f"{self.path}: trace is closed")
        return self._h

    def read_chunk(self, max_packets: int = DEFAULT_CHUNK) -> PacketChunk | None:
        """The next chunk of up to ``max_packets`` packets, None at the end."""
        if max_packets < 1:
            raise ValueError("max_packets must be positive")
        arrays = {name: np.empty(max_packets, dtype=dt) for name, dt in COLUMNS}
        ccols = _CColumns(**{name: a.ctypes.data for name, a in arrays.items()})
        n = self._lib.swell_pcap_read(self._handle(), ctypes.byref(ccols), max_packets)
        if n < 0:
            buf = ctypes.create_string_buffer(_ERRLEN)
            self._lib.swell_pcap_error(self._handle(), buf, _ERRLEN)
            raise TraceError(self.path, buf.value.decode(errors="replace") or "read failed")
        if n == 0:
            return None
        small = n < max_packets // 4
        return PacketChunk(**{k: (a[:n].copy() if small else a[:n]) for k, a in arrays.items()})

    def read_native(self, read: Any, target: int, max_packets: int = DEFAULT_CHUNK) -> int:
        """Read up to ``max_packets`` packets straight into a native consumer, no columns.

        ``read`` is a ctypes function of this library, ``(trace handle, target,
        max_packets) -> packets read, 0 at the end, -1 on an error``, such as the
        connection tracker's ``swell_ct_read_prepare`` (``target``: its selection
        buffer). Errors raise :class:`TraceError` as :meth:`read_chunk` does."""
        if max_packets < 1:
            raise ValueError("max_packets must be positive")
        n = int(read(self._handle(), target, max_packets))
        if n < 0:
            buf = ctypes.create_string_buffer(_ERRLEN)
            self._lib.swell_pcap_error(self._handle(), buf, _ERRLEN)
            raise TraceError(self.path, buf.value.decode(errors="replace") or "read failed")
        return n

    def chunks(self, max_packets: int = DEFAULT_CHUNK) -> Iterator[PacketChunk]:
        """Iterate over the rest of the file in chunks of at most ``max_packets``."""
        while (chunk := self.read_chunk(max_packets)) is not None:
            yield chunk

    def chunks_with_offsets(self, max_packets: int = DEFAULT_CHUNK
                            ) -> Iterator[tuple[PacketChunk, np.ndarray]]:
        """:meth:`chunks`, each with the file offset of its packets' captured bytes
        (``uint64``, one per row): packet ``i``'s bytes are the file's
        ``[off[i], off[i] + caplen[i])``."""
        self._lib.swell_pcap_keep_offsets(self._handle(), 1)
        try:
            while (chunk := self.read_chunk(max_packets)) is not None:
                off = np.empty(len(chunk), dtype=np.uint64)
                got = self._lib.swell_pcap_offsets(
                    self._handle(), off.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                    len(chunk))
                if got != len(chunk):  # the ABI promises one per row
                    raise TraceError(self.path, f"{got} offsets for {len(chunk)} packets")
                yield chunk, off
        finally:
            if self._h is not None:
                self._lib.swell_pcap_keep_offsets(self._h, 0)

    def digest(self) -> tuple[str, int]:
        """XXH3-128 of the whole file (32 hex digits, canonical order) and its size.

        Computed over the bytes the reader has read (no second pass), plus the part of
        the file not read yet, read now; for a trace opened from memory it raises."""
        out = ctypes.create_string_buffer(16)
        size = ctypes.c_uint64()
        if self._lib.swell_pcap_digest(self._handle(), out, ctypes.byref(size)) != 0:
            buf = ctypes.create_string_buffer(_ERRLEN)
            self._lib.swell_pcap_error(self._handle(), buf, _ERRLEN)
            raise TraceError(self.path, buf.value.decode(errors="replace") or "hash failed")
        return out.raw.hex(), int(size.value)

    @property
    def offset(self) -> int:
        """Bytes of the file consumed so far."""
        return int(self._lib.swell_pcap_offset(self._handle()))

    @property
    def info(self) -> TraceInfo:
        h = self._handle()
        ci = _CInfo()
        self._lib.swell_pcap_info(h, ctypes.byref(ci))
        linktypes: dict[int, int] = {}
        tsresol: dict[int, float] = {}
        snaplens: dict[int, int] = {}
        cif = _CIface()
        for i in range(ci.n_ifaces):
            self._lib.swell_pcap_iface(h, i, ctypes.byref(cif))
            linktypes[i] = int(cif.linktype)
            tsresol[i] = float(cif.tsres_s)
            snaplens[i] = int(cif.snaplen)
        return TraceInfo(
            path=self.path,
            format="pcapng" if ci.format == 2 else "pcap",
            ts_resolution=min(tsresol.values(), default=1e-6),
            snaplen=int(ci.snaplen),
            linktypes=linktypes,
            packets=int(ci.packets),
            bytes=int(ci.bytes_wire),
            first_ts_ns=int(ci.min_ts_ns),
            last_ts_ns=int(ci.max_ts_ns),
            bytes_captured=int(ci.bytes_cap),
            complete=bool(ci.done),
            tsresol=tsresol,
            snaplens=snaplens,
        )

    @property
    def warnings(self) -> dict[str, int]:
        """Reason -> count, only reasons that occurred."""
        names = warning_reasons()
        counts = (ctypes.c_uint64 * len(names))()
        self._lib.swell_pcap_warnings(self._handle(), counts, len(names))
        return {name: int(c) for name, c in zip(names, counts, strict=True) if c}

    @property
    def damage(self) -> Damage:
        """What was not returned so far (skipped records, damaged blocks, a cut end, and
        once the reader has stopped, the bytes it left unread at the end)."""
        w = self.warnings
        first = int(self._lib.swell_pcap_first_damage(self._handle()))
        reasons = {r: c for r, c in w.items() if r in DAMAGE_REASONS}
        info = self.info
        unread = max(0, self.size - self.offset) if info.complete else 0
        estimate = 0
        if unread:
            reasons["unread_bytes"] = unread
            # records of the file's mean size (headers included) in the unread bytes
            mean = max(self.offset - reasons.get("resync_skipped_bytes", 0), 1) / max(
                info.packets, 1)
            estimate = int(unread / mean) if info.packets else 0
        return Damage(self.path, reasons, self.skipped,
                      None if first == (1 << 64) - 1 else first, estimate)

    @property
    def skipped(self) -> int:
        """Packets seen in the file but not returned (each counted in a warning)."""
        skip = _skip_reasons()
        return sum(c for reason, c in self.warnings.items() if reason in skip)


SKIP_REASONS = ("truncated_last_record", "corrupt_record", "bad_interface_id")
DAMAGE_REASONS = SKIP_REASONS + ("truncated_block", "corrupt_block", "resync_skipped_bytes")
BYTE_REASONS = ("resync_skipped_bytes", "unread_bytes")  # counts of bytes, not packets


@dataclass(frozen=True)
class Damage:
    """Damage the reader met in a file: reason -> count (packets or blocks; bytes for
    :data:`BYTE_REASONS`: ``resync_skipped_bytes``, and ``unread_bytes`` left at the end
    when the reader stopped), packets not returned, the file offset of the first, and
    about how many packets the unread bytes held (at the file's mean record size)."""

    path: str
    reasons: dict[str, int]
    skipped_packets: int
    first_offset: int | None
    unread_packets_estimate: int = 0

    def __bool__(self) -> bool:
        return bool(self.reasons)

    @property
    def lost_bytes(self) -> int:
        """Bytes of the file that gave no packet: skipped by a resync or left unread."""
        return sum(int(self.reasons.get(r, 0)) for r in BYTE_REASONS)

    def to_json(self) -> dict[str, Any]:
        return {"reasons": self.reasons, "skipped_packets": self.skipped_packets,
                "lost_bytes": self.lost_bytes,
                "unread_packets_estimate": self.unread_packets_estimate,
                "first_offset": self.first_offset}

    def one_line(self) -> str:
        """``damaged capture: ...`` for the screen (empty when there was no damage)."""
        if not self:
            return ""
        where = f", first at byte {self.first_offset:,}" if self.first_offset is not None else ""
        why = ", ".join(f"{r} {c:,}" for r, c in sorted(self.reasons.items()))
        n = self.skipped_packets
        lost = f", {self.lost_bytes:,} bytes lost" if self.lost_bytes else ""
        unread = int(self.reasons.get("unread_bytes", 0))
        if unread:
            more = self.unread_packets_estimate
            lost += f" ({unread:,} unread at the end" + (
                f", about {more:,} packet{'' if more == 1 else 's'} more)" if more else ")")
        return (f"{self.path}: damaged capture: {n:,} packet{'' if n == 1 else 's'} not "
                f"returned ({why}){lost}{where}")


# Path -> the damage a Trace of it had met when it was closed: commands that read a
# trace through other modules report it without a second pass (see last_damage).
_LAST_DAMAGE: dict[str, Damage] = {}


def last_damage(path: str | os.PathLike[str]) -> Damage | None:
    """The damage met by the last :class:`Trace` of ``path`` closed in this process."""
    return _LAST_DAMAGE.get(str(Path(path)))


def open_trace(path: str | os.PathLike[str]) -> Trace:
    """Open a pcap or pcapng file; raises :class:`TraceError` if it is unusable."""
    p = Path(path)
    try:
        input_file(p, "capture")
    except SwellError as exc:  # missing, a directory, a FIFO or device, unreadable
        raise TraceError(p, exc.message) from None
    lib = _lib()
    err = ctypes.create_string_buffer(_ERRLEN)
    handle = lib.swell_pcap_open(os.fsencode(p), err, _ERRLEN)
    if not handle:
        raise TraceError(p, err.value.decode(errors="replace"))
    return Trace(str(p), handle)


def open_bytes(data: bytes, name: str = "<memory>") -> Trace:
    """Open an in-memory capture (tests and fuzzing)."""
    lib = _lib()
    err = ctypes.create_string_buffer(_ERRLEN)
    handle = lib.swell_pcap_open_mem(data, len(data), err, _ERRLEN)
    if not handle:
        raise TraceError(name, err.value.decode(errors="replace"))
    return Trace(name, handle, len(data))


def read_all(path: str | os.PathLike[str]) -> PacketChunk:
    """Every packet of a (small) file as one chunk."""
    with open_trace(path) as tr:
        return PacketChunk.concat(list(tr.chunks()))


def read_with_offsets(path: str | os.PathLike[str]) -> tuple[PacketChunk, np.ndarray, TraceInfo]:
    """Every packet of a (small) file as one chunk, the file offset of each packet's
    captured bytes (``uint64``) and the file's :class:`TraceInfo`: the packets the
    reader returns, located in the file (after damage too), for tools that copy them."""
    with open_trace(path) as tr:
        parts = list(tr.chunks_with_offsets())
        info = tr.info
    chunk = PacketChunk.concat([c for c, _ in parts])
    offsets = np.concatenate([o for _, o in parts]) if parts else np.zeros(0, np.uint64)
    return chunk, offsets, info


def trackable(chunk: PacketChunk) -> np.ndarray:
    """The packets the connection tracker takes: TCP or UDP over IP, transport header
    captured, not a later fragment (``conntrack_prep.rs``'s ``skip_reason``)."""
    return ((chunk.ipver > 0) & np.isin(chunk.proto, (6, 17)) & chunk.l4_ok
            & ((chunk.frag & FRAG_LATER) == 0))


def census(path: str | os.PathLike[str]) -> tuple[int, int, Damage]:
    """Packets in a capture, how many of them the connection tracker takes
    (:func:`trackable`), and the reader's damage: read once, a chunk at a time (what
    ``swell check`` asks of a trace a model will be extracted from)."""
    packets = tracked = 0
    with open_trace(path) as tr:
        for chunk in tr.chunks():
            packets += len(chunk)
            tracked += int(trackable(chunk).sum())
        return packets, tracked, tr.damage


def addr_to_str(hi: int, lo: int) -> str:
    """Text form of an address column pair: dotted quad for IPv4, else IPv6."""
    hi, lo = int(hi), int(lo)
    if is_v4(hi, lo):
        return str(ipaddress.IPv4Address(lo & 0xFFFFFFFF))
    return str(ipaddress.IPv6Address((hi << 64) | lo))


def addr_to_cols(text: str) -> tuple[int, int]:
    """The inverse of :func:`addr_to_str`: an address's ``(hi, lo)`` column values
    (IPv4 as ``::ffff:a.b.c.d``, as the reader stores it)."""
    try:
        addr = ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise TraceError(text, "not an IPv4 or IPv6 address") from None
    full = int(addr) | (0xFFFF << 32) if addr.version == 4 else int(addr)
    return full >> 64, full & ((1 << 64) - 1)


def is_v4(hi: Any, lo: Any) -> Any:
    """Whether an address (scalars or arrays) is IPv4-mapped ``::ffff:a.b.c.d``."""
    if isinstance(hi, np.ndarray) or isinstance(lo, np.ndarray):
        return (np.asarray(hi) == 0) & ((np.asarray(lo) >> np.uint64(32)) == V4_MAPPED_HI_OF_LO)
    return int(hi) == 0 and (int(lo) >> 32) == V4_MAPPED_HI_OF_LO


def v4_to_int(lo: Any) -> Any:
    """The 32-bit IPv4 address in a ``lo`` column value (scalar or array)."""
    if isinstance(lo, np.ndarray):
        return (lo & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return int(lo) & 0xFFFFFFFF
