"""A running dumbbell as a :class:`~swell.placement.Placement` for traffic kinds.

The only bridge from a :class:`~swell.topologies.topology.Topology` to the
traffic code: every emulated host becomes an :class:`~swell.placement.Endpoint`
(its address, a :class:`~swell.placement.Via` place that enters its Mininet
node's namespace, the node as its group, its access link as plain numbers, and
the interface its packets enter by for raw injection), and the bottleneck
becomes :class:`~swell.placement.PathFacts`. A testbed layout fills the same
types from its inventory.
"""

from __future__ import annotations

from typing import Any

from swell.placement import AccessLink, Attachment, Endpoint, PathFacts, Placement, Via
from swell.topologies.layout import in_ns
from swell.topologies.spec import LinkDir, Loss


def mean_loss(loss: Loss) -> float:
    """The long-run loss probability of a loss model (Gilbert-Elliott: stationary mean)."""
    if loss.kind == "bernoulli":
        return loss.p
    if loss.kind == "gilbert":
        bad = loss.p_gb / max(loss.p_gb + loss.p_bg, 1e-12)
        return (1 - bad) * loss.loss_good + bad * loss.loss_bad
    return 0.0


def access_link(link: LinkDir | None) -> AccessLink | None:
    if link is None:
        return None
    return AccessLink(delay_ms=link.delay_ms, rate_mbps=link.rate_mbps,
                      loss=mean_loss(link.loss))


def placement_of(topo: Any) -> Placement:
    """The placement of a running :class:`Topology` (after ``up()``)."""
    lay = topo.layout
    if lay is None:
        raise RuntimeError("placement_of: the topology is not up")

    def endpoint(h: Any) -> Endpoint:
        h_if = lay.host_intf.get(h.node)
        e_if = lay.edge_intf.get(h.node)
        att = None
        if h_if and e_if and h_if in lay.macs and e_if in lay.macs:
            att = Attachment(h_if, lay.macs[h_if], lay.macs[e_if])
        return Endpoint(ip=h.ip, place=Via(tuple(in_ns(lay.pid(h.node), [])), label=h.node),
                        group=h.node, link=access_link(h.link), attachment=att)

    return Placement(
        bg_clients=tuple(endpoint(h) for h in topo.clients),
        bg_servers=tuple(endpoint(h) for h in topo.servers),
        fg_clients=tuple(endpoint(h) for h in topo.fg_clients),
        fg_servers=tuple(endpoint(h) for h in topo.fg_servers),
        path=path_facts(topo.spec),
    )


def path_facts(spec: Any) -> PathFacts:
    """The bottleneck of a topology spec (before it is up), as plain numbers."""
    bn = spec.bottleneck
    fwd, rev = bn.forward_dir(), bn.reverse_dir()
    return PathFacts(forward_mbps=fwd.rate_mbps, reverse_mbps=rev.rate_mbps,
                     forward_delay_ms=fwd.delay_ms, reverse_delay_ms=rev.delay_ms,
                     forward_loss=mean_loss(fwd.loss), reverse_loss=mean_loss(rev.loss),
                     family=spec.network.version)


def host_place(topo: Any, host: Any) -> Via:
    """The place of one emulated host of a running topology (for tests and benches)."""
    return Via(tuple(in_ns(topo.layout.pid(host.node), [])), label=host.node)
