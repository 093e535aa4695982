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
* ``sweep:`` maps a dotted field path (``topology.bottleneck.rate_mbps``,
  ``background``, ``foreground.object_bytes``) to a list of values; the runs
  are the cartesian product, each repeated ``repetitions`` times.

Every error names the file, the line and the field (``exp.yaml:12:
background.kind: input should be 'none', 'swing', ...``). Loading resolves
nothing on the host: paths stay strings, so any experiment file validates on
any machine (tests check every file in ``experiments/``). An experiment,
``extends:`` or topology file that is a FIFO, device or directory is refused
by name before it is read (a FIFO with no writer would block forever).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from swell.errors import SwellError
from swell.fsutil import input_file
from swell.generators import registry
from swell.generators.kind import Role
from swell.generators.models import VariantSpec
from swell.generators.nothing import NoneSpec
from swell.generators.web import HttperfSpec
from swell.topologies.spec import MAX_HOSTS_PER_GROUP, HostGroup, TopologySpec
from swell.typed import StrictModel

__all__ = ["BackgroundSpec", "Experiment", "ExperimentTopology", "ForegroundSpec", "RunPlan",
           "VariantSpec", "derive_seed", "expand_runs", "load_experiment"]

SCHEMA_VERSION = 1

PlotKind = Literal["energy", "timeseries", "cdf", "slowdown", "table"]
DEFAULT_KIND: dict[Role, str] = {"background": "none", "foreground": "httperf"}

# The kinds' option models, from the one registry: a tagged union on ``kind``.
BackgroundSpec = Annotated[Union[registry.spec_models("background")],  # noqa: UP007
                           Field(discriminator="kind")]
ForegroundSpec = Annotated[Union[registry.spec_models("foreground")],  # noqa: UP007
                           Field(discriminator="kind")]
_BACKGROUND: TypeAdapter[Any] = TypeAdapter(BackgroundSpec)


class BackgroundGroup(HostGroup):
    """A background host group; ``count``, ``access``/``model`` may be left to the
    background kind (Swing: 50 clients and 10 servers drawn from its model)."""

    count: int | None = Field(None, ge=0, le=MAX_HOSTS_PER_GROUP)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _source(self) -> BackgroundGroup:  # replaces HostGroup's: the source may come later
        if self.access is not None and self.model is not None:
            raise ValueError("give one of 'access' (explicit) or 'model' (drawn), not both")
        if isinstance(self.access, list) and len(self.access) != self.count:
            raise ValueError(f"'access' lists {len(self.access)} links but count is "
                             f"{self.count} (give one mapping for all hosts or one per host)")
        if self.count is not None and self.count and self.namespaces > self.count:
            raise ValueError(f"namespaces ({self.namespaces}) exceeds count ({self.count})")
        return self


class ExperimentTopology(TopologySpec):
    """The topology of an experiment: a dumbbell spec whose background groups the
    background kind completes (how many hosts, access links drawn from its model)."""

    clients: BackgroundGroup = BackgroundGroup()
    servers: BackgroundGroup = BackgroundGroup()


class Experiment(StrictModel):
    """A study: one topology, a background, a foreground, and what varies."""

    version: int = SCHEMA_VERSION
    name: str
    description: str = ""
    seed: int = Field(1, ge=0)
    # per_run: each sweep point and repetition draws its own seed. common: every sweep
    # point of a repetition gets the same seed (common random numbers): backgrounds whose
    # variants leave the draw alone (request sizes, think times, capped links, another
    # bottleneck) then draw the same sessions at the same times, so the configurations
    # differ by what the sweep changes and not by a draw (Figure 13's equal forward load)
    seeds: Literal["per_run", "common"] = "per_run"
    duration_s: float = Field(60.0, gt=0, le=7 * 86400)
    warmup_s: float = Field(5.0, ge=0, le=86400)
    repetitions: int = Field(1, ge=1, le=1000)
    engine: Literal["auto", "netem", "native"] = "auto"
    congestion_control: Literal["reno", "cubic", "bbr"] = "reno"
    # Linux >= 5.6 starts every connection without the ssthresh its predecessor to the
    # same host learnt (net.ipv4.tcp_no_ssthresh_metrics_save=1); true caches it in the
    # run's namespaces, as the kernels of the paper's era did (docs/generators.md)
    tcp_ssthresh_cache: bool = False
    topology: ExperimentTopology | str = Field(
        description="a topology spec (inline) or a path to one"
    )
    background: BackgroundSpec = Field(default_factory=NoneSpec)
    foreground: ForegroundSpec = Field(default_factory=HttperfSpec)
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    baseline: str | None = Field(
        None, description="label of the run slowdowns are against (default: the 'none' background)"
    )
    plots: list[PlotKind] = Field(
        default_factory=lambda: ["energy", "timeseries", "cdf", "slowdown"]
    )

    @field_validator("background", "foreground", mode="before")
    @classmethod
    def _default_kind(cls, value: Any, info: Any) -> Any:
        if isinstance(value, dict) and "kind" not in value:
            return {**value, "kind": DEFAULT_KIND[info.field_name]}
        return value

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

    def topology_spec(self) -> ExperimentTopology:
        """The topology, loading it from its file when the experiment names one."""
        if isinstance(self.topology, ExperimentTopology):
            return self.topology
        data, lines = _read_yaml(Path(self.topology), "topology")
        try:
            return ExperimentTopology.model_validate(data)
        except ValidationError as exc:
            raise _format_error(Path(self.topology), lines, exc) from None


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


def _read_yaml(path: Path, what: str = "experiment"
               ) -> tuple[dict[str, Any], dict[tuple[Any, ...], int]]:
    input_file(path, "YAML")  # a FIFO would block forever, a directory is no file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SwellError(path, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SwellError(path, f"not UTF-8 text (byte {exc.start})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise SwellError(where, f"not valid YAML: {problem}") from None
    if data is None:
        raise SwellError(path, f"empty {what} file")
    if not isinstance(data, dict):
        raise SwellError(path, f"a {what} file must be a mapping of fields")
    lines: dict[tuple[Any, ...], int] = {}
    if node is not None:
        _no_duplicate_keys(node, path)
        _line_map(node, (), lines)
    return data, lines


def _no_duplicate_keys(node: yaml.Node, path: Path) -> None:
    """YAML lets a later key silently win over an earlier one; here it is an error."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for knode, vnode in node.value:
            line = knode.start_mark.line + 1
            if knode.value in seen:
                raise SwellError(f"{path}:{line}", f"duplicate key {knode.value!r} (first "
                                                   f"given on line {seen[knode.value]})")
            seen[knode.value] = line
            _no_duplicate_keys(vnode, path)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _no_duplicate_keys(item, path)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: mappings merge key by key, anything else replaces.

    A mapping that names another ``kind:`` than the one it overrides replaces it whole
    (a foreground switched from httperf to none keeps none of httperf's options).
    """
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) \
                and value.get("kind", out[key].get("kind")) == out[key].get("kind"):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


PATH_FIELDS = ("trace", "model", "flows")


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
    try:
        input_file(parent_path, "YAML")
    except SwellError as exc:
        raise SwellError(f"{path}:{lines.get(('extends',), 1)}",
                         f"extends: {parent}: {exc.message}") from None
    base, _ = _resolve_extends(parent_path, seen + (parent_path,))
    return deep_merge(base, data), lines


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """``loc`` without the tag pydantic puts after a tagged union's field
    (``background.swing.variant`` -> ``background.variant``) or a union branch's name."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if i and loc[i - 1] in ("background", "foreground") and isinstance(part, str) \
                and part in registry.kinds(loc[i - 1]):
            continue
        if isinstance(part, str) and (part[:1].isupper() or "[" in part
                                      or part.startswith("function-")):
            continue
        out.append(part)
    return tuple(out)


def _first_error(exc: ValidationError) -> tuple[tuple[Any, ...], str]:
    """The problem to show first (a misspelt key explains a "field required" beside it)."""
    errors = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    err = errors[0]
    loc = _clean_loc(tuple(err.get("loc", ())))
    if err.get("type") in ("union_tag_invalid", "union_tag_not_found"):
        loc += ("kind",)
    return loc, err.get("msg", "invalid").removeprefix("Value error, ")


def _format_error(path: Path, lines: dict, exc: ValidationError) -> SwellError:
    loc, msg = _first_error(exc)
    line = None
    for cut in range(len(loc), -1, -1):
        line = lines.get(loc[:cut])
        if line is not None:
            break
    field = ".".join(str(p) for p in loc) or "(top level)"
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
            return str(_BACKGROUND.validate_python(value).display())
        except ValidationError:
            return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value)


def _portable(value: Any, field: str = "") -> Any:
    """A sweep value as it names its run: file paths by their file names, so a run's key
    and seed do not depend on where the checkout or the study lives (paths are absolute
    after loading)."""
    if isinstance(value, str) and (field in PATH_FIELDS or field == "topology") \
            and os.path.isabs(value):
        return os.path.basename(value)
    if isinstance(value, dict):
        return {k: _portable(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_portable(v, field) for v in value]
    return value


def derive_seed(seed: int, key: str, repetition: int) -> int:
    """A stable per-run seed from the experiment seed, the run key and the repetition
    (``key`` is ``"common"`` for every run under ``seeds: common``)."""
    digest = hashlib.sha256(f"{seed}/{key}/{repetition}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _sweep_lines(where: str) -> dict[tuple[Any, ...], int]:
    """Line numbers of the experiment file ``where`` (empty when it is not one)."""
    try:
        return _read_yaml(Path(where))[1] if Path(where).is_file() else {}
    except SwellError:
        return {}


def sweep_item_where(where: str, lines: dict[tuple[Any, ...], int], key: str,
                     index: int) -> str:
    """``FILE:LINE`` of sweep item ``index`` of ``key`` (the file alone when unknown)."""
    for loc in (("sweep", key, index), ("sweep", key), ("sweep",)):
        if loc in lines:
            return f"{where}:{lines[loc]}"
    return where


def expand_runs(exp: Experiment, where: str = "experiment") -> list[RunPlan]:
    """The cartesian product of the sweep, times the repetitions, in a stable order.

    Errors name the sweep item (file and line); two configurations with the same
    label are an error (the report would merge them as repetitions)."""
    keys = list(exp.sweep)
    base = exp.model_dump(exclude={"sweep"})
    plans: list[RunPlan] = []
    lines = _sweep_lines(where) if keys else {}
    labels: dict[str, tuple[int, ...]] = {}
    indexed = [list(enumerate(exp.sweep[k])) for k in keys]
    for icombo in itertools.product(*indexed) if keys else [()]:
        combo = tuple(v for _, v in icombo)
        idx = tuple(i for i, _ in icombo)
        last = next((j for j in range(len(keys) - 1, -1, -1)
                     if len(exp.sweep[keys[j]]) > 1), len(keys) - 1)
        item_where = sweep_item_where(where, lines, keys[last], idx[last]) if keys else where
        data = copy.deepcopy(base)
        for k, v in zip(keys, combo, strict=True):
            _set_path(data, k, v)
        try:
            spec = Experiment.model_validate(data)
        except ValidationError as exc:
            loc, msg = _first_error(exc)
            field = ".".join(str(p) for p in loc)
            bad = _bad_item(exp, keys, idx, loc)
            if bad is not None:
                item_where = sweep_item_where(where, lines, keys[bad], idx[bad])
            combo_s = ", ".join(f"{k}={_value_label(v)}" for k, v in zip(keys, combo, strict=True))
            raise SwellError(item_where, f"sweep point ({combo_s}): {field}: {msg}") from None
        label = " / ".join(_value_label(v) for v in combo) if combo else spec.background.display()
        if label in labels and labels[label] != idx:
            raise SwellError(item_where, f"sweep: label {label!r} names two different "
                                         "configurations; give each its own label (the "
                                         "report would average them as repetitions)")
        labels[label] = idx
        key_src = "|".join(f"{k}={_portable(v, k)!r}"
                           for k, v in zip(keys, combo, strict=True)) or "single"
        key = _slug(label) + "-" + hashlib.sha1(key_src.encode()).hexdigest()[:6]
        point = tuple((k, _value_label(v)) for k, v in zip(keys, combo, strict=True))
        seed_key = key_src if exp.seeds == "per_run" else "common"
        for rep in range(exp.repetitions):
            plans.append(RunPlan(key, label, rep, derive_seed(exp.seed, seed_key, rep), spec,
                                 point))
    return plans


def _bad_item(exp: Experiment, keys: list[str], idx: tuple[int, ...],
              loc: tuple[Any, ...]) -> int | None:
    """Which sweep key a validation error at ``loc`` belongs to (the longest match)."""
    dotted = ".".join(str(p) for p in loc)
    best = None
    for j, k in enumerate(keys):
        if (dotted == k or dotted.startswith(k + ".")) and \
                (best is None or len(k) > len(keys[best])):
            best = j
    return best


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")[:40] or "run"
