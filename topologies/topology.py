"""``Topology``: the context manager that brings a dumbbell up and always takes it down.

::

    with Topology(spec, capture_dir=out) as topo:
        a, b = topo.clients[0], topo.servers[0]
        topo.run_in(a, ["ping", "-c", "3", "-I", a.ip, b.ip])
        server = topo.popen_in(b, ["iperf3", "-s", "-B", b.ip])
    # everything this run created is gone here, also after an exception or Ctrl-C

It owns every object it creates, all named with the run prefix ``sw<4 hex>``:
the Mininet nodes (named network namespaces ``<prefix>-<suffix>``), their
interfaces and qdiscs, the engine process, tcpdump captures and every process
started with :meth:`Topology.popen_in`. Its state lives in
``/run/swell/<prefix>/state.json`` (owner pid, engine, namespaces) so
``swell topo status``/``down`` and ``swell cleanup`` can find it.

Teardown order: user processes, captures (SIGINT: flushed), engine (final
counters), Mininet shells, any process still inside one of the run's
namespaces, the namespace names, the state directory. A second Ctrl-C during
teardown is ignored so teardown finishes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_json
from swell.topologies import capture as cap
from swell.topologies.addressing import AddressPlan, plan_addresses
from swell.topologies.engines import (
    Engine,
    EngineFacts,
    HostLinks,
    choose_engine,
    make_engine,
    probe_engines,
)
from swell.topologies.layout import Layout, build_layout, in_ns, run, stop_layout
from swell.topologies.modelnet import group_links
from swell.topologies.quickack import quickack_lines
from swell.topologies.spec import LinkDir, TopologySpec, any_pairing

STATE_ROOT = Path(os.environ.get("SWELL_STATE_ROOT", "/run/swell"))


@dataclass(frozen=True)
class EmulatedHost:
    """One emulated host: an address in a namespace, with its access link (None = unshaped)."""

    ip: str
    side: str  # "left" (client side) or "right" (server side)
    role: str  # "bg" or "fg"
    node: str  # node suffix, e.g. "c0"
    namespace: str  # full netns name
    link: LinkDir | None


def prefix_in_use(prefix: str, state_root: Path = STATE_ROOT) -> bool:
    """Does a state dir or a namespace ``<prefix>-*`` already exist?"""
    used = os.listdir("/var/run/netns") if os.path.isdir("/var/run/netns") else []
    return (state_root / prefix).exists() or any(u.startswith(prefix + "-") for u in used)


def new_prefix(state_root: Path = STATE_ROOT) -> str:
    """A fresh run prefix ``sw<4 hex>`` not used by any state dir or namespace."""
    for _ in range(100):
        prefix = "sw" + secrets.token_hex(2)
        if not prefix_in_use(prefix, state_root):
            return prefix
    raise SwellError("prefix", "could not find a free run prefix")


def resolve_host_links(spec: TopologySpec, plan: AddressPlan) -> HostLinks:
    out: HostLinks = {}
    for side, group in (("left", spec.clients), ("right", spec.servers)):
        links = group_links(group, "client" if side == "left" else "server", spec.seed)
        hosts = plan.bg_hosts(side)  # type: ignore[arg-type]
        out[side] = list(zip(hosts, links, strict=True))  # type: ignore[index]
    return out


def netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """Processes whose network namespace is one of ``inodes``."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            ino = netns_inode(int(entry))
            if ino is not None and ino in inodes:
                out.append(int(entry))
    return out


def kill_and_wait(pids: list[int], sig: int = signal.SIGKILL, timeout: float = 5.0) -> list[int]:
    """Send ``sig`` to each pid and wait until they are gone; returns those still alive."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        for pid in list(alive):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # reap our own children
            if not os.path.exists(f"/proc/{pid}") or _is_zombie(pid):
                alive.remove(pid)
        if alive:
            time.sleep(0.01)
    return alive


def process_start(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (tells a reused pid apart)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


class Topology:
    """A running dumbbell; see the module docstring."""

    def __init__(
        self,
        spec: TopologySpec,
        engine: str | None = None,
        capture_dir: Path | None = None,
        prefix: str | None = None,
        state_root: Path = STATE_ROOT,
        facts: EngineFacts | None = None,
    ) -> None:
        self.spec = spec
        self.requested_engine = engine or spec.engine
        self.capture_dir = Path(capture_dir) if capture_dir is not None else None
        self.state_root = Path(state_root)
        self.prefix = prefix or new_prefix(self.state_root)
        if prefix is not None and prefix_in_use(prefix, self.state_root):
            raise SwellError(prefix, "run prefix in use (namespaces or state dir exist)")
        self.state_dir = self.state_root / self.prefix
        self.facts = facts
        self.plan = plan_addresses(spec)
        self.host_links = resolve_host_links(spec, self.plan)
        self.hosts = self._emulated_hosts()
        self.engine: Engine | None = None
        self.layout: Layout | None = None
        self.captures: dict[str, Path] = {}
        self.client_captures: dict[tuple[str, str], Path] = {}
        self.capture_reports: list[cap.CaptureReport] = []
        self.report: dict[str, Any] = {}
        self._tcpdumps: list[cap.TcpdumpCapture] = []
        self._procs: list[subprocess.Popen[Any]] = []
        self._ns_inodes: set[int] = set()
        self._up = False

    # ---------------------------------------------------------------- hosts
    def _emulated_hosts(self) -> list[EmulatedHost]:
        out = []
        for node in self.plan.nodes:
            links = dict(self.host_links[node.side]) if node.role == "bg" else {}
            for ip in node.hosts:
                out.append(
                    EmulatedHost(
                        str(ip),
                        node.side,
                        node.role,
                        node.suffix,
                        f"{self.prefix}-{node.suffix}",
                        links.get(ip),
                    )
                )
        return out

    def _select(self, side: str, role: str) -> list[EmulatedHost]:
        return [h for h in self.hosts if h.side == side and h.role == role]

    @property
    def clients(self) -> list[EmulatedHost]:
        return self._select("left", "bg")

    @property
    def servers(self) -> list[EmulatedHost]:
        return self._select("right", "bg")

    @property
    def fg_clients(self) -> list[EmulatedHost]:
        return self._select("left", "fg")

    @property
    def fg_servers(self) -> list[EmulatedHost]:
        return self._select("right", "fg")

    @property
    def engine_name(self) -> str | None:
        return None if self.engine is None else self.engine.name

    def host(self, ip: str) -> EmulatedHost:
        """The emulated host with address ``ip`` (any spelling of an IPv6 address)."""
        try:
            want = str(ipaddress.ip_address(ip))
        except ValueError:
            raise SwellError(self.prefix, f"not an IP address: {ip!r}") from None
        for h in self.hosts:
            if h.ip == want:
                return h
        raise SwellError(self.prefix, f"no emulated host {ip}")

    def stats(self) -> dict[str, Any]:
        """The engine's latest counters (per pipe for native, per qdisc for netem)."""
        return {} if self.engine is None else self.engine.stats()

    def expected_rtt_ms(self, a: EmulatedHost, b: EmulatedHost) -> float:
        """Configured round trip between hosts on opposite sides (propagation only)."""
        if a.side == b.side:
            raise ValueError("expected_rtt_ms is for hosts on opposite sides")
        access = sum(h.link.delay_ms for h in (a, b) if h.link is not None)
        bn = self.spec.bottleneck
        return 2 * access + bn.forward_dir().delay_ms + bn.reverse_dir().delay_ms

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Topology:
        self.up()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.down()

    def up(self) -> None:
        if self._up:
            raise SwellError(self.prefix, "topology is already up")
        facts = self.facts or probe_engines()
        requested = self.requested_engine
        if self.spec.capture.clients and requested == "auto" and facts.native:
            requested = "native"  # the one engine with a tap before the uplinks
        pairing = any_pairing(self.spec.bottleneck, (
            link for side in self.host_links.values() for _, link in side))
        if pairing and requested == "auto" and facts.native:
            requested = "native"  # the one engine that pairs packets (netem.netem_args)
        name = choose_engine(requested, facts)
        if pairing and name != "native":
            raise SwellError("pairing", "needs the native engine: netem has no packet that "
                             "leaves with the one before it (a link's pairing)")
        if self.spec.capture.clients and name != "native":
            raise SwellError("capture.clients", "needs the native engine: netem shapes a "
                             "host's uplink on its own interface, before any capture sees "
                             "what the host sends")
        self.state_dir.mkdir(parents=True, exist_ok=False)
        self._up = True
        try:
            self._write_state("starting", name)
            self.engine = make_engine(name)
            self.layout = Layout(self.prefix, self.plan, self.engine.kernel_forwarding)
            build_layout(self.layout)
            self._note_namespaces()
            self._quickack()
            if self.capture_dir is not None and self.spec.capture.enabled:
                self.capture_dir.mkdir(parents=True, exist_ok=True)
                self.captures = cap.capture_paths(self.capture_dir.resolve())
                if self.spec.capture.clients:
                    nodes = [n.suffix for n in self.plan.nodes
                             if n.side == "left" and n.role == "bg"]
                    self.client_captures = cap.client_capture_paths(
                        self.capture_dir.resolve(), nodes)
            self.engine.start(
                self.layout,
                self.host_links,
                self.spec,
                self.state_dir,
                self.captures if self.engine.captures_itself else {},
            )
            if self.captures and not self.engine.captures_itself:
                for direction, path in self.captures.items():
                    tcpdump = cap.TcpdumpCapture(
                        self.layout, direction, path, self.spec.capture.snaplen
                    )
                    self._tcpdumps.append(tcpdump)
                    tcpdump.start()
            if self.client_captures:
                for tcpdump in cap.client_captures(self.layout, self.client_captures,
                                                   self.spec.capture.snaplen):
                    self._tcpdumps.append(tcpdump)
                    tcpdump.start()
            self._write_state("up", name)
        except BaseException:
            self.down()
            raise

    def _quickack(self) -> None:
        """The groups' quick-ack receivers (:mod:`swell.topologies.quickack`)."""
        assert self.layout is not None
        family = ["-6"] if self.plan.version == 6 else []
        for suffix, lines in quickack_lines(self.spec, self.plan,
                                            self.layout.host_intf).items():
            run(["ip", *family, "-n", self.layout.name(suffix), "-batch", "-"],
                stdin="\n".join(lines) + "\n")

    def _note_namespaces(self) -> None:
        """Remember the inode of every node's namespace (to find processes left in them)."""
        if self.layout is not None:
            for suffix in self.layout.nodes:
                if (ino := netns_inode(self.layout.pid(suffix))) is not None:
                    self._ns_inodes.add(ino)

    def _write_state(self, status: str, engine: str) -> None:
        names = [f"{self.prefix}-{s}" for s in (self.layout.nodes if self.layout else {})]
        write_json(
            self.state_dir / "state.json",
            {
                "prefix": self.prefix,
                "status": status,
                "owner_pid": os.getpid(),
                "owner_start": process_start(os.getpid()),
                "engine": engine,
                "engine_pid": self.engine.pid if self.engine else None,
                "namespaces": names,
                "hosts": len(self.hosts),
                "captures": {d: str(p) for d, p in self.captures.items()},
                "client_captures": [str(p) for p in self.client_captures.values()],
                "spec": json.loads(self.spec.model_dump_json()),
                "started": time.time(),
            },
        )

    def down(self) -> dict[str, Any]:
        """Tear everything down (idempotent); returns the run's final report."""
        if not self._up:
            return self.report
        in_main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if in_main else None
        try:
            problems = self._teardown()
        finally:
            if in_main:
                signal.signal(signal.SIGINT, old)
        self._up = False
        self.report["problems"] = problems + self.report.get("problems", [])
        return self.report

    def _teardown(self) -> list[str]:
        problems: list[str] = []
        kill_and_wait([p.pid for p in self._procs if p.poll() is None], signal.SIGTERM, 2.0)
        kill_and_wait([p.pid for p in self._procs if p.poll() is None], signal.SIGKILL)
        for p in self._procs:
            with contextlib.suppress(Exception):
                p.wait(timeout=1)
        self._procs.clear()
        for tcpdump in self._tcpdumps:
            try:
                self.capture_reports.append(tcpdump.stop())
            except SwellError as exc:
                problems.append(str(exc))
        self._tcpdumps.clear()
        if self.engine is not None:
            try:
                final = self.engine.stop()
                self.report["engine_stats"] = final
                if self.engine.captures_itself and self.captures:
                    self.capture_reports += cap.native_reports(final, self.captures)
            except SwellError as exc:
                problems.append(str(exc))
        problems += cap.problems(self.capture_reports)
        self.report["captures"] = [vars(r) for r in self.capture_reports]
        self.report["engine"] = self.engine_name
        if self.layout is not None:
            self._note_namespaces()  # also after a failed build
            problems += stop_layout(self.layout)
        left = kill_and_wait(pids_in_netns(self._ns_inodes))
        if left:
            problems.append(f"processes would not die: {left}")
        shutil.rmtree(self.state_dir, ignore_errors=True)
        return problems

    # -------------------------------------------------------------- running
    def _pid_of(self, node: str | EmulatedHost) -> int:
        if self.layout is None:
            raise SwellError(self.prefix, "topology is not up")
        suffix = node.node if isinstance(node, EmulatedHost) else node
        if suffix not in self.layout.nodes:
            raise SwellError(self.prefix, f"no node {suffix!r}")
        return self.layout.pid(suffix)

    def run_in(
        self,
        node: str | EmulatedHost,
        argv: list[str],
        check: bool = True,
        timeout: float | None = None,
        **kw: Any,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` to completion inside ``node``'s namespace (a host or a suffix)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        proc = subprocess.run(in_ns(self._pid_of(node), argv), timeout=timeout, **kw)
        if check and proc.returncode != 0:
            err = (proc.stderr or "").strip()[:300] if kw.get("text") else ""
            raise SwellError(f"{argv[0]} in {node}", f"exit {proc.returncode}: {err}")
        return proc

    def popen_in(self, node: str | EmulatedHost, argv: list[str], **kw: Any) -> subprocess.Popen:
        """Start ``argv`` inside ``node``'s namespace; it is stopped at teardown."""
        kw.setdefault("start_new_session", True)
        proc = subprocess.Popen(in_ns(self._pid_of(node), argv), **kw)
        self._procs.append(proc)
        return proc
