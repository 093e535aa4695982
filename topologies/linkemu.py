"""Typed configuration of swell's native link-emulation engine and its runner.

The engine (``topologies/native``, binary ``swell-link``) forwards every IPv4
frame between its ports (AF_PACKET sockets on interfaces inside network
namespaces) through up to three pipes: the ``up`` pipe of the source host, the
port pipe ``(in, out)`` (the bottleneck, per direction) and the ``down`` pipe of
the destination host. A pipe is a serialiser of rate R with no burst allowance,
a drop-tail queue (bytes or packets), random loss (Bernoulli or
Gilbert-Elliott) and a propagation delay; see ``docs/linkemu.md``.

This module holds the frozen dataclasses that describe a run (each rejects bad
values with a :class:`~swell.errors.SwellError` when built), their JSON form
(what the engine reads), and :class:`LinkEngine`, which starts the engine, waits
for its ``READY`` line, reads its JSON-lines stats incrementally and stops it
with SIGTERM. The run prefix (``EngineConfig.name``) is on the engine's command
line (``--name``) so ``swell cleanup`` can find a leftover engine.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import select
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from swell.errors import EnvironmentProblem, SwellError
from swell.fsutil import write_json
from swell.native import native_artifact

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _prob(where: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise SwellError(where, f"probability must be in [0, 1], got {value}")


def _ipv4(where: str, value: str) -> None:
    try:
        ipaddress.IPv4Address(value)
    except ValueError as exc:
        raise SwellError(where, f"not an IPv4 address: {value!r}") from exc


@dataclass(frozen=True)
class LossModel:
    """Random loss at a pipe's entrance: "none", "bernoulli" (p) or "gilbert".

    Gilbert-Elliott: a two-state chain advanced once per packet; in the good
    state packets are lost with ``loss_good``, in the bad state with
    ``loss_bad``; the mean bad-state sojourn (burst length) is ``1 / p_bg``.
    """

    kind: str = "none"
    p: float = 0.0
    p_gb: float = 0.0
    p_bg: float = 0.0
    loss_good: float = 0.0
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ("none", "bernoulli", "gilbert"):
            raise SwellError("loss.kind", f"must be none, bernoulli or gilbert, got {self.kind!r}")
        for name in ("p", "p_gb", "p_bg", "loss_good", "loss_bad"):
            _prob(f"loss.{name}", getattr(self, name))
        if self.kind == "gilbert" and self.p_bg == 0.0 and self.p_gb > 0.0:
            raise SwellError("loss.p_bg", "gilbert with p_bg = 0 never leaves the bad state")


@dataclass(frozen=True)
class PipeSpec:
    """One link direction: rate (None = unlimited), delay, drop-tail queue, loss."""

    rate_bps: float | None = None
    delay_us: int = 0
    queue_bytes: int | None = None
    queue_packets: int | None = None
    loss: LossModel = field(default_factory=LossModel)

    def __post_init__(self) -> None:
        if self.rate_bps is not None and not (self.rate_bps > 0 and self.rate_bps < 1e12):
            raise SwellError("pipe.rate_bps", f"must be positive (or None), got {self.rate_bps}")
        if not isinstance(self.delay_us, int) or not 0 <= self.delay_us <= 60_000_000:
            raise SwellError("pipe.delay_us", f"must be an int in [0, 60 s], got {self.delay_us}")
        if self.queue_bytes is not None and self.queue_packets is not None:
            raise SwellError("pipe", "give at most one of queue_bytes and queue_packets")
        for name in ("queue_bytes", "queue_packets"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise SwellError(f"pipe.{name}", f"must be a positive int, got {value}")
        if not isinstance(self.loss, LossModel):
            raise SwellError("pipe.loss", "must be a LossModel")


@dataclass(frozen=True)
class PortSpec:
    """An interface the engine opens with AF_PACKET, inside namespace ``netns``."""

    name: str
    netns: str
    ifname: str
    peer_mac: str | None = None
    gateway_ips: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise SwellError("port.name", f"bad port name {self.name!r}")
        if not self.netns.startswith("/"):
            raise SwellError(f"port {self.name}", f"netns must be a path, got {self.netns!r}")
        if not 0 < len(self.ifname) < 16:
            raise SwellError(f"port {self.name}", f"bad interface name {self.ifname!r}")
        if self.peer_mac is not None and not _MAC.match(self.peer_mac):
            raise SwellError(f"port {self.name}", f"bad MAC {self.peer_mac!r}")
        for ip in self.gateway_ips:
            _ipv4(f"port {self.name}.gateway_ips", ip)


@dataclass(frozen=True)
class Route:
    """Destination prefix -> port (longest prefix match)."""

    prefix: str
    port: str

    def __post_init__(self) -> None:
        try:
            ipaddress.IPv4Network(self.prefix, strict=False)
        except ValueError as exc:
            raise SwellError("route.prefix", f"not an IPv4 prefix: {self.prefix!r}") from exc


@dataclass(frozen=True)
class HostLink:
    """One emulated host's access link: ``up`` (host -> network) and ``down``."""

    ip: str
    up: PipeSpec
    down: PipeSpec

    def __post_init__(self) -> None:
        _ipv4("host.ip", self.ip)


@dataclass(frozen=True)
class EngineConfig:
    """Everything one engine run needs; ``to_json()`` is what the binary reads."""

    name: str
    ports: tuple[PortSpec, ...]
    routes: tuple[Route, ...]
    hosts: tuple[HostLink, ...] = ()
    port_pipes: tuple[tuple[str, str, PipeSpec], ...] = ()
    captures: tuple[tuple[str, str, str], ...] = ()
    stats_path: str | None = None
    stats_interval_ms: int = 100
    seed: int = 1

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise SwellError("engine.name", f"bad run name {self.name!r}")
        names = [p.name for p in self.ports]
        if not names or len(set(names)) != len(names):
            raise SwellError(f"engine {self.name}", f"ports must be non-empty and unique: {names}")
        for r in self.routes:
            if r.port not in names:
                raise SwellError(f"route {r.prefix}", f"unknown port {r.port!r}")
        ips = [h.ip for h in self.hosts]
        if len(set(ips)) != len(ips):
            raise SwellError(f"engine {self.name}", "a host IP is listed twice")
        pairs = [(a, b) for a, b, _ in self.port_pipes]
        if len(set(pairs)) != len(pairs):
            raise SwellError(f"engine {self.name}", "a port pipe is listed twice")
        for a, b, pipe in self.port_pipes:
            if a not in names or b not in names or not isinstance(pipe, PipeSpec):
                raise SwellError(f"port pipe {a}->{b}", "unknown port or not a PipeSpec")
        for a, b, _path in self.captures:
            if (a, b) not in pairs:
                raise SwellError(f"capture {a}->{b}", "captures need a port pipe there")
        if not 1 <= self.stats_interval_ms <= 60_000:
            raise SwellError("engine.stats_interval_ms", "must be in [1, 60000]")
        if not 0 <= self.seed < 2**64:
            raise SwellError("engine.seed", "must fit in 64 bits")

    def to_json(self) -> dict[str, Any]:
        """The engine's JSON config (tuples become lists)."""
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EngineConfig:
        """Inverse of :meth:`to_json` (validating again)."""
        try:
            return cls(
                name=d["name"],
                ports=tuple(PortSpec(**{**p, "gateway_ips": tuple(p.get("gateway_ips", ()))})
                            for p in d["ports"]),
                routes=tuple(Route(**r) for r in d["routes"]),
                hosts=tuple(HostLink(h["ip"], _pipe(h["up"]), _pipe(h["down"]))
                            for h in d.get("hosts", ())),
                port_pipes=tuple((a, b, _pipe(p)) for a, b, p in d.get("port_pipes", ())),
                captures=tuple((a, b, c) for a, b, c in d.get("captures", ())),
                stats_path=d.get("stats_path"),
                stats_interval_ms=d.get("stats_interval_ms", 100),
                seed=d.get("seed", 1),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise SwellError("engine config", f"malformed: {exc}") from exc


def _pipe(d: dict[str, Any]) -> PipeSpec:
    return PipeSpec(**{**d, "loss": LossModel(**d.get("loss", {}))})


def _merge_stats(into: dict[str, Any], record: dict[str, Any]) -> None:
    """Fold one stats line into the accumulated view (latest value per pipe)."""
    into["t"] = record["t"]
    into["final"] = record.get("final", False)
    into["ports"] = record["ports"]
    into["captures"] = record["captures"]
    pipes = into.setdefault("pipes", {})
    samples = into.setdefault("queue_samples", {})
    for name, counters in record["pipes"].items():
        pipes[name] = counters
        if name.startswith("port:"):
            samples.setdefault(name, []).append(
                (record["t"], counters["queue_bytes"], counters["queue_packets"],
                 counters["peak_queue_bytes"]))


class LinkEngine:
    """Runs ``swell-link`` for one :class:`EngineConfig`; a context manager.

    ``start()`` waits for the engine's ``READY`` line (no sleeping), ``stats()``
    returns the latest counters per pipe (``pipes``), per port (``ports``),
    per capture (``captures``) and the bottleneck queue over time
    (``queue_samples``: (t, queue bytes, queue packets, peak bytes) per port
    pipe). ``stop()`` sends SIGTERM, waits, and returns the final counters.
    With ``die_with_parent`` (default) the engine gets SIGTERM if this process
    dies, even by SIGKILL (strictly: when the thread that called ``start``
    exits, so start it from a thread that lives as long as the run); a
    long-lived ``swell topo up`` passes False.
    ``rt_priority`` runs the engine under SCHED_FIFO (None: normal scheduling);
    on a busy host this is what keeps the delay tail within a millisecond.
    ``spin_us``: how long before a departure the engine stops sleeping.
    ``threads``: 1 (one forwarding thread) or 2 (one per direction; needs two
    ports); None lets the engine choose: 2 when no pipe has a delay or a rate.
    """

    def __init__(self, config: EngineConfig, workdir: Path, die_with_parent: bool = True,
                 spin_us: int = 30, rt_priority: int | None = 10,
                 threads: int | None = None) -> None:
        self.config = config
        self.workdir = Path(workdir)
        self.die_with_parent = die_with_parent
        self.spin_us = spin_us
        self.rt_priority = rt_priority
        if threads not in (None, 1, 2):
            raise SwellError(config.name, f"threads must be 1, 2 or None, not {threads}")
        self.threads = threads
        default_stats = self.workdir / f"{config.name}-link-stats.jsonl"
        self.stats_path = Path(config.stats_path or default_stats)
        self.config_path = self.workdir / f"{config.name}-link.json"
        self.proc: subprocess.Popen[bytes] | None = None
        self._stats: dict[str, Any] = {}
        self._offset = 0
        self._partial = b""

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise SwellError(self.config.name, "engine not started")
        return self.proc.pid

    def argv(self) -> list[str]:
        argv = [str(native_artifact("swell-link")), "--name", self.config.name,
                "--spin-us", str(self.spin_us)]
        if self.rt_priority is not None:
            argv += ["--rt-priority", str(self.rt_priority)]
        if self.threads is not None:
            argv += ["--threads", str(self.threads)]
        if self.die_with_parent:
            argv.append("--die-with-parent")
        return [*argv, str(self.config_path)]

    def start(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            raise SwellError(self.config.name, "engine already started")
        body = self.config.to_json()
        body["stats_path"] = str(self.stats_path)
        write_json(self.config_path, body)
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0.0))
            if not ready:
                self._kill()
                raise EnvironmentProblem(self.config.name, f"engine not READY within {timeout} s")
            chunk = os.read(self.proc.stdout.fileno(), 1)
            if not chunk:
                err = self._finish_failed()
                raise EnvironmentProblem(self.config.name, f"engine failed to start: {err}")
            line += chunk
        if line.strip() != b"READY":
            self._kill()
            raise EnvironmentProblem(self.config.name, f"engine said {line!r}, not READY")

    def _finish_failed(self) -> str:
        assert self.proc is not None
        self.proc.wait(timeout=5)
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        self.proc = None
        return " ".join(err.split()) or "no message"

    def _kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stats(self) -> dict[str, Any]:
        """Latest counters (reads only what the engine appended since last call)."""
        if not self.stats_path.exists():
            return self._stats
        with self.stats_path.open("rb") as f:
            f.seek(self._offset)
            data = self._partial + f.read()
            self._offset = f.tell()
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            if raw.strip():
                _merge_stats(self._stats, json.loads(raw))
        return self._stats

    def stop(self, timeout: float = 10.0) -> dict[str, Any]:
        """SIGTERM, wait for exit, return the final counters."""
        if self.proc is None:
            return self.stats()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise SwellError(self.config.name, "engine ignored SIGTERM; killed") from None
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.proc = None
        if code != 0:
            raise SwellError(self.config.name, f"engine exited with {code}: {err.strip()}")
        return self.stats()

    def __enter__(self) -> LinkEngine:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:
            with contextlib.suppress(SwellError):
                self.stop()
