"""Lay out the dumbbell with Mininet nodes: host namespaces, two edge routers, one core.

::

    c0 ─┐                                           ┌─ s0
    c1 ─┼─ el ══ (left port) r (right port) ══ er ─┼─ s1
    fc0 ┘                                           └─ fs0

Every box is a ``mininet.node.Node`` (its own network namespace, driven by
Mininet's shell; no OpenFlow switch or controller), every line a Mininet
``Link`` (a veth pair created directly inside the namespaces, never in the
host's). Nodes are also given a name with ``ip netns attach`` so
``ip netns list`` shows them and engines can open ``/var/run/netns/NAME``.
Names are ``<prefix>-<suffix>`` (``sw1a2b-c0``), interfaces
``<node>-eth<N>`` (at most 15 characters).

Host namespaces carry their emulated hosts' addresses on one interface and
route everything via their edge router. The edge routers forward in the
kernel, so many namespaces share one port of the core router and the
bottleneck is one queue. The core router either forwards in the kernel
(``kernel_forwarding=True``, the tc engine shapes its egress) or has no IPs
and forwarding off, so the native engine (AF_PACKET on its two ports) is the
only path across. Neighbour entries are static (no ARP storms with a thousand
hosts), an IPv4 plan turns IPv6 off (no stray router solicitations in the
captures) and TSO/GSO/GRO and checksum offloads are off on every interface.

An IPv6 plan (:attr:`AddressPlan.version` 6) is laid out the same way with
IPv6 addresses, static neighbour (NDP) entries and routes. So that addresses
are usable at once and nothing but the experiment's traffic is sent, each
namespace first turns IPv6 off (removing the link-local addresses Mininet's
``up`` created), sets ``addr_gen_mode`` none on its interfaces (no link-local
address, hence no duplicate address detection and no router solicitation),
DAD, router advertisements and autoconfiguration off, then turns IPv6 back
on; every address is added with ``nodad``. The core router of the native
engine (no addresses, no forwarding) keeps IPv6 off altogether.

A host namespace stands for many users behind its addresses, so it opens
connections faster than one real host: one client address of a Harpoon model
ran about 400 connections/s to one server and came back to a port it had used
35 s earlier, still in TIME_WAIT, after which ``connect()`` stalled. Host
namespaces therefore let ``connect()`` reuse a TIME_WAIT port once its last
timestamp is over a second old (``net.ipv4.tcp_tw_reuse=1``, RFC 7323
timestamps keep the two incarnations apart; the kernel's default, 2, allows it
on loopback only); :data:`HOST_SYSCTLS`. The port range is the kernel's.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field

from swell.errors import EnvironmentProblem, SwellError
from swell.topologies.addressing import AddressPlan, Side

SIDES: tuple[Side, Side] = ("left", "right")
EDGE = {"left": "el", "right": "er"}
CORE = "r"
MAX_IFNAME = 15
OFFLOADS = ("rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off")
SYSCTL_COMMON = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.conf.all.rp_filter": "0",
    "net.ipv4.conf.default.rp_filter": "0",
}
HOST_SYSCTLS = {"net.ipv4.tcp_tw_reuse": "1"}  # emulated hosts only (module docstring)


def run(argv: Sequence[str], stdin: str | None = None) -> str:
    """Run a command; raise SwellError with its stderr when it fails."""
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SwellError(argv[0], f"{' '.join(argv[:6])} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def in_ns(pid: int, argv: Sequence[str]) -> list[str]:
    """argv that runs ``argv`` in the network namespace of ``pid`` (Mininet's mnexec)."""
    return ["mnexec", "-a", str(pid), *argv]


@dataclass
class Layout:
    """The built network: Mininet nodes and the names of the interfaces that matter."""

    prefix: str
    plan: AddressPlan
    kernel_forwarding: bool
    nodes: dict[str, object] = field(default_factory=dict)  # suffix -> mininet Node
    host_intf: dict[str, str] = field(default_factory=dict)  # host suffix -> its interface
    edge_intf: dict[str, str] = field(default_factory=dict)  # host suffix -> edge's interface
    core_port: dict[str, str] = field(default_factory=dict)  # side -> core interface
    edge_uplink: dict[str, str] = field(default_factory=dict)  # side -> edge interface
    macs: dict[str, str] = field(default_factory=dict)  # interface name -> MAC
    attached: list[str] = field(default_factory=list)  # netns names this layout created

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def pid(self, suffix: str) -> int:
        return int(self.nodes[suffix].pid)  # type: ignore[attr-defined]

    def netns_path(self, suffix: str) -> str:
        return f"/var/run/netns/{self.name(suffix)}"


def node_suffixes(plan: AddressPlan) -> list[str]:
    return [CORE, EDGE["left"], EDGE["right"], *(n.suffix for n in plan.nodes)]


def check_names(prefix: str, plan: AddressPlan) -> None:
    per_edge = {side: len(plan.side_nodes(side)) for side in SIDES}
    for suffix in node_suffixes(plan):
        last = max(per_edge.values()) if suffix.startswith("e") else 1
        ifname = f"{prefix}-{suffix}-eth{last}"
        if len(ifname) > MAX_IFNAME:
            raise SwellError(suffix, f"interface name {ifname} exceeds {MAX_IFNAME} characters")


def build_layout(layout: Layout) -> Layout:
    """Create and configure every node and link of ``layout`` (made by the caller).

    Each node is recorded on ``layout`` as soon as it exists, so on failure the
    caller's :func:`stop_layout` removes whatever was built.
    """
    try:
        from mininet.link import Link
        from mininet.node import Node
    except ImportError as exc:
        msg = f"cannot import Mininet ({exc}); apt install mininet"
        raise EnvironmentProblem("mininet", msg) from None
    prefix, plan = layout.prefix, layout.plan
    check_names(prefix, plan)
    for suffix in node_suffixes(plan):
        node = Node(layout.name(suffix), inNamespace=True)
        layout.nodes[suffix] = node
        run(["ip", "netns", "attach", layout.name(suffix), str(node.pid)])
        layout.attached.append(layout.name(suffix))
    core = layout.nodes[CORE]
    for port, side in enumerate(SIDES):
        edge = layout.nodes[EDGE[side]]
        e_if, c_if = f"{edge.name}-eth0", f"{core.name}-eth{port}"
        Link(edge, core, intfName1=e_if, intfName2=c_if)
        layout.edge_uplink[side], layout.core_port[side] = e_if, c_if
        for k, node_plan in enumerate(plan.side_nodes(side), start=1):
            host = layout.nodes[node_plan.suffix]
            h_if, x_if = f"{host.name}-eth0", f"{edge.name}-eth{k}"
            Link(host, edge, intfName1=h_if, intfName2=x_if)
            layout.host_intf[node_plan.suffix], layout.edge_intf[node_plan.suffix] = h_if, x_if
    _configure(layout)
    return layout


def _interfaces(layout: Layout) -> dict[str, list[str]]:
    """suffix -> interfaces in that namespace."""
    out: dict[str, list[str]] = {s: [] for s in layout.nodes}
    for side in SIDES:
        out[CORE].append(layout.core_port[side])
        out[EDGE[side]].append(layout.edge_uplink[side])
    for node_plan in layout.plan.nodes:
        out[node_plan.suffix].append(layout.host_intf[node_plan.suffix])
        out[EDGE[node_plan.side]].append(layout.edge_intf[node_plan.suffix])
    return out


def _read_mac(layout: Layout, suffix: str, ifname: str) -> str:
    out = run(["ip", "-n", layout.name(suffix), "-o", "link", "show", "dev", ifname])
    return out.split("link/ether", 1)[1].split()[0]


def sysctls_for(version: int, forward: bool, interfaces: Sequence[str],
                host: bool = False) -> list[tuple[str, str]]:
    """The sysctls of one namespace, in the order they must be written.

    IPv4: IPv6 off. IPv6: off (flushes link-local addresses), then no address
    generation on ``interfaces``, no DAD, RA or autoconf, then on again.
    A namespace that does not forward (the native engine's core) keeps IPv6 off.
    An emulated ``host`` namespace also gets :data:`HOST_SYSCTLS`.
    """
    fwd = "1" if forward else "0"
    out = [*SYSCTL_COMMON.items(), ("net.ipv4.ip_forward", fwd)]
    if host:
        out += HOST_SYSCTLS.items()
    if version != 6 or not forward:
        return out
    for scope in ("all", "default"):
        out += [
            (f"net.ipv6.conf.{scope}.accept_dad", "0"),
            (f"net.ipv6.conf.{scope}.accept_ra", "0"),
            (f"net.ipv6.conf.{scope}.autoconf", "0"),
            (f"net.ipv6.conf.{scope}.addr_gen_mode", "1"),
        ]
    for ifname in interfaces:
        out += [
            (f"net.ipv6.conf.{ifname}.addr_gen_mode", "1"),
            (f"net.ipv6.conf.{ifname}.accept_dad", "0"),
        ]
    out += [
        ("net.ipv6.conf.all.forwarding", fwd),
        ("net.ipv6.conf.default.disable_ipv6", "0"),
        ("net.ipv6.conf.all.disable_ipv6", "0"),
    ]
    return out


def _configure(layout: Layout) -> None:
    intfs = _interfaces(layout)
    version = layout.plan.version
    hosts = {n.suffix for n in layout.plan.nodes}
    for suffix, names in intfs.items():
        pid = layout.pid(suffix)
        forward = not (suffix == CORE and not layout.kernel_forwarding)
        sysctls = sysctls_for(version, forward, names, host=suffix in hosts)
        run(in_ns(pid, ["sysctl", "-q", "-w", *(f"{k}={v}" for k, v in sysctls)]))
        for ifname in names:
            run(in_ns(pid, ["ethtool", "-K", ifname, *OFFLOADS]))
            layout.macs[ifname] = _read_mac(layout, suffix, ifname)
    batches: dict[str, list[str]] = {s: ["link set lo up"] for s in layout.nodes}
    for suffix, names in intfs.items():
        batches[suffix] += [f"link set {n} up" for n in names]
    _address_hosts(layout, batches)
    _address_routers(layout, batches)
    for suffix, lines in batches.items():
        run(["ip", "-n", layout.name(suffix), "-batch", "-"], stdin="\n".join(lines) + "\n")


def _nodad(layout: Layout) -> str:
    """``ip addr add`` suffix: IPv6 addresses skip duplicate address detection."""
    return " nodad" if layout.plan.version == 6 else ""


def _address_hosts(layout: Layout, batches: dict[str, list[str]]) -> None:
    nodad = _nodad(layout)
    for node_plan in layout.plan.nodes:
        h_if, x_if = layout.host_intf[node_plan.suffix], layout.edge_intf[node_plan.suffix]
        plen = node_plan.subnet.prefixlen
        host_lines = batches[node_plan.suffix]
        host_lines += [f"addr add {h}/{plen} dev {h_if}{nodad}" for h in node_plan.hosts]
        host_lines += [
            f"neigh replace {node_plan.gateway} lladdr {layout.macs[x_if]} dev {h_if}"
            " nud permanent",
            f"route add default via {node_plan.gateway} dev {h_if}",
        ]
        edge_lines = batches[EDGE[node_plan.side]]
        edge_lines.append(f"addr add {node_plan.gateway}/{plen} dev {x_if}{nodad}")
        mac = layout.macs[h_if]
        edge_lines += [
            f"neigh replace {h} lladdr {mac} dev {x_if} nud permanent" for h in node_plan.hosts
        ]


def _address_routers(layout: Layout, batches: dict[str, list[str]]) -> None:
    plan = layout.plan
    nodad = _nodad(layout)
    for side, other in (("left", "right"), ("right", "left")):
        transit = plan.transit[side]
        plen = transit.subnet.prefixlen
        e_if, c_if = layout.edge_uplink[side], layout.core_port[side]
        edge_lines = batches[EDGE[side]]
        edge_lines += [
            f"addr add {transit.edge_ip}/{plen} dev {e_if}{nodad}",
            f"neigh replace {transit.core_ip} lladdr {layout.macs[c_if]} dev {e_if} nud permanent",
            f"route add {plan.halves[other]} via {transit.core_ip} dev {e_if}",
        ]
        if layout.kernel_forwarding:
            batches[CORE] += [
                f"addr add {transit.core_ip}/{plen} dev {c_if}{nodad}",
                f"neigh replace {transit.edge_ip} lladdr {layout.macs[e_if]} dev {c_if}"
                " nud permanent",
                f"route add {plan.halves[side]} via {transit.edge_ip} dev {c_if}",
            ]


def stop_layout(layout: Layout) -> list[str]:
    """Stop every node's shell and drop the netns names. Returns problems seen."""
    problems = []
    for suffix, node in list(layout.nodes.items()):
        try:
            node.terminate()  # type: ignore[attr-defined]
        except Exception as exc:  # keep tearing down the rest
            problems.append(f"{suffix}: {exc}")
    for name in layout.attached:  # only the names this layout attached
        proc = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True)
        if proc.returncode != 0 and "No such file" not in proc.stderr:
            problems.append(f"netns {name}: {proc.stderr.strip()}")
    layout.nodes.clear()
    layout.attached.clear()
    return problems
