"""The dumbbell topology spec: pure, typed, validated data (no side effects).

A spec says *what* to emulate; ``addressing`` turns it into an address plan,
``layout`` builds it with Mininet and ``engines`` shape it. Every model here
rejects unknown keys (``extra="forbid"``), so a misspelled option is an error
and never silently ignored, and every number is range-checked.

Shape of a spec (YAML)::

    network: 10.77.0.0/16          # private range holding every address (or fd00:5e11::/48)
    bottleneck:                    # client side -> server side ("forward")
      rate_mbps: 20
      delay_ms: 10                 # one-way
      queue_bytes: 100000          # or queue_packets (never both)
      reverse: {rate_mbps: 20, delay_ms: 10, queue_packets: 100}   # optional
    clients:                       # background clients (emulated hosts)
      count: 200
      namespaces: 2                # multiplexed onto this many namespaces
      access: {delay_ms: 5, rate_mbps: 10, loss: 0.001}     # or a list, one per host
    servers:
      count: 20
      model: {path: models/web, side: server}               # drawn from a Swing model
      quickack: [{port: 443, share: 0.5}]  # half the servers ACK every segment on 443
    foreground: {clients: 1, servers: 1}                    # unconstrained access links
    capture: {enabled: true, snaplen: 128}
    seed: 1

Access links apply the same parameters in both directions (host -> network
"up" and network -> host "down"). ``loss`` is a probability per packet and
per direction; a float is Bernoulli loss, a mapping selects Gilbert-Elliott.
``pairing`` is the share of packets queued right behind another that arrive with
it (frame aggregation, receive coalescing; native engine only: docs/topologies.md).

:class:`Loss` and :class:`LinkDir` are the one definition of what a link may
be (probabilities, rate, delay and queue ranges, which fields go together).
The shaping engines do not check these again: ``linkemu.pipe_from_link`` and
``linkemu.loss_model`` turn a validated ``LinkDir``/``Loss`` into the native
engine's pipe, and ``netem`` turns it into tc arguments; both take rates and
delays in engine units from :attr:`LinkDir.rate_bps` and
:attr:`LinkDir.delay_us`, so both engines shape with the same numbers (one
rounding of the delay to microseconds). A native config read back from JSON is
checked against these same models (``linkemu.check_pipe``).

Other readers of specs (an experiment file holding a ``topology:`` mapping)
call ``TopologySpec.model_validate(data)``: it raises pydantic's
``ValidationError`` whose ``loc`` tuples are field paths inside the spec;
:func:`validation_problems` gives them without pydantic's union-branch labels,
ready to be looked up in a YAML line map.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from swell.errors import SwellError
from swell.inet import lab_range_problem
from swell.typed import StrictModel

__all__ = [
    "Bottleneck",
    "CaptureSpec",
    "Foreground",
    "HostGroup",
    "LinkDir",
    "Loss",
    "LossKind",
    "MAX_HOSTS_PER_GROUP",
    "MAX_NAMESPACES_PER_GROUP",
    "ModelDraw",
    "PRIVATE_RANGES",
    "StrictModel",  # re-exported: the base now lives in swell.typed
    "TopologySpec",
    "format_validation_error",
    "load_spec",
    "ms_to_us",
    "spec_from_dict",
    "validation_problems",
]

PRIVATE_RANGES = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
PRIVATE_RANGES_V6 = (ipaddress.IPv6Network("fc00::/7"),)  # unique local addresses
MAX_V6_PREFIXLEN = 60  # each half holds at least eight /64s (namespaces, transit)
MAX_HOSTS_PER_GROUP = 4096
MAX_NAMESPACES_PER_GROUP = 64

LossKind = Literal["none", "bernoulli", "gilbert"]


def ms_to_us(ms: float) -> int:
    """A delay in whole microseconds, the resolution of both shaping engines."""
    return round(ms * 1000)


class Loss(StrictModel):
    """Random loss: none, Bernoulli (``p``) or Gilbert-Elliott (two-state bursts)."""

    kind: LossKind = "none"
    p: float = Field(0.0, ge=0.0, le=1.0, description="Bernoulli drop probability")
    p_gb: float = Field(0.0, ge=0.0, le=1.0, description="gilbert: P(good->bad) per packet")
    p_bg: float = Field(0.0, ge=0.0, le=1.0, description="gilbert: P(bad->good) per packet")
    loss_good: float = Field(0.0, ge=0.0, le=1.0)
    loss_bad: float = Field(1.0, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return {"kind": "bernoulli" if value > 0 else "none", "p": value}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Loss:
        if self.kind == "gilbert" and self.p_bg <= 0.0:
            raise ValueError("gilbert loss needs p_bg > 0 (mean burst length is 1/p_bg)")
        if self.kind == "none" and (self.p or self.p_gb):
            raise ValueError("loss kind 'none' takes no probabilities")
        return self

    @property
    def active(self) -> bool:
        return self.kind != "none" and (self.p > 0 or self.kind == "gilbert")


class LinkDir(StrictModel):
    """One direction of a link: a serialiser with delay, a drop-tail queue and loss."""

    rate_mbps: float | None = Field(None, gt=0, le=100_000, description="None = no limit")
    delay_ms: float = Field(0.0, ge=0, le=10_000, description="one-way propagation delay")
    queue_bytes: int | None = Field(None, ge=1500, le=1 << 30)
    queue_packets: int | None = Field(None, ge=1, le=1_000_000)
    loss: Loss = Loss()
    pairing: float = Field(0.0, ge=0, le=1, description=(
        "share of the packets queued right behind another that arrive together with it "
        "(a last hop that aggregates frames, a host that coalesces receive interrupts); "
        "native engine only"))

    @model_validator(mode="after")
    def _one_queue_limit(self) -> LinkDir:
        if self.queue_bytes is not None and self.queue_packets is not None:
            raise ValueError("give queue_bytes or queue_packets, not both")
        return self

    @property
    def rate_bps(self) -> float | None:
        """The rate in bit/s (None = no limit), as the engines take it."""
        return None if self.rate_mbps is None else self.rate_mbps * 1e6

    @property
    def delay_us(self) -> int:
        """The one-way delay in whole microseconds, as the engines apply it."""
        return ms_to_us(self.delay_ms)


class Bottleneck(LinkDir):
    """The shared link; its fields are the forward (client -> server) direction."""

    rate_mbps: float = Field(..., gt=0, le=100_000)
    reverse: LinkDir | None = Field(None, description="server -> client; default = forward")

    def forward_dir(self) -> LinkDir:
        return LinkDir(**self.model_dump(exclude={"reverse"}))

    def reverse_dir(self) -> LinkDir:
        return self.reverse if self.reverse is not None else self.forward_dir()


def any_pairing(bottleneck: Bottleneck, links: Iterable[LinkDir]) -> bool:
    """Whether the bottleneck or any of ``links`` pairs packets (only swell-link does)."""
    both = (bottleneck.forward_dir(), bottleneck.reverse_dir())
    return any(link.pairing > 0 for link in (*both, *links))


class ModelDraw(StrictModel):
    """Access links drawn (seeded) from a Swing model's network distributions."""

    path: Path
    side: Literal["client", "server"]
    max_rate_mbps: float | None = Field(None, gt=0, description="cap drawn capacities")
    queue_packets: int = Field(100, ge=1, le=1_000_000)
    pairing: float = Field(0.0, ge=0, le=1, description="every drawn link's pairing")


class QuickAck(StrictModel):
    """A share of a group's hosts that acknowledge every TCP segment they receive on
    one application's connections (``port``: the server's port; the clients match it
    as destination, the servers as source). :mod:`swell.topologies.quickack`."""

    port: int = Field(..., ge=1, le=65535)
    share: float = Field(..., ge=0.0, le=1.0)


class HostGroup(StrictModel):
    """Background emulated hosts: many addresses multiplexed onto a few namespaces."""

    count: int = Field(..., ge=0, le=MAX_HOSTS_PER_GROUP)
    namespaces: int = Field(1, ge=1, le=MAX_NAMESPACES_PER_GROUP)
    access: LinkDir | list[LinkDir] | None = None
    model: ModelDraw | None = None
    quickack: list[QuickAck] = Field(
        default_factory=list, description="per application port, the share of these hosts "
        "that ACK every segment (a route with quickack); the rest keep delayed ACKs")

    @model_validator(mode="after")
    def _source(self) -> HostGroup:
        if self.count and (self.access is None) == (self.model is None):
            raise ValueError("give exactly one of 'access' (explicit) or 'model' (drawn)")
        if isinstance(self.access, list) and len(self.access) != self.count:
            raise ValueError(
                f"'access' lists {len(self.access)} links but count is {self.count}"
                " (give one mapping for all hosts or exactly one per host)"
            )
        if self.count and self.namespaces > self.count:
            raise ValueError(f"namespaces ({self.namespaces}) exceeds count ({self.count})")
        ports = [q.port for q in self.quickack]
        if len(set(ports)) != len(ports):
            raise ValueError(f"quickack names a port twice ({sorted(ports)})")
        return self


class Foreground(StrictModel):
    """Foreground hosts, each in its own namespace, on unconstrained access links."""

    clients: int = Field(1, ge=0, le=10)  # fc0..fc9 keeps interface names <= 15 chars
    servers: int = Field(1, ge=0, le=10)


class CaptureSpec(StrictModel):
    """Capture at the bottleneck, one pcap per direction.

    ``clients``: also capture beside the background clients, where a trace
    recorded on the users' own machines had its monitor: on each background
    client namespace's interface, what the hosts send (before their uplinks)
    and what they receive (after their downlinks), one pcap per namespace and
    direction (``clients-<node>-forward.pcap``, ``clients-<node>-reverse.pcap``).
    Native engine only (``auto`` picks it): netem shapes a host's uplink on the
    host's own interface, where no capture can see a packet before it.
    """

    enabled: bool = True
    snaplen: int = Field(128, ge=64, le=65535)
    clients: bool = False


class TopologySpec(StrictModel):
    """A dumbbell: background and foreground hosts on both sides of a bottleneck."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network = ipaddress.IPv4Network(
        "10.77.0.0/16"
    )
    bottleneck: Bottleneck
    clients: HostGroup = HostGroup(count=0)
    servers: HostGroup = HostGroup(count=0)
    foreground: Foreground = Foreground()
    capture: CaptureSpec = CaptureSpec()
    engine: Literal["auto", "netem", "native"] = "auto"
    seed: int = Field(1, ge=0, le=2**63 - 1)

    @field_validator("network", mode="before")
    @classmethod
    def _strict_network(cls, value: Any) -> Any:
        text = str(value)
        if ":" in text:
            return _ipv6_network(text)
        try:
            net = ipaddress.IPv4Network(text, strict=True)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network: {exc}") from None
        if problem := lab_range_problem(net):  # private or documentation ranges only
            raise ValueError(problem)
        if net.prefixlen > 24:
            raise ValueError(f"{net} is too small: give at least a /24")
        return net


def _ipv6_network(text: str) -> ipaddress.IPv6Network:
    """An IPv6 ``network:``: a unique local (fc00::/7) or documentation (2001:db8::/32)
    prefix of at least a /60."""
    try:
        net = ipaddress.IPv6Network(text, strict=True)
    except ValueError as exc:
        raise ValueError(f"not an IPv6 network: {exc}") from None
    if problem := lab_range_problem(net):  # unique local or documentation ranges only
        raise ValueError(problem)
    if net.prefixlen > MAX_V6_PREFIXLEN:
        raise ValueError(f"{net} is too small: give at least a /{MAX_V6_PREFIXLEN}")
    return net


_UNION_MISMATCH = {"list_type", "dict_type", "model_type", "model_attributes_type"}


def _clean_loc(loc: tuple[Any, ...]) -> tuple[str | int, ...]:
    """``loc`` without pydantic's union-branch labels (``LinkDir``, ``list[...]``)."""
    return tuple(
        p
        for p in loc
        if isinstance(p, int)
        or ("[" not in p and not p.startswith("function-") and not p[:1].isupper())
    )


def validation_problems(exc: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    """``(field path, message)`` for each problem of a spec's ``ValidationError``.

    Paths are tuples of keys and list indices inside the spec (union-branch
    labels dropped), so a caller can prefix them (``("topology", *loc)``) and
    look them up in a YAML line map. When a value could take several shapes
    (one mapping or a list of them), the "wrong shape" errors of the branches
    that do not apply are dropped if a more specific error exists. Duplicates
    (the same path and message from two branches) are given once.
    """
    errors = [(_clean_loc(e["loc"]), e) for e in exc.errors()]
    specific = [(loc, e) for loc, e in errors if e["type"] not in _UNION_MISMATCH]
    if specific:
        errors = specific
    out: list[tuple[tuple[str | int, ...], str]] = []
    for loc, err in errors:
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        if (loc, msg) not in out:
            out.append((loc, msg))
    return out


def format_validation_error(exc: ValidationError) -> str:
    """``field.path: message`` for each problem, joined on one line."""
    parts = [
        f"{'.'.join(str(p) for p in loc) or '(top level)'}: {msg}"
        for loc, msg in validation_problems(exc)
    ]
    return "; ".join(dict.fromkeys(parts))


def spec_from_dict(data: Any, where: str = "spec") -> TopologySpec:
    """Validate a mapping; raise :class:`SwellError` naming ``where`` and the field."""
    if not isinstance(data, dict):
        raise SwellError(where, "a topology spec must be a mapping of keys to values")
    try:
        return TopologySpec.model_validate(data)
    except ValidationError as exc:
        raise SwellError(where, format_validation_error(exc)) from None


def load_spec(path: str | Path) -> TopologySpec:
    """Read a YAML spec. Relative model paths are resolved against its folder."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SwellError(path, f"cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        raise SwellError(path, f"{at}not valid YAML ({getattr(exc, 'problem', exc)})") from None
    spec = spec_from_dict(data, str(path))
    return _resolve_model_paths(spec, path.parent)


def _resolve_model_paths(spec: TopologySpec, base: Path) -> TopologySpec:
    groups = {}
    for side in ("clients", "servers"):
        group: HostGroup = getattr(spec, side)
        if group.model is not None and not group.model.path.is_absolute():
            model = group.model.model_copy(update={"path": base / group.model.path})
            groups[side] = group.model_copy(update={"model": model})
    return spec.model_copy(update=groups) if groups else spec
