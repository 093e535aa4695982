"""The topology spec of one run: the experiment's dumbbell, completed by its background.

An experiment's topology (:class:`~swell.experiments.schema.ExperimentTopology`)
may leave the background host groups open; the background kind says what it
needs (:class:`~swell.placement.HostNeeds`), and :func:`topology_for` writes
the concrete spec:

* a side the kind needs no hosts on gets ``count: 0`` (no background, fixed loss);
* a group the user gave explicit access links (``access``) or a model
  (``model``) keeps them, and the kind's forced count applies only when it
  asks for one (an open-loop flow needs exactly one host per side);
* otherwise the group gets the kind's count (the user's count when the kind
  leaves it open, else its default) and its access links: drawn from the
  kind's model, or unshaped (``access: {}``);
* a group the kind asks quick-ack receivers of (per application port, the share of
  its hosts that acknowledge every segment: a Swing model's ``acks``) gets its
  ``quickack`` list, unless the user gave one;
* a kind that asks for a fixed loss sets it on both directions of the bottleneck.
"""

from __future__ import annotations

from typing import Any

from swell.experiments.schema import ExperimentTopology
from swell.placement import GroupNeed, HostNeeds


def _group(user: dict[str, Any], need: GroupNeed | None) -> dict[str, Any]:
    if need is None or need.count == 0:
        return {"count": 0}
    group = {k: v for k, v in user.items() if v is not None}
    explicit = "access" in group or "model" in group
    if need.count is not None:
        group["count"] = need.count
    elif group.get("count") is None:
        group["count"] = need.default_count
    if need.quickack and not group.get("quickack"):  # the user's own list wins
        group["quickack"] = [{"port": port, "share": share} for port, share in need.quickack]
    if not explicit:
        if need.model is not None:
            group["model"] = {"path": str(need.model), "side": need.side}
        else:
            group["access"] = {}
    if group.get("namespaces", 1) > group["count"]:
        group["namespaces"] = group["count"]
    return group


def topology_for(topology: ExperimentTopology, needs: HostNeeds) -> dict[str, Any]:
    """The topology spec (as data) of one run, for its background's needs."""
    topo = topology.model_dump(mode="json")
    topo["clients"] = _group(topo.get("clients") or {}, needs.clients)
    topo["servers"] = _group(topo.get("servers") or {}, needs.servers)
    if needs.bottleneck_loss is not None:
        bn = dict(topo["bottleneck"])
        bn["loss"] = float(needs.bottleneck_loss)
        if isinstance(bn.get("reverse"), dict):
            bn["reverse"] = {**bn["reverse"], "loss": float(needs.bottleneck_loss)}
        topo["bottleneck"] = bn
    return topo
