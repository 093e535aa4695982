"""Raw replay of a trace with tcpreplay, its addresses rewritten into the topology.

The simplest open-loop baseline: the trace's own packets, byte for byte
(headers and all), at the trace's times. Steps:

1. **Split** (:func:`split_trace`). Every TCP/UDP packet replayable on the
   address plan is oriented by its connection
   (:func:`swell.generators.playback.server_side`: SYN, then SYN/ACK, then the
   well-known port); client->server packets go into ``c2s.pcap``,
   server->client packets into ``s2c.pcap``. On an IPv4 plan these are the IPv4
   packets; on an IPv6 plan (the hosts' addresses say which) the IPv6 ones
   without extension headers, and the unfragmented IPv4 ones translated to IPv6
   (:func:`v4_to_v6`: tcprewrite maps addresses within a family only), written
   with Ethernet type 0x86DD and cut to the MTU. Other packets (ARP, ICMP, ...)
   are dropped and counted. The raw records are read with dpkt (pcap or
   pcapng) and matched one for one with the swell reader's rows; whatever the
   input link type (Ethernet with VLAN tags, Linux SLL/SLL2, raw IP, BSD
   loopback), each packet is written as untagged Ethernet + IP.
2. **Rewrite** (``tcprewrite``): ``--pnat`` maps every trace client address
   onto a client emulated host and every trace server address onto a server
   host (both fields, so replies match), ``--enet-smac``/``--enet-dmac`` set
   to the injecting interface and its peer, ``--fixlen=pad``
   restores payloads cut by a short snaplen, ``--mtu-trunc`` cuts offloaded
   super-frames to the MTU, and ``--fixcsum`` recomputes the checksums. IPv6
   pairs are ``[a/128]:[b/128]``; tcprewrite 4.4.3 writes multicast MACs on IPv6
   frames whatever ``--enet-*`` say, so :func:`set_macs` sets them afterwards.
3. **Replay** (``tcpreplay``): ``c2s`` enters the emulated network on the
   client side, ``s2c`` on the server side, each from its own namespace
   (only interfaces of namespaces the caller or the topology created). Two
   processes cannot share one clock, so both are started to begin at the
   same wall-clock instant plus their first packet's offset in the trace
   (``_at`` below sleeps, then ``exec``s tcpreplay); start skew is the process
   exec time (about a millisecond).

The replayed packets reach real host stacks, which answer packets of
connections they never opened with RSTs; this is inherent in raw replay
(seed 004, section 4.1: it is neither responsive nor consistent).
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dpkt
import numpy as np
from pydantic import Field

from swell.errors import EnvironmentProblem, SwellError
from swell.extract.reader import PacketChunk, addr_to_str, read_all
from swell.extract.tiling import copies_for, tile, trace_mbps
from swell.generators.base import Generator, GenResult, Place, Proc
from swell.generators.kind import (
    ONE_PAIR,
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    Tool,
    TrafficKind,
    Window,
    background_pair,
    input_file,
)
from swell.generators.playback import connections, server_side
from swell.inet import is_v6
from swell.placement import Endpoint, HostNeeds, PathFacts

START_LEAD_S = 1.0
_AT = ("import os, sys, time; t = float(sys.argv[1]); "
       "time.sleep(max(0.0, t - time.time())); os.execvp(sys.argv[2], sys.argv[2:])")


@dataclass(frozen=True)
class Inject:
    """Where one direction enters the network: an interface in a place, and its MACs."""

    place: Place
    iface: str
    smac: str  # the interface's own MAC
    dmac: str  # its peer's MAC (the next hop)


@dataclass
class SplitResult:
    c2s: Path
    s2c: Path
    counts: dict[str, int]
    first_ts: dict[str, float]  # direction -> trace time of its first packet
    clients: list[str]  # trace client addresses, in order of first appearance
    servers: list[str]
    plan: dict[str, Any] = field(default_factory=dict)  # looping / copies (see Looping)


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


def _raw_records(path: Path) -> tuple[list[tuple[float, bytes]], int, bool]:
    """Every record of a pcap/pcapng file: (timestamp, bytes), the link type, nanosecond?"""
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        try:
            reader: Any = dpkt.pcapng.Reader(f) if magic == b"\x0a\x0d\x0d\x0a" \
                else dpkt.pcap.Reader(f)
        except (ValueError, dpkt.dpkt.Error) as exc:
            raise SwellError(path, f"not a pcap/pcapng file: {exc}") from None
        records = [(float(ts), bytes(buf)) for ts, buf in reader]
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        return records, int(reader.datalink()), nano


def replayable(pk: PacketChunk, family: int, records: list[tuple[float, bytes]] | None = None,
               linktype: int = 1) -> np.ndarray:
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
            n = l2_header_len(linktype, buf)
            ok[i] = len(buf) > n + 6 and buf[n + 6] in (6, 17)
    return ok


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


def _load(trace: Path, start_s: float, duration_s: float | None, family: int = 4) -> tuple[
        PacketChunk, list[tuple[float, bytes]], int, bool, np.ndarray, np.ndarray,
        np.ndarray]:
    """The trace as swell's reader sees it and as raw records (the same packets, one to
    one), link type, nanosecond stamps, times from the first packet, the packets in the
    window and the replayable ones among them (:func:`replayable`)."""
    pk = read_all(trace)
    records, linktype, nano = _raw_records(Path(trace))
    if len(records) != len(pk):
        raise SwellError(trace, f"dpkt read {len(records)} records, the swell reader "
                                f"{len(pk)}: cannot match packets")
    t = (pk.ts_ns - pk.ts_ns.min()).astype(np.float64) / 1e9 if len(pk) else np.zeros(0)
    inside = (t >= start_s) & (t < (np.inf if duration_s is None else start_s + duration_s))
    usable = replayable(pk, family, records, linktype) & inside
    return pk, records, linktype, nano, t, inside, usable


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
    if looping is not None:
        return _split_looped(trace, out_dir, start_s, duration_s, looping, family, mtu)
    pk, records, linktype, nano, t, inside, usable = _load(trace, start_s, duration_s,
                                                           family)
    srv = server_side(pk)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"c2s": out_dir / "c2s.raw.pcap", "s2c": out_dir / "s2c.raw.pcap"}
    masks = {"c2s": usable & ~srv, "s2c": usable & srv}
    first: dict[str, float] = {}
    for name, mask in masks.items():
        idx = np.flatnonzero(mask)
        with open(paths[name], "wb") as f:
            w = dpkt.pcap.Writer(f, snaplen=262144, linktype=1, nano=nano)
            for i in idx:  # as Ethernet: placeholder MACs, set by tcprewrite
                ts, buf = records[i]
                w.writepkt(_frame(buf, linktype, family, mtu), ts=ts)
        first[name] = float(pk.ts_ns[idx[0]]) / 1e9 if idx.size else np.inf
    return SplitResult(paths["c2s"], paths["s2c"],
                       {"c2s": int(masks["c2s"].sum()), "s2c": int(masks["s2c"].sum()),
                        "dropped": int((inside & ~usable).sum())}, first,
                       _addresses(pk.select(masks["c2s"]), pk.select(masks["s2c"]), family),
                       _addresses(pk.select(masks["s2c"]), pk.select(masks["c2s"]), family))


def _split_looped(trace: Path, out_dir: Path, start_s: float, duration_s: float | None,
                  lp: Looping, family: int = 4, mtu: int = 1500) -> SplitResult:
    """:func:`split_trace` with looping and copies."""
    pk, records, linktype, nano, t, inside, usable = _load(trace, start_s, duration_s,
                                                           family)
    idx = np.flatnonzero(usable)
    if not idx.size:
        raise SwellError(trace, f"no {_WHAT[family]} to replay")
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
            writers[name] = dpkt.pcap.Writer(files[name], snaplen=262144, linktype=1, nano=nano)
        for j in range(len(til)):
            row, k = int(til.index[j]), int(til.copy[j])
            i = int(idx[row])
            name = "s2c" if srv[i] else "c2s"
            buf = records[i][1]
            pkt = bytearray(_frame(buf, linktype, family, mtu))
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
    fixed = {113: 16, 276: 20, 0: 4, 108: 4, 101: 0, 12: 0, 14: 0, 228: 0}
    if linktype not in fixed:
        raise SwellError("replay", f"link type {linktype} is not supported")
    return fixed[linktype]


ETHER_IPV4 = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
ETHER_IPV6 = ETHER_IPV4[:12] + b"\x86\xdd"
_WHAT = {4: "IPv4 TCP/UDP packets", 6: "TCP/UDP packets (IPv6, or IPv4 to translate)"}


def round_robin(trace_addrs: list[str], topo_addrs: list[str]) -> dict[str, str]:
    """Map trace addresses onto topology addresses in turn (several may share one)."""
    if not topo_addrs:
        raise SwellError("replay", "the topology has no hosts on this side")
    return {a: topo_addrs[i % len(topo_addrs)] for i, a in enumerate(trace_addrs)}


def pnat_arg(mapping: dict[str, str]) -> str:
    """tcprewrite's pseudo-NAT pairs: ``a/32:b/32``, IPv6 in brackets ``[a/128]:[b/128]``
    (tcprewrite maps within a family only)."""
    return ",".join(f"[{a}/128]:[{b}/128]" if ":" in a else f"{a}/32:{b}/32"
                    for a, b in mapping.items())


def set_macs(path: Path, smac: str, dmac: str) -> None:
    """Write the Ethernet addresses of every frame in a pcap (in place, atomically).

    tcprewrite 4.4.3 ignores ``--enet-smac``/``--enet-dmac`` on IPv6 frames and writes
    multicast MACs (``33:33`` + the low 32 bits of the original addresses) instead, which
    the next hop drops as not its own; so on an IPv6 plan the MACs are set here."""
    records, linktype, nano = _raw_records(path)
    head = bytes.fromhex(dmac.replace(":", "")) + bytes.fromhex(smac.replace(":", ""))
    tmp = path.with_suffix(".macs.tmp")
    with open(tmp, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=262144, linktype=linktype, nano=nano)
        for ts, buf in records:
            w.writepkt(head + buf[12:], ts=ts)
    tmp.replace(path)


def rewrite_argv(src: Path, dst: Path, mapping: dict[str, str], inject: Inject,
                 mtu: int = 1500) -> list[str]:
    """The tcprewrite command for one direction."""
    return ["tcprewrite", f"--infile={src}", f"--outfile={dst}", f"--pnat={pnat_arg(mapping)}",
            f"--enet-smac={inject.smac}", f"--enet-dmac={inject.dmac}",
            "--fixlen=pad", f"--mtu={mtu}", "--mtu-trunc", "--fixcsum"]


@dataclass
class ReplayConfig:
    trace: Path
    out_dir: Path
    client_inject: Inject  # client->server packets enter here
    server_inject: Inject  # server->client packets enter here
    clients: list[str]  # topology client addresses
    servers: list[str]  # topology server addresses
    mtu: int = 1500
    multiplier: float = 1.0  # tcpreplay --multiplier (1 = trace speed)
    maps: dict[str, str] = field(default_factory=dict)  # explicit trace -> topology addresses
    start_s: float = 0.0  # replay only this window of the trace
    duration_s: float | None = None
    looping: Looping | None = None  # loop it for a run, merge copies up to a rate


_SENT = re.compile(r"Actual:\s*(\d+)\s+packets\s+\((\d+)\s+bytes\)\s+sent in\s+([\d.]+)")
_FAILED = re.compile(r"Failed packets:\s*(\d+)")


class ReplayGenerator(Generator):
    """tcpreplay of the trace's two directions on the two sides of the topology."""

    name = "tcpreplay"
    tools = ("tcpreplay", "tcprewrite")

    def __init__(self, cfg: ReplayConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.split: SplitResult | None = None
        self.mapping: dict[str, str] = {}
        self.players: dict[str, Proc] = {}

    def check(self) -> None:
        for tool in self.tools:
            if shutil.which(tool) is None:
                raise EnvironmentProblem(tool, "not installed (Debian package tcpreplay)")

    def injects(self) -> dict[str, Inject]:
        return {"c2s": self.cfg.client_inject, "s2c": self.cfg.server_inject}

    def start_server(self) -> None:
        """Replay has no listening side: split and rewrite, unless :meth:`prepare` did."""
        if self.split is None:
            self.prepare()

    @property
    def family(self) -> int:
        """The address plan's family, from the topology addresses."""
        hosts = [*self.cfg.clients, *self.cfg.servers]
        return 6 if any(is_v6(a) for a in hosts) else 4

    def prepare(self) -> SplitResult:
        """Split the trace and rewrite both directions (the counts are known after this)."""
        c, family = self.cfg, self.family
        self.split = split_trace(Path(c.trace), self.out, c.start_s, c.duration_s, c.looping,
                                 family, c.mtu)
        if not self.split.counts["c2s"] + self.split.counts["s2c"]:
            raise SwellError(c.trace, f"no {_WHAT[family]} to replay")
        self.mapping = {**round_robin(self.split.clients, c.clients),
                        **round_robin(self.split.servers, c.servers), **c.maps}
        raw = {"c2s": self.split.c2s, "s2c": self.split.s2c}
        for name, inject in self.injects().items():
            argv = rewrite_argv(raw[name], self.out / f"{name}.pcap", self.mapping, inject, c.mtu)
            res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if res.returncode != 0:
                raise SwellError("tcprewrite", (res.stderr + res.stdout).strip()[-300:]
                                 or f"status {res.returncode}")
            if family == 6:
                set_macs(self.out / f"{name}.pcap", inject.smac, inject.dmac)
        return self.split

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Both interfaces exist and are up where the packets will enter."""
        for inject in self.injects().values():
            res = inject.place.run(["ip", "-o", "link", "show", "dev", inject.iface],
                                   timeout=timeout)
            if res.returncode != 0 or "state DOWN" in res.stdout:
                raise SwellError(inject.iface, f"not up in {inject.place.name}: "
                                               f"{res.stderr.strip() or res.stdout.strip()}")

    def start_client(self) -> None:
        assert self.split is not None
        base, first = time.time() + START_LEAD_S, min(self.split.first_ts.values())
        for name, inject in self.injects().items():
            if not self.split.counts[name]:
                continue
            argv = ["tcpreplay", "-i", inject.iface, f"--multiplier={self.cfg.multiplier}",
                    str(self.out / f"{name}.pcap")]
            at = base + (self.split.first_ts[name] - first) / self.cfg.multiplier
            self.players[name] = self.spawn(f"tcpreplay {name}", inject.place,
                                            [sys.executable, "-c", _AT, f"{at:.6f}", *argv])

    def running(self) -> bool:
        return any(p.alive() for p in self.players.values())

    def stop(self) -> None:
        for p in self.players.values():
            p.stop(grace=5.0)

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        assert self.split is not None
        summary: dict[str, Any] = {"counts": self.split.counts, **self.split.plan,
                                   "mapping": self.mapping}
        for name, p in self.players.items():
            text = "\n".join(p.drain() + list(p.stderr_tail))
            m, failed = _SENT.search(text), _FAILED.search(text)
            if m is None and p.popen.returncode in (-15, -2, 143, 130):
                # stopped by us before the trace ended (the run was shorter): no summary
                summary[name] = {"stopped_early": True}
                continue
            if m is None:
                raise SwellError(p.label, f"no summary (status {p.popen.returncode}): "
                                          f"{text.strip()[-300:]}")
            summary[name] = {"sent": int(m.group(1)), "bytes": int(m.group(2)),
                             "seconds": float(m.group(3)),
                             "failed": int(failed.group(1)) if failed else 0}
        files = {"c2s": self.out / "c2s.pcap", "s2c": self.out / "s2c.pcap"}
        return GenResult(self.name, {}, summary, files)


def replay_between(clients: list[Endpoint], servers: list[Endpoint], trace: Path,
                   out_dir: Path, **kw: Any) -> ReplayGenerator:
    """tcpreplay between two groups of emulated hosts: client->server packets enter at the
    first client's attachment, server->client packets at the first server's; trace
    addresses map onto the hosts that share that first host's place (so each packet
    crosses their links)."""
    sides = []
    for hosts in (clients, servers):
        first = hosts[0]
        att = first.attachment
        if att is None:
            raise SwellError("tcpreplay", f"{first.ip}: the layout gives no interface to "
                                          "inject packets at")
        sides.append((Inject(first.place, att.iface, att.mac, att.gateway_mac),
                      [h.ip for h in hosts if h.group == first.group]))
    cfg = ReplayConfig(trace=Path(trace), out_dir=Path(out_dir), client_inject=sides[0][0],
                       server_inject=sides[1][0], clients=sides[0][1], servers=sides[1][1], **kw)
    return ReplayGenerator(cfg)


class ReplaySpec(KindSpec):
    """tcpreplay of a whole trace, addresses rewritten into the topology."""

    kind: Literal["tcpreplay"] = "tcpreplay"
    trace: str = Field(description="packet trace to replay")
    target_mbps: float | None = Field(
        None, gt=0, description="mean rate (IP level, both directions) reached by merging "
                                "time-shifted copies of the looped trace (each copy one more "
                                "user); default: the trace's own rate")
    loop: bool = Field(True, description="loop the trace for the whole run (false: replay "
                                         "it once)")


class ReplayKind(TrafficKind):
    """Raw replay: both directions of the trace at its own times (not responsive)."""

    name = "tcpreplay"
    role = "background"
    Spec = ReplaySpec
    cli = "swell.generators.replay"
    tools = (Tool("tcpreplay", "tcpreplay"), Tool("tcprewrite", "tcpreplay"))

    @property
    def s(self) -> ReplaySpec:
        assert isinstance(self.spec, ReplaySpec)
        return self.spec

    family = 4  # the address plan's, set by check_path

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: the trace readable, and which families it carries (so
        :meth:`check_path` can say what an address plan does with them)."""
        super().validate(ctx)
        self._census(input_file(ctx, self.s.trace))

    def _census(self, trace: Path) -> None:
        self.trace = trace
        pk = read_all(trace)
        tcp_udp = np.isin(pk.proto, (6, 17))
        self.packets = {f: int(((pk.ipver == f) & tcp_udp).sum()) for f in (4, 6)}
        self.rates_by = {f: trace_rates(trace, f, pk) for f in (4, 6)
                         if replayable(pk, f).any()}
        if not self.rates_by:
            raise SwellError(trace, "no TCP/UDP packets to replay")

    def prepare(self, ctx: PrepareContext) -> None:
        self._census(input_file(ctx, self.s.trace))

    @property
    def rates(self) -> dict[str, float] | None:
        """The trace's own rate per direction on this plan (None before prepare)."""
        return getattr(self, "rates_by", {}).get(self.family)

    def asked_mbps(self) -> dict[str, float] | None:
        """The target (or the trace's rate, looped) split between the directions as the
        trace's bytes are; played once: not judged."""
        rates = self.rates
        if not rates or not (self.s.loop or self.s.target_mbps is not None):
            return None
        total = rates["forward"] + rates["reverse"]
        want = self.s.target_mbps if self.s.target_mbps is not None else total
        return {d: want * r / max(total, 1e-12) for d, r in rates.items()}

    def needs(self) -> HostNeeds:
        return ONE_PAIR

    def check_path(self, path: PathFacts) -> list[str]:
        """An open-loop rate at or above the bottleneck only measures the queue: an error;
        so is an IPv4 plan for a trace whose TCP/UDP is all IPv6 (tcprewrite maps addresses
        within a family). On an IPv6 plan a trace's IPv4 packets are translated: a warning
        says so."""
        self.family = path.family
        notes = []
        counts = getattr(self, "packets", None)
        if counts and path.family == 4 and not counts[4] and counts[6]:
            raise SwellError(self.name, f"cannot run over IPv4: {self.s.trace}'s "
                             f"{counts[6]} TCP/UDP packets are all IPv6, and tcprewrite maps "
                             "addresses within a family only; use an IPv6 network")
        if counts and path.family == 6 and counts[4]:
            notes.append(f"{self.name}: {counts[4]} IPv4 TCP/UDP packets of {self.s.trace} "
                         "are translated to IPv6 before the rewrite (addresses ::ffff:a.b.c.d, "
                         "header rebuilt without options, fragments dropped, packets over "
                         "the MTU cut to it): tcprewrite does not translate 4 to 6")
        if counts and path.family == 4 and counts[6]:
            notes.append(f"{self.name}: {counts[6]} IPv6 packets of {self.s.trace} are not "
                         "replayed on an IPv4 plan")
        asked = self.asked_mbps() or {}
        for d, cap in (("reverse", path.reverse_mbps), ("forward", path.forward_mbps)):
            if cap is not None and asked.get(d, 0.0) >= cap:
                raise SwellError("background", f"{self.s.display()} replays {asked[d]:.3g} "
                                 f"Mbit/s ({d}), at or above the bottleneck's {cap:g} Mbit/s")
        return notes

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        """The generator's summary, plus asked / copies merged / planned."""
        res = super().result(gen, window)
        if gen is not None:
            res.metrics["replay"] = {k: gen.summary.get(k) for k in (
                "asked_mbps", "trace_mbps", "copies", "whole_copies", "partial_copy_share",
                "planned_mbps", "loop")}
            # for the run's delivery check: what an overshoot at the bottleneck means here
            res.metrics["load"] = {"overshoot_cause": (
                "the emulated hosts answer replayed segments of connections they never "
                "opened (RSTs), and their answers cross the bottleneck too (raw replay is "
                "neither responsive nor consistent)")}
        return res

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        background_pair(pl, self.name)
        if self.s.loop or self.s.target_mbps is not None:
            looping = Looping(ctx.duration_s, self.s.loop, self.s.target_mbps, ctx.seed,
                              ctx.warmup_s)
            return replay_between(list(pl.bg_clients), list(pl.bg_servers), self.trace,
                                  ctx.out_dir, looping=looping)
        return replay_between(list(pl.bg_clients), list(pl.bg_servers), self.trace,
                              ctx.out_dir, duration_s=ctx.duration_s)


def trace_rates(trace: Path, family: int = 4, pk: PacketChunk | None = None
                ) -> dict[str, float]:
    """The trace's own rate per bottleneck direction when looped (IP bytes of the packets
    replayable on a plan of ``family``, IPv4 ones translated to IPv6 counted 20 bytes
    longer, over the loop period): forward = client -> server."""
    pk = read_all(trace) if pk is None else pk
    usable = replayable(pk, family)
    if not usable.any():
        raise SwellError(trace, f"no {_WHAT[family]} to replay")
    srv = server_side(pk)
    t = np.sort(pk.ts_ns[usable]).astype(np.float64) / 1e9
    nb = pk.ip_len.astype(np.float64) + (20.0 * (pk.ipver == 4) if family == 6 else 0.0)
    total = trace_mbps(t, nb[usable].astype(np.int64))
    share = float(nb[usable & srv].sum()) / max(float(nb[usable].sum()), 1e-12)
    return {"forward": total * (1 - share), "reverse": total * share}


def iface_mac(place: Place, iface: str) -> str:
    res = place.run(["cat", f"/sys/class/net/{iface}/address"])
    if res.returncode != 0:
        raise SwellError(iface, f"no such interface in {place.name}")
    return res.stdout.strip()


def add_parsers(sub: Any) -> None:
    """``swell gen replay`` (for the ``swell gen`` command's subparsers)."""
    p = sub.add_parser("replay", help="tcpreplay a trace, addresses rewritten (tcprewrite)")
    p.add_argument("trace", type=Path)
    p.add_argument("--client-ns", required=True, help="namespace where client packets enter")
    p.add_argument("--client-if", required=True, help="its interface")
    p.add_argument("--server-ns", required=True, help="namespace where server packets enter")
    p.add_argument("--server-if", required=True, help="its interface")
    p.add_argument("--clients", required=True, help="topology client addresses (comma list)")
    p.add_argument("--servers", required=True, help="topology server addresses (comma list)")
    p.add_argument("--client-dmac", help="next-hop MAC on the client side "
                                         "(default: the server interface's MAC)")
    p.add_argument("--server-dmac", help="next-hop MAC on the server side "
                                         "(default: the client interface's MAC)")
    p.add_argument("--start", type=float, default=0.0, help="seconds into the trace")
    p.add_argument("--duration", type=float, help="seconds of the trace to replay")
    p.add_argument("--multiplier", type=float, default=1.0, help="tcpreplay speed factor")
    p.add_argument("--loop", type=float, metavar="SECONDS",
                   help="loop the trace for this many seconds")
    p.add_argument("--target-mbps", type=float, help="merge time-shifted copies up to this "
                   "rate, both directions (needs --loop)")
    p.add_argument("--seed", type=int, default=1, help="phases of the copies")
    p.add_argument("--out", type=Path, help="output directory (default: a temporary one)")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: Any) -> int:
    import json
    import tempfile

    from swell.generators.base import Netns, run_generator

    cp, sp = Netns(args.client_ns), Netns(args.server_ns)
    cmac, smac = iface_mac(cp, args.client_if), iface_mac(sp, args.server_if)
    out = args.out or Path(tempfile.mkdtemp(prefix="swell-gen-replay-"))
    cfg = ReplayConfig(trace=args.trace, out_dir=out,
                       client_inject=Inject(cp, args.client_if, cmac, args.client_dmac or smac),
                       server_inject=Inject(sp, args.server_if, smac, args.server_dmac or cmac),
                       clients=[x for x in args.clients.split(",") if x],
                       servers=[x for x in args.servers.split(",") if x],
                       multiplier=args.multiplier, start_s=args.start, duration_s=args.duration,
                       looping=Looping(args.loop, True, args.target_mbps, args.seed)
                       if args.loop else None)
    res = run_generator(ReplayGenerator(cfg), duration_s=None, label="tcpreplay")
    print(json.dumps({**res.summary, "out": str(out)}, default=str))
    return 0
