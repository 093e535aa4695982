"""The one interface of a traffic kind: a background source or a foreground application.

An experiment file names a kind (``background: {kind: swing, ...}``,
``foreground: {kind: httperf, ...}``); :mod:`swell.generators.registry` maps
that name to a :class:`TrafficKind` subclass, and ``swell run``, ``swell gen``
and ``swell check`` dispatch only through it. A kind is one module and one
registry line; ``docs/adding-a-traffic-kind.md`` walks through one.

A kind has, as class attributes:

* ``name`` (the ``kind:`` value), ``role`` (``background`` or ``foreground``);
* ``Spec``: its typed options, a :class:`KindSpec` with ``kind:
  Literal[name]`` (unknown keys are errors; ``swell check`` validates them with
  file and line);
* ``tools``: the programs it runs, each a :class:`~swell.generators.base.Tool`
  with the Debian package that has it (the same declaration as a generator's);
* ``testbed``: whether it runs on a testbed (``swell testbed``), not only locally.

and a life cycle the runner drives, in order:

1. ``check()``: every tool present (else :class:`EnvironmentProblem`, exit 3,
   naming the tool and its package) and the native binaries it needs built;
2. ``prepare(ctx)`` (before the topology exists): models extracted or
   transformed, input files checked; cached under ``ctx.cache_dir``;
3. ``needs()``: the background hosts it wants (:class:`HostNeeds`);
4. ``check_path(path)``: problems with the shared link it will run over
   (an open-loop rate at or above the bottleneck is an error, a stream above
   it a warning), before anything starts;
5. ``build(ctx)``: the :class:`~swell.generators.base.Generator` that runs
   its processes on ``ctx.placement`` (servers, readiness by probing, clients,
   counters, stop), or ``None`` when it generates nothing;
6. ``result(gen, window)``: its typed results, a :class:`KindResult` of
   metrics and series that ``results.json`` stores and the report draws.

Kinds never see the topology: only the :class:`~swell.placement.Placement`
(addresses and places) and :class:`~swell.placement.PathFacts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from swell.errors import SwellError
from swell.generators.base import Generator, GenResult, Tool, require
from swell.placement import Endpoint, GroupNeed, HostNeeds, PathFacts, Placement
from swell.typed import StrictModel

Role = Literal["background", "foreground"]


class KindSpec(StrictModel):
    """Options of one traffic kind in an experiment file (subclasses add theirs)."""

    kind: str
    label: str | None = None

    def display(self) -> str:
        """A short label for tables and plots."""
        return self.label or self.kind


@dataclass(frozen=True)
class PrepareContext:
    """What a kind may use before the topology exists."""

    base_dir: Path  # the experiment file's folder (relative inputs)
    cache_dir: Path  # shared across the study's runs (models, variants)
    seed: int


@dataclass(frozen=True)
class RunContext:
    """What a kind gets to run: where, for how long, with which seed."""

    out_dir: Path  # this kind's own folder in the run directory
    placement: Placement
    seed: int
    duration_s: float  # how long its clients run (background: warm-up + measurement)
    warmup_s: float  # the part of ``duration_s`` before measurement starts


@dataclass(frozen=True)
class Window:
    """The measurement window in wall-clock seconds (and the clients' start)."""

    start: float
    end: float
    clients_started: float


@dataclass
class ReportPart:
    """What a kind adds to a study's report: figures (PNG paths, captions) and HTML."""

    figures: list[tuple[Path, str]] = field(default_factory=list)
    html: str = ""


@dataclass
class KindResult:
    """A kind's results: scalar/list metrics and named series (all JSON-ready)."""

    kind: str
    metrics: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.metrics, "series": self.series,
                "problems": self.problems}


class TrafficKind:
    """One kind of traffic; see the module docstring for the life cycle."""

    name: ClassVar[str]
    role: ClassVar[Role]
    Spec: ClassVar[type[KindSpec]]
    tools: ClassVar[tuple[Tool, ...]] = ()
    native: ClassVar[tuple[str, ...]] = ()  # swell's own binaries it runs
    cli: ClassVar[str | None] = None  # module adding its ``swell gen`` subcommands
    # a foreground that runs between the foreground hosts (all but ``none``): the
    # topology must give it a client and a server
    needs_fg_hosts: ClassVar[bool] = True
    # it runs on a testbed (``swell testbed``): its generator's readiness is of the forms
    # the testbed's jobs know (ready lines, probes; experiments/testbed_jobs.py)
    testbed: ClassVar[bool] = False

    def __init__(self, spec: KindSpec) -> None:
        self.spec = spec

    def check(self) -> None:
        """Raise EnvironmentProblem naming the first missing tool and its package."""
        from swell.native import native_artifact

        require(self.tools)
        for name in self.native:
            native_artifact(name)

    def prepare(self, ctx: PrepareContext) -> None:
        """Models and inputs, before the topology exists (default: nothing to do)."""

    def validate(self, ctx: PrepareContext) -> None:
        """What ``swell check`` asks before anything runs: input files usable, nothing
        written. Default: a ``trace`` option must be a readable capture and a ``model``
        option a swell model directory (so every kind with such options gets it)."""
        for key, what in (("trace", "trace"), ("model", "model")):
            value = getattr(self.spec, key, None)
            if isinstance(value, str) and value:
                check_input(ctx.base_dir / value, what)

    def needs(self) -> HostNeeds:
        """Background hosts this kind wants (default: none)."""
        return HostNeeds()

    def check_path(self, path: PathFacts) -> list[str]:
        """Warnings about the path it will run over; raise SwellError for a useless run."""
        return []

    def build(self, ctx: RunContext) -> Generator | None:
        """The generator of its processes on ``ctx.placement`` (None: nothing to run)."""
        return None

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        """Typed results from what the generator collected (default: its summary)."""
        metrics = {"generator": gen.name, "summary": gen.summary} if gen is not None else {}
        return KindResult(self.name, metrics)

    def asked_mbps(self) -> dict[str, float] | None:
        """The load it was asked for per bottleneck direction, when it has one."""
        return None

    def model_dir(self) -> Path | None:
        """The model it replays, if any (recorded in the run's results)."""
        return None

    @classmethod
    def report(cls, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
        """Its own figures and tables for ``swell report``, from stored results alone.

        ``groups``: configuration label -> its runs (``results.json`` entries) in which
        this kind ran; figures are written into ``out``. Default: nothing to add.
        """
        return ReportPart()


# --- helpers shared by kinds -------------------------------------------------------------------

ONE_PAIR = HostNeeds(clients=GroupNeed(count=1), servers=GroupNeed(count=1))


def input_file(ctx: PrepareContext, path: str, what: str = "trace") -> Path:
    """An input file of a kind, relative to the experiment file's folder; must exist."""
    full = ctx.base_dir / path
    if not full.is_file():
        raise SwellError(full, f"no such {what}")
    return full


def check_input(path: Path, what: str) -> None:
    """A trace that opens as a capture, or a directory that loads as a swell model."""
    if what == "model":
        from swell.extract.model import load_model

        if not path.is_dir():
            raise SwellError(path, "no such model directory" if not path.exists()
                             else "not a directory (a swell model is a directory)")
        load_model(path)
        return
    from swell.extract.reader import open_trace

    open_trace(path).close()


def background_pair(placement: Placement, kind: str) -> tuple[Endpoint, Endpoint]:
    """The first background server and client (open-loop kinds use one of each)."""
    if not placement.bg_servers or not placement.bg_clients:
        raise SwellError(kind, "needs a background client and server in the topology")
    return placement.bg_servers[0], placement.bg_clients[0]
