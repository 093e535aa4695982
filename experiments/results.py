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

:func:`load_results` checks the format and version and groups the runs by
their label (repetitions together) for the report.
"""

from __future__ import annotations

import json
from collections import OrderedDict
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
    """Read a results file (or a study directory) and check its version."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    input_file(path, "results")
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise SwellError(path, "not a swell results file")
    if data.get("version") != RESULTS_VERSION:
        raise SwellError(path, f"results version {data.get('version')} is not supported "
                               f"(this swell reads version {RESULTS_VERSION})")
    if not data.get("runs"):
        raise SwellError(path, "no finished runs in this results file")
    if not isinstance(data["runs"], list):
        raise SwellError(path, "damaged results file: 'runs' is not a list")
    for i, run in enumerate(data["runs"]):
        problem = _run_problem(run)
        if problem:
            raise SwellError(path, f"damaged or incomplete results file: run {i}: {problem}")
    for key in ("experiment", "host"):
        if not isinstance(data.get(key, {}), dict):
            raise SwellError(path, f"damaged results file: {key!r} is not a mapping")
    return data


def _run_problem(run: Any) -> str | None:
    """What a run entry lacks that the report needs (None when it is complete)."""
    if not isinstance(run, dict):
        return "not a mapping"
    for key, typ in (("key", str), ("label", str), ("repetition", int), ("bottleneck", dict)):
        if not isinstance(run.get(key), typ):
            return f"{key!r} missing or not a {typ.__name__}"
    for d in ("forward", "reverse"):
        b = run["bottleneck"].get(d)
        if not isinstance(b, dict):
            return f"bottleneck.{d} missing"
        if not isinstance(b.get("bg_mean_mbps"), (int, float)):
            return f"bottleneck.{d}.bg_mean_mbps missing or not a number"
        if not isinstance(b.get("series_mbps", []), list):
            return f"bottleneck.{d}.series_mbps is not a list"
    for key in ("foreground", "spec", "point"):
        if run.get(key) is not None and not isinstance(run[key], dict):
            return f"{key!r} is not a mapping"
    return None


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
