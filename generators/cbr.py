"""CBR and Poisson baselines over UDP and TCP (the paper's CU, CT, PU, PT).

One flow of fixed-size messages from a client address to a receiver, at a
mean rate given in bits per second *at the IP level* (payload plus 28 bytes
of UDP/IP or 52 bytes of TCP/IP headers with timestamps per message, 20 more
over IPv6, so the bottleneck sees the asked rate; for TCP, segments may
coalesce, so the header share is approximate). Inter-departure times are
constant (CBR) or exponential (Poisson process).

Two engines behind the same class:

* ``swell``: ``swell-gen send`` / ``swell-gen recv``: absolute departure
  schedule (no drift), sleep then busy-poll the last ``spin_us``; each message
  carries its sequence number and departure time (ns); the receiver logs
  (seq, tx_ns, rx_ns, size) for every message.
* ``ditg``: D-ITG (Debian ``d-itg``) ``ITGRecv`` / ``ITGSend -poll`` (always
  ``-poll``: without it D-ITG sends fewer packets than asked), decoded with
  ``ITGDec -l``; departure and arrival times at microsecond resolution.

``realtime`` runs either sender under SCHED_FIFO (root): on a loaded machine
a preempted sender otherwise sends late and then catches up in a burst,
which shows as outliers in the inter-departure times of both engines.

:func:`timing_stats` turns either log into the same numbers (achieved rate,
inter-departure mean, standard deviation and 99th percentile deviation, KS
distance to an exponential, loss), which is how the two engines are compared
side by side.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from swell.errors import EnvironmentProblem, SwellError
from swell.generators.base import (
    DITG,
    Generator,
    GenResult,
    Local,
    Place,
    Proc,
    parse_json_lines,
)
from swell.generators.kind import (
    ONE_PAIR,
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    TrafficKind,
    Window,
    background_pair,
)
from swell.generators.models import base_model, model_rate_bps
from swell.inet import header_bytes, hostport
from swell.native import native_artifact
from swell.placement import HostNeeds, PathFacts

HEADER_BYTES = {"udp": 28, "tcp": 52}
UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


def parse_rate(text: str | float) -> float:
    """``"10M"``, ``"500k"``, ``"1.5G"``, ``2e6`` -> bits per second."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgG]?)(bit/s|bps|b)?\s*", text)
        if not m:
            raise SwellError("rate", f"cannot read {text!r} (e.g. 10M, 500k, 2e6)")
        value = float(m.group(1)) * UNITS[m.group(2).lower()]
    if not value > 0:
        raise SwellError("rate", f"must be positive, not {text!r}")
    return value


@dataclass
class CbrConfig:
    dst: str  # receiver address (server side)
    rate_bps: float
    out_dir: Path
    proto: str = "udp"  # "udp" | "tcp"
    dist: str = "const"  # "const" | "poisson"
    size: int = 512  # payload bytes per message
    duration_s: float = 10.0
    port: int = 9600
    src: str | None = None  # client source address (its emulated link)
    server: Place = field(default_factory=Local)
    client: Place = field(default_factory=Local)
    engine: str = "swell"  # "swell" | "ditg"
    seed: int = 1
    signal_port: int = 9000  # D-ITG signalling port
    spin_us: int | None = None  # busy-poll window (swell-gen default: 1000, 40 with --rt)
    realtime: bool = False  # SCHED_FIFO sender (root): swell-gen --rt, or chrt for ITGSend

    def __post_init__(self) -> None:
        if self.proto not in HEADER_BYTES:
            raise SwellError("proto", f"{self.proto!r}: udp or tcp")
        if self.dist not in ("const", "poisson"):
            raise SwellError("dist", f"{self.dist!r}: const or poisson")
        if self.engine not in ("swell", "ditg"):
            raise SwellError("engine", f"{self.engine!r}: swell or ditg")
        if not 16 <= self.size <= 65000:
            raise SwellError("size", f"{self.size}: 16..65000 bytes")
        if not self.duration_s > 0:
            raise SwellError("duration", "must be positive")

    @property
    def pps(self) -> float:
        return self.rate_bps / (8.0 * (self.size + header_bytes(self.dst, self.proto)))


class CbrGenerator(Generator):
    """CU / CT / PU / PT: one paced flow, swell-gen or D-ITG as the engine."""

    name = "cbr"

    def __init__(self, cfg: CbrConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.out = Path(cfg.out_dir)
        self.receiver: Proc | None = None
        self.sender: Proc | None = None
        self.sender_summary: dict[str, Any] = {}
        self.tools = DITG if cfg.engine == "ditg" else ()

    def check(self) -> None:
        try:
            super().check()
        except EnvironmentProblem as exc:
            raise EnvironmentProblem(exc.where, f"{exc.message}; or use --engine swell"
                                     if self.cfg.engine == "ditg" else exc.message) from None

    @property
    def log_path(self) -> Path:
        return self.out / ("recv.bin" if self.cfg.engine == "swell" else "itgrecv.log")

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        c = self.cfg
        if c.engine == "swell":
            argv = [str(native_artifact("swell-gen")), "recv", "--listen", hostport(c.dst, c.port),
                    "--proto", c.proto, "--size", str(c.size), "--log", str(self.log_path),
                    "--duration", str(c.duration_s + 60)]
        else:
            argv = ["ITGRecv", "-Sp", str(c.signal_port), "-l", str(self.log_path)]
        self.receiver = self.spawn("receiver", c.server, argv)

    def wait_ready(self, timeout: float = 10.0) -> None:
        assert self.receiver is not None
        if self.cfg.engine == "swell":
            self.receiver.wait_line(lambda ln: ln == "READY", timeout)
            return
        argv = [str(native_artifact("swell-gen")), "probe", "--connect-only",
                "--addr", hostport(self.cfg.dst, self.cfg.signal_port), "--timeout", str(timeout)]
        if self.cfg.src:
            argv += ["--src", self.cfg.src]
        res = self.cfg.client.run(argv, timeout=timeout + 5)
        if res.returncode != 0:
            if not self.receiver.alive():
                raise SwellError("ITGRecv", self.receiver.error_text())
            raise SwellError("ITGRecv", f"not answering: {res.stderr.strip()}")

    def sender_argv(self) -> list[str]:
        c = self.cfg
        if c.engine == "swell":
            argv = [str(native_artifact("swell-gen")), "send", "--dst", hostport(c.dst, c.port),
                    "--proto", c.proto, "--pps", f"{c.pps:.6f}", "--size", str(c.size),
                    "--dist", "exp" if c.dist == "poisson" else "const",
                    "--duration", str(c.duration_s), "--seed", str(c.seed)]
            argv += ["--spin-us", str(c.spin_us)] if c.spin_us is not None else []
            argv += ["--src", c.src] if c.src else []
            return argv + (["--rt"] if c.realtime else [])
        idt = ["-E" if c.dist == "poisson" else "-C", f"{c.pps:.3f}"]
        argv = ["ITGSend", "-a", c.dst, "-Sdp", str(c.signal_port), "-rp", str(c.port),
                "-T", c.proto.upper(), *idt, "-c", str(c.size), "-t",
                str(int(c.duration_s * 1000)), "-s", f"{(c.seed % 997 + 1) / 999:.6f}", "-poll"]
        argv += ["-sa", c.src] if c.src else []
        return ["chrt", "-f", "10", *argv] if c.realtime else argv

    def start_client(self) -> None:
        self.sender = self.spawn("sender", self.cfg.client, self.sender_argv())

    def running(self) -> bool:
        return self.sender is not None and self.sender.alive()

    def poll(self) -> list[dict[str, Any]]:
        if self.sender is None or self.cfg.engine != "swell":
            return []
        new = parse_json_lines(self.sender.drain())
        self.counter_lines.extend(r for r in new if "t" in r)
        self.sender_summary.update(next((r for r in new if "sent" in r and "t" not in r), {}))
        return new

    def stop(self) -> None:
        if self.sender is not None:
            self.sender.stop(grace=self.cfg.duration_s + 10)
        if self.receiver is not None:
            self.receiver.stop()

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        self.poll()
        if self.sender is not None and self.sender.popen.returncode not in (0, -15):
            raise SwellError(self.sender.label, self.sender.error_text())
        if self.cfg.engine == "swell":
            log = read_swell_log(self.log_path)
        else:
            log = read_ditg_log(self.log_path, self.out / "itgrecv.txt")
        stats = timing_stats(log, warmup_s)
        stats["target_pps"] = self.cfg.pps
        stats["target_payload_bps"] = self.cfg.pps * self.cfg.size * 8
        stats["asked_mbps"] = self.cfg.rate_bps / 1e6
        stats["delivered_mbps"] = delivered_mbps(log, self.cfg.size + HEADER_BYTES[self.cfg.proto],
                                                 self.cfg.duration_s, warmup_s)
        if self.sender_summary:
            stats["sender"] = dict(self.sender_summary)
        series = throughput_series(log)
        return GenResult(self.name, series, stats, {"log": self.log_path})


def read_swell_log(path: Path) -> dict[str, np.ndarray]:
    """``swell-gen recv`` log -> seq, tx_s, rx_s, size."""
    try:
        raw = np.fromfile(path, dtype="<u8").reshape(-1, 4)
    except (OSError, ValueError) as exc:
        raise SwellError(path, f"cannot read receiver log: {exc}") from None
    return {"seq": raw[:, 0].astype(np.int64), "tx_s": raw[:, 1] / 1e9, "rx_s": raw[:, 2] / 1e9,
            "size": raw[:, 3].astype(np.int64)}


_DITG_LINE = re.compile(r"Seq>\s*(\d+).*txTime>(\d+):(\d+):([\d.]+)\s+rxTime>(\d+):(\d+):([\d.]+)"
                        r"\s+Size>\s*(\d+)")


def read_ditg_log(path: Path, text_path: Path) -> dict[str, np.ndarray]:
    """Decode an ITGRecv log with ``ITGDec -l`` -> seq, tx_s, rx_s, size (µs resolution)."""
    res = subprocess.run(["ITGDec", str(path), "-l", str(text_path)], capture_output=True,
                         text=True, timeout=120)
    if res.returncode != 0 or not text_path.exists():
        raise SwellError(path, f"ITGDec failed: {res.stderr.strip()[-200:]}")
    rows = [m.groups() for m in map(_DITG_LINE.search, text_path.read_text().splitlines()) if m]
    if not rows:
        return {k: np.zeros(0) for k in ("seq", "tx_s", "rx_s", "size")}
    a = np.array(rows, dtype=float)
    tx = a[:, 1] * 3600 + a[:, 2] * 60 + a[:, 3]
    rx = a[:, 4] * 3600 + a[:, 5] * 60 + a[:, 6]
    for t in (tx, rx):  # a run across midnight
        t += 86400.0 * np.concatenate([[0], np.cumsum(np.diff(t) < -43200)])
    return {"seq": a[:, 0].astype(np.int64), "tx_s": tx, "rx_s": rx,
            "size": a[:, 7].astype(np.int64)}


def timing_stats(log: dict[str, np.ndarray], warmup_s: float = 0.0) -> dict[str, float]:
    """Achieved rate and inter-departure/arrival statistics of a receiver log."""
    tx, rx, size, seq = log["tx_s"], log["rx_s"], log["size"], log["seq"]
    if tx.size < 3:
        raise SwellError("receiver", f"only {tx.size} messages received")
    order = np.argsort(seq, kind="stable")
    tx, rx, size, seq = tx[order], rx[order], size[order], seq[order]
    keep = tx >= tx[0] + warmup_s
    tx, rx, size, seq = tx[keep], rx[keep], size[keep], seq[keep]
    span = tx[-1] - tx[0]
    idt = np.diff(tx)[np.diff(seq) == 1]  # departures of consecutive messages only
    iat = np.diff(np.sort(rx))
    expected = int(seq[-1] - seq[0] + 1)
    return {
        "messages": int(tx.size), "lost": expected - int(np.unique(seq).size),
        "pps": (tx.size - 1) / span, "payload_bps": float(size[:-1].sum()) * 8 / span,
        "idt_mean_us": float(idt.mean() * 1e6), "idt_std_us": float(idt.std() * 1e6),
        "idt_p99_abs_dev_us": float(np.percentile(np.abs(idt - idt.mean()), 99) * 1e6),
        "iat_std_us": float(iat.std() * 1e6),
        # Shape check for Poisson sources: KS distance to an exponential of the same mean.
        "ks_exp_d": _ks_expon(idt),
    }


def _ks_expon(idt: np.ndarray) -> float:
    """KS distance of ``idt`` to an exponential of the same mean. SciPy's stats is
    imported here, not at the top: every experiment imports this module through the
    kind registry, and ``scipy.stats`` costs 0.5 s of each ``swell`` process (25 s under
    the VM layer's TCG guest)."""
    from scipy import stats

    return float(stats.kstest(idt, "expon", args=(0, idt.mean())).statistic)


def delivered_mbps(log: dict[str, np.ndarray], ip_bytes: int, duration_s: float,
                   warmup_s: float = 0.0) -> float:
    """Messages received that left in ``[warmup_s, duration_s)`` of the schedule (from the
    first departure), as Mbit/s at the IP level (``ip_bytes`` a message)."""
    tx = log["tx_s"]
    if tx.size == 0:
        return 0.0
    start = min(warmup_s, duration_s / 2)
    rel = tx - tx.min()
    n = int(((rel >= start) & (rel < duration_s)).sum())
    return n * ip_bytes * 8 / max(duration_s - start, 1e-9) / 1e6


def throughput_series(log: dict[str, np.ndarray], bin_s: float = 0.1) -> dict[str, np.ndarray]:
    """Received Mbit/s (payload) per ``bin_s`` bin."""
    rx = log["rx_s"]
    if rx.size == 0:
        return {"t": np.zeros(0), "rx_mbps": np.zeros(0)}
    t = rx - rx.min()
    idx = (t / bin_s).astype(np.int64)
    bits = np.bincount(idx, weights=log["size"].astype(float) * 8)
    return {"t": np.arange(bits.size) * bin_s, "rx_mbps": bits / bin_s / 1e6}


# --- the CBR and Poisson traffic kinds (background: {kind: cbr|poisson, ...}) -----------------


class OpenLoopSpec(KindSpec):
    """One paced flow at ``rate_mbps`` (or the rate of a Swing model, ``match_model``)."""

    proto: Literal["udp", "tcp"] = "udp"
    rate_mbps: float | None = Field(None, gt=0, description="mean rate (IP level)")
    match_model: bool = Field(False, description="send at the model's mean s->c rate")
    model: str | None = Field(None, description="Swing model directory (match_model)")
    trace: str | None = Field(None, description="trace to extract the model from (match_model)")

    @model_validator(mode="after")
    def _rate(self) -> OpenLoopSpec:
        if self.rate_mbps is None and not self.match_model:
            raise ValueError(f"{self.kind} needs rate_mbps or match_model: true (with a model)")
        if self.match_model and not (self.model or self.trace):
            raise ValueError("match_model needs a model or a trace")
        return self

    def display(self) -> str:
        if self.label:
            return self.label
        rate = f"{self.rate_mbps:g}M" if self.rate_mbps else "model rate"
        return f"{self.kind}-{self.proto} {rate}"


class CbrSpec(OpenLoopSpec):
    kind: Literal["cbr"] = "cbr"


class PoissonSpec(OpenLoopSpec):
    kind: Literal["poisson"] = "poisson"


class CbrKind(TrafficKind):
    """CU/CT: constant inter-departure times, server side -> client side (with the downloads)."""

    name = "cbr"
    role = "background"
    Spec = CbrSpec
    cli = "swell.generators.cbr_cli"
    native = ("swell-gen",)
    testbed = True
    dist = "const"

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model: Path | None = None

    @property
    def s(self) -> OpenLoopSpec:
        assert isinstance(self.spec, OpenLoopSpec)
        return self.spec

    def prepare(self, ctx: PrepareContext) -> None:
        if self.s.match_model:
            self.model = base_model(self.s.model, self.s.trace, ctx.cache_dir, ctx.base_dir)

    def model_dir(self) -> Path | None:
        return self.model

    def rate_bps(self) -> float:
        if self.s.rate_mbps is not None:
            return self.s.rate_mbps * 1e6
        if self.model is None:
            raise SwellError(self.name, "needs rate_mbps or a model to match")
        return model_rate_bps(self.model)

    def asked_mbps(self) -> dict[str, float] | None:
        return {"reverse": self.rate_bps() / 1e6, "forward": 0.0}

    def needs(self) -> HostNeeds:
        return ONE_PAIR

    def check_path(self, path: PathFacts) -> list[str]:
        """An open-loop rate at or above the bottleneck only measures the queue: an error."""
        rate, cap = self.rate_bps() / 1e6, path.reverse_mbps
        if cap is not None and rate >= cap:
            raise SwellError("background", f"{self.s.display()} sends {rate:g} Mbit/s, at or "
                             f"above the bottleneck's {cap:g} Mbit/s: it would only measure "
                             "the queue")
        return []

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        """The generator's summary; a sender that fell behind its schedule says so."""
        res = super().result(gen, window)
        snd = (gen.summary.get("sender") or {}) if gen is not None else {}
        behind = int(snd.get("skipped", 0)) + int(snd.get("unsent", 0))
        if behind:
            total = behind + int(snd.get("sent", 0))
            res.metrics["warnings"] = [
                f"{self.s.display()}: the sender fell behind its schedule: {behind} of "
                f"{total} messages ({behind / max(total, 1):.0%}) not sent (skipped after "
                f"stalls over 1 s, or still owed at the end); delivered "
                f"{gen.summary.get('delivered_mbps', 0.0):.2f} of {self.rate_bps() / 1e6:.2f} "
                "Mbit/s asked" + ("; TCP's congestion control held it under the asked rate"
                                  if self.s.proto == "tcp" else "")]
        return res

    def build(self, ctx: RunContext) -> Generator:
        sender, receiver = background_pair(ctx.placement, self.name)
        return CbrGenerator(CbrConfig(
            dst=receiver.ip, src=sender.ip, rate_bps=self.rate_bps(), out_dir=ctx.out_dir,
            proto=self.s.proto, dist=self.dist, duration_s=ctx.duration_s,
            server=receiver.place, client=sender.place, seed=ctx.seed,
            size=1400 if self.s.proto == "udp" else 1448,
        ))


class PoissonKind(CbrKind):
    """PU/PT: exponential inter-departure times at the same mean rate."""

    name = "poisson"
    Spec = PoissonSpec
    dist = "poisson"
