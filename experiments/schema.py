"""Experiment files: a typed schema, `extends:`, sweeps, and errors with line numbers.

An experiment file is YAML and pure data (Flent's lesson: a test is a
declarative file; unlike Flent it is checked against a schema, here pydantic
models with ``extra="forbid"`` so a misspelt key is an error, not a silent
default). Composition is explicit:

* ``extends: other.yaml`` (a path relative to the file) loads the other file
  first and deep-merges this one on top (mappings merge key by key; lists and
  scalars replace);
* ``full:`` holds overrides applied only with ``swell run --full`` (the
  paper's full durations, one flag away from the scaled-down defaults);
* ``sweep:`` maps a dotted field path (``topology.bottleneck.capacity_mbps``,
  ``background``, ``foreground.object_bytes``) to a list of values; the runs
  are the cartesian product, each repeated ``repetitions`` times.

Every error names the file, the line and the field (``exp.yaml:12:
background.kind: input should be 'none', 'swing', ...``). Loading resolves
nothing on the host: paths stay strings, so any experiment file validates on
any machine (tests check every file in ``experiments/``).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swell.errors import SwellError

SCHEMA_VERSION = 1

BackgroundKind = Literal[
    "none", "swing", "cbr", "poisson", "upb", "tpb", "tcpreplay", "fixed_loss"
]
ForegroundKind = Literal["none", "httperf", "bulk"]
PlotKind = Literal["energy", "timeseries", "cdf", "slowdown", "table"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VariantSpec(_Strict):
    """A model transformation (DESIGN 2.1); all fields optional and combinable."""

    scale: float | None = Field(None, gt=0, description="session arrival rate x k")
    target_mbps: float | None = Field(None, gt=0, description="scale sessions to this mean rate")
    rsp: float | None = Field(None, gt=0, description="response sizes x k")
    hb_rtt_ms: float | None = Field(None, gt=0, description="every RTT set to this (HB: 4 ms)")
    zero_think: bool = False
    cap_mbps: float | None = Field(None, gt=0, description="cap every access link at this rate")

    @model_validator(mode="after")
    def _one_scaling(self) -> VariantSpec:
        if self.scale is not None and self.target_mbps is not None:
            raise ValueError("give either scale or target_mbps, not both")
        return self


class BackgroundSpec(_Strict):
    """One background: a generator, its input and its rate."""

    kind: BackgroundKind = "none"
    label: str | None = None
    proto: Literal["udp", "tcp"] = "udp"
    model: str | None = Field(None, description="Swing model directory (swing; rate matching)")
    trace: str | None = Field(None, description="packet trace (upb, tpb, tcpreplay; extraction)")
    rate_mbps: float | None = Field(None, gt=0, description="mean rate for cbr/poisson")
    match_model: bool = Field(False, description="cbr/poisson at the model's mean rate")
    loss: float | None = Field(None, ge=0, lt=1, description="fixed_loss: loss rate p")
    variant: VariantSpec | None = None

    @model_validator(mode="after")
    def _needs(self) -> BackgroundSpec:
        k = self.kind
        if k == "swing" and not (self.model or self.trace):
            raise ValueError("swing needs a model (or a trace to extract one from)")
        if k in ("upb", "tpb", "tcpreplay") and not self.trace:
            raise ValueError(f"{k} needs a trace")
        if k in ("cbr", "poisson") and self.rate_mbps is None and not self.match_model:
            raise ValueError(f"{k} needs rate_mbps or match_model: true (with a model)")
        if self.match_model and not (self.model or self.trace):
            raise ValueError("match_model needs a model or a trace")
        if k == "fixed_loss" and self.loss is None:
            raise ValueError("fixed_loss needs loss (a probability, e.g. 0.01)")
        if self.variant is not None and k != "swing":
            raise ValueError("variant applies to the swing background only")
        return self

    def display(self) -> str:
        if self.label:
            return self.label
        if self.kind in ("cbr", "poisson"):
            rate = f"{self.rate_mbps:g}M" if self.rate_mbps else "model rate"
            return f"{self.kind}-{self.proto} {rate}"
        if self.kind == "fixed_loss":
            return f"loss {100 * (self.loss or 0):g}%"
        return self.kind


class ForegroundSpec(_Strict):
    """httperf against Apache (response times), a bulk iperf3 download, or nothing."""

    kind: ForegroundKind = "httperf"
    object_bytes: int = Field(1_000_000, gt=0)
    objects: int = Field(0, ge=0, description="0: fetch back to back for the whole run")


class Experiment(_Strict):
    """A study: one topology, a background, a foreground, and what varies."""

    version: int = SCHEMA_VERSION
    name: str
    description: str = ""
    seed: int = Field(1, ge=0)
    duration_s: float = Field(60.0, gt=0)
    warmup_s: float = Field(5.0, ge=0)
    repetitions: int = Field(1, ge=1, le=1000)
    engine: Literal["auto", "netem", "native"] = "auto"
    congestion_control: Literal["reno", "cubic", "bbr"] = "reno"
    topology: dict[str, Any] | str = Field(
        default_factory=dict, description="a topology spec (inline) or a path to one"
    )
    background: BackgroundSpec = BackgroundSpec()
    foreground: ForegroundSpec = ForegroundSpec()
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    baseline: str | None = Field(
        None, description="label of the run slowdowns are against (default: the 'none' background)"
    )
    plots: list[PlotKind] = Field(
        default_factory=lambda: ["energy", "timeseries", "cdf", "slowdown"]
    )

    @field_validator("version")
    @classmethod
    def _version(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"this swell reads experiment version {SCHEMA_VERSION}, not {v}")
        return v

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if not values:
                raise ValueError(f"sweep over {key!r} has no values")
            if key.split(".")[0] not in cls.model_fields or key.split(".")[0] == "sweep":
                raise ValueError(f"sweep over {key!r}: no such field")
        return v


@dataclass(frozen=True)
class RunPlan:
    """One run of an experiment: the resolved spec, its label, repetition and seed."""

    key: str
    label: str
    repetition: int
    seed: int
    spec: Experiment
    point: tuple[tuple[str, str], ...] = ()  # (sweep field, value label) of this run


# --- loading -----------------------------------------------------------------------------------


def _line_map(node: yaml.Node, path: tuple[Any, ...], out: dict[tuple[Any, ...], int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for knode, vnode in node.value:
            key = knode.value
            out[path + (key,)] = knode.start_mark.line + 1
            _line_map(vnode, path + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)


def _read_yaml(path: Path) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SwellError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SwellError(where, f"not valid YAML: {problem}") from None
    if data is None:
        raise SwellError(path, "empty experiment file")
    if not isinstance(data, dict):
        raise SwellError(path, "an experiment file must be a mapping of fields")
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _line_map(node, (), lines)
    return data, lines


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


PATH_FIELDS = ("trace", "model")


def _absolutize(data: dict[str, Any], base: Path) -> None:
    """Make the file paths a file names relative to that file's own folder, in place.

    Done per file before merging, so a path in a file reached through ``extends:`` stays
    relative to the file that wrote it.
    """
    def fix(bg: Any) -> None:
        if isinstance(bg, dict):
            for key in PATH_FIELDS:
                if isinstance(bg.get(key), str) and not os.path.isabs(bg[key]):
                    bg[key] = str((base / bg[key]).resolve())

    fix(data.get("background"))
    sweep = data.get("sweep")
    if isinstance(sweep, dict) and isinstance(sweep.get("background"), list):
        for bg in sweep["background"]:
            fix(bg)
    if isinstance(data.get("topology"), str) and not os.path.isabs(data["topology"]):
        data["topology"] = str((base / data["topology"]).resolve())
    for block in ("full",):
        if isinstance(data.get(block), dict):
            _absolutize(data[block], base)


def _resolve_extends(path: Path, seen: tuple[Path, ...]) -> tuple[dict[str, Any], dict]:
    data, lines = _read_yaml(path)
    _absolutize(data, path.parent)
    parent = data.pop("extends", None)
    if parent is None:
        return data, lines
    if not isinstance(parent, str):
        raise SwellError(f"{path}:{lines.get(('extends',), 1)}", "extends: must be a file path")
    parent_path = (path.parent / parent).resolve()
    if parent_path in seen:
        raise SwellError(path, f"extends: cycle through {parent_path.name}")
    if not parent_path.is_file():
        raise SwellError(f"{path}:{lines.get(('extends',), 1)}", f"extends: no such file {parent}")
    base, _ = _resolve_extends(parent_path, seen + (parent_path,))
    return deep_merge(base, data), lines


def _format_error(path: Path, lines: dict, exc: ValidationError) -> SwellError:
    err = exc.errors()[0]
    loc = tuple(err.get("loc", ()))
    line = None
    for cut in range(len(loc), -1, -1):
        line = lines.get(loc[:cut])
        if line is not None:
            break
    field = ".".join(str(p) for p in loc) or "(top level)"
    msg = err.get("msg", "invalid").removeprefix("Value error, ")
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    where = f"{path}:{line}" if line else str(path)
    return SwellError(where, f"{field}: {msg}{more}")


def load_experiment(path: str | os.PathLike[str], full: bool = False) -> Experiment:
    """Load, compose and validate an experiment file; ``full`` applies its ``full:`` block."""
    path = Path(path)
    data, lines = _resolve_extends(path.resolve(), (path.resolve(),))
    full_block = data.pop("full", None)
    if full_block is not None and not isinstance(full_block, dict):
        raise SwellError(f"{path}:{lines.get(('full',), 1)}", "full: must be a mapping")
    if full and full_block:
        data = deep_merge(data, full_block)
    try:
        exp = Experiment.model_validate(data)
    except ValidationError as exc:
        raise _format_error(path, lines, exc) from None
    return exp


# --- sweeps and runs ---------------------------------------------------------------------------


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = data
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[parts[-1]] = copy.deepcopy(value)


def _value_label(value: Any) -> str:
    if isinstance(value, dict):
        if "label" in value:
            return str(value["label"])
        try:
            return BackgroundSpec.model_validate(value).display()
        except ValidationError:
            return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def derive_seed(seed: int, key: str, repetition: int) -> int:
    """A stable per-run seed from the experiment seed, the run key and the repetition."""
    digest = hashlib.sha256(f"{seed}/{key}/{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def expand_runs(exp: Experiment, where: str = "experiment") -> list[RunPlan]:
    """The cartesian product of the sweep, times the repetitions, in a stable order."""
    keys = list(exp.sweep)
    base = exp.model_dump(exclude={"sweep"})
    plans: list[RunPlan] = []
    for combo in itertools.product(*(exp.sweep[k] for k in keys)) if keys else [()]:
        data = copy.deepcopy(base)
        for k, v in zip(keys, combo, strict=True):
            _set_path(data, k, v)
        try:
            spec = Experiment.model_validate(data)
        except ValidationError as exc:
            field = ".".join(str(p) for p in exc.errors()[0]["loc"])
            msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
            combo_s = ", ".join(f"{k}={_value_label(v)}" for k, v in zip(keys, combo, strict=True))
            raise SwellError(where, f"sweep point ({combo_s}): {field}: {msg}") from None
        label = " / ".join(_value_label(v) for v in combo) if combo else spec.background.display()
        key_src = "|".join(f"{k}={v!r}" for k, v in zip(keys, combo, strict=True)) or "single"
        key = _slug(label) + "-" + hashlib.sha1(key_src.encode()).hexdigest()[:6]
        point = tuple((k, _value_label(v)) for k, v in zip(keys, combo, strict=True))
        for rep in range(exp.repetitions):
            plans.append(RunPlan(key, label, rep, derive_seed(exp.seed, key_src, rep), spec,
                                 point))
    return plans


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")[:40] or "run"
