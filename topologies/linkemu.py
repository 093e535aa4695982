"""Typed configuration of swell's native link-emulation engine and its runner.

The engine (``topologies/native``, binary ``swell-link``) forwards every IPv4
and IPv6 frame between its ports (AF_PACKET sockets on interfaces inside network
namespaces) through up to three pipes: the ``up`` pipe of the source host, the
port pipe ``(in, out)`` (the bottleneck, per direction) and the ``down`` pipe of
the destination host. A pipe is a serialiser of rate R with no burst allowance,
a drop-tail queue (bytes or packets), random loss (Bernoulli or
Gilbert-Elliott) and a propagation delay; see ``docs/linkemu.md``.

This module holds the frozen dataclasses that describe a run, their JSON form
(what the engine reads), and :class:`LinkEngine`, which starts the engine, waits
for its ``READY`` line, reads its JSON-lines stats incrementally and stops it
with SIGTERM. The run prefix (``EngineConfig.name``) is on the engine's command
line (``--name``) so ``swell cleanup`` can find a leftover engine.

Where link parameters are checked. What a link may be (probabilities in
[0, 1], rate, delay and queue ranges, one queue limit, Gilbert-Elliott with
``p_bg > 0``) is defined once, by the topology spec's pydantic models
(:class:`~swell.topologies.spec.LinkDir`, :class:`~swell.topologies.spec.Loss`).
Spec values reach this module through one conversion, :func:`pipe_from_link`
(and :func:`loss_model` for its loss), which only changes units; it does not
check again. :class:`PipeSpec` and :class:`LossModel` check only what the
engine's JSON format itself needs for a value to mean what it says: the
integer fields are the engine's ``u64`` (non-negative ints; ``1.5`` or ``-1``
would otherwise be refused only when the engine starts), numbers are finite
(JSON has no NaN or infinity), and ``loss.kind`` is one the engine knows (it
reads any other string as "no loss", without a word). A config read back from
JSON (:meth:`EngineConfig.from_json`) is an edge like a spec file, so each of
its pipes is also checked against the spec's models (:func:`check_pipe`, via
the inverse conversion :func:`link_from_pipe`); code that builds pipes by hand
(benchmarks, engine tests) can call :func:`check_pipe` too. The port, route
and host checks below are the engine format's own (names, MACs, prefixes,
cross references) and have no counterpart in the spec.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
import select
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any, get_args

from pydantic import ValidationError

from swell.errors import EnvironmentProblem, SwellError
from swell.fsutil import write_json
from swell.native import native_artifact
from swell.topologies.spec import LinkDir, Loss, LossKind, format_validation_error

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


LOSS_KINDS: tuple[str, ...] = get_args(LossKind)


def _number(where: str, value: Any) -> None:
    """A JSON number the engine reads as ``f64`` (finite; not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SwellError(where, f"must be a finite number, got {value!r}")


def _u64(where: str, value: Any) -> None:
    """A JSON integer the engine reads as ``u64``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise SwellError(where, f"must be a non-negative int, got {value!r}")


def _ipv4(where: str, value: str) -> None:
    try:
        ipaddress.IPv4Address(value)
    except ValueError as exc:
        raise SwellError(where, f"not an IPv4 address: {value!r}") from exc


def _ip(where: str, value: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError as exc:
        raise SwellError(where, f"not an IPv4 or IPv6 address: {value!r}") from exc


@dataclass(frozen=True)
class LossModel:
    """Random loss at a pipe's entrance: "none", "bernoulli" (p) or "gilbert".

    Gilbert-Elliott: a two-state chain advanced once per packet; in the good
    state packets are lost with ``loss_good``, in the bad state with
    ``loss_bad``; the mean bad-state sojourn (burst length) is ``1 / p_bg``.
    Built from a spec by :func:`loss_model`. Checks only the format (a kind
    the engine knows, finite numbers); the ranges are the spec's
    (:class:`~swell.topologies.spec.Loss`), see :func:`check_pipe`.
    """

    kind: LossKind = "none"
    p: float = 0.0
    p_gb: float = 0.0
    p_bg: float = 0.0
    loss_good: float = 0.0
    loss_bad: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in LOSS_KINDS:
            raise SwellError("loss.kind", f"must be none, bernoulli or gilbert, got {self.kind!r}")
        for f in fields(self)[1:]:  # every field after ``kind`` is a probability
            _number(f"loss.{f.name}", getattr(self, f.name))


@dataclass(frozen=True)
class PipeSpec:
    """One link direction: rate (None = unlimited), delay, drop-tail queue, loss.

    Engine units: bit/s and whole microseconds. Built from a spec by
    :func:`pipe_from_link`. Checks only the format (``u64`` ints, finite
    numbers); the ranges and the one-queue-limit rule are the spec's
    (:class:`~swell.topologies.spec.LinkDir`), see :func:`check_pipe`.
    """

    rate_bps: float | None = None
    delay_us: int = 0
    queue_bytes: int | None = None
    queue_packets: int | None = None
    loss: LossModel = field(default_factory=LossModel)
    pairing: float = 0.0  # share of queued packets that depart with the one before

    def __post_init__(self) -> None:
        if self.rate_bps is not None:
            _number("pipe.rate_bps", self.rate_bps)
        _number("pipe.pairing", self.pairing)
        _u64("pipe.delay_us", self.delay_us)
        for name in ("queue_bytes", "queue_packets"):
            if getattr(self, name) is not None:
                _u64(f"pipe.{name}", getattr(self, name))
        if not isinstance(self.loss, LossModel):
            raise SwellError("pipe.loss", "must be a LossModel")


def loss_model(loss: Loss) -> LossModel:
    """The engine's loss process for a (validated) spec :class:`Loss`: the same fields in
    the same units, so a field one of them lacks fails here (and in :func:`link_from_pipe`
    the other way), never silently."""
    return LossModel(**loss.model_dump())


def pipe_from_link(link: LinkDir) -> PipeSpec:
    """The engine's pipe for one (validated) spec link direction; units only, no checks."""
    return PipeSpec(
        rate_bps=link.rate_bps,
        delay_us=link.delay_us,
        queue_bytes=link.queue_bytes,
        queue_packets=link.queue_packets,
        loss=loss_model(link.loss),
        pairing=link.pairing,
    )


def link_from_pipe(pipe: PipeSpec) -> LinkDir:
    """The spec link a pipe stands for (inverse of :func:`pipe_from_link`).

    Validates with the spec's models, so it raises pydantic's
    ``ValidationError`` for a pipe no spec could describe.
    """
    return LinkDir.model_validate(
        {
            "rate_mbps": None if pipe.rate_bps is None else pipe.rate_bps / 1e6,
            "delay_ms": pipe.delay_us / 1000,
            "queue_bytes": pipe.queue_bytes,
            "queue_packets": pipe.queue_packets,
            "loss": asdict(pipe.loss),
            "pairing": pipe.pairing,
        }
    )


def check_pipe(pipe: PipeSpec, where: str = "pipe") -> None:
    """Raise :class:`SwellError` unless ``pipe`` is a link the topology spec accepts.

    Field names in the message are the spec's (``rate_mbps``, ``delay_ms``).
    """
    try:
        link_from_pipe(pipe)
    except ValidationError as exc:
        raise SwellError(where, f"not a valid link: {format_validation_error(exc)}") from None


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
            ipaddress.ip_network(self.prefix, strict=False)
        except ValueError as exc:
            msg = f"not an IPv4 or IPv6 prefix: {self.prefix!r}"
            raise SwellError("route.prefix", msg) from exc


@dataclass(frozen=True)
class HostLink:
    """One emulated host's access link: ``up`` (host -> network) and ``down``."""

    ip: str
    up: PipeSpec
    down: PipeSpec

    def __post_init__(self) -> None:
        _ip("host.ip", self.ip)


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
        """Inverse of :meth:`to_json`; validates again, each pipe by the spec's rules."""
        try:
            config = cls(
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
        for host in config.hosts:
            check_pipe(host.up, f"engine config host {host.ip} up")
            check_pipe(host.down, f"engine config host {host.ip} down")
        for a, b, pipe in config.port_pipes:
            check_pipe(pipe, f"engine config port pipe {a}->{b}")
        return config


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
    ``spin_us``: how long before a departure the engine stops sleeping, at
    least (it widens this to 1.5x the lateness of its own wake-ups, up to 250 us).
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
