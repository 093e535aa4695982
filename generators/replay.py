"""Raw replay of a trace with tcpreplay, its addresses rewritten into the topology.

The simplest open-loop baseline: the trace's own packets, byte for byte
(headers and all), at the trace's times. Steps:

1. **Split** (:func:`swell.generators.replay_split.split_trace`): the
   trace's replayable TCP/UDP packets by direction into ``c2s.pcap`` and
   ``s2c.pcap`` (on an IPv6 plan IPv4 ones translated to IPv6), looped and
   merged with renumbered copies up to a target rate.
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

import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dpkt
import numpy as np
from pydantic import Field

from swell.errors import SwellError
from swell.extract.reader import Damage, last_damage, read_all
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
from swell.generators.replay_split import (
    REPLAYABLE,
    Looping,
    RawPackets,
    SplitResult,
    check_link_types,
    replayable,
    split_trace,
    trace_rates,
)
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
    head = bytes.fromhex(dmac.replace(":", "")) + bytes.fromhex(smac.replace(":", ""))
    tmp = path.with_suffix(".macs.tmp")
    with RawPackets(path) as records, open(tmp, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=262144, linktype=1, nano=records.nano)
        for i in range(len(records)):
            ts, buf = records[i]
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


TCPREPLAY = (Tool("tcpreplay", "tcpreplay"), Tool("tcprewrite", "tcpreplay"))


class ReplayGenerator(Generator):
    """tcpreplay of the trace's two directions on the two sides of the topology."""

    name = "tcpreplay"
    tools = TCPREPLAY
    native = ()

    def __init__(self, cfg: ReplayConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.split: SplitResult | None = None
        self.mapping: dict[str, str] = {}
        self.players: dict[str, Proc] = {}

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
            raise SwellError(c.trace, f"no {REPLAYABLE[family]} to replay")
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
    tools = TCPREPLAY

    @property
    def s(self) -> ReplaySpec:
        assert isinstance(self.spec, ReplaySpec)
        return self.spec

    family = 4  # the address plan's, set by check_path

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: what :meth:`prepare` reads and checks (the trace readable,
        packets to replay, link types the split can rewrite, its damage), and which
        families it carries (so :meth:`check_path` can say what an address plan does
        with them)."""
        super().validate(ctx)
        self._census(input_file(ctx, self.s.trace))

    def _census(self, trace: Path) -> None:
        self.trace = trace
        # trace_damage: the run's warning and input_damage (experiments.runner)
        self.packets, self.rates_by, self.trace_damage = trace_census(trace)

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


def trace_census(trace: Path) -> tuple[dict[int, int], dict[int, dict[str, float]],
                                       Damage | None]:
    """A trace read as the split reads it, and checked as it checks it: TCP/UDP packets
    per family, the trace's own rates per family whose packets a plan of it replays,
    and the reader's damage. A one-line error for an unreadable trace, one with nothing
    to replay, or a link type the split cannot rewrite."""
    pk = read_all(trace)
    tcp_udp = np.isin(pk.proto, (6, 17))
    packets = {f: int(((pk.ipver == f) & tcp_udp).sum()) for f in (4, 6)}
    rates_by = {f: trace_rates(trace, f, pk) for f in (4, 6) if replayable(pk, f).any()}
    if not rates_by:
        raise SwellError(trace, "no TCP/UDP packets to replay")
    check_link_types(pk, replayable(pk, 4) | replayable(pk, 6), trace)
    return packets, rates_by, last_damage(trace)


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
    p.add_argument("--force", action="store_true",
                   help="write into --out even when it holds files swell gen did not write")
    p.set_defaults(func=cmd_replay)


def cmd_replay(args: Any) -> int:
    import json

    from swell.fsutil import check_gen_output, gen_output_dir
    from swell.generators.base import Netns, run_generator

    if args.out:  # a bad output, then a bad trace: said before anything is touched
        check_gen_output(args.out, args.force)
    trace_census(args.trace)
    cp, sp = Netns(args.client_ns), Netns(args.server_ns)
    cmac, smac = iface_mac(cp, args.client_if), iface_mac(sp, args.server_if)
    out = gen_output_dir(args.out, "replay", args.force)
    cfg = ReplayConfig(trace=args.trace, out_dir=out,
                       client_inject=Inject(cp, args.client_if, cmac, args.client_dmac or smac),
                       server_inject=Inject(sp, args.server_if, smac, args.server_dmac or cmac),
                       clients=[x for x in args.clients.split(",") if x],
                       servers=[x for x in args.servers.split(",") if x],
                       multiplier=args.multiplier, start_s=args.start, duration_s=args.duration,
                       looping=Looping(args.loop, True, args.target_mbps, args.seed)
                       if args.loop else None)
    gen = ReplayGenerator(cfg)
    split = gen.prepare()  # the trace read (and its damage said) before anything starts
    if split.damage:
        print(f"swell: warning: {split.damage.one_line()}", file=sys.stderr)
    res = run_generator(gen, duration_s=None, label="tcpreplay")
    damage = {"damage": split.damage.to_json()} if split.damage else {}
    print(json.dumps({**res.summary, **damage, "out": str(out)}, default=str))
    return 0
