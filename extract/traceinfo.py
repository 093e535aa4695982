"""``swell trace info``: what is in a capture, like capinfos plus what swell needs.

One streaming pass over the chunks of :mod:`swell.extract.reader` gathers
totals (packets, bytes on the wire and captured, time span), per-protocol
counts, TCP handshake packets (SYN, SYN/ACK), distinct hosts, how many
packets the capture cut short (snap length), and per-conversation
directions. A trace is called *bidirectional* when most TCP/UDP
conversations were seen in both directions, *one-directional* when none or
almost none were (typically SYNs without any SYN/ACK, or one side of a
link), else *mixed*. The reader's counted warnings are passed through.

Memory stays bounded by the chunk size plus one entry per distinct host and
per conversation.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell.extract.reader import ACK, DEFAULT_CHUNK, SKIP_REASONS, SYN, PacketChunk, open_trace
from swell.progress import Progress

LINKTYPE_NAMES = {
    0: "NULL (BSD loopback)",
    1: "Ethernet",
    12: "raw IP",
    14: "raw IP",
    101: "raw IP",
    108: "LOOP (OpenBSD loopback)",
    113: "Linux cooked (SLL)",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked v2 (SLL2)",
}

PROGRESS_MIN_BYTES = 64 << 20
BOTH_WAYS_BIDIR = 0.5  # share of conversations seen both ways to call a trace bidirectional
BOTH_WAYS_ONEDIR = 0.02  # at most this share: one-directional


def linktype_name(code: int) -> str:
    return LINKTYPE_NAMES.get(code, f"unsupported ({code})")


@dataclass
class TraceSummary:
    """The numbers ``swell trace info`` prints (also its ``--json`` output)."""

    path: str
    format: str
    packets: int = 0
    skipped: int = 0
    first_ts: str = ""
    last_ts: str = ""
    duration_s: float = 0.0
    linktypes: dict[int, str] = field(default_factory=dict)
    bytes_wire: int = 0
    bytes_captured: int = 0
    snaplen: int = 0
    payload_cut: int = 0
    max_caplen: int = 0
    ipv4: int = 0
    ipv6: int = 0
    non_ip: int = 0
    tcp: int = 0
    udp: int = 0
    icmp: int = 0
    other_ip: int = 0
    fragments: int = 0
    vlan_tagged: int = 0
    tcp_syn: int = 0
    tcp_synack: int = 0
    hosts: int = 0
    conversations: int = 0
    conversations_both_ways: int = 0
    direction: str = "unknown"
    direction_why: str = ""
    warnings: dict[str, int] = field(default_factory=dict)
    unread_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["linktypes"] = {str(k): v for k, v in self.linktypes.items()}
        return d


class _Accumulator:
    """Counts over chunks; hosts and conversations as sets of small tuples."""

    def __init__(self, s: TraceSummary) -> None:
        self.s = s
        self.hosts: set[tuple[int, int]] = set()
        self.conv: dict[tuple[int, ...], int] = {}

    def add(self, c: PacketChunk) -> None:
        s = self.s
        ip = c.ipver != 0
        s.ipv4 += int(np.count_nonzero(c.ipver == 4))
        s.ipv6 += int(np.count_nonzero(c.ipver == 6))
        s.non_ip += int(np.count_nonzero(~ip))
        tcp = ip & (c.proto == 6)
        udp = ip & (c.proto == 17)
        icmp = ip & ((c.proto == 1) | (c.proto == 58))
        s.tcp += int(np.count_nonzero(tcp))
        s.udp += int(np.count_nonzero(udp))
        s.icmp += int(np.count_nonzero(icmp))
        s.other_ip += int(np.count_nonzero(ip & ~(tcp | udp | icmp)))
        s.fragments += int(np.count_nonzero(c.frag))
        s.vlan_tagged += int(np.count_nonzero(c.vlan))
        synack = tcp & c.l4_ok & ((c.tcp_flags & (SYN | ACK)) == (SYN | ACK))
        s.tcp_syn += int(np.count_nonzero(tcp & c.l4_ok & ((c.tcp_flags & (SYN | ACK)) == SYN)))
        s.tcp_synack += int(np.count_nonzero(synack))
        s.payload_cut += int(np.count_nonzero(c.caplen < c.wirelen))
        if len(c):
            s.max_caplen = max(s.max_caplen, int(c.caplen.max()))
        self._hosts(c, ip)
        self._conversations(c, (tcp | udp) & c.l4_ok)

    def _hosts(self, c: PacketChunk, ip: np.ndarray) -> None:
        hi = np.concatenate([c.saddr_hi[ip], c.daddr_hi[ip]])
        lo = np.concatenate([c.saddr_lo[ip], c.daddr_lo[ip]])
        for i in _distinct(hi, lo).tolist():
            self.hosts.add((int(hi[i]), int(lo[i])))

    def _conversations(self, c: PacketChunk, sel: np.ndarray) -> None:
        if not np.any(sel):
            return
        k = c.select(sel)
        fwd = k.forward()
        a_hi = np.where(fwd, k.saddr_hi, k.daddr_hi)
        a_lo = np.where(fwd, k.saddr_lo, k.daddr_lo)
        b_hi = np.where(fwd, k.daddr_hi, k.saddr_hi)
        b_lo = np.where(fwd, k.daddr_lo, k.saddr_lo)
        pa = np.where(fwd, k.sport, k.dport).astype(np.uint64)
        pb = np.where(fwd, k.dport, k.sport).astype(np.uint64)
        ports = (pa << np.uint64(24)) | (pb << np.uint64(8)) | k.proto.astype(np.uint64)
        cols = (a_hi, a_lo, b_hi, b_lo, ports, fwd.astype(np.uint64))
        for i in _distinct(*cols).tolist():
            key = tuple(int(col[i]) for col in cols[:5])
            self.conv[key] = self.conv.get(key, 0) | (1 << int(fwd[i]))

    def finish(self) -> None:
        s = self.s
        s.hosts = len(self.hosts)
        s.conversations = len(self.conv)
        s.conversations_both_ways = sum(1 for v in self.conv.values() if v == 3)
        if s.conversations == 0:
            s.direction, s.direction_why = "unknown", "no TCP/UDP conversations"
            return
        share = s.conversations_both_ways / s.conversations
        if share >= BOTH_WAYS_BIDIR:
            s.direction = "bidirectional"
        elif share <= BOTH_WAYS_ONEDIR:
            s.direction = "one-directional"
        else:
            s.direction = "mixed"
        why = f"{100 * share:.0f} % of TCP/UDP conversations seen both ways"
        if s.tcp_syn and not s.tcp_synack:
            why += f"; {s.tcp_syn:,} SYNs but no SYN/ACK"
        s.direction_why = why


_MIX = np.uint64(0x9E3779B97F4A7C15)


def _distinct(*cols: np.ndarray) -> np.ndarray:
    """Index of one row per distinct row of the columns (by a 64-bit row hash).

    Sorting one hash column is far faster than ``np.unique(axis=0)``; two
    distinct rows sharing a 64-bit hash is negligible for counting.
    """
    h = np.zeros(len(cols[0]), dtype=np.uint64)
    for col in cols:
        h = (h ^ col.astype(np.uint64)) * _MIX
        h ^= h >> np.uint64(29)
    return np.unique(h, return_index=True)[1]


def _iso(ts_ns: int) -> str:
    t = dt.datetime.fromtimestamp(ts_ns / 1e9, tz=dt.UTC)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def summarize(path: str | Path, chunk: int = DEFAULT_CHUNK, progress: bool = True) -> TraceSummary:
    """Read the whole trace once and return its summary."""
    with open_trace(path) as tr:
        info = tr.info
        s = TraceSummary(path=str(path), format=info.format)
        acc = _Accumulator(s)
        bar = (
            Progress(f"reading {Path(path).name}", total=tr.size / 1e6, unit=" MB")
            if (progress and tr.size >= PROGRESS_MIN_BYTES)
            else None
        )
        for c in tr.chunks(chunk):
            acc.add(c)
            if bar:
                bar.update(done=tr.offset / 1e6, status=f"{tr.info.packets:,} packets")
        if bar:
            bar.finish()
        info = tr.info
        s.warnings = tr.warnings
        s.unread_bytes = max(0, tr.size - tr.offset)
        s.skipped = sum(n for r, n in s.warnings.items() if r in SKIP_REASONS)
    acc.finish()
    s.packets = info.packets
    s.linktypes = {i: f"{linktype_name(lt)} [{lt}]" for i, lt in info.linktypes.items()}
    s.bytes_wire, s.bytes_captured, s.snaplen = info.bytes, info.bytes_captured, info.snaplen
    if info.packets:
        s.first_ts, s.last_ts = _iso(info.first_ts_ns), _iso(info.last_ts_ns)
        s.duration_s = (info.last_ts_ns - info.first_ts_ns) / 1e9
    return s


def _linktypes(lts: dict[int, str]) -> str:
    """Per interface, grouping interfaces that share a link type."""
    groups: dict[str, list[int]] = {}
    for i, name in lts.items():
        groups.setdefault(name, []).append(i)
    parts = []
    for name, ifs in groups.items():
        where = f"if{ifs[0]}" if len(ifs) == 1 else f"{len(ifs)} interfaces (if{ifs[0]}-{ifs[-1]})"
        parts.append(f"{name} on {where}")
    return "; ".join(parts) or "-"


def _pct(n: int, total: int) -> str:
    return f"{n:,} ({100 * n / total:.1f} %)" if total else f"{n:,}"


def format_table(s: TraceSummary) -> str:
    """Human-readable two-column table."""
    n = s.packets
    jumps = s.warnings.get("ts_jump", 0)
    cut = (
        f"yes: {s.payload_cut:,} packets cut (max captured {s.max_caplen} B)"
        if s.payload_cut
        else "no"
    )
    rows: list[tuple[str, str]] = [
        ("file", s.path),
        ("format", s.format),
        ("packets", f"{n:,}" + (f" (+{s.skipped:,} not readable)" if s.skipped else "")),
        ("first packet", s.first_ts or "-"),
        ("last packet", s.last_ts or "-"),
        ("duration", f"{s.duration_s:,.6f} s" + (" (spans time jumps)" if jumps else "")),
        ("link types", _linktypes(s.linktypes)),
        ("bytes on wire", f"{s.bytes_wire:,}"),
        ("bytes captured", f"{s.bytes_captured:,}"),
        ("snap length", f"{s.snaplen}" if s.snaplen else "unlimited"),
        ("payload cut", cut),
        ("IPv4 / IPv6", f"{_pct(s.ipv4, n)} / {_pct(s.ipv6, n)}"),
        ("non-IP", _pct(s.non_ip, n)),
        ("TCP / UDP", f"{_pct(s.tcp, n)} / {_pct(s.udp, n)}"),
        ("ICMP / other IP", f"{_pct(s.icmp, n)} / {_pct(s.other_ip, n)}"),
        ("IP fragments", f"{s.fragments:,}"),
        ("VLAN-tagged", f"{s.vlan_tagged:,}"),
        ("TCP SYN / SYN-ACK", f"{s.tcp_syn:,} / {s.tcp_synack:,}"),
        ("hosts", f"{s.hosts:,}"),
        (
            "conversations",
            f"{s.conversations:,} TCP/UDP, {s.conversations_both_ways:,} seen both ways",
        ),
        ("direction", f"{s.direction} ({s.direction_why})"),
    ]
    if s.unread_bytes:
        rows.append(("unread bytes", f"{s.unread_bytes:,} at the end (damaged; see warnings)"))
    if s.warnings:
        skip = set(SKIP_REASONS)
        rows += [
            (f"warning {r}", f"{c:,}" + (" packets not returned" if r in skip else ""))
            for r, c in sorted(s.warnings.items())
        ]
    else:
        rows.append(("warnings", "none"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
