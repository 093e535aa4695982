"""The baselines that generate nothing: no background, fixed loss, no foreground.

Papers often evaluate with no background traffic at all, or with a fixed
random loss rate on the shared link instead of traffic (the study's Figure 5
compares that with a real background). Neither starts a process: ``none``
asks for no background hosts, ``fixed_loss`` asks the topology for a random
loss probability on both directions of the bottleneck. ``none`` is also the
foreground kind of a run that only measures its background.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from swell.generators.kind import KindSpec, TrafficKind
from swell.placement import GroupNeed, HostNeeds


class NoneSpec(KindSpec):
    kind: Literal["none"] = "none"


class FixedLossSpec(KindSpec):
    """Random loss with probability ``loss`` per packet, both directions of the bottleneck."""

    kind: Literal["fixed_loss"] = "fixed_loss"
    loss: float = Field(ge=0, lt=1, description="loss probability per packet, e.g. 0.01")

    def display(self) -> str:
        return self.label or f"loss {100 * self.loss:g}%"


class NoBackground(TrafficKind):
    """No background traffic and no background hosts."""

    name = "none"
    role = "background"
    Spec = NoneSpec
    testbed = True

    def needs(self) -> HostNeeds:
        return HostNeeds(clients=GroupNeed(count=0), servers=GroupNeed(count=0))


class FixedLoss(TrafficKind):
    """No traffic; the bottleneck drops packets at random with a fixed probability."""

    name = "fixed_loss"
    role = "background"
    Spec = FixedLossSpec
    testbed = True

    def needs(self) -> HostNeeds:
        assert isinstance(self.spec, FixedLossSpec)
        return HostNeeds(clients=GroupNeed(count=0), servers=GroupNeed(count=0),
                         bottleneck_loss=self.spec.loss)


class NoForeground(TrafficKind):
    """No foreground application: the run measures its background only."""

    name = "none"
    role = "foreground"
    Spec = NoneSpec
    needs_fg_hosts = False
    testbed = True
