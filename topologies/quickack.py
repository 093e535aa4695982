"""Receivers that acknowledge every segment: a share of a group's hosts, per port.

A Linux receiver delays its ACKs (one per two full-sized segments received back
to back) unless it is in quick-ack mode; the hosts of a real trace differ (campus's
HTTPS hosts acknowledged 0.82-0.84 of their segments, its HTTP clients 0.51), and
those ACKs are most of the smaller direction's packets. ``TCP_QUICKACK`` set by
the application does not last (a burst of eight segments is still ACKed 0.15 per
segment); a route's ``quickack`` metric does, for every socket whose route it is
(``bench/quickack.py``: 1.00). A topology group's ``quickack`` list
(:class:`~swell.topologies.spec.QuickAck`: a port and a share) makes that share
of its emulated hosts such receivers on that application's connections, the
others keep the kernel's delayed ACKs.

Emulated hosts share a namespace, and an application's connections are told apart
by the server's port, so the selection is a policy rule per chosen host and port:
``from HOST ipproto tcp dport PORT`` on the clients' side (their connections go
to the port), ``sport PORT`` on the servers' (Linux >= 4.17, iproute2 >= 4.17),
into the routing table :data:`TABLE` of the namespace, which holds its default
route again with ``quickack 1``. A TCP socket keeps the route it was given when it
connected (a client) or was accepted (a server: the lookup has its local port as
source port), so every segment the chosen host receives on that port is
acknowledged at once and nothing else changes. Which hosts: ``round(share *
count)`` of the group, a draw from the topology's seed and the port
(:func:`chosen_hosts`), the same every time. On a testbed the chosen hosts are
address aliases of the edge machines, and each machine gets the same table and
one rule per chosen alias in its own namespace, numbered so that each is checked
and undone by itself (:func:`swell.topologies.testbed_steps.edge_steps`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import numpy as np

from swell.topologies.addressing import AddressPlan, IPAddress, NodePlan, Side
from swell.topologies.spec import HostGroup, TopologySpec

__all__ = ["RULE_PREF", "TABLE", "chosen_hosts", "quickack_hosts", "quickack_lines"]

TABLE = 77  # the namespaces' routing table with the quick-ack default route
RULE_PREF = 1000  # before the main table's rule (32766)
_SIDE_CODE = {"left": 1, "right": 2}


def chosen_hosts(hosts: Sequence[IPAddress], share: float, seed: int, port: int,
                 side: Side) -> list[IPAddress]:
    """The ``round(share * len(hosts))`` hosts of a group that ACK every segment on
    ``port``: drawn without replacement from the seed, the port and the side."""
    n = int(round(share * len(hosts)))
    if n <= 0:
        return []
    rng = np.random.default_rng([seed, port, _SIDE_CODE[side]])
    pick = np.sort(rng.choice(len(hosts), size=n, replace=False))
    return [hosts[int(i)] for i in pick]


def quickack_hosts(spec: TopologySpec,
                   plan: AddressPlan) -> list[tuple[NodePlan, IPAddress, str, int]]:
    """Every chosen host of the spec's groups: (its namespace's plan, its address, the
    match: ``dport`` on the clients' side or ``sport`` on the servers', the port)."""
    groups: tuple[tuple[Side, HostGroup, str], ...] = (
        ("left", spec.clients, "dport"), ("right", spec.servers, "sport"))
    out = []
    for side, group, match in groups:
        if not group.quickack:
            continue
        nodes = [n for n in plan.side_nodes(side) if n.role == "bg"]
        node_of = {h: n for n in nodes for h in n.hosts}
        hosts = [h for n in nodes for h in n.hosts]
        for q in group.quickack:
            out += [(node_of[h], h, match, q.port)
                    for h in chosen_hosts(hosts, q.share, spec.seed, q.port, side)]
    return out


def quickack_lines(spec: TopologySpec, plan: AddressPlan,
                   host_intf: dict[str, str]) -> dict[str, list[str]]:
    """Per host namespace (node suffix), the ``ip -batch`` lines of its quick-ack route
    and rules (none for a namespace without a chosen host). ``host_intf``: each host
    namespace's interface (the layout's)."""
    default = "0.0.0.0/0" if plan.version == 4 else "::/0"
    out: dict[str, list[str]] = {}
    for node, h, match, port in quickack_hosts(spec, plan):
        lines = out.setdefault(node.suffix, [
            f"route add {default} via {node.gateway} dev {host_intf[node.suffix]} "
            f"table {TABLE} quickack 1"])
        lines.append(f"rule add pref {RULE_PREF} from {ipaddress.ip_address(h)} "
                     f"ipproto tcp {match} {port} table {TABLE}")
    return out
