"""The address plan: every emulated host, namespace and transit link gets an address.

The user's range (private or documentation: :func:`swell.inet.lab_range_problem`,
checked by the topology spec) is cut in two halves: the first for the client side
(left of the bottleneck), the second for the server side (right). Inside each
half:

* each host namespace gets its own subnet, sized to the next power of two
  that holds its emulated hosts plus the network, broadcast and gateway
  addresses; the edge router owns ``.1`` (the gateway) and the emulated hosts
  take ``.2`` upwards, all on the namespace's one interface;
* the last ``/30`` of the half is the transit link between that side's edge
  router and the core router (``edge`` = first usable, ``core`` = second).

An IPv6 range (a unique local prefix such as ``fd00:5e11::/48``, or one inside
the documentation prefix ``2001:db8::/32``) is cut the same
way, with the sizes IPv6 links conventionally have: every host namespace
gets a ``/64`` (gateway ``::1``, hosts ``::2`` upwards) and the transit link
is the last ``/64`` of its half (``::1`` edge, ``::2`` core). A plan is of one
family: the whole dumbbell is IPv4 or IPv6 (no dual stack); its
:attr:`AddressPlan.version` tells the layout and the engines which.

Background hosts are split into contiguous blocks, one block per namespace.
The plan is pure data; :func:`check_plan` verifies that no two subnets
overlap, that everything lies inside the chosen range and that no address is
used twice, and the planner raises :class:`SwellError` when the range is too
small.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal, TypeAlias

from swell.errors import SwellError
from swell.topologies.spec import TopologySpec

Side = Literal["left", "right"]
Role = Literal["bg", "fg"]
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

V6_SUBNET_PREFIX = 64  # every IPv6 namespace subnet and transit link is a /64
V4_TRANSIT_PREFIX = 30


@dataclass(frozen=True)
class NodePlan:
    """One host namespace: its name suffix, subnet, gateway and emulated hosts."""

    suffix: str  # node name after the run prefix, e.g. "c0", "fs0"
    side: Side
    role: Role
    subnet: IPNetwork
    hosts: tuple[IPAddress, ...]
    first_index: int  # index of hosts[0] within its group (background hosts)

    @property
    def gateway(self) -> IPAddress:
        return self.subnet.network_address + 1


@dataclass(frozen=True)
class TransitPlan:
    """The /30 (IPv6: /64) between a side's edge router and the core router."""

    side: Side
    subnet: IPNetwork

    @property
    def edge_ip(self) -> IPAddress:
        return self.subnet.network_address + 1

    @property
    def core_ip(self) -> IPAddress:
        return self.subnet.network_address + 2


@dataclass(frozen=True)
class AddressPlan:
    network: IPNetwork
    halves: dict[Side, IPNetwork]
    nodes: tuple[NodePlan, ...]
    transit: dict[Side, TransitPlan]

    @property
    def version(self) -> int:
        """4 or 6: the family of every address in the plan."""
        return self.network.version

    def side_nodes(self, side: Side) -> tuple[NodePlan, ...]:
        return tuple(n for n in self.nodes if n.side == side)

    def bg_hosts(self, side: Side) -> list[IPAddress]:
        return [h for n in self.side_nodes(side) if n.role == "bg" for h in n.hosts]


def split_blocks(count: int, parts: int) -> list[int]:
    """Sizes of ``parts`` contiguous blocks covering ``count`` items, as even as possible."""
    if count == 0:
        return []
    parts = min(parts, count)
    base, extra = divmod(count, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def subnet_prefix_for(n_hosts: int, version: int = 4) -> int:
    """Prefix length of a namespace subnet for n hosts.

    IPv4: the smallest that holds n hosts + network, gateway, broadcast.
    IPv6: always a /64 (a spec holds at most 4096 hosts per group).
    """
    if version == 6:
        return V6_SUBNET_PREFIX
    need = n_hosts + 3
    bits = max(2, (need - 1).bit_length())
    return 32 - bits


def transit_prefix(version: int) -> int:
    """Prefix length of a transit link: /30 for IPv4, /64 for IPv6."""
    return V6_SUBNET_PREFIX if version == 6 else V4_TRANSIT_PREFIX


class _Allocator:
    """Hands out aligned subnets from the bottom of a half, below a reserved top."""

    def __init__(self, half: IPNetwork, top: IPNetwork) -> None:
        self.half = half
        self.top = top
        self.next = int(half.network_address)

    def take(self, prefix: int, what: str) -> IPNetwork:
        size = 1 << (self.half.max_prefixlen - prefix)
        start = (self.next + size - 1) // size * size
        net = type(self.half)((start, prefix))
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
    halves: dict[Side, IPNetwork] = {"left": left, "right": right}
    version = spec.network.version
    groups = {
        "left": ("c", spec.clients.count, spec.clients.namespaces, "fc", spec.foreground.clients),
        "right": ("s", spec.servers.count, spec.servers.namespaces, "fs", spec.foreground.servers),
    }
    nodes: list[NodePlan] = []
    transit: dict[Side, TransitPlan] = {}
    for side, half in halves.items():
        tp = transit_prefix(version)
        top_start = int(half.broadcast_address) + 1 - (1 << (half.max_prefixlen - tp))
        top = type(half)((top_start, tp))
        transit[side] = TransitPlan(side, top)
        alloc = _Allocator(half, top)
        bg_letter, bg_count, bg_ns, fg_letter, fg_count = groups[side]
        first = 0
        for i, size in enumerate(split_blocks(bg_count, bg_ns)):
            nodes.append(_node(alloc, f"{bg_letter}{i}", side, "bg", size, first, version))
            first += size
        for i in range(fg_count):
            nodes.append(_node(alloc, f"{fg_letter}{i}", side, "fg", 1, i, version))
    plan = AddressPlan(spec.network, halves, tuple(nodes), transit)
    check_plan(plan)
    return plan


def _node(
    alloc: _Allocator, suffix: str, side: Side, role: Role, n: int, first: int, version: int
) -> NodePlan:
    subnet = alloc.take(subnet_prefix_for(n, version), f"namespace {suffix} ({n} hosts)")
    hosts = tuple(subnet.network_address + 2 + k for k in range(n))
    return NodePlan(suffix, side, role, subnet, hosts, first)


def check_plan(plan: AddressPlan) -> None:
    """Raise :class:`SwellError` on any overlap, duplicate or address outside the range."""
    subnets = [(n.suffix, n.subnet) for n in plan.nodes]
    subnets += [(f"transit-{t.side}", t.subnet) for t in plan.transit.values()]
    for name, net in subnets:
        if net.version != plan.network.version or not net.subnet_of(plan.network):
            raise SwellError("network", f"{name} subnet {net} lies outside {plan.network}")
    ordered = sorted(subnets, key=lambda s: int(s[1].network_address))
    for (name_a, a), (name_b, b) in zip(ordered, ordered[1:], strict=False):
        if a.overlaps(b):
            raise SwellError("network", f"subnets of {name_a} ({a}) and {name_b} ({b}) overlap")
    seen: set[IPAddress] = set()
    for node in plan.nodes:
        for addr in (node.gateway, *node.hosts):
            if addr in seen or addr not in node.subnet or addr == node.subnet.broadcast_address:
                raise SwellError("network", f"address {addr} of {node.suffix} is not usable")
            seen.add(addr)
    halves = plan.halves
    for node in plan.nodes:
        if not node.subnet.subnet_of(halves[node.side]):
            raise SwellError("network", f"{node.suffix} is outside the {node.side} half")
