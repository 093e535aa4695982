"""Packet-level traffic (D-ITG style): many flows whose inter-departure times
and payload sizes follow a fitted packet model or a D-ITG preset.

``background: {kind: packets, model: DIR | preset: NAME, flows: N, engine: swell|ditg}``

Flows. Per flow class of a packet model (``swell fit packets``; its transport
and direction: ``s2c`` classes send from a background server to a client,
``c2s`` the other way) or for the one preset (VoIP G.711/G.729/G.723.1 with
RTP or CRTP, with or without VAD; Telnet; DNS: ``swell.extract.ditg_presets``),
``flows`` flows, each its own 5-tuple. ``proto`` overrides the transport.

Engines:

* ``swell`` (default): swell draws every flow's departures from the
  distributions (sizes truncated to whole bytes as D-ITG does), merges them
  into one plan file per sender (records ``t_ns, flow, size``) and
  ``swell-gen psend`` paces it (absolute times, sleep then busy-poll; one
  socket per flow), ``swell-gen precv`` logs every message. Drawing in
  Python keeps every family (and the empirical samples) in one place: the
  pacer only follows times, like D-ITG's ``-Ft``/``-Fs`` files.
* ``ditg``: ``ITGRecv`` and ``ITGSend`` in multi-flow mode (a script, one
  line per flow, each with ``-poll``), the preset's own ITGSend option or the
  fit's D-ITG options (``-Ft``/``-Fs`` files of the same draws when D-ITG has
  no such family, e.g. lognormal), decoded with ``ITGDec -l``.

Results: per flow the ITGDec set (:func:`flow_stats`): packets, loss,
throughput, packet rate against the asked one, inter-departure mean and
standard deviation, delay (one way: sender and receiver share a clock in the
emulated hosts; on other places the delay is marked relative) and jitter
(ITGDec's: mean absolute difference of consecutive delays), plus totals.
"""

from __future__ import annotations

import html
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from swell.errors import EnvironmentProblem, SwellError
from swell.extract.ditg_presets import preset as get_preset
from swell.extract.packetfit import Dist, load_packet_model
from swell.generators.base import (
    DITG,
    Generator,
    GenResult,
    Proc,
    parse_json_lines,
    require,
)
from swell.generators.kind import (
    KindResult,
    KindSpec,
    PrepareContext,
    ReportPart,
    RunContext,
    TrafficKind,
    Window,
)
from swell.inet import IP_HEADER, hostport
from swell.native import native_artifact
from swell.placement import GroupNeed, HostNeeds, Local, Netns, PathFacts, Place, Via

HEADER_BYTES = {"udp": 28, "tcp": 52}
MIN_SIZE = {"udp": 16, "tcp": 20}  # swell-gen's stamp (and TCP's length field)
FLOW_SHIFT = 48
PORTS = {("s2c", "udp"): 9700, ("s2c", "tcp"): 9701, ("c2s", "udp"): 9702, ("c2s", "tcp"): 9703}


@dataclass(frozen=True)
class FlowClass:
    """One class of flows: what to draw and which way it goes."""

    name: str
    proto: str
    direction: str  # s2c: server side -> client side; c2s the other way
    idt: Dist
    size: Dist
    ditg_app: tuple[str, ...] = ()  # a D-ITG preset option (VoIP ..., Telnet, DNS)


@dataclass
class Leg:
    """Everything one sender/receiver pair carries (one direction, one transport)."""

    direction: str
    proto: str
    flows: list[tuple[int, FlowClass]] = field(default_factory=list)  # (flow id, class)

    @property
    def key(self) -> str:
        return f"{self.direction}-{self.proto}"


def draw_plan(classes: list[tuple[int, FlowClass]], duration_s: float, seed: int,
              proto: str) -> tuple[np.ndarray, dict[str, int]]:
    """Departures of every flow over ``duration_s``, merged and sorted: a structured
    array (t_ns, flow, size), and how many draws had to be raised or clamped."""
    rng = np.random.default_rng(seed)
    parts, fixes = [], {"idt_negative": 0, "size_raised": 0, "size_clamped": 0}
    for fid, fc in classes:
        mean = max(fc.idt.mean(), 1e-6) if fc.idt.family != "cauchy" else 0.01
        n = int(duration_s / mean * 1.3) + 16
        t = np.zeros(0)
        while True:
            gaps = fc.idt.sample(rng, n)
            fixes["idt_negative"] += int((gaps < 0).sum())
            gaps = np.maximum(gaps, 0.0)
            if t.size == 0:  # a random phase in the first gap: flows not in lock step
                t = rng.uniform(0, 1) * gaps[0] + np.r_[0.0, np.cumsum(gaps[1:])]
            else:
                t = np.concatenate([t, t[-1] + np.cumsum(gaps)])
            if t[-1] >= duration_s or not np.isfinite(t[-1]):
                break
        t = t[t < duration_s]
        size = np.floor(fc.size.sample(rng, t.size))  # D-ITG sends (int) X
        low = MIN_SIZE[proto]
        fixes["size_raised"] += int((size < low).sum())
        fixes["size_clamped"] += int((size > 65507).sum())
        size = np.clip(size, low, 65507)
        rec = np.zeros(t.size, dtype=[("t_ns", "<u8"), ("flow", "<u4"), ("size", "<u4")])
        rec["t_ns"], rec["flow"], rec["size"] = (t * 1e9).astype(np.uint64), fid, size
        parts.append(rec)
    plan = np.concatenate(parts) if parts else np.zeros(0, dtype=[("t_ns", "<u8"),
                                                                 ("flow", "<u4"),
                                                                 ("size", "<u4")])
    return plan[np.argsort(plan["t_ns"], kind="stable")], fixes


def read_log(path: Path) -> dict[str, np.ndarray]:
    """A ``swell-gen precv`` log -> flow, seq, tx_s, rx_s, size."""
    try:
        raw = np.fromfile(path, dtype="<u8").reshape(-1, 4)
    except (OSError, ValueError) as exc:
        raise SwellError(path, f"cannot read receiver log: {exc}") from None
    return {"flow": (raw[:, 0] >> FLOW_SHIFT).astype(np.int64),
            "seq": (raw[:, 0] & ((1 << FLOW_SHIFT) - 1)).astype(np.int64),
            "tx_s": raw[:, 1] / 1e9, "rx_s": raw[:, 2] / 1e9, "size": raw[:, 3].astype(np.int64)}


_DITG = re.compile(r"Flow>\s*(\d+)\s+Seq>\s*(\d+).*txTime>(\d+):(\d+):([\d.]+)\s+"
                   r"rxTime>(\d+):(\d+):([\d.]+)\s+Size>\s*(\d+)")


def read_ditg(path: Path, text_path: Path) -> dict[str, np.ndarray]:
    """An ITGRecv log via ``ITGDec -l`` -> flow (0-based), seq, tx_s, rx_s, size."""
    res = subprocess.run(["ITGDec", str(path), "-l", str(text_path)], capture_output=True,
                         text=True, timeout=300)
    if res.returncode != 0 or not text_path.exists():
        raise SwellError(path, f"ITGDec failed: {res.stderr.strip()[-200:]}")
    rows = [m.groups() for m in map(_DITG.search, text_path.read_text().splitlines()) if m]
    if not rows:
        return {k: np.zeros(0) for k in ("flow", "seq", "tx_s", "rx_s", "size")}
    a = np.array(rows, dtype=float)
    tx = a[:, 2] * 3600 + a[:, 3] * 60 + a[:, 4]
    rx = a[:, 5] * 3600 + a[:, 6] * 60 + a[:, 7]
    return {"flow": a[:, 0].astype(np.int64) - 1, "seq": a[:, 1].astype(np.int64),
            "tx_s": tx, "rx_s": rx, "size": a[:, 8].astype(np.int64)}


def flow_stats(log: dict[str, np.ndarray], expected: dict[int, int], start_s: float = 0.0,
               one_way: bool = True) -> list[dict[str, Any]]:
    """Per flow: the ITGDec set from a receiver log. ``expected``: flow -> packets sent;
    ``start_s``: only packets sent at least this long after the flow's first."""
    out = []
    for fid in sorted(expected):
        m = log["flow"] == fid
        seq, tx, rx, size = log["seq"][m], log["tx_s"][m], log["rx_s"][m], log["size"][m]
        order = np.argsort(seq, kind="stable")
        seq, tx, rx, size = seq[order], tx[order], rx[order], size[order]
        row: dict[str, Any] = {"flow": fid, "sent": expected[fid], "received": int(seq.size),
                               "lost": max(0, expected[fid] - int(np.unique(seq).size))}
        row["loss"] = row["lost"] / expected[fid] if expected[fid] else 0.0
        if start_s > 0 and tx.size:
            keep = tx >= tx[0] + start_s
            seq, tx, rx, size = seq[keep], tx[keep], rx[keep], size[keep]
        if tx.size >= 3:
            span = tx[-1] - tx[0]
            idt = np.diff(tx)[np.diff(seq) == 1]
            delay = rx - tx
            row.update({
                "pps": float((tx.size - 1) / span) if span > 0 else 0.0,
                "throughput_bps": float(size[:-1].sum() * 8 / span) if span > 0 else 0.0,
                "bytes_mean": float(size.mean()),
                "idt_mean_us": float(idt.mean() * 1e6) if idt.size else None,
                "idt_std_us": float(idt.std() * 1e6) if idt.size else None,
                "idt_median_us": float(np.median(idt) * 1e6) if idt.size else None,
                "delay_ms": float(delay.mean() * 1e3),
                "delay_max_ms": float(delay.max() * 1e3),
                "jitter_ms": float(np.abs(np.diff(delay)).mean() * 1e3),
                "delay_kind": "one-way" if one_way else "relative (clocks differ)",
            })
        out.append(row)
    return out


@dataclass
class PacketsConfig:
    legs: list[Leg]
    out_dir: Path
    duration_s: float
    warmup_s: float = 0.0
    engine: str = "swell"
    seed: int = 1
    realtime: bool = False
    # per direction: (receiver address, receiver place, sender address, sender place)
    ends: dict[str, tuple[str, Place, str | None, Place]] = field(default_factory=dict)
    signal_port: int = 9010


class PacketsGenerator(Generator):
    """Many packet-level flows: swell-gen psend/precv or ITGSend/ITGRecv per leg."""

    name = "packets"

    def __init__(self, cfg: PacketsConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.receivers: dict[str, Proc] = {}
        self.senders: dict[str, Proc] = {}
        self.expected: dict[str, dict[int, int]] = {}
        self.plans: dict[str, np.ndarray] = {}
        self.fixes: dict[str, int] = {}
        self.tools = DITG if cfg.engine == "ditg" else ()

    def check(self) -> None:
        try:
            super().check()
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(exc.where, f"{exc.message}; or use engine: swell") from None

    def _ditg_line(self, leg: Leg, fid: int, fc: FlowClass, dst: str, src: str | None,
                   plan: np.ndarray, sig: int) -> list[str]:
        port = PORTS[(leg.direction, leg.proto)] + 10 + fid
        line = ["-a", dst, "-Sdp", str(sig), "-rp", str(port), "-T", leg.proto.upper(),
                "-t", str(int(self.cfg.duration_s * 1000)), "-poll"]
        line += ["-sa", src] if src else []
        if fc.ditg_app:
            return line + list(fc.ditg_app)
        idt, size = fc.idt.ditg_args("idt"), fc.size.ditg_args("size")
        mine = plan[plan["flow"] == fid]
        if idt is None:  # D-ITG has no such family: the same draws as a file (ms)
            path = self.out / f"{leg.key}-flow{fid}.idt"
            gaps = np.diff(mine["t_ns"].astype(np.float64), prepend=0.0) / 1e6
            path.write_text("\n".join(f"{g:.6f}" for g in gaps) + "\n")
            idt = ["-Ft", str(path)]
        if size is None:
            path = self.out / f"{leg.key}-flow{fid}.size"
            path.write_text("\n".join(str(int(s)) for s in mine["size"]) + "\n")
            size = ["-Fs", str(path)]
        return line + idt + size

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        c = self.cfg
        for i, leg in enumerate(c.legs):
            dst, rplace, _, _ = c.ends[leg.direction]
            port = PORTS[(leg.direction, leg.proto)]
            if c.engine == "swell":
                argv = [str(native_artifact("swell-gen")), "precv", "--listen", hostport(dst, port),
                        "--proto", leg.proto, "--log", str(self.out / f"{leg.key}.bin"),
                        "--duration", str(c.duration_s + 60)]
            else:
                argv = ["ITGRecv", "-Sp", str(c.signal_port + i),
                        "-l", str(self.out / f"{leg.key}.itg")]
            self.receivers[leg.key] = self.spawn(f"receiver {leg.key}", rplace, argv)

    def wait_ready(self, timeout: float = 10.0) -> None:
        c = self.cfg
        for i, leg in enumerate(c.legs):
            proc = self.receivers[leg.key]
            if c.engine == "swell":
                proc.wait_line(lambda ln: ln == "READY", timeout)
                continue
            dst, _, src, splace = c.ends[leg.direction]
            argv = [str(native_artifact("swell-gen")), "probe", "--connect-only",
                    "--addr", hostport(dst, c.signal_port + i), "--timeout", str(timeout)]
            res = splace.run(argv + (["--src", src] if src else []), timeout=timeout + 5)
            if res.returncode != 0:
                raise SwellError(proc.label, proc.error_text() if not proc.alive()
                                 else f"not answering: {res.stderr.strip()}")

    def start_client(self) -> None:
        c = self.cfg
        for i, leg in enumerate(c.legs):
            dst, _, src, splace = c.ends[leg.direction]
            plan, fixes = draw_plan(leg.flows, c.duration_s, c.seed * 1009 + i, leg.proto)
            for k, v in fixes.items():
                self.fixes[k] = self.fixes.get(k, 0) + v
            self.plans[leg.key] = plan
            self.expected[leg.key] = {fid: int((plan["flow"] == fid).sum()) for fid, _ in leg.flows}
            if c.engine == "swell":
                path = self.out / f"{leg.key}.plan"
                plan.tofile(path)
                argv = [str(native_artifact("swell-gen")), "psend", "--dst",
                        hostport(dst, PORTS[(leg.direction, leg.proto)]), "--proto", leg.proto,
                        "--plan", str(path)]
                argv += (["--src", src] if src else []) + (["--rt"] if c.realtime else [])
            else:
                script = self.out / f"{leg.key}.script"
                lines = [" ".join(self._ditg_line(leg, fid, fc, dst, src, plan,
                                                  c.signal_port + i)) for fid, fc in leg.flows]
                script.write_text("\n".join(lines) + "\n")
                argv = ["ITGSend", str(script)]
                argv = ["chrt", "-f", "10", *argv] if c.realtime else argv
            self.senders[leg.key] = self.spawn(f"sender {leg.key}", splace, argv)

    def _sent_part(self, leg: Leg, snd: Proc | None) -> None:
        """A sender stopped before the end of its plan sent only the plan's first part:
        only that part is expected (the plan is in sending order)."""
        done = [r for r in parse_json_lines(snd.drain()) if "sent" in r and "t" not in r] \
            if snd is not None else []
        plan = self.plans.get(leg.key)
        if done and plan is not None:
            k = int(done[-1]["sent"]) + int(done[-1]["errors"])
            if k < plan.size:
                head = np.bincount(plan["flow"][:k].astype(np.int64),
                                   minlength=int(plan["flow"].max()) + 1)
                self.expected[leg.key] = {fid: int(head[fid]) for fid, _ in leg.flows}

    def running(self) -> bool:
        return any(p.alive() for p in self.senders.values())

    def stop(self) -> None:
        for p in self.senders.values():
            p.stop(grace=self.cfg.duration_s + 10)
        for p in self.receivers.values():
            p.stop()

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        c = self.cfg
        flows, problems = [], []
        for leg in c.legs:
            snd = self.senders.get(leg.key)
            if snd is not None and snd.popen.returncode not in (0, -15):
                raise SwellError(snd.label, snd.error_text())
            if c.engine == "swell":
                log = read_log(self.out / f"{leg.key}.bin")
                self._sent_part(leg, snd)
            else:
                log = read_ditg(self.out / f"{leg.key}.itg", self.out / f"{leg.key}.txt")
                if c.engine == "ditg" and any(fc.ditg_app for _, fc in leg.flows):
                    # D-ITG drew its own departures: expected = its highest sequence
                    self.expected[leg.key] = {
                        fid: int(log["seq"][log["flow"] == fid].max(initial=0))
                        for fid, _ in leg.flows}
            _, rplace, _, splace = c.ends[leg.direction]
            # emulated hosts share this machine's CLOCK_MONOTONIC
            one_way = all(isinstance(p, Local | Netns | Via) for p in (rplace, splace))
            names = dict(leg.flows)
            for row in flow_stats(log, self.expected.get(leg.key, {}), warmup_s, one_way):
                fc = names[row["flow"]]
                row.update({"class": fc.name, "proto": leg.proto, "direction": leg.direction,
                            "asked_pps": 1 / fc.idt.mean() if fc.idt.family != "cauchy"
                            else None})
                flows.append(row)
        summary = totals(flows)
        summary.update({"engine": c.engine, "flows": flows, "draw_fixes": self.fixes})
        if any(self.fixes.values()):
            problems.append(f"draws raised or clamped to what the engine can send: {self.fixes}")
        summary["problems"] = problems
        return GenResult(self.name, {}, summary, {"out": self.out})


def totals(flows: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate of the per-flow rows."""
    sent = sum(f["sent"] for f in flows)
    lost = sum(f["lost"] for f in flows)
    with_d = [f for f in flows if "delay_ms" in f]
    return {"n_flows": len(flows), "sent": sent, "received": sum(f["received"] for f in flows),
            "lost": lost, "loss": lost / sent if sent else 0.0,
            "throughput_bps": sum(f.get("throughput_bps", 0.0) for f in flows),
            "delay_ms": float(np.mean([f["delay_ms"] for f in with_d])) if with_d else None,
            "jitter_ms": float(np.mean([f["jitter_ms"] for f in with_d])) if with_d else None}


# --- the traffic kind ---------------------------------------------------------------------------


class PacketsSpec(KindSpec):
    """Packet-level flows from a fitted model or a D-ITG preset."""

    kind: Literal["packets"] = "packets"
    model: str | None = Field(None, description="packet model directory (swell fit packets)")
    preset: str | None = Field(None, description="VoIP:G.711.1:RTP[:VAD], Telnet, DNS, ...")
    classes: list[str] | None = Field(None, description="model classes to generate (all)")
    flows: int = Field(1, ge=1, le=2000, description="flows per class")
    proto: Literal["udp", "tcp"] | None = Field(None, description="override the transport")
    engine: Literal["swell", "ditg"] = "swell"
    realtime: bool = Field(False, description="SCHED_FIFO senders (root)")

    @model_validator(mode="after")
    def _source(self) -> PacketsSpec:
        if (self.model is None) == (self.preset is None):
            raise ValueError("packets needs exactly one of model or preset")
        if self.preset is not None:
            try:  # an unknown name is an error at check time, with its line
                get_preset(self.preset)
            except SwellError as exc:
                raise ValueError(exc.message) from None
        return self

    def display(self) -> str:
        return self.label or f"packets {self.preset or Path(self.model or '').name} " \
                             f"x{self.flows} ({self.engine})"


class PacketsKind(TrafficKind):
    """Packet-level background flows (D-ITG's model), swell-gen or D-ITG as the engine."""

    name = "packets"
    role = "background"
    Spec = PacketsSpec
    native = ("swell-gen",)
    cli = "swell.generators.packets_cli"

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model: Path | None = None
        self._classes: list[FlowClass] | None = None
        self.ip_extra = 0  # header bytes beyond IPv4's per packet (20 on an IPv6 plan)

    @property
    def s(self) -> PacketsSpec:
        assert isinstance(self.spec, PacketsSpec)
        return self.spec

    def check(self) -> None:
        super().check()
        if self.s.engine == "ditg":
            require(DITG, "or use engine: swell")

    def prepare(self, ctx: PrepareContext) -> None:
        if self.s.model is not None:
            self.model = ctx.base_dir / self.s.model
        self._classes = self.flow_classes()

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: the packet model readable and its classes there (nothing
        written; not the default check, which expects a Swing model)."""
        self.prepare(ctx)

    def model_dir(self) -> Path | None:
        return self.model

    def flow_classes(self) -> list[FlowClass]:
        """The classes to generate, from the preset or the model."""
        s = self.s
        if s.preset is not None:
            p = get_preset(s.preset)
            proto = s.proto or p.transports[0]
            if proto not in p.transports:
                raise SwellError(s.preset, f"D-ITG's preset runs over {'/'.join(p.transports)}, "
                                           f"not {proto}")
            return [FlowClass(p.name, proto, "s2c", p.idt, p.size, p.ditg_args)]
        path = self.model if self.model is not None else Path(s.model or "")
        model = load_packet_model(path)
        names = s.classes or model.classes
        unknown = [n for n in names if n not in model.classes]
        if unknown:
            raise SwellError(path, f"no class {unknown[0]!r} (fitted: {', '.join(model.classes)})")
        out = []
        for n in names:
            meta = model.meta["classes"][n]
            proto = s.proto or meta["transport"]
            out.append(FlowClass(n, proto, meta["direction"], model.dist(n, "idt"),
                                 model.dist(n, "size")))
            if s.engine == "ditg" and model.dist(n, "size").family == "discrete":
                raise SwellError(path, f"class {n}: D-ITG cannot draw a discrete size")
        return out

    def classes(self) -> list[FlowClass]:
        if self._classes is None:
            self._classes = self.flow_classes()
        return self._classes

    def legs(self) -> list[Leg]:
        legs: dict[tuple[str, str], Leg] = {}
        fid = 0
        for fc in self.classes():
            leg = legs.setdefault((fc.direction, fc.proto), Leg(fc.direction, fc.proto))
            for _ in range(self.s.flows):
                leg.flows.append((fid, fc))
                fid += 1
        return list(legs.values())

    def asked_mbps(self) -> dict[str, float] | None:
        out = {"reverse": 0.0, "forward": 0.0}
        for fc in self.classes():
            if fc.idt.family == "cauchy":
                continue
            bps = ((fc.size.mean() + HEADER_BYTES[fc.proto] + self.ip_extra) * 8 / fc.idt.mean()
                   * self.s.flows)
            out["reverse" if fc.direction == "s2c" else "forward"] += bps / 1e6
        return out

    def needs(self) -> HostNeeds:
        return HostNeeds(clients=GroupNeed(count=1), servers=GroupNeed(count=1))

    def check_path(self, path: PathFacts) -> list[str]:
        asked = self.asked_mbps() or {}
        for way, cap in (("reverse", path.reverse_mbps), ("forward", path.forward_mbps)):
            if cap is not None and asked.get(way, 0.0) >= cap:
                raise SwellError("background", f"{self.s.display()} asks {asked[way]:.3g} Mbit/s "
                                 f"({way}), at or above the bottleneck's {cap:g} Mbit/s")
        return []

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        if not pl.bg_servers or not pl.bg_clients:
            raise SwellError(self.name, "needs a background client and server in the topology")
        srv, cli = pl.bg_servers[0], pl.bg_clients[0]
        self.ip_extra = IP_HEADER[srv.family] - IP_HEADER[4]
        ends = {"s2c": (cli.ip, cli.place, srv.ip, srv.place),
                "c2s": (srv.ip, srv.place, cli.ip, cli.place)}
        return PacketsGenerator(PacketsConfig(
            legs=self.legs(), out_dir=ctx.out_dir, duration_s=ctx.duration_s,
            warmup_s=ctx.warmup_s, engine=self.s.engine, seed=ctx.seed,
            realtime=self.s.realtime, ends=ends))

    @classmethod
    def report(cls, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
        """A table per configuration: the ITGDec set, means over runs and flows."""
        return ReportPart(html=report_table(groups))

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        if gen is None:
            return KindResult(self.name)
        summ = dict(gen.summary)
        problems = list(summ.pop("problems", []))
        return KindResult(self.name, {"generator": gen.name, "summary": summ},
                          problems=problems)



def report_table(groups: dict[str, list[dict[str, Any]]]) -> str:
    """HTML: per configuration, flows and the ITGDec set (means over runs and flows)."""
    head = ["configuration", "engine", "flows", "sent", "loss (%)", "throughput (kbit/s)",
            "pkt/s per flow (asked)", "IDT sd (us)", "delay (ms)", "jitter (ms)", "runs"]
    rows = []
    for label, runs in groups.items():
        flows = [f for r in runs for f in ((r.get("generator") or {}).get("summary") or {})
                 .get("flows", [])]
        if not flows:
            continue

        def mean(key: str, rows: list[dict[str, Any]] = flows) -> float:
            vals = [float(f[key]) for f in rows if f.get(key) is not None]
            return float(np.mean(vals)) if vals else float("nan")

        summ = (runs[0].get("generator") or {}).get("summary") or {}
        sent = sum(f["sent"] for f in flows)
        cells = [label, str(summ.get("engine", "-")), f"{len(flows) / len(runs):g}", str(sent),
                 f"{100 * sum(f['lost'] for f in flows) / max(sent, 1):.3f}",
                 f"{mean('throughput_bps') * len(flows) / len(runs) / 1e3:.1f}",
                 f"{mean('pps'):.3f} ({mean('asked_pps'):.3f})", f"{mean('idt_std_us'):.1f}",
                 f"{mean('delay_ms'):.3f}", f"{mean('jitter_ms'):.3f}", str(len(runs))]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    if not rows:
        return ""
    return ("<h3>Packet-level flows</h3><table><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")
