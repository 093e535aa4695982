"""Packet playback of a trace: UPB (over UDP) and TPB (over one TCP connection).

The paper's playback baselines (seed 004, section 4.1) send the packets of a
trace again with the trace's own timing and sizes: open loop, so they have
the trace's burstiness but do not respond to congestion.

Schedule (:func:`trace_schedule`). The trace is read with
:func:`swell.extract.reader.read_all`; every TCP/UDP packet over IPv4/IPv6 is
oriented by its connection (:func:`server_side`): the destination of a pure
SYN is the server; else the source of a SYN/ACK; else the endpoint with the
lower port (the well-known service). ``direction`` picks the packets sent by
the server side (default, the response traffic), by the client side, or both.
By default only packets that carry payload are played (pure ACKs are the
receiver's business). Times are offsets from the first packet kept; sizes are
the trace's IP length (the engine's payload is ``ip_len - 28`` for UDP, 48 over
an IPv6 address plan, so the bottleneck sees the trace's IP length) or its L4
payload length.

Engine: D-ITG (Debian ``d-itg``), always with ``-poll``. ``-Ft FILE`` gives one
inter-departure time per line in milliseconds, where line ``i`` is the wait
*before* packet ``i`` (measured: the first line delays the first packet), and
it must be positive; ``-Fs FILE`` gives one payload size per line (bytes, at
least 1). D-ITG pads a payload to its own header, 20 bytes (UDP) or 24 bytes
(TCP): such packets are counted as ``padded`` in the summary. Zero gaps
(packets with equal timestamps) are spread by 1 µs on the absolute schedule,
so no drift builds up. TPB runs the same files with ``-T TCP -D`` (no Nagle:
each write leaves when scheduled unless the window is closed).

Accuracy (measured, ``docs/playback.md``): on this 2-core shared machine
ITGSend ``-poll`` as an ordinary process sleeps late for gaps over 1 ms and
never catches up (example.pcap: 593 ms behind after 15.6 s, gap error p99
2.9 ms); under SCHED_FIFO (``chrt -f 10``, ``realtime=True``, the default)
the gap error p99 is 0.03 ms and the drift 7 ms, so D-ITG is the engine.
D-ITG 2.8.1's ``-sa`` fails ("Address family not supported"), so the sender's
source address is the route's choice in the sender's namespace; ``src`` is
only used by the readiness probe. ITGSend exits 0 even when a flow fails, so
its output is checked for errors.

With ``direction="both"`` the generator runs one leg per direction (each leg
an ITGRecv on the receiving side and an ITGSend on the sending side).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from swell.errors import SwellError
from swell.extract.reader import PacketChunk, last_damage, read_all
from swell.extract.tiling import Tiling, copies_for, tile, trace_mbps
from swell.generators.base import (
    DITG,
    Generator,
    GenResult,
    Local,
    Netns,
    Place,
    Proc,
)
from swell.generators.cbr import read_ditg_log, throughput_series
from swell.generators.kind import (
    ONE_PAIR,
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    TrafficKind,
    Window,
    background_pair,
    input_file,
)
from swell.inet import IP_HEADER, hostport, is_v6
from swell.native import native_artifact
from swell.placement import Endpoint, HostNeeds, PathFacts

DIRECTIONS = ("server", "client", "both")
SIZE_MODES = ("ip", "payload")
UDP_IP_HEADER = 28
V6_EXTRA = IP_HEADER[6] - IP_HEADER[4]  # an IPv6 packet's header is 20 bytes longer
TCP_IP_HEADER = 40
DITG_MIN_PAYLOAD = {"udp": 20, "tcp": 24}  # D-ITG's own header; smaller writes are padded
MAX_PAYLOAD = 65507
MIN_GAP_S = 1e-6
WELL_KNOWN = 1024
DRAIN_S = 1.0


@dataclass(frozen=True)
class PacketSchedule:
    """Departure offsets (s, from the first packet) and per-packet sizes of one direction."""

    t_s: np.ndarray  # float64, non-decreasing, t_s[0] == 0
    ip_len: np.ndarray  # int64, the trace's IP length
    payload_len: np.ndarray  # int64, the trace's L4 payload length
    first_ts_s: float  # the trace time of t_s == 0
    conn: np.ndarray | None = None  # int64 connection id per packet (looping: partial copies)

    def __len__(self) -> int:
        return int(self.t_s.size)

    @property
    def duration_s(self) -> float:
        return float(self.t_s[-1]) if self.t_s.size else 0.0

    def sizes(self, mode: str = "ip", proto: str = "udp") -> np.ndarray:
        """What the engine writes per packet so that ``mode`` matches the trace."""
        if mode not in SIZE_MODES:
            raise SwellError("sizes", f"{mode!r}: ip or payload")
        if mode == "payload":
            size = self.payload_len.copy()
        else:
            size = self.ip_len - (UDP_IP_HEADER if proto == "udp" else TCP_IP_HEADER)
        return np.clip(size, 1, MAX_PAYLOAD).astype(np.int64)

    def gaps_ms(self, lead_s: float = 0.001) -> np.ndarray:
        """D-ITG ``-Ft`` values: wait before each packet, ms, all positive, no drift."""
        t = np.asarray(self.t_s, dtype=float) + lead_s
        # spread equal times by MIN_GAP_S on the absolute schedule: t'_i >= t'_{i-1} + gap
        idx = np.arange(t.size, dtype=float) * MIN_GAP_S
        t_adj = np.maximum.accumulate(t - idx) + idx
        return np.diff(t_adj, prepend=0.0) * 1e3

    def window(self, start_s: float = 0.0, duration_s: float | None = None) -> PacketSchedule:
        """The packets in ``[start_s, start_s + duration_s)``, re-based to zero."""
        end = np.inf if duration_s is None else start_s + duration_s
        keep = (self.t_s >= start_s) & (self.t_s < end)
        t = self.t_s[keep]
        if t.size == 0:
            raise SwellError("playback", f"no packets between {start_s} s and {end} s")
        return PacketSchedule(t - t[0], self.ip_len[keep], self.payload_len[keep],
                              self.first_ts_s + float(t[0]),
                              None if self.conn is None else self.conn[keep])

    def trace_mbps(self) -> float:
        """The trace's own rate when looped (IP bytes over the loop period), Mbit/s."""
        return trace_mbps(self.t_s, self.ip_len)

    def tiled(self, tiling: Tiling) -> PacketSchedule:
        """The departures of a :class:`~swell.extract.tiling.Tiling` of this schedule."""
        i = tiling.index
        conn = None if self.conn is None else self.conn[i] + tiling.copy * (int(self.conn.max())
                                                                             + 1)
        return PacketSchedule(tiling.t_s, self.ip_len[i], self.payload_len[i], self.first_ts_s,
                              conn)


def connections(chunk: PacketChunk) -> tuple[np.ndarray, np.ndarray]:
    """Per packet: its connection id (both directions alike) and its direction bit
    (True: from the lower endpoint to the higher one)."""
    fwd = chunk.forward()  # the (lower endpoint -> higher endpoint) direction bit
    lo_hi = np.where(fwd[:, None], np.stack([chunk.saddr_hi, chunk.saddr_lo, chunk.sport,
                                             chunk.daddr_hi, chunk.daddr_lo, chunk.dport], 1),
                     np.stack([chunk.daddr_hi, chunk.daddr_lo, chunk.dport,
                               chunk.saddr_hi, chunk.saddr_lo, chunk.sport], 1))
    key = np.concatenate([lo_hi.astype(np.uint64), chunk.proto[:, None].astype(np.uint64)], 1)
    _, conn = np.unique(key, axis=0, return_inverse=True)
    return conn.reshape(-1).astype(np.int64), fwd


def server_side(chunk: PacketChunk) -> np.ndarray:
    """Per packet: True when its source is the server side of its connection.

    Only meaningful for TCP/UDP packets (others get False).
    """
    n = len(chunk)
    conn, fwd = connections(chunk)
    # server_is_higher[c]: True when the higher endpoint of connection c is the server
    n_conn = int(conn.max()) + 1 if n else 0
    decided = np.zeros(n_conn, dtype=bool)
    higher = np.zeros(n_conn, dtype=bool)
    flags = chunk.tcp_flags
    tcp = chunk.proto == 6
    syn = tcp & ((flags & 0x12) == 0x02)
    synack = tcp & ((flags & 0x12) == 0x12)
    for mask, to_higher in ((syn, fwd), (synack, ~fwd)):
        idx = np.flatnonzero(mask & ~decided[conn])
        first = np.unique(conn[idx], return_index=True)
        cs, at = first[0], idx[first[1]]
        higher[cs] = to_higher[at]  # SYN goes to the server; SYN/ACK comes from it
        decided[cs] = True
    src_port = np.where(fwd, chunk.sport, chunk.dport).astype(np.int64)  # lower endpoint's port
    dst_port = np.where(fwd, chunk.dport, chunk.sport).astype(np.int64)
    by_port = _port_rule(src_port, dst_port)
    rest = np.flatnonzero(~decided[conn])
    higher[conn[rest]] = by_port[rest]
    # packet source is the higher endpoint when fwd is False
    return np.where(fwd, ~higher[conn], higher[conn]) & np.isin(chunk.proto, (6, 17))


def _port_rule(lower_port: np.ndarray, higher_port: np.ndarray) -> np.ndarray:
    """Is the higher endpoint the server, from ports alone: the well-known or smaller one."""
    lo_wk, hi_wk = lower_port < WELL_KNOWN, higher_port < WELL_KNOWN
    return np.where(lo_wk != hi_wk, hi_wk, higher_port < lower_port)


def trace_schedule(path: str | Path, direction: str = "server", with_empty: bool = False,
                   chunk: PacketChunk | None = None) -> PacketSchedule:
    """The packet schedule of one direction (or both) of a trace's TCP/UDP packets."""
    if direction not in DIRECTIONS:
        raise SwellError("direction", f"{direction!r}: server, client or both")
    pk = read_all(path) if chunk is None else chunk
    l4 = np.isin(pk.proto, (6, 17)) & (pk.ipver > 0) & ((pk.frag & 4) == 0)
    srv = server_side(pk)
    conn, _ = connections(pk)
    keep = l4 & (srv if direction == "server" else ~srv if direction == "client" else True)
    if not with_empty:
        keep &= pk.payload_len > 0
    if not keep.any():
        raise SwellError(path, f"no {'' if with_empty else 'payload '}packets in direction "
                               f"{direction}")
    sel = pk.select(keep)
    order = np.argsort(sel.ts_ns, kind="stable")
    ts = sel.ts_ns[order]
    t = (ts - ts[0]).astype(np.float64) / 1e9
    return PacketSchedule(t, sel.ip_len[order].astype(np.int64),
                          sel.payload_len[order].astype(np.int64), float(ts[0]) / 1e9,
                          conn[keep][order])


def write_ditg_files(sched: PacketSchedule, sizes: np.ndarray, idt_path: Path,
                     size_path: Path) -> None:
    """Write D-ITG's ``-Ft`` (ms, one a line) and ``-Fs`` (bytes, one a line) files."""
    idt_path.write_text("".join(f"{g:.6f}\n" for g in sched.gaps_ms()))
    size_path.write_text("".join(f"{int(s)}\n" for s in sizes))


@dataclass
class Leg:
    """One played direction: sender place/address -> receiver place/address."""

    sched: PacketSchedule
    sender: Place
    receiver: Place
    dst: str
    src: str | None = None
    port: int = 9700
    signal_port: int = 9010
    label: str = "server"


@dataclass
class PlaybackConfig:
    trace: Path
    out_dir: Path
    dst: str  # receiver address (for direction "server": a client-side host)
    src: str | None = None  # sender address (for direction "server": a server-side host)
    sender: Place = field(default_factory=Local)
    receiver: Place = field(default_factory=Local)
    proto: str = "udp"  # "udp" (UPB) | "tcp" (TPB)
    direction: str = "server"
    sizes: str | None = None  # default: "ip" for UDP, "payload" for TCP
    with_empty: bool = False
    start_s: float = 0.0
    duration_s: float | None = None
    port: int = 9700
    signal_port: int = 9010
    realtime: bool = True  # SCHED_FIFO sender (root): needed for 1 ms accuracy, see docs
    loop: bool = False  # loop the (windowed) trace for run_s seconds
    target_mbps: float | None = None  # merge time-shifted copies up to this rate (IP level)
    run_s: float | None = None  # how long a looped / merged playback lasts
    warmup_s: float = 0.0  # the part of run_s before measurement (the rate is aimed after it)
    seed: int = 1  # phases of the copies, connections of a partial copy

    def __post_init__(self) -> None:
        if (self.loop or self.target_mbps is not None) and not (self.run_s or 0) > 0:
            raise SwellError("playback", "looping or a target rate needs the run's duration")
        if self.proto not in ("udp", "tcp"):
            raise SwellError("proto", f"{self.proto!r}: udp or tcp")
        if self.direction not in DIRECTIONS:
            raise SwellError("direction", f"{self.direction!r}: server, client or both")
        if self.sizes is None:
            self.sizes = "ip" if self.proto == "udp" else "payload"
        if self.sizes not in SIZE_MODES:
            raise SwellError("sizes", f"{self.sizes!r}: ip or payload")


class PlaybackGenerator(Generator):
    """UPB / TPB: the trace's packet schedule through D-ITG (``-Ft``/``-Fs``, ``-poll``)."""

    name = "playback"
    tools = DITG

    def __init__(self, cfg: PlaybackConfig, legs: list[Leg] | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.legs = legs if legs is not None else self._legs_from_config()
        self.receivers: list[Proc] = []
        self.senders: list[Proc] = []

    def _tile(self, sched: PacketSchedule) -> tuple[PacketSchedule, dict[str, Any]]:
        """The looped / merged schedule of one leg and what it plans (``extract.tiling``)."""
        c = self.cfg
        rate = sched.trace_mbps()
        info: dict[str, Any] = {"trace_mbps": rate, "loop": c.loop, "asked_mbps": c.target_mbps
                                or (rate if c.loop else None)}
        if not c.loop and c.target_mbps is None:
            return sched, {**info, "copies": 1.0}
        til = tile(sched.t_s, sched.ip_len, c.run_s, copies_for(c.target_mbps, rate),
                   sched.conn, loop=c.loop, seed=c.seed, window_start_s=c.warmup_s)
        out = sched.tiled(til)
        run = float(c.run_s or 0.0)
        inside = out.t_s >= min(c.warmup_s, run / 2)
        planned = float(out.ip_len[inside].sum()) * 8 / max(run - min(c.warmup_s, run / 2),
                                                            1e-9) / 1e6
        return out, {**info, "copies": round(til.users, 4), "whole_copies": til.copies,
                     "partial_copy_share": round(til.partial, 4), "period_s": til.period_s,
                     "phases_s": [round(p, 6) for p in til.phases_s],
                     "planned_mbps": planned}

    def _legs_from_config(self) -> list[Leg]:
        c = self.cfg
        dirs = ["server", "client"] if c.direction == "both" else [c.direction]
        chunk = read_all(c.trace)
        legs = []
        self.plans: dict[str, dict[str, Any]] = {}
        for i, d in enumerate(dirs):
            sched = trace_schedule(c.trace, d, c.with_empty, chunk).window(c.start_s, c.duration_s)
            sched, self.plans[d] = self._tile(sched)
            if i == 0:
                legs.append(Leg(sched, c.sender, c.receiver, c.dst, c.src, c.port,
                                c.signal_port, d))
            else:  # the reverse direction: roles swap
                if c.src is None:
                    raise SwellError("playback", "direction both needs the sender address (src)")
                legs.append(Leg(sched, c.receiver, c.sender, c.src, c.dst, c.port + 1,
                                c.signal_port + 1, d))
        return legs

    def leg_sizes(self, leg: Leg) -> np.ndarray:
        sizes = leg.sched.sizes(str(self.cfg.sizes), self.cfg.proto)
        if self.cfg.sizes == "ip" and is_v6(leg.dst):  # IPv6 headers: 20 bytes more
            sizes = np.clip(sizes - V6_EXTRA, 1, None)
        return sizes

    def files(self, leg: Leg) -> tuple[Path, Path, Path]:
        base = self.out / leg.label
        return base.with_suffix(".idt"), base.with_suffix(".sizes"), base.with_suffix(".itglog")

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for leg in self.legs:
            idt, size, log = self.files(leg)
            write_ditg_files(leg.sched, self.leg_sizes(leg), idt, size)
            argv = ["ITGRecv", "-Sp", str(leg.signal_port), "-l", str(log)]
            self.receivers.append(self.spawn(f"ITGRecv {leg.label}", leg.receiver, argv))

    def wait_ready(self, timeout: float = 10.0) -> None:
        exe = str(native_artifact("swell-gen"))
        for leg, recv in zip(self.legs, self.receivers, strict=True):
            argv = [exe, "probe", "--connect-only", "--addr", hostport(leg.dst, leg.signal_port),
                    "--timeout", str(timeout)] + (["--src", leg.src] if leg.src else [])
            res = leg.sender.run(argv, timeout=timeout + 5)
            if res.returncode != 0:
                if not recv.alive():
                    raise SwellError("ITGRecv", recv.error_text())
                raise SwellError("ITGRecv", f"not answering: {res.stderr.strip()}")

    def sender_argv(self, leg: Leg) -> list[str]:
        idt, size, _ = self.files(leg)
        argv = ["ITGSend", "-a", leg.dst, "-Sdp", str(leg.signal_port), "-rp", str(leg.port),
                "-T", self.cfg.proto.upper(), "-Ft", str(idt), "-Fs", str(size),
                "-z", str(len(leg.sched)), "-t", str(int((leg.sched.duration_s + 60) * 1000)),
                "-poll"]
        argv += ["-D"] if self.cfg.proto == "tcp" else []
        return ["chrt", "-f", "10", *argv] if self.cfg.realtime else argv

    def start_client(self) -> None:
        for leg in self.legs:
            self.senders.append(self.spawn(f"ITGSend {leg.label}", leg.sender,
                                           self.sender_argv(leg)))

    def running(self) -> bool:
        return any(s.alive() for s in self.senders)

    def stop(self) -> None:
        grace = max(leg.sched.duration_s for leg in self.legs) + 10
        for s in self.senders:
            s.stop(grace=grace)
        if self.senders and all(s.popen.returncode == 0 for s in self.senders):
            time.sleep(DRAIN_S)  # the last packets in flight reach ITGRecv before it stops
        for r in self.receivers:
            r.stop()

    def sender_failed(self, snd: Proc) -> str | None:
        """ITGSend's own error lines (it exits 0 when a flow fails)."""
        text = snd.drain() + list(snd.stderr_tail)
        bad = [ln for ln in text if "error" in ln.lower() or "aborted" in ln.lower()]
        if snd.popen.returncode not in (0, -15):
            bad.append(f"exit status {snd.popen.returncode}")
        return " | ".join(bad) if bad else None

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        summary: dict[str, Any] = {"proto": self.cfg.proto, "sizes": self.cfg.sizes, "legs": {}}
        series: dict[str, np.ndarray] = {}
        files: dict[str, Path] = {}
        for leg, snd in zip(self.legs, self.senders, strict=True):
            failure = self.sender_failed(snd)
            if failure:
                raise SwellError(snd.label, failure)
            _, _, log = self.files(leg)
            rx = read_ditg_log(log, log.with_suffix(".txt"))
            summary["legs"][leg.label] = {
                **leg_summary(leg.sched, self.leg_sizes(leg), rx, self.cfg.proto),
                **getattr(self, "plans", {}).get(leg.label, {}),
                "delivered_mbps": delivered_mbps(leg.sched, rx, self.cfg.proto,
                                                 self.cfg.warmup_s,
                                                 V6_EXTRA if is_v6(leg.dst) else 0)}
            for k, v in throughput_series(rx).items():
                series[f"{leg.label}_{k}"] = v
            files[f"{leg.label}_log"] = log
        return GenResult(self.name, series, summary, files)


def delivered_mbps(sched: PacketSchedule, rx: dict[str, np.ndarray], proto: str,
                   warmup_s: float = 0.0, ip_extra: int = 0) -> float | None:
    """Received rate at the IP level (payload + headers), over the schedule after ``warmup_s``
    (departure times relative to the first received packet's scheduled time)."""
    if rx["seq"].size < 2 or len(sched) < 2:
        return None
    seq = rx["seq"].astype(np.int64) - 1
    ok = (seq >= 0) & (seq < len(sched))
    if not ok.any():
        return None
    rel = rx["tx_s"][ok] - (rx["tx_s"][ok] - sched.t_s[seq[ok]]).min()  # on the schedule's clock
    start = min(warmup_s, sched.duration_s / 2)
    inside = rel >= start
    hdr = (UDP_IP_HEADER if proto == "udp" else TCP_IP_HEADER + 12) + ip_extra
    bits = float((rx["size"][ok][inside] + hdr).sum()) * 8
    return bits / max(sched.duration_s - start, 1e-9) / 1e6


def leg_summary(sched: PacketSchedule, sizes: np.ndarray, rx: dict[str, np.ndarray],
                proto: str) -> dict[str, Any]:
    """Scheduled against received: counts, bytes, and timing error against the schedule.

    ``idt_error_p99_ms``: p99 of |D-ITG departure gap - trace gap| over consecutive
    packets; ``offset_p99_ms`` / ``arrival_offset_p99_ms``: p99 of the departure /
    arrival time's deviation from the schedule (after removing the median offset).
    ``lag_ms``: how far behind the schedule the last departure was, against the first.
    D-ITG waits each gap after the previous send and never catches up, so a sender
    held by its host (a hypervisor's steal, a CPU taken) ends behind by about the
    holds' sum, and one that sleeps late on every gap (an ordinary process, a closed TCP
    window) falls behind steadily.
    """
    out: dict[str, Any] = {
        "scheduled": len(sched), "received": int(rx["seq"].size),
        "scheduled_bytes": int(sizes.sum()), "received_bytes": int(rx["size"].sum()),
        "expected_bytes": int(np.maximum(sizes, DITG_MIN_PAYLOAD[proto]).sum()),
        "padded": int((sizes < DITG_MIN_PAYLOAD[proto]).sum()),
        "duration_s": sched.duration_s,
    }
    if rx["seq"].size < 3:
        return out
    order = np.argsort(rx["seq"], kind="stable")
    seq = rx["seq"][order].astype(np.int64) - 1  # D-ITG numbers packets from 1
    ok = (seq >= 0) & (seq < len(sched))
    seq, tx, arr = seq[ok], rx["tx_s"][order][ok], rx["rx_s"][order][ok]
    want = sched.t_s[seq]
    consecutive = np.diff(seq) == 1
    gap_err = (np.diff(tx) - np.diff(want))[consecutive]
    out["idt_error_p99_ms"] = float(np.percentile(np.abs(gap_err), 99) * 1e3)
    out["lag_ms"] = float(((tx[-1] - want[-1]) - (tx[0] - want[0])) * 1e3)
    for key, t in (("offset_p99_ms", tx), ("arrival_offset_p99_ms", arr)):
        dev = (t - want) - np.median(t - want)
        out[key] = float(np.percentile(np.abs(dev), 99) * 1e3)
    return out


def playback_between(server: Endpoint, client: Endpoint, trace: Path, out_dir: Path,
                     proto: str = "udp", direction: str = "server", **kw: Any
                     ) -> PlaybackGenerator:
    """UPB/TPB between a server-side and a client-side emulated host.

    Direction "server" (default) sends from the server host to the client host; "client"
    the other way; "both" runs both legs. D-ITG cannot bind a source address, so the
    sender's address is its namespace's route choice (the first host of the place).
    """
    snd, rcv = (client, server) if direction == "client" else (server, client)
    cfg = PlaybackConfig(trace=Path(trace), out_dir=Path(out_dir), dst=rcv.ip, src=snd.ip,
                         sender=snd.place, receiver=rcv.place, proto=proto,
                         direction=direction, **kw)
    return PlaybackGenerator(cfg)


class PlaybackSpec(KindSpec):
    """Packet playback of a trace's server-side schedule (UPB over UDP, TPB over TCP)."""

    trace: str = Field(description="packet trace whose server-side packets are played")
    target_mbps: float | None = Field(
        None, gt=0, description="mean rate (IP level) reached by merging time-shifted copies "
                                "of the looped trace (each copy one more user); default: "
                                "the trace's own rate")
    loop: bool = Field(True, description="loop the trace for the whole run (false: play it "
                                         "once)")


class UpbSpec(PlaybackSpec):
    kind: Literal["upb"] = "upb"


class TpbSpec(PlaybackSpec):
    kind: Literal["tpb"] = "tpb"


class UpbKind(TrafficKind):
    """UPB: the trace's server -> client packets, same times and sizes, over UDP (D-ITG)."""

    name = "upb"
    role = "background"
    Spec = UpbSpec
    cli = "swell.generators.playback"
    tools = DITG
    proto = "udp"

    @property
    def s(self) -> PlaybackSpec:
        assert isinstance(self.spec, PlaybackSpec)
        return self.spec

    def prepare(self, ctx: PrepareContext) -> None:
        """The trace read and its server-side schedule built (its rate is the asked
        load); the reader's damage is kept for the run's warnings (``trace_damage``)."""
        self.trace = input_file(ctx, self.s.trace)
        self.trace_rate = trace_schedule(self.trace, "server").trace_mbps()
        self.trace_damage = last_damage(self.trace)

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: what :meth:`prepare` checks (a readable trace with payload
        packets on the server side), nothing written."""
        super().validate(ctx)
        self.prepare(ctx)

    def asked_mbps(self) -> dict[str, float] | None:
        """The target, else the trace's own rate when looped (played once: not judged)."""
        rate = getattr(self, "trace_rate", None)
        if self.s.target_mbps is not None:
            return {"reverse": self.s.target_mbps, "forward": 0.0}
        return {"reverse": rate, "forward": 0.0} if self.s.loop and rate else None

    def needs(self) -> HostNeeds:
        return ONE_PAIR

    def check_path(self, path: PathFacts) -> list[str]:
        """An open-loop rate at or above the bottleneck only measures the queue: an error."""
        rate, cap = (self.asked_mbps() or {}).get("reverse"), path.reverse_mbps
        if rate is not None and cap is not None and rate >= cap:
            raise SwellError("background", f"{self.s.display()} plays {rate:.3g} Mbit/s, at or "
                             f"above the bottleneck's {cap:g} Mbit/s")
        return []

    def build(self, ctx: RunContext) -> Generator:
        server, client = background_pair(ctx.placement, self.name)
        if self.s.loop or self.s.target_mbps is not None:
            return playback_between(server, client, self.trace, ctx.out_dir, proto=self.proto,
                                    direction="server", loop=self.s.loop,
                                    target_mbps=self.s.target_mbps, run_s=ctx.duration_s,
                                    warmup_s=ctx.warmup_s, seed=ctx.seed)
        return playback_between(server, client, self.trace, ctx.out_dir,
                                proto=self.proto, direction="server",
                                duration_s=ctx.duration_s)

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        """The generator's summary, plus asked / copies merged / planned / delivered."""
        res = super().result(gen, window)
        leg = (gen.summary.get("legs") or {}).get("server") if gen is not None else None
        if leg:
            res.metrics["playback"] = {k: leg.get(k) for k in (
                "asked_mbps", "trace_mbps", "copies", "whole_copies", "partial_copy_share",
                "planned_mbps", "delivered_mbps", "loop", "scheduled", "received")}
        return res


class TpbKind(UpbKind):
    """TPB: the same schedule over one TCP connection (responsive to loss, in order)."""

    name = "tpb"
    Spec = TpbSpec
    proto = "tcp"


def add_parsers(sub: Any) -> None:
    """``swell gen upb`` / ``swell gen tpb`` (for the ``swell gen`` command's subparsers)."""
    for name, proto in (("upb", "udp"), ("tpb", "tcp")):
        p = sub.add_parser(name, help=f"play a trace's packet schedule over "
                                      f"{'UDP' if proto == 'udp' else 'one TCP connection'}")
        p.add_argument("trace", type=Path)
        p.add_argument("--dst", required=True, help="receiver address")
        p.add_argument("--src", help="sender address (needed for --direction both)")
        p.add_argument("--src-ns", help="network namespace of the sender (default: this one)")
        p.add_argument("--dst-ns", help="network namespace of the receiver (default: this one)")
        p.add_argument("--direction", choices=DIRECTIONS, default="server",
                       help="whose packets to play: the server side's (default), ...")
        p.add_argument("--sizes", choices=SIZE_MODES,
                       help="match the trace's IP length (UDP default) or payload (TCP default)")
        p.add_argument("--with-empty", action="store_true", help="also packets without payload")
        p.add_argument("--start", type=float, default=0.0, help="seconds into the trace")
        p.add_argument("--duration", type=float, help="seconds of the trace to play")
        p.add_argument("--port", type=int, default=9700)
        p.add_argument("--signal-port", type=int, default=9010, help="D-ITG signalling port")
        p.add_argument("--no-rt", action="store_true", help="no SCHED_FIFO (less accurate)")
        p.add_argument("--loop", type=float, metavar="SECONDS",
                       help="loop the trace for this many seconds")
        p.add_argument("--target-mbps", type=float,
                       help="merge time-shifted copies up to this rate (needs --loop)")
        p.add_argument("--seed", type=int, default=1, help="phases of the copies")
        p.add_argument("--out", type=Path, help="output directory (default: a temporary one)")
        p.add_argument("--force", action="store_true",
                       help="write into --out even when it holds files swell gen did not write")
        p.set_defaults(func=lambda a, proto=proto: cmd_playback(a, proto))


def cmd_playback(args: Any, proto: str) -> int:
    import json
    import sys

    from swell.fsutil import check_gen_output, gen_output_dir

    if args.out:
        check_gen_output(args.out, args.force)
    cfg = PlaybackConfig(trace=args.trace, out_dir=Path(args.out or "."), dst=args.dst,
                         src=args.src,
                         sender=Netns(args.src_ns) if args.src_ns else Local(),
                         receiver=Netns(args.dst_ns) if args.dst_ns else Local(),
                         proto=proto, direction=args.direction, sizes=args.sizes,
                         with_empty=args.with_empty, start_s=args.start,
                         duration_s=args.duration, port=args.port,
                         signal_port=args.signal_port, realtime=not args.no_rt,
                         loop=args.loop is not None, run_s=args.loop,
                         target_mbps=args.target_mbps, seed=args.seed)
    from swell.generators.base import run_generator

    gen = PlaybackGenerator(cfg)  # reads the trace (a bad one: nothing written)
    gen.out = cfg.out_dir = gen_output_dir(args.out, f"{proto[0]}pb", args.force)
    damage = last_damage(args.trace)
    if damage:
        print(f"swell: warning: {damage.one_line()}", file=sys.stderr)
    res = run_generator(gen, duration_s=None, label=f"{'upb' if proto == 'udp' else 'tpb'}")
    said = {"damage": damage.to_json()} if damage else {}
    print(json.dumps({**res.summary, **said, "out": str(gen.out)}, default=str))
    return 0
