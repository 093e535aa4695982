"""The address plan: every emulated host, namespace and transit link gets an address.

The user's private range is cut in two halves: the first for the client side
(left of the bottleneck), the second for the server side (right). Inside each
half:

* each host namespace gets its own subnet, sized to the next power of two
  that holds its emulated hosts plus the network, broadcast and gateway
  addresses; the edge router owns ``.1`` (the gateway) and the emulated hosts
  take ``.2`` upwards, all on the namespace's one interface;
* the last ``/30`` of the half is the transit link between that side's edge
  router and the core router (``edge`` = first usable, ``core`` = second).

Background hosts are split into contiguous blocks, one block per namespace.
The plan is pure data; :func:`check_plan` verifies that no two subnets
overlap, that everything lies inside the chosen range and that no address is
used twice, and the planner raises :class:`SwellError` when the range is too
small.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from swell.errors import SwellError
from swell.topologies.spec import TopologySpec

Side = Literal["left", "right"]
Role = Literal["bg", "fg"]


@dataclass(frozen=True)
class NodePlan:
    """One host namespace: its name suffix, subnet, gateway and emulated hosts."""

    suffix: str  # node name after the run prefix, e.g. "c0", "fs0"
    side: Side
    role: Role
    subnet: ipaddress.IPv4Network
    hosts: tuple[ipaddress.IPv4Address, ...]
    first_index: int  # index of hosts[0] within its group (background hosts)

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 1


@dataclass(frozen=True)
class TransitPlan:
    """The /30 between a side's edge router and the core router."""

    side: Side
    subnet: ipaddress.IPv4Network

    @property
    def edge_ip(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 1

    @property
    def core_ip(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 2


@dataclass(frozen=True)
class AddressPlan:
    network: ipaddress.IPv4Network
    halves: dict[Side, ipaddress.IPv4Network]
    nodes: tuple[NodePlan, ...]
    transit: dict[Side, TransitPlan]

    def side_nodes(self, side: Side) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.side == side)

    def bg_hosts(self, side: Side) -> list[ipaddress.IPv4Address]:
        return [h for n in self.side_nodes(side) if n.role == "bg" for h in n.hosts]


def split_blocks(count: int, parts: int) -> list[int]:
    """Sizes of ``parts`` contiguous blocks covering ``count`` items, as even as possible."""
    if count == 0:
        return []
    parts = min(parts, count)
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def subnet_prefix_for(n_hosts: int) -> int:
    """Smallest prefix length whose subnet holds n hosts + network, gateway, broadcast."""
    need = n_hosts + 3
    bits = max(2, (need - 1).bit_length())
    return 32 - bits


class _Allocator:
    """Hands out aligned subnets from the bottom of a half, below a reserved top."""

    def __init__(self, half: ipaddress.IPv4Network, top: ipaddress.IPv4Network) -> None:
        self.half = half
        self.top = top
        self.next = int(half.network_address)

    def take(self, prefix: int, what: str) -> ipaddress.IPv4Network:
        size = 1 << (32 - prefix)
        start = (self.next + size - 1) // size * size
        net = ipaddress.IPv4Network((start, prefix))
        if not net.subnet_of(self.half) or net.overlaps(self.top):
            raise SwellError(
                "network",
                f"{self.half} has no room for {what} (a /{prefix}); choose a larger range",
            )
        self.next = start + size
        return net


def plan_addresses(spec: TopologySpec) -> AddressPlan:
    """The address plan for ``spec`` (deterministic; raises if the range is too small)."""
    left, right = spec.network.subnets(prefixlen_diff=1)
    halves: dict[Side, ipaddress.IPv4Network] = {"left": left, "right": right}
    groups = {
        "left": ("c", spec.clients.count, spec.clients.namespaces, "fc", spec.foreground.clients),
        "right": ("s", spec.servers.count, spec.servers.namespaces, "fs", spec.foreground.servers),
    }
    nodes: list[NodePlan] = []
    transit: dict[Side, TransitPlan] = {}
    for side, half in halves.items():
        top = ipaddress.IPv4Network((int(half.broadcast_address) - 3, 30))
        transit[side] = TransitPlan(side, top)
        alloc = _Allocator(half, top)
        bg_letter, bg_count, bg_ns, fg_letter, fg_count = groups[side]
        first = 0
        for i, size in enumerate(split_blocks(bg_count, bg_ns)):
            nodes.append(_node(alloc, f"{bg_letter}{i}", side, "bg", size, first))
            first += size
        for i in range(fg_count):
            nodes.append(_node(alloc, f"{fg_letter}{i}", side, "fg", 1, i))
    plan = AddressPlan(spec.network, halves, tuple(nodes), transit)
    check_plan(plan)
    return plan


def _node(alloc: _Allocator, suffix: str, side: Side, role: Role, n: int, first: int) -> NodePlan:
    subnet = alloc.take(subnet_prefix_for(n), f"namespace {suffix} ({n} hosts)")
    hosts = tuple(subnet.network_address + 2 + k for k in range(n))
    return NodePlan(suffix, side, role, subnet, hosts, first)


def check_plan(plan: AddressPlan) -> None:
    """Raise :class:`SwellError` on any overlap, duplicate or address outside the range."""
    subnets = [(n.suffix, n.subnet) for n in plan.nodes]
    subnets += [(f"transit-{t.side}", t.subnet) for t in plan.transit.values()]
    for name, net in subnets:
        if not net.subnet_of(plan.network):
            raise SwellError("network", f"{name} subnet {net} lies outside {plan.network}")
    ordered = sorted(subnets, key=lambda s: int(s[1].network_address))
    for (name_a, a), (name_b, b) in zip(ordered, ordered[1:], strict=False):
        if a.overlaps(b):
            raise SwellError("network", f"subnets of {name_a} ({a}) and {name_b} ({b}) overlap")
    seen: set[ipaddress.IPv4Address] = set()
    for node in plan.nodes:
        for addr in (node.gateway, *node.hosts):
            if addr in seen or addr not in node.subnet or addr == node.subnet.broadcast_address:
                raise SwellError("network", f"address {addr} of {node.suffix} is not usable")
            seen.add(addr)
    halves = plan.halves
    for node in plan.nodes:
        if not node.subnet.subnet_of(halves[node.side]):
            raise SwellError("network", f"{node.suffix} is outside the {node.side} half")
