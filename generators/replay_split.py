"""The trace prepared for tcpreplay: split by direction, looped, translated to the plan.

Step 1 of :mod:`swell.generators.replay` (the rewrite and the replay are there).
Every TCP/UDP packet replayable on the address plan is oriented by its
connection (:func:`swell.generators.playback.server_side`: SYN, then SYN/ACK,
then the well-known port); client->server packets go into ``c2s.pcap``,
server->client packets into ``s2c.pcap``. On an IPv4 plan these are the IPv4
packets; on an IPv6 plan (the hosts' addresses say which) the IPv6 ones without
extension headers, and the unfragmented IPv4 ones translated to IPv6
(:func:`v4_to_v6`: tcprewrite maps addresses within a family only), written with
Ethernet type 0x86DD and cut to the MTU. Other packets (ARP, ICMP, ...) are
dropped and counted. The packets are those swell's reader returns (pcap or
pcapng), each copied from the file at the offset the reader gives
(:func:`swell.extract.reader.read_with_offsets`), so a damaged trace (a corrupt
length, a cut last record) replays every packet the reader could read, and its
damage is said (:attr:`SplitResult.damage`) instead of failing a run at its
start; whatever the input link type (Ethernet with VLAN tags, Linux SLL/SLL2,
raw IP, BSD loopback; per packet, so pcapng interfaces may differ), each
packet is written as untagged Ethernet + IP.

With :class:`Looping` the kept packets (both directions together, so a copy's
requests and responses stay aligned) are looped for the run and merged with
time-shifted copies up to a target rate (:mod:`swell.extract.tiling`); copy
``k`` >= 1 has every address renumbered (100.64.0.0/10, or fd00::/96 on an IPv6
plan), so each copy is one more user and maps onto other emulated hosts.
"""

from __future__ import annotations

import ipaddress
import mmap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dpkt
import numpy as np

from swell.errors import SwellError
from swell.extract.reader import (
    Damage,
    PacketChunk,
    addr_to_str,
    last_damage,
    read_all,
    read_with_offsets,
)
from swell.extract.tiling import copies_for, tile, trace_mbps
from swell.generators.playback import connections, server_side


@dataclass
class SplitResult:
    c2s: Path
    s2c: Path
    counts: dict[str, int]
    first_ts: dict[str, float]  # direction -> trace time of its first packet
    clients: list[str]  # trace client addresses, in order of first appearance
    servers: list[str]
    plan: dict[str, Any] = field(default_factory=dict)  # looping / copies (see Looping)
    damage: Damage | None = None  # what the reader could not read in the trace


@dataclass(frozen=True)
class Looping:
    """Loop the trace for ``run_s`` seconds and merge copies up to ``target_mbps``."""

    run_s: float
    loop: bool = True
    target_mbps: float | None = None  # both directions, IP level
    seed: int = 1
    warmup_s: float = 0.0  # the rate is aimed at [warmup_s, run_s)


COPY_NET = (100 << 24) | (64 << 16)  # copies k >= 1 are renumbered into 100.64.0.0/10
COPY_ADDRS = 4096  # addresses per copy


COPY_NET6 = 0xFD00 << 112  # on an IPv6 plan: fd00::/96, the low 32 bits as above


def _copy_addr(k: int, i: int, family: int = 4) -> bytes:
    """Address ``i`` (of the trace's sorted table) in copy ``k`` >= 1."""
    if family == 6:
        return int(COPY_NET6 + (k << 12) + i).to_bytes(16, "big")
    return int(COPY_NET + (k << 12) + i).to_bytes(4, "big")


class RawPackets:
    """The packets swell's reader returns from a trace, as ``(timestamp, bytes)`` pairs
    copied from the (memory-mapped) file at the reader's offsets; ``linktype[i]`` and
    ``nano`` (a sub-microsecond timestamp resolution) are what the writer needs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pk, self.offsets, info = read_with_offsets(path)
        self.linktype = self.pk.linktype
        self.nano = info.ts_resolution < 1e-6
        self.damage = last_damage(path)
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) \
            if len(self.pk) else None

    def __len__(self) -> int:
        return len(self.pk)

    def __getitem__(self, i: int) -> tuple[float, bytes]:
        assert self._map is not None
        at = int(self.offsets[i])
        return int(self.pk.ts_ns[i]) / 1e9, self._map[at: at + int(self.pk.caplen[i])]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
        self._file.close()

    def __enter__(self) -> RawPackets:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replayable(pk: PacketChunk, family: int, records: RawPackets | None = None) -> np.ndarray:
    """The packets replayable on a plan of ``family``: IPv4 plan: IPv4 TCP/UDP; IPv6
    plan: IPv6 TCP/UDP without extension headers (with ``records``: read from the raw
    next-header byte) and unfragmented IPv4 TCP/UDP (translated, :func:`v4_to_v6`)."""
    tcp_udp = np.isin(pk.proto, (6, 17))
    if family == 4:
        return (pk.ipver == 4) & tcp_udp
    ok = tcp_udp & (((pk.ipver == 4) & (pk.frag == 0)) | (pk.ipver == 6))
    if records is not None:
        for i in np.flatnonzero(ok & (pk.ipver == 6)):
            buf = records[i][1]
            n = l2_header_len(int(records.linktype[i]), buf)
            ok[i] = len(buf) > n + 6 and buf[n + 6] in (6, 17)
    return ok


def check_link_types(pk: PacketChunk, usable: np.ndarray, trace: Path | str) -> None:
    """A one-line error naming the trace when a replayable packet's link type is one the
    split cannot turn into Ethernet, or its time one a pcap file cannot hold
    (:func:`check_times`): what ``swell check`` asks before a run."""
    for lt in np.unique(pk.linktype[usable]):
        if int(lt) != 1 and int(lt) not in L2_FIXED:
            raise SwellError(trace, f"link type {int(lt)} is not supported for replay")
    check_times(pk, usable, trace)


PCAP_MAX_NS = (1 << 32) * 1_000_000_000  # a classic pcap record holds 32-bit seconds


def check_times(pk: PacketChunk, usable: np.ndarray, trace: Path | str) -> None:
    """A one-line error naming the trace when a replayable packet's time does not fit
    the pcap files the split writes (0 to 2^32 s: a damaged pcapng timestamp can say
    year 2262; found by the fuzz, where dpkt's writer raised struct.error)."""
    out = usable & ((pk.ts_ns < 0) | (pk.ts_ns >= PCAP_MAX_NS))
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise SwellError(trace, f"packet {i + 1}: time {int(pk.ts_ns[i]) // 10**9:,} s is "
                                "outside what a pcap file holds (0 to 2^32 s); cannot replay it")


def v4_to_v6(ip: bytes) -> bytes:
    """An IPv4 packet as IPv6 (the header rebuilt as SIIT does, RFC 7915, with the
    addresses IPv4-mapped ``::ffff:a.b.c.d``; options dropped; tcprewrite --fixcsum
    recomputes the TCP/UDP checksum over the new pseudo-header)."""
    ihl = (ip[0] & 0x0F) * 4
    total = int.from_bytes(ip[2:4], "big") or len(ip)  # 0: segmentation offload
    tos, ttl, proto = ip[1], ip[8], ip[9]
    head = bytes([0x60 | tos >> 4, (tos & 0x0F) << 4, 0, 0]) + \
        max(total - ihl, 0).to_bytes(2, "big") + bytes([proto, ttl])
    mapped = b"\x00" * 10 + b"\xff\xff"
    return head + mapped + ip[12:16] + mapped + ip[16:20] + ip[ihl:]


def _load(records: RawPackets, start_s: float, duration_s: float | None, family: int = 4
          ) -> tuple[PacketChunk, np.ndarray, np.ndarray, np.ndarray]:
    """The trace's packets as swell's reader sees them, times from the first packet, the
    packets in the window and the replayable ones among them (:func:`replayable`)."""
    pk = records.pk
    t = (pk.ts_ns - pk.ts_ns.min()).astype(np.float64) / 1e9 if len(pk) else np.zeros(0)
    inside = (t >= start_s) & (t < (np.inf if duration_s is None else start_s + duration_s))
    usable = replayable(pk, family, records) & inside
    check_times(pk, usable, records.path)
    return pk, t, inside, usable


def _frame(buf: bytes, linktype: int, family: int, mtu: int = 1500) -> bytes:
    """One record as untagged Ethernet + IP of the plan's family (placeholder MACs).

    IPv6 packets longer than ``mtu`` (offloaded super-frames, translated full-size IPv4
    packets) are cut to it here, payload length set: tcprewrite 4.4.3's --mtu-trunc
    cuts IPv4 packets only."""
    ip = buf[l2_header_len(linktype, buf):]
    if family == 4:
        return ETHER_IPV4 + ip
    ip = v4_to_v6(ip) if ip[0] >> 4 == 4 else ip
    if 40 + int.from_bytes(ip[4:6], "big") > mtu:
        ip = ip[:4] + (mtu - 40).to_bytes(2, "big") + ip[6:mtu]
    return ETHER_IPV6 + ip


def split_trace(trace: Path, out_dir: Path, start_s: float = 0.0,
                duration_s: float | None = None, looping: Looping | None = None,
                family: int = 4, mtu: int = 1500) -> SplitResult:
    """Write the client->server and server->client TCP/UDP packets to two pcaps.

    ``family`` is the address plan's: 4 keeps the IPv4 packets; 6 keeps the IPv6
    ones and translates the IPv4 ones (:func:`v4_to_v6`), Ethernet type 0x86DD, and the
    trace addresses are given in IPv6 form (IPv4 ones as ``::ffff:a.b.c.d``).

    Only packets in ``[start_s, start_s + duration_s)`` from the trace's first packet.
    With ``looping`` the kept packets (both directions together, so a copy's requests
    and responses stay aligned) are looped and merged (:mod:`swell.extract.tiling`):
    copy 0 keeps the trace's addresses, copy ``k`` >= 1 has every address renumbered
    into ``100.64.0.0/10`` (one to one, ``100.64.0.0 + (k << 12) + i``; on an IPv6
    plan ``fd00::/96`` with the same low 32 bits), so each copy is one more user and
    maps onto other emulated hosts.
    """
    with RawPackets(Path(trace)) as records:
        if looping is not None:
            res = _split_looped(records, trace, out_dir, start_s, duration_s, looping,
                                family, mtu)
        else:
            res = _split_once(records, out_dir, start_s, duration_s, family, mtu)
    res.damage = records.damage
    return res


def _split_once(records: RawPackets, out_dir: Path, start_s: float, duration_s: float | None,
                family: int, mtu: int) -> SplitResult:
    """:func:`split_trace` without looping: the window's packets, once."""
    pk, t, inside, usable = _load(records, start_s, duration_s, family)
    srv = server_side(pk)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"c2s": out_dir / "c2s.raw.pcap", "s2c": out_dir / "s2c.raw.pcap"}
    masks = {"c2s": usable & ~srv, "s2c": usable & srv}
    first: dict[str, float] = {}
    for name, mask in masks.items():
        idx = np.flatnonzero(mask)
        with open(paths[name], "wb") as f:
            w = dpkt.pcap.Writer(f, snaplen=262144, linktype=1, nano=records.nano)
            for i in idx:  # as Ethernet: placeholder MACs, set by tcprewrite
                ts, buf = records[i]
                w.writepkt(_frame(buf, int(records.linktype[i]), family, mtu), ts=ts)
        first[name] = float(pk.ts_ns[idx[0]]) / 1e9 if idx.size else np.inf
    return SplitResult(paths["c2s"], paths["s2c"],
                       {"c2s": int(masks["c2s"].sum()), "s2c": int(masks["s2c"].sum()),
                        "dropped": int((inside & ~usable).sum())}, first,
                       _addresses(pk.select(masks["c2s"]), pk.select(masks["s2c"]), family),
                       _addresses(pk.select(masks["s2c"]), pk.select(masks["c2s"]), family))


def _split_looped(records: RawPackets, trace: Path, out_dir: Path, start_s: float,
                  duration_s: float | None, lp: Looping, family: int = 4,
                  mtu: int = 1500) -> SplitResult:
    """:func:`split_trace` with looping and copies."""
    pk, t, inside, usable = _load(records, start_s, duration_s, family)
    idx = np.flatnonzero(usable)
    if not idx.size:
        raise SwellError(trace, f"no {REPLAYABLE[family]} to replay")
    idx = idx[np.argsort(pk.ts_ns[idx], kind="stable")]
    srv = server_side(pk)
    conn, _ = connections(pk)
    nbytes = pk.ip_len[idx].astype(np.int64)
    rate = trace_mbps(t[idx], nbytes)
    til = tile(t[idx], nbytes, lp.run_s, copies_for(lp.target_mbps, rate) if lp.loop or
               lp.target_mbps is not None else 1.0, conn[idx], loop=lp.loop, seed=lp.seed,
               window_start_s=lp.warmup_s)
    if family == 4:
        addr = np.stack([pk.saddr_lo[idx], pk.daddr_lo[idx]], 1).astype(np.int64) & 0xFFFFFFFF
        table, inv = np.unique(addr, return_inverse=True)
        ints = [int(a) for a in table]
    else:  # 128-bit: (hi, lo) rows, sorted as integers
        rows = np.concatenate([np.stack([pk.saddr_hi[idx], pk.saddr_lo[idx]], 1),
                               np.stack([pk.daddr_hi[idx], pk.daddr_lo[idx]], 1)])
        table, inv = np.unique(rows, axis=0, return_inverse=True)
        inv = inv.reshape(2, -1).T
        ints = [(int(h) << 64) | int(lo) for h, lo in table]
    if len(ints) > COPY_ADDRS:
        raise SwellError(trace, f"{len(ints)} addresses, at most {COPY_ADDRS} to copy")
    inv = inv.reshape(-1, 2)
    copy_ids = max(int(til.copy.max()), 0)
    net = COPY_NET if family == 4 else COPY_NET6
    if copy_ids and any(net + (1 << 12) <= a < net + ((copy_ids + 1) << 12) for a in ints):
        raise SwellError(trace, f"uses {ipaddress.ip_address(net)}, where copies are "
                                "renumbered")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"c2s": out_dir / "c2s.raw.pcap", "s2c": out_dir / "s2c.raw.pcap"}
    t0 = float(pk.ts_ns[idx[0]]) / 1e9
    counts = {"c2s": 0, "s2c": 0, "dropped": int((inside & ~usable).sum())}
    first: dict[str, float] = {"c2s": np.inf, "s2c": np.inf}
    writers, files = {}, {}
    try:
        for name, path in paths.items():
            files[name] = open(path, "wb")  # noqa: SIM115 - closed below
            writers[name] = dpkt.pcap.Writer(files[name], snaplen=262144, linktype=1,
                                             nano=records.nano)
        for j in range(len(til)):
            row, k = int(til.index[j]), int(til.copy[j])
            i = int(idx[row])
            name = "s2c" if srv[i] else "c2s"
            buf = records[i][1]
            pkt = bytearray(_frame(buf, int(records.linktype[i]), family, mtu))
            if k and family == 4:
                pkt[26:30] = _copy_addr(k, int(inv[row, 0]))
                pkt[30:34] = _copy_addr(k, int(inv[row, 1]))
            elif k:
                pkt[22:38] = _copy_addr(k, int(inv[row, 0]), 6)
                pkt[38:54] = _copy_addr(k, int(inv[row, 1]), 6)
            ts = t0 + float(til.t_s[j])
            writers[name].writepkt(bytes(pkt), ts=ts)
            counts[name] += 1
            first[name] = min(first[name], ts)
    finally:
        for f in files.values():
            f.close()
    sent_c2s = pk.select(usable & ~srv)
    sent_s2c = pk.select(usable & srv)
    clients0 = _addresses(sent_c2s, sent_s2c, family)
    servers0 = _addresses(sent_s2c, sent_c2s, family)
    pos = {a: n for n, a in enumerate(ints)}

    def copies_of(addrs: list[str]) -> list[str]:
        out = list(addrs)
        for k in range(1, copy_ids + 1):
            out += [str(ipaddress.ip_address(_copy_addr(
                k, pos[int(ipaddress.ip_address(a))], family))) for a in addrs]
        return out

    nb_dir = {d: int(nbytes[srv[idx] == (d == "s2c")].sum()) for d in ("c2s", "s2c")}
    plan = {"loop": lp.loop, "trace_mbps": rate,
            "asked_mbps": lp.target_mbps if lp.target_mbps is not None else (
                rate if lp.loop else None),
            "copies": round(til.users, 4), "whole_copies": til.copies,
            "partial_copy_share": round(til.partial, 4), "period_s": til.period_s,
            "planned_mbps": _window_mbps(til.t_s, nbytes[til.index], lp.warmup_s, lp.run_s),
            "share_s2c": nb_dir["s2c"] / max(sum(nb_dir.values()), 1)}
    return SplitResult(paths["c2s"], paths["s2c"], counts, first, copies_of(clients0),
                       copies_of(servers0), plan)


def _window_mbps(t_s: np.ndarray, nbytes: np.ndarray, start: float, end: float) -> float:
    """Mbit/s of the departures in ``[start, end)`` (start capped at half the run)."""
    start = min(start, end / 2)
    inside = (t_s >= start) & (t_s < end)
    return float(nbytes[inside].sum()) * 8 / max(end - start, 1e-9) / 1e6


def _addresses(sent: PacketChunk, received: PacketChunk, family: int = 4) -> list[str]:
    """Addresses of one side: sources of what it sent and destinations of what it received,
    in order of first appearance (so broadcast and unanswered destinations are mapped too);
    on an IPv6 plan all in IPv6 form (IPv4 ones mapped, as :func:`v4_to_v6` writes them)."""
    ts = np.concatenate([sent.ts_ns, received.ts_ns])
    pairs = np.concatenate([np.stack([sent.saddr_hi, sent.saddr_lo], 1),
                            np.stack([received.daddr_hi, received.daddr_lo], 1)])
    order = np.argsort(ts, kind="stable")
    _, first = np.unique(pairs[order], axis=0, return_index=True)
    if family == 6:
        return [str(ipaddress.IPv6Address((int(a) << 64) | int(b)))
                for a, b in pairs[order][np.sort(first)]]
    return [addr_to_str(int(a), int(b)) for a, b in pairs[order][np.sort(first)]]


def l2_header_len(linktype: int, buf: bytes) -> int:
    """Bytes before the IP header for the link types swell reads."""
    if linktype == 1:  # Ethernet, with any 802.1Q/802.1ad tags
        n = 14
        while buf[n - 2:n] in (b"\x81\x00", b"\x88\xa8") and len(buf) >= n + 4:
            n += 4
        return n
    if linktype not in L2_FIXED:
        raise SwellError("replay", f"link type {linktype} is not supported")
    return L2_FIXED[linktype]


# bytes before the IP header of the other link types swell reads (SLL, SLL2, BSD
# loopback and null, raw IP in its three numbers)
L2_FIXED = {113: 16, 276: 20, 0: 4, 108: 4, 101: 0, 12: 0, 14: 0, 228: 0}


ETHER_IPV4 = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
ETHER_IPV6 = ETHER_IPV4[:12] + b"\x86\xdd"
REPLAYABLE = {4: "IPv4 TCP/UDP packets", 6: "TCP/UDP packets (IPv6, or IPv4 to translate)"}


def trace_rates(trace: Path, family: int = 4, pk: PacketChunk | None = None
                ) -> dict[str, float]:
    """The trace's own rate per bottleneck direction when looped (IP bytes of the packets
    replayable on a plan of ``family``, IPv4 ones translated to IPv6 counted 20 bytes
    longer, over the loop period): forward = client -> server."""
    pk = read_all(trace) if pk is None else pk
    usable = replayable(pk, family)
    if not usable.any():
        raise SwellError(trace, f"no {REPLAYABLE[family]} to replay")
    srv = server_side(pk)
    t = np.sort(pk.ts_ns[usable]).astype(np.float64) / 1e9
    nb = pk.ip_len.astype(np.float64) + (20.0 * (pk.ipver == 4) if family == 6 else 0.0)
    total = trace_mbps(t, nb[usable].astype(np.int64))
    share = float(nb[usable & srv].sum()) / max(float(nb[usable].sum()), 1e-12)
    return {"forward": total * (1 - share), "reverse": total * share}
