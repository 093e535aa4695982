"""Shaping engines behind one interface, and the ``auto|netem|native`` choice.

An engine receives a built :class:`~swell.topologies.layout.Layout` and the
access link of every background host, and makes the bottleneck and the
access links real:

* :class:`NetemEngine` runs the tc command lines of :mod:`.netem` with
  ``tc -batch`` inside each namespace (the core router forwards in the
  kernel). It needs ``sch_netem``.
* :class:`NativeEngine` builds a :class:`swell.topologies.linkemu.EngineConfig`
  (two ports on the core router, routes by side, one ``HostLink`` per
  background host, the bottleneck as the two port pipes, every pipe made by
  ``linkemu.pipe_from_link``, and per-direction captures) and runs
  ``swell-link`` through ``linkemu.LinkEngine`` (the core router has no IPs
  and does not forward).

:func:`choose_engine` is the pure decision; :func:`probe_engines` asks the
host what is available (through :mod:`.probe`, whose answers ``swell doctor``
reports too). ``auto`` prefers netem where the kernel has it and falls back to
the native engine.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swell.errors import EnvironmentProblem, SwellError
from swell.topologies import netem
from swell.topologies.addressing import Side
from swell.topologies.layout import CORE, EDGE, SIDES, Layout, in_ns
from swell.topologies.probe import kernel_has_qdisc, native_engine_status
from swell.topologies.spec import LinkDir, TopologySpec

ENGINES = ("netem", "native")
DIRECTIONS = {"forward": ("left", "right"), "reverse": ("right", "left")}

HostLinks = dict[Side, list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, LinkDir]]]


@dataclass(frozen=True)
class EngineFacts:
    """What the host offers, as found by :func:`probe_engines`."""

    netem: bool
    htb: bool
    native: bool  # swell-link is built and AF_PACKET works
    why_not_native: str = ""


def choose_engine(requested: str, facts: EngineFacts) -> str:
    """The engine to use for ``requested`` (auto, netem or native), or EnvironmentProblem."""
    if requested not in ("auto", *ENGINES):
        raise SwellError("engine", f"unknown engine {requested!r}; use auto, netem or native")
    netem_ok = facts.netem and facts.htb
    if requested == "netem" and not netem_ok:
        missing = "sch_netem" if not facts.netem else "sch_htb"
        raise EnvironmentProblem("engine", f"netem engine asked for but the kernel lacks {missing}")
    if requested == "native" and not facts.native:
        raise EnvironmentProblem("engine", f"native engine unavailable: {facts.why_not_native}")
    if requested != "auto":
        return requested
    if netem_ok:
        return "netem"
    if facts.native:
        return "native"
    raise EnvironmentProblem(
        "engine", f"no shaping engine: kernel lacks sch_netem and {facts.why_not_native}"
    )


def probe_engines() -> EngineFacts:
    """Ask the host what :func:`choose_engine` needs to know."""
    ok, why = native_engine_status()
    return EngineFacts(kernel_has_qdisc("netem"), kernel_has_qdisc("htb"), ok, why)


class Engine(ABC):
    """Shapes a laid-out dumbbell. ``kernel_forwarding`` says which layout it needs."""

    name: str
    kernel_forwarding: bool
    captures_itself: bool  # writes the bottleneck pcaps (else tcpdump does)

    @abstractmethod
    def start(
        self,
        layout: Layout,
        hosts: HostLinks,
        spec: TopologySpec,
        workdir: Path,
        captures: dict[str, Path],
    ) -> None: ...

    @abstractmethod
    def stop(self) -> dict[str, Any]: ...

    @abstractmethod
    def stats(self) -> dict[str, Any]: ...

    @property
    def pid(self) -> int | None:
        return None


class NetemEngine(Engine):
    name = "netem"
    kernel_forwarding = True
    captures_itself = False

    def __init__(self) -> None:
        self.devices: list[tuple[str, str]] = []  # (netns name, dev)
        self.layout: Layout | None = None

    def batches(
        self, layout: Layout, hosts: HostLinks, spec: TopologySpec, mtu: int = 1500
    ) -> dict[str, list[list[str]]]:
        """suffix -> tc commands for that namespace (pure; no command is run)."""
        out: dict[str, list[list[str]]] = {CORE: []}
        core_out = {"forward": layout.core_port["right"], "reverse": layout.core_port["left"]}
        dirs = {"forward": spec.bottleneck.forward_dir(), "reverse": spec.bottleneck.reverse_dir()}
        for direction, dev in core_out.items():
            out[CORE] += netem.bottleneck_cmds(dev, dirs[direction], mtu)
        for side in SIDES:
            links = dict(hosts[side])
            for node in layout.plan.side_nodes(side):
                if node.role != "bg":
                    continue
                pairs = [(h, links[h]) for h in node.hosts]
                up_dev, down_dev = layout.host_intf[node.suffix], layout.edge_intf[node.suffix]
                out.setdefault(node.suffix, []).extend(
                    netem.access_cmds(up_dev, pairs, "src", node.subnet, mtu)
                )
                out.setdefault(EDGE[side], []).extend(
                    netem.access_cmds(down_dev, pairs, "dst", node.subnet, mtu)
                )
        return out

    def start(
        self,
        layout: Layout,
        hosts: HostLinks,
        spec: TopologySpec,
        workdir: Path,
        captures: dict[str, Path],
    ) -> None:
        self.layout = layout
        for suffix, cmds in self.batches(layout, hosts, spec).items():
            text = netem.to_batch(cmds)
            (workdir / f"tc-{suffix}.batch").write_text(text)
            proc = subprocess.run(
                in_ns(layout.pid(suffix), ["tc", "-batch", "-"]),
                input=text,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise SwellError(f"tc in {layout.name(suffix)}", proc.stderr.strip()[:300])
            devs = {c[c.index("dev") + 1] for c in cmds}
            self.devices += [(suffix, d) for d in sorted(devs)]

    def stats(self) -> dict[str, Any]:
        if self.layout is None:
            return {}
        out: dict[str, Any] = {}
        for suffix, dev in self.devices:
            proc = subprocess.run(
                in_ns(self.layout.pid(suffix), ["tc", "-s", "-j", "qdisc", "show", "dev", dev]),
                capture_output=True,
                text=True,
            )
            if proc.returncode == 0 and proc.stdout.strip():
                out[f"{suffix}/{dev}"] = json.loads(proc.stdout)
        return out

    def stop(self) -> dict[str, Any]:
        final = self.stats()
        if self.layout is not None:
            for suffix, dev in self.devices:
                subprocess.run(
                    in_ns(self.layout.pid(suffix), ["tc", *netem.teardown_cmds(dev)[0]]),
                    capture_output=True,
                )
        self.devices = []
        return final


def native_config(
    layout: Layout, hosts: HostLinks, spec: TopologySpec, workdir: Path, captures: dict[str, Path]
) -> Any:
    """The swell-link configuration for this layout (pure: builds dataclasses only)."""
    from swell.topologies import linkemu

    plan = layout.plan
    ports = tuple(
        linkemu.PortSpec(
            name=side,
            netns=layout.netns_path(CORE),
            ifname=layout.core_port[side],
            peer_mac=layout.macs[layout.edge_uplink[side]],
            # the engine answers ARP for these; IPv6 neighbours are static (no NDP)
            gateway_ips=(str(plan.transit[side].core_ip),) if plan.version == 4 else (),
        )
        for side in SIDES
    )
    routes = tuple(linkemu.Route(prefix=str(plan.halves[side]), port=side) for side in SIDES)
    host_links = tuple(
        linkemu.HostLink(
            ip=str(ip), up=linkemu.pipe_from_link(link), down=linkemu.pipe_from_link(link)
        )
        for side in SIDES
        for ip, link in hosts[side]
    )
    dirs = {"forward": spec.bottleneck.forward_dir(), "reverse": spec.bottleneck.reverse_dir()}
    port_pipes = tuple((*DIRECTIONS[d], linkemu.pipe_from_link(dirs[d])) for d in DIRECTIONS)
    capture_list = tuple((*DIRECTIONS[d], str(path)) for d, path in captures.items())
    return linkemu.EngineConfig(
        name=layout.prefix,
        ports=ports,
        routes=routes,
        hosts=host_links,
        port_pipes=port_pipes,
        captures=capture_list,
        stats_path=str(workdir / "link-stats.jsonl"),
        seed=spec.seed,
    )


class NativeEngine(Engine):
    name = "native"
    kernel_forwarding = False
    captures_itself = True

    def __init__(self) -> None:
        self.engine: Any = None

    def start(
        self,
        layout: Layout,
        hosts: HostLinks,
        spec: TopologySpec,
        workdir: Path,
        captures: dict[str, Path],
    ) -> None:
        from swell.topologies import linkemu

        config = native_config(layout, hosts, spec, workdir, captures)
        self.engine = linkemu.LinkEngine(config, workdir)
        self.engine.start()

    @property
    def pid(self) -> int | None:
        return None if self.engine is None else self.engine.pid

    def stats(self) -> dict[str, Any]:
        return {} if self.engine is None else self.engine.stats()

    def stop(self) -> dict[str, Any]:
        if self.engine is None:
            return {}
        engine, self.engine = self.engine, None
        return engine.stop()


def make_engine(name: str) -> Engine:
    return NetemEngine() if name == "netem" else NativeEngine()
