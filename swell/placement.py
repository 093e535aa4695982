"""Where traffic runs: places, emulated endpoints and the placement of a run.

Traffic code (``swell.generators``) never looks inside a topology. A layout
backend (the local Mininet dumbbell today, Ansible hosts on a testbed later)
hands every traffic kind a :class:`Placement`: for each group of emulated
hosts (background clients and servers, foreground clients and servers) a list
of :class:`Endpoint` values, each an address to bind and a :class:`Place`
where a process bound to it must run, plus the link facts a kind may need to
size its probes or check its rate (access link, bottleneck). That is all a
kind knows of the network.

Addresses are IPv4 or IPv6 (a run's hosts are all of one family, the
topology's ``network``). :attr:`Endpoint.ip` is the address as text (IPv6
compressed, no brackets), what ``bind``/``-B``/``ping -I`` take;
:attr:`Endpoint.family` is 4 or 6 and :attr:`Endpoint.url_host` the form a
URL or a ``host:port`` needs (``[fd00::2]``); :attr:`Placement.family` is the
family of the run.

A :class:`Place` turns a command line into one that runs in that place:

* :class:`Local`: this process's namespace;
* :class:`Netns`: a named network namespace (``ip netns exec``);
* :class:`Via`: any command prefix (``mnexec -a PID`` for a Mininet node,
  ``ssh host`` for a testbed machine).

Before a run exists, a kind says what hosts it needs with :class:`HostNeeds`
(how many background clients and servers, and whether their access links are
drawn from a model); the experiment runner turns that into the topology spec.
This module is a leaf: it imports nothing from swell's stage packages.
"""

from __future__ import annotations

import ipaddress
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Place(ABC):
    """Where a process runs."""

    name: str = "local"

    @abstractmethod
    def argv(self, argv: Sequence[str]) -> list[str]:
        """The command line that runs ``argv`` in this place."""

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        kw.setdefault("text", True)
        return subprocess.Popen(self.argv(argv), **kw)

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(argv), text=True, capture_output=True, timeout=timeout)


class Local(Place):
    def argv(self, argv: Sequence[str]) -> list[str]:
        return list(argv)


@dataclass(frozen=True)
class Netns(Place):
    ns: str

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.ns

    def argv(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]


@dataclass(frozen=True)
class Via(Place):
    """A place given by a command prefix, e.g. ``["mnexec", "-a", PID]`` for a node."""

    prefix: tuple[str, ...]
    label: str = "via"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def argv(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]


@dataclass(frozen=True)
class AccessLink:
    """An emulated host's access link, the same both ways (None rate: unconstrained)."""

    delay_ms: float = 0.0
    rate_mbps: float | None = None
    loss: float = 0.0  # mean loss probability per packet and direction


@dataclass(frozen=True)
class Attachment:
    """The interface an emulated host's packets enter the network by (raw injection)."""

    iface: str
    mac: str
    gateway_mac: str


@dataclass(frozen=True)
class Endpoint:
    """One emulated host: the address to bind and where its processes run."""

    ip: str
    place: Place
    group: str  # hosts with the same group share one place (namespace, machine)
    link: AccessLink | None = None
    attachment: Attachment | None = None

    @property
    def family(self) -> int:
        """4 or 6: the IP version of :attr:`ip`."""
        return ipaddress.ip_address(self.ip).version

    @property
    def url_host(self) -> str:
        """The address as a URL host: bracketed for IPv6 (``[fd00::2]``), else as is."""
        return f"[{self.ip}]" if self.family == 6 else self.ip


@dataclass(frozen=True)
class PathFacts:
    """The shared link between the two sides (forward: client side -> server side), and
    the IP version (4 or 6) of the topology's address plan, so a kind's ``check_path``
    can refuse a family it cannot run over before anything runs."""

    forward_mbps: float | None = None
    reverse_mbps: float | None = None
    forward_delay_ms: float = 0.0
    reverse_delay_ms: float = 0.0
    forward_loss: float = 0.0
    reverse_loss: float = 0.0
    family: int = 4


@dataclass(frozen=True)
class Placement:
    """Every endpoint a run's traffic kinds may use, by role, and the shared path."""

    bg_clients: tuple[Endpoint, ...] = ()
    bg_servers: tuple[Endpoint, ...] = ()
    fg_clients: tuple[Endpoint, ...] = ()
    fg_servers: tuple[Endpoint, ...] = ()
    path: PathFacts = field(default_factory=PathFacts)

    @property
    def family(self) -> int:
        """4 or 6: the IP version of the run's hosts (4 when there are none)."""
        for group in (self.bg_clients, self.bg_servers, self.fg_clients, self.fg_servers):
            if group:
                return group[0].family
        return 4

    def rtt_ms(self, a: Endpoint, b: Endpoint) -> float:
        """Configured propagation round trip between hosts on opposite sides."""
        access = sum(e.link.delay_ms for e in (a, b) if e.link is not None)
        return 2 * access + self.path.forward_delay_ms + self.path.reverse_delay_ms

    def max_rtt_ms(self) -> float:
        """The longest configured round trip between a background client and server."""
        worst = max((e.link.delay_ms for e in self.bg_clients if e.link), default=0.0)
        worst_s = max((e.link.delay_ms for e in self.bg_servers if e.link), default=0.0)
        return 2 * (worst + worst_s) + self.path.forward_delay_ms + self.path.reverse_delay_ms


def by_group(endpoints: Iterable[Endpoint]) -> list[tuple[Place, list[str]]]:
    """Addresses grouped by the place they live in (one entry per group, in order)."""
    out: dict[str, tuple[Place, list[str]]] = {}
    for e in endpoints:
        out.setdefault(e.group, (e.place, []))[1].append(e.ip)
    return list(out.values())


@dataclass(frozen=True)
class GroupNeed:
    """Background hosts a traffic kind needs on one side."""

    count: int | None = None  # None: the topology's own count, else ``default_count``
    default_count: int = 1
    model: Path | None = None  # access links drawn from this Swing model (else unshaped)
    side: str = "client"  # which side of the model the links are drawn from
    # (server port, share of the hosts): that share acknowledges every TCP segment it
    # receives on that application's connections (swell.topologies.quickack)
    quickack: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class HostNeeds:
    """What a kind asks of the topology before it exists."""

    clients: GroupNeed | None = None  # None: no background hosts on that side
    servers: GroupNeed | None = None
    bottleneck_loss: float | None = None  # a fixed random loss on the shared link
