"""The versioned results file of a study (``results.json``) and its loading.

Flent's lesson: one file per study holds the raw series *and* the host's
state, so any past study can be re-plotted from that file alone. Here
``results.json`` is assembled from the per-run ``run.json`` files (each
written atomically when its run finished) plus ``experiment.json`` and
``host.json``::

    {"format": "swell-results", "version": 1,
     "experiment": {...resolved spec...}, "full": false, "host": {...},
     "runs": [ {key, label, repetition, seed, background, engine, timing,
                bottleneck: {forward|reverse: {bg_mean_mbps, all_mean_mbps,
                series_mbps, series_bin_s, energy}},
                foreground: {response_times_s, starts_s, httperf}, ...}, ...]}

:func:`load_results` checks the format and version, then the structure of
every field the report reads (:data:`RESULTS_SCHEMA`: types, lists of numbers,
energy plots whose arrays agree), so a damaged or hand-edited file is one line
(``damaged results file: runs[0].captures: not a list (a str)``, exit 2) and
never a traceback halfway through a report; :func:`group_runs` groups the
runs by their label (repetitions together) for the report.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.fsutil import input_file, write_json

RESULTS_FORMAT = "swell-results"
RESULTS_VERSION = 1


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise SwellError(path, f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise SwellError(path, f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise SwellError(path, f"not valid JSON (line {exc.lineno}): {exc.msg}") from None


def assemble_results(study: Path, wanted: dict[tuple[str, int], str] | None = None) -> Path:
    """Write ``results.json`` from the study's finished runs (atomically).

    ``wanted``: (run key, repetition) -> spec digest of the runs of the current spec;
    finished runs of another spec (an edited file's old configurations) are left out.
    """
    exp = _read_json(study / "experiment.json")
    host = _read_json(study / "host.json") if (study / "host.json").exists() else {}
    runs = [_read_json(p) for p in sorted((study / "runs").glob("*/rep*/run.json"))]
    if wanted is not None:
        runs = [r for r in runs if isinstance(r, dict) and
                wanted.get((r.get("key"), r.get("repetition"))) == r.get("spec_digest")]
    order = {}
    for r in runs:
        order.setdefault(r["key"], len(order))
    runs.sort(key=lambda r: (order[r["key"]], r["repetition"]))
    dest = study / "results.json"
    write_json(dest, {
        "format": RESULTS_FORMAT,
        "version": RESULTS_VERSION,
        "experiment": exp.get("spec", {}),
        "full": exp.get("full", False),
        "host": host,
        "runs": runs,
    })
    return dest


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results file (or a study directory) and check its version and structure."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    input_file(path, "results")
    return check_results(_read_json(path), path)


def check_results(data: Any, path: str | Path) -> dict[str, Any]:
    """``data`` read from the results file ``path``, checked (format, version, the
    structure the report reads); a one-line :class:`SwellError` naming the file."""
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise SwellError(path, "not a swell results file")
    if data.get("version") != RESULTS_VERSION:
        raise SwellError(path, f"results version {data.get('version')} is not supported "
                               f"(this swell reads version {RESULTS_VERSION})")
    if not data.get("runs"):
        raise SwellError(path, "no finished runs in this results file")
    problem = results_problem(data)
    if problem:
        raise SwellError(path, f"damaged results file: {problem}")
    return data


# -- the structure the report reads ------------------------------------------------------


@dataclass(frozen=True)
class Opt:
    """A field that may be absent; ``null`` too when ``null`` (read as ``x.get(k) or
    {}``), not when read as ``x.get(k, default)``."""

    spec: Any
    null: bool = True


@dataclass(frozen=True)
class ListOf:
    """A list whose items all match ``item``."""

    item: Any


NUMBER = "number"  # int or float, not bool
NUMBER_OR_NULL = "number or null"  # an array item read as float (null is NaN)
ENERGY = {"octaves": ListOf(NUMBER), "n_coeffs": ListOf(NUMBER), "mu": ListOf(NUMBER_OR_NULL),
          "y": ListOf(NUMBER_OR_NULL), "ci": ListOf(NUMBER_OR_NULL), "bin_s": NUMBER,
          "vanishing_moments": NUMBER, "n_samples": NUMBER, "mean": NUMBER_OR_NULL}
DIRECTION = {"bg_mean_mbps": NUMBER, "series_mbps": Opt(ListOf(NUMBER_OR_NULL), False),
             "series_bin_s": Opt(NUMBER, False), "energy": Opt(ENERGY)}
ROLE_SPEC = Opt({"kind": Opt(object)})
RUN = {
    "key": str, "label": str, "repetition": int,
    "bottleneck": {"forward": DIRECTION, "reverse": DIRECTION},
    "captures": Opt(ListOf({"dropped": Opt(NUMBER, False)}), False),
    "foreground": Opt({"response_times_s": Opt(ListOf(NUMBER_OR_NULL), False),
                       "bulk": Opt({"series_mbps": Opt(ListOf(NUMBER_OR_NULL)),
                                    "interval_s": Opt(NUMBER, False)})}),
    "spec": Opt({"background": ROLE_SPEC, "foreground": ROLE_SPEC}),
    "point": Opt(dict), "problems": Opt(list), "warnings": Opt(list),
    "generator": Opt({"summary": Opt(dict)}),
}
RESULTS_SCHEMA = {
    "experiment": Opt({"plots": Opt(ListOf(str)), "baseline": Opt(str),
                       "sweep": Opt({"background": Opt(list)})}, False),
    "host": Opt({"git_revision": Opt(str)}, False),
    "runs": ListOf(RUN),
}


def results_problem(data: Any) -> str | None:
    """The first field of a results file (its ``runs`` non-empty) that the report could
    not read, as ``where: what`` (``runs[0].captures: not a list (a str)``); None."""
    return _problem(data, RESULTS_SCHEMA, "")


def _what(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _problem(value: Any, spec: Any, where: str) -> str | None:
    """Where ``value`` first departs from ``spec`` (see :data:`RESULTS_SCHEMA`)."""
    if isinstance(spec, Opt):
        return None if value is None and spec.null else _problem(value, spec.spec, where)
    if spec is object:
        return None
    if spec in (NUMBER, NUMBER_OR_NULL):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok or (value is None and spec == NUMBER_OR_NULL):
            return None
        return f"{where}: not a number ({_what(value)})"
    if isinstance(spec, type):
        ok = isinstance(value, spec) and not (spec is int and isinstance(value, bool))
        return None if ok else f"{where}: not a {_TYPE_NAMES[spec]} ({_what(value)})"
    if isinstance(spec, ListOf):
        if not isinstance(value, list):
            return f"{where}: not a list ({_what(value)})"
        for i, item in enumerate(value):
            if problem := _problem(item, spec.item, f"{where}[{i}]"):
                return problem
        return None
    if not isinstance(value, dict):
        return f"{where}: not a mapping ({_what(value)})"
    for key, sub in spec.items():
        at = f"{where}.{key}" if where else key
        if key not in value:
            if not isinstance(sub, Opt):
                return f"{at}: missing"
            continue
        if problem := _problem(value[key], sub, at):
            return problem
    if spec is ENERGY and len({len(value[k]) for k in ("octaves", "n_coeffs", "mu", "y",
                                                         "ci")}) > 1:
        return f"{where}: octaves, n_coeffs, mu, y and ci of different lengths"
    return None


_TYPE_NAMES = {str: "string", int: "whole number", list: "list", dict: "mapping"}


def group_runs(data: dict[str, Any]) -> OrderedDict[str, list[dict[str, Any]]]:
    """Runs grouped by label (the repetitions of one configuration), in study order."""
    groups: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for run in data["runs"]:
        groups.setdefault(run["label"], []).append(run)
    return groups


def baseline_for(data: dict[str, Any], label: str) -> str | None:
    """The baseline configuration of ``label``: the spec's ``baseline``, else the run with
    no background at the same sweep point (same capacity, object size, ...)."""
    wanted = (data.get("experiment") or {}).get("baseline")
    if wanted:
        return baseline_label(data)
    runs = group_runs(data)
    point = {k: v for k, v in (runs[label][0].get("point") or {}).items() if k != "background"}
    for other, rs in runs.items():
        r = rs[0]
        rest = {k: v for k, v in (r.get("point") or {}).items() if k != "background"}
        if r.get("background_kind") == "none" and rest == point:
            return other
    return None


def baseline_label(data: dict[str, Any]) -> str | None:
    """The configuration slowdowns are computed against: the spec's, or no background."""
    wanted = (data.get("experiment") or {}).get("baseline")
    labels = list(group_runs(data))
    if wanted:
        if wanted not in labels:
            raise SwellError("baseline", f"no runs labelled {wanted!r} (have {labels})")
        return wanted
    for run in data["runs"]:
        if run.get("background_kind") == "none":
            return run["label"]
    return None
