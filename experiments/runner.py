"""``swell run``: lay out, generate, capture, tear down, repeat; resumable.

A study directory holds::

    experiment.yaml          the file as given (copied), and
    experiment.json          the resolved spec (extends and --full applied)
    host.json                kernel, tool versions, git revision, engine facts
    models/                  extracted models and their variants (cached)
    runs/<key>/rep<N>/       one run: topology.json, schedule, captures, logs,
                             run.json (written last, atomically: a run is done
                             exactly when its run.json exists)
    results.json             every finished run, assembled (versioned)

Re-running the same command keeps the runs whose ``run.json`` exists and
whose spec digest (the resolved spec of the run, ``--full``, the engine, and
its inputs: a topology file's resolved spec, the contents of its traces and
models, also stored in ``run.json`` as ``inputs``) matches, so an interrupted
study continues where it stopped; a run whose spec or inputs changed, and a
half-done run (no ``run.json``), is redone from scratch (and said why), and
``results.json`` holds only the runs of the current spec. The directory is
locked (``STUDY/.lock``) while a run uses it; a directory that holds other
things is refused. Before anything starts, live leftovers of a killed run
(its prefix, its processes) stop the run with a pointer to ``swell cleanup``
(``--cleanup`` removes them first). ``host.json`` (see
:mod:`swell.experiments.provenance`) holds package versions, native hashes,
tool versions and sysctls; each run's also the qdiscs, sysctls and offloads of
its namespaces. Each run: the topology comes up (the
``Topology`` context manager owns and removes everything), congestion control
is set in every namespace, the background starts, after the warm-up the
foreground starts, both stop after the duration, the topology goes down, and
the captures are reduced to results (time series per direction, energy plots,
response times) by :mod:`swell.experiments.collect`. Damage the reader met in
a trace a model was extracted from, or in a trace a kind replays itself
(``tcpreplay``, ``upb``, ``tpb``: their ``trace_damage``), is a warning of
every run (on screen, in ``run.json``'s ``warnings`` and the report) and is
kept in ``run.json`` as ``input_damage``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.experiments.check import check_experiment
from swell.experiments.collect import collect_run
from swell.experiments.emulation import lateness_warning
from swell.experiments.provenance import host_metadata, network_state
from swell.experiments.results import RESULTS_VERSION, assemble_results
from swell.experiments.schema import Experiment, RunPlan, expand_runs, load_experiment
from swell.experiments.session import Session
from swell.experiments.tcpsettings import set_tcp
from swell.experiments.topology_plan import topology_for
from swell.fsutil import check_output, dir_lock, write_json, write_text
from swell.generators import registry
from swell.generators.kind import PrepareContext, RunContext, TrafficKind
from swell.generators.models import model_damage
from swell.progress import Progress

__all__ = ["host_metadata", "input_damage", "is_study", "prepare_kinds", "run_digest",
           "run_experiment", "run_inputs"]


def prepare_kinds(exp: Experiment, ctx: PrepareContext) -> tuple[TrafficKind, TrafficKind]:
    """The run's background and foreground kinds, checked and prepared (every runner:
    local, testbed)."""
    bg = registry.make("background", exp.background)
    fg = registry.make("foreground", exp.foreground)
    for kind in (bg, fg):
        kind.check()
        kind.prepare(ctx)
    return bg, fg


def input_damage(kinds: dict[str, TrafficKind]) -> dict[str, tuple[dict[str, Any], str]]:
    """Per role (``background``, ``foreground``): the damage the reader met in the trace
    the kind's model was extracted from, or in the trace it replays (a prepared kind's
    ``trace_damage``), and its line for the screen (roles without damage left out)."""
    out = {}
    for role, kind in kinds.items():
        d = model_damage(kind.model_dir())
        trace = getattr(kind, "trace_damage", None)
        if d is None and trace:
            d = ({"source": trace.path, **trace.to_json()}, trace.one_line())
        if d is not None:
            out[role] = d
    return out


def _run_one(plan: RunPlan, study: Path, rdir: Path, engine: str, prog: Progress,
             base_dir: Path) -> dict:
    from swell.topologies.placement import path_facts, placement_of
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import Topology

    exp = plan.spec
    bg, fg = prepare_kinds(exp, PrepareContext(base_dir, study / "models", plan.seed))
    topo_dict = topology_for(exp.topology_spec(), bg.needs())
    topo_dict.setdefault("seed", plan.seed)
    spec = spec_from_dict(topo_dict, f"{plan.key} topology")
    path = path_facts(spec)
    kinds = {"background": bg, "foreground": fg}
    damage = input_damage(kinds)
    warnings = bg.check_path(path) + fg.check_path(path) + [
        damage_warning(role, kinds[role], line) for role, (_, line) in damage.items()]
    for w in warnings:
        prog.note(f"warning: {w}")
    write_json(rdir / "topology.json", json.loads(spec.model_dump_json()))
    host = {**host_metadata(), "seed": plan.seed, "congestion_control": exp.congestion_control,
            "tcp_ssthresh_cache": exp.tcp_ssthresh_cache}
    write_json(rdir / "host.json", host)
    total = exp.warmup_s + exp.duration_s
    with Topology(spec, engine=engine if engine != "auto" else None,
                  capture_dir=rdir / "capture") as topo:
        set_tcp(topo, exp.congestion_control, exp.tcp_ssthresh_cache)
        write_json(rdir / "host.json", {**host, "network": network_state(topo)})
        placement = placement_of(topo)
        session = Session(
            bg.build(RunContext(rdir / "background", placement, plan.seed, total, exp.warmup_s)),
            fg.build(RunContext(rdir / "foreground", placement, plan.seed, exp.duration_s, 0.0)),
        )
        session.run(exp.warmup_s, total, prog)
        engine_used, prefix = topo.engine_name, topo.prefix
    report = topo.report
    if report.get("problems"):
        raise SwellError(rdir, "; ".join(report["problems"]))
    bg_result, fg_result = session.results(bg, fg, exp.warmup_s)
    result = collect_run(plan, rdir, engine_used, session.timing, bg_result, fg_result, report,
                         topo_dict, bg.model_dir(), prefix=prefix, warnings=warnings,
                         asked_mbps=bg.asked_mbps())
    result["problems"] = result["problems"] + session.problems
    if damage:  # what the reader could not use in the traces behind the run's models
        result["input_damage"] = {role: d for role, (d, _) in damage.items()}
    for problem in result.get("problems", []):
        prog.note(f"problem: {problem}")
    if late := lateness_warning(result.get("engine_lateness")):
        prog.note(f"warning: {late}")
    return result


def damage_warning(role: str, kind: TrafficKind, line: str) -> str:
    """A run's warning for damage in the trace behind one of its kinds."""
    if kind.model_dir() is not None:
        return f"{line} (the {role} model was extracted from it)"
    return f"{line} (the {role} replays the packets read)"


INPUT_FIELDS = ("trace", "model", "flows")  # spec keys that name input files or directories
MODEL_FILES = ("model.json", "arrays.npz")  # what a model directory's fingerprint covers
_FINGERPRINTS: dict[tuple[str, int, int, int], str] = {}


def _file_sha(path: Path) -> str:
    """SHA-256 of a file's contents (16 hex digits), cached by (path, size, mtime,
    inode): about 0.6 GB/s here, 1.5 s for a 1 GB trace, once per study."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _FINGERPRINTS:
        with path.open("rb") as f:
            _FINGERPRINTS[key] = hashlib.file_digest(f, "sha256").hexdigest()[:16]
    return _FINGERPRINTS[key]


def fingerprint(path: Path) -> str:
    """What an input file or model directory holds: its contents' hash (a directory: its
    model files', or its top-level files'; plots and the like do not count)."""
    try:
        if path.is_file():
            return _file_sha(path)
        if path.is_dir():
            names = [n for n in MODEL_FILES if (path / n).is_file()] or sorted(
                p.name for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            h = hashlib.sha256()
            for n in names:
                h.update(f"{n}={_file_sha(path / n)};".encode())
            return h.hexdigest()[:16]
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    return "missing"


def run_inputs(plan: RunPlan, base_dir: Path | None = None) -> dict[str, Any]:
    """What a run reads besides its spec: a topology file's resolved spec, and the
    fingerprint of every trace, model and flow input (relative paths against the
    experiment file's folder ``base_dir``). Empty when the spec is all there is."""
    out: dict[str, Any] = {}
    topo = plan.spec.topology_spec()
    if isinstance(plan.spec.topology, str):
        out["topology"] = json.loads(topo.model_dump_json())
    files: dict[str, str] = {}

    def walk(obj: Any, where: str) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                at = f"{where}.{k}" if where else str(k)
                if k in INPUT_FIELDS and isinstance(v, str) and v:
                    p = Path(v) if os.path.isabs(v) or base_dir is None else base_dir / v
                    files[at] = fingerprint(p)
                elif k == "path" and where.endswith(".model") and isinstance(v, str):
                    files[at] = fingerprint(Path(v))  # access links drawn from a model
                else:
                    walk(v, at)

    spec = json.loads(plan.spec.model_dump_json())
    spec["topology"] = json.loads(topo.model_dump_json())
    walk(spec, "")
    if files:
        out["files"] = files
    return out


def _digest(plan: RunPlan, full: bool, engine: str, inputs: dict[str, Any]) -> str:
    spec = json.loads(plan.spec.model_dump_json())
    if not spec.get("tcp_ssthresh_cache"):  # added later: off, older studies stay resumable
        spec.pop("tcp_ssthresh_cache", None)
    if (spec.get("background") or {}).get("rre_draw") == "independent":  # likewise
        spec["background"].pop("rre_draw")
    payload = {"spec": spec, "key": plan.key, "repetition": plan.repetition,
               "seed": plan.seed, "full": full, "engine": engine}
    if inputs:  # likewise: a run that reads no file keeps the digest it had before
        payload["inputs"] = inputs
    src = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(src.encode()).hexdigest()[:16]


def run_digest(plan: RunPlan, full: bool, engine: str, base_dir: Path | None = None) -> str:
    """What a finished run was made from: the resolved spec of its configuration, its
    repetition and seed, ``--full``, the engine, and its inputs (:func:`run_inputs`: a
    topology file's contents, the traces' and models' contents), SHA-256, 16 hex digits."""
    return _digest(plan, full, engine, run_inputs(plan, base_dir))


def _changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Which inputs differ between two :func:`run_inputs` (for the rerun message)."""
    what = []
    if old.get("topology") != new.get("topology"):
        what.append("the topology file")
    of, nf = old.get("files") or {}, new.get("files") or {}
    what += [k for k in sorted(set(of) | set(nf)) if of.get(k) != nf.get(k)]
    return ", ".join(what)


def _reusable(rdir: Path, digest: str, legacy: str, inputs: dict[str, Any]) -> str | None:
    """None when the finished run in ``rdir`` can be kept, else why it is rerun
    (``legacy``: the digest without the inputs, as swell computed it before)."""
    try:
        run = json.loads((rdir / "run.json").read_text())
        old = run.get("spec_digest")
    except (OSError, ValueError, AttributeError):
        return "its run.json is unreadable"
    if old is None:
        return "it has no spec digest (an older swell)"
    if old == digest:
        return None
    if old == legacy:
        return "its input files were not recorded (an older swell)"
    if isinstance(run.get("inputs"), dict) and (changed := _changed(run["inputs"], inputs)):
        return f"its inputs changed ({changed})"
    return "its spec changed"


def is_study(path: Path) -> bool:
    """A swell study directory (what ``check_output`` may reuse)."""
    return any((path / n).exists() for n in ("experiment.json", "runs", ".lock"))


def _leftovers(clean: bool) -> None:
    """A previous run's live leftovers (its prefix, its processes) stop a new run, unless
    ``clean``: they would compete for the CPU and the addresses."""
    if os.geteuid() != 0:
        return
    from swell.topologies import cleanup as cl

    try:
        found = [cl.find_leftovers(p) for p in sorted(cl.find_prefixes())]
    except (OSError, ValueError):
        return
    stale = [x for x in found if not x.owner_alive and not x.empty()]
    if not stale:
        return
    what = "; ".join(f"{x.prefix}: {len(x.processes)} processes, {len(x.namespaces)} "
                     "namespaces" for x in stale)
    if not clean:
        raise SwellError("host", f"a previous run left things running ({what}); run "
                                 "'swell cleanup' first, or 'swell run --cleanup'")
    for left in stale:
        problems = cl.remove(left)
        print(f"swell: cleaned up {left.prefix}" + (f" ({'; '.join(problems)})" if problems
                                                     else ""), file=sys.stderr)


def run_experiment(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                   full: bool = False, engine: str | None = None,
                   cleanup: bool = False) -> Path:
    """Run (or continue) a study; return its directory.

    A finished run is kept only when its spec digest (:func:`run_digest`) matches;
    others are rerun and said so. The study directory is locked for the duration."""
    # every configuration, and what this host lacks for any of them, before anything starts
    check_experiment(path, full=full, host=True)
    exp: Experiment = load_experiment(path, full=full)
    plans = expand_runs(exp, str(path))
    # absolute from here on: the tools a run starts get paths inside the study (Apache's
    # PidFile and ErrorLog, pathload's -o beside its cwd) and resolve relative ones
    # against their own roots, not the caller's working directory
    study = (Path(out) if out else Path("runs") / exp.name).absolute()
    check_output(study, is_previous=is_study, what="swell study directory")
    with dir_lock(study, "study directory"):
        _leftovers(cleanup)
        return _run_study(exp, plans, Path(path), study, full, engine)


def _run_study(exp: Experiment, plans: list[RunPlan], path: Path, study: Path, full: bool,
               engine: str | None) -> Path:
    src = path.read_bytes()
    if not (study / "experiment.yaml").exists() or \
            (study / "experiment.yaml").read_bytes() != src:
        write_text(study / "experiment.yaml", src.decode("utf-8"))
    write_json(study / "experiment.json", {"results_version": RESULTS_VERSION, "full": full,
                                           "spec": json.loads(exp.model_dump_json())})
    write_json(study / "host.json", host_metadata())
    done = 0
    wanted: dict[tuple[str, int], str] = {}
    for i, plan in enumerate(plans, 1):
        rdir = study / "runs" / plan.key / f"rep{plan.repetition}"
        inputs = run_inputs(plan, path.resolve().parent)
        digest = _digest(plan, full, engine or exp.engine, inputs)
        wanted[(plan.key, plan.repetition)] = digest
        if (rdir / "run.json").is_file():
            why = _reusable(rdir, digest, _digest(plan, full, engine or exp.engine, {}),
                            inputs)
            if why is None:
                done += 1
                continue
            print(f"swell: rerunning {plan.label} rep {plan.repetition}: {why}",
                  file=sys.stderr)
        if rdir.exists():
            shutil.rmtree(rdir)  # a half-done or outdated run: redo it
        rdir.mkdir(parents=True)
        label = f"[{i}/{len(plans)}] {plan.label} rep {plan.repetition}"
        total = plan.spec.warmup_s + plan.spec.duration_s
        with Progress(label, total=total, unit="s") as prog:
            result = _run_one(plan, study, rdir, engine or exp.engine, prog,
                              path.resolve().parent)
        write_json(rdir / "run.json", {**result, "spec_digest": digest, "inputs": inputs})
    if done:
        print(f"swell: kept {done} finished runs whose spec is unchanged", file=sys.stderr)
    assemble_results(study, wanted)
    return study
