"""Raw replay of a trace with tcpreplay, its addresses rewritten into the topology.

The simplest open-loop baseline: the trace's own packets, byte for byte
(headers and all), at the trace's times. Steps:

1. **Split** (:func:`split_trace`). Every IPv4 TCP/UDP packet is oriented by
   its connection (:func:`swell.generators.playback.server_side`: SYN, then
   SYN/ACK, then the well-known port); client->server packets go into
   ``c2s.pcap``, server->client packets into ``s2c.pcap``. Other packets
   (ARP, IPv6, ICMP, ...) are dropped and counted: they cannot be mapped onto
   the topology's IPv4 hosts. The raw records are read with dpkt (pcap or
   pcapng) and matched one for one with the swell reader's rows; whatever the
   input link type (Ethernet with VLAN tags, Linux SLL/SLL2, raw IP, BSD
   loopback), each packet is written as untagged Ethernet + IPv4.
2. **Rewrite** (``tcprewrite``): ``--pnat`` maps every trace client address
   onto a client emulated host and every trace server address onto a server
   host (both fields, so replies match), ``--enet-smac``/``--enet-dmac`` set
   to the injecting interface and its peer, ``--fixlen=pad``
   restores payloads cut by a short snaplen, ``--mtu-trunc`` cuts offloaded
   super-frames to the MTU, and ``--fixcsum`` recomputes the checksums.
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
from swell.generators.base import Generator, GenResult, Place, Proc
from swell.generators.kind import (
    ONE_PAIR,
    KindSpec,
    PrepareContext,
    RunContext,
    Tool,
    TrafficKind,
    background_pair,
    input_file,
)
from swell.generators.playback import server_side
from swell.inet import require_ipv4
from swell.placement import Endpoint, HostNeeds

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


def split_trace(trace: Path, out_dir: Path, start_s: float = 0.0,
                duration_s: float | None = None) -> SplitResult:
    """Write the client->server and server->client IPv4 TCP/UDP packets to two pcaps.

    Only packets in ``[start_s, start_s + duration_s)`` from the trace's first packet.
    """
    pk = read_all(trace)
    records, linktype, nano = _raw_records(Path(trace))
    if len(records) != len(pk):
        raise SwellError(trace, f"dpkt read {len(records)} records, the swell reader "
                                f"{len(pk)}: cannot match packets")
    t = (pk.ts_ns - pk.ts_ns.min()).astype(np.float64) / 1e9 if len(pk) else np.zeros(0)
    inside = (t >= start_s) & (t < (np.inf if duration_s is None else start_s + duration_s))
    usable = (pk.ipver == 4) & np.isin(pk.proto, (6, 17)) & inside
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
                w.writepkt(ETHER_IPV4 + buf[l2_header_len(linktype, buf):], ts=ts)
        first[name] = float(pk.ts_ns[idx[0]]) / 1e9 if idx.size else np.inf
    return SplitResult(paths["c2s"], paths["s2c"],
                       {"c2s": int(masks["c2s"].sum()), "s2c": int(masks["s2c"].sum()),
                        "dropped": int((inside & ~usable).sum())}, first,
                       _addresses(pk.select(masks["c2s"]), pk.select(masks["s2c"])),
                       _addresses(pk.select(masks["s2c"]), pk.select(masks["c2s"])))


def _addresses(sent: PacketChunk, received: PacketChunk) -> list[str]:
    """Addresses of one side: sources of what it sent and destinations of what it received,
    in order of first appearance (so broadcast and unanswered destinations are mapped too)."""
    ts = np.concatenate([sent.ts_ns, received.ts_ns])
    pairs = np.concatenate([np.stack([sent.saddr_hi, sent.saddr_lo], 1),
                            np.stack([received.daddr_hi, received.daddr_lo], 1)])
    order = np.argsort(ts, kind="stable")
    _, first = np.unique(pairs[order], axis=0, return_index=True)
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


def round_robin(trace_addrs: list[str], topo_addrs: list[str]) -> dict[str, str]:
    """Map trace addresses onto topology addresses in turn (several may share one)."""
    if not topo_addrs:
        raise SwellError("replay", "the topology has no hosts on this side")
    return {a: topo_addrs[i % len(topo_addrs)] for i, a in enumerate(trace_addrs)}


def pnat_arg(mapping: dict[str, str]) -> str:
    return ",".join(f"{a}/32:{b}/32" for a, b in mapping.items())


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

    def prepare(self) -> SplitResult:
        """Split the trace and rewrite both directions (the counts are known after this)."""
        c = self.cfg
        self.split = split_trace(Path(c.trace), self.out, c.start_s, c.duration_s)
        if not self.split.counts["c2s"] + self.split.counts["s2c"]:
            raise SwellError(c.trace, "no IPv4 TCP/UDP packets to replay")
        self.mapping = {**round_robin(self.split.clients, c.clients),
                        **round_robin(self.split.servers, c.servers), **c.maps}
        raw = {"c2s": self.split.c2s, "s2c": self.split.s2c}
        for name, inject in self.injects().items():
            argv = rewrite_argv(raw[name], self.out / f"{name}.pcap", self.mapping, inject, c.mtu)
            res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if res.returncode != 0:
                raise SwellError("tcprewrite", (res.stderr + res.stdout).strip()[-300:]
                                 or f"status {res.returncode}")
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
        summary: dict[str, Any] = {"counts": self.split.counts, "mapping": self.mapping}
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

    def prepare(self, ctx: PrepareContext) -> None:
        assert isinstance(self.spec, ReplaySpec)
        self.trace = input_file(ctx, self.spec.trace)

    def needs(self) -> HostNeeds:
        return ONE_PAIR

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        background_pair(pl, self.name)
        require_ipv4(self.name, [e.ip for e in (*pl.bg_clients, *pl.bg_servers)],
                     "tcpreplay replays the trace's IPv4 packets with addresses rewritten one "
                     "to one onto the hosts (tcprewrite pseudo-NAT); use upb or tpb")
        return replay_between(list(pl.bg_clients), list(pl.bg_servers), self.trace,
                              ctx.out_dir, duration_s=ctx.duration_s)


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
                       multiplier=args.multiplier, start_s=args.start, duration_s=args.duration)
    res = run_generator(ReplayGenerator(cfg), duration_s=None, label="tcpreplay")
    print(json.dumps({**res.summary, "out": str(out)}, default=str))
    return 0
