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

Re-running the same command skips the runs whose ``run.json`` exists, so an
interrupted study continues where it stopped, and a half-done run (no
``run.json``) is redone from scratch. Each run: the topology comes up (the
``Topology`` context manager owns and removes everything), congestion control
is set in every namespace, the background starts, after the warm-up the
foreground starts, both stop after the duration, the topology goes down, and
the captures are reduced to results (time series per direction, energy plots,
response times) by :mod:`swell.experiments.collect`.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from swell import __version__
from swell.errors import SwellError
from swell.experiments.collect import collect_run
from swell.experiments.results import RESULTS_VERSION, assemble_results
from swell.experiments.schema import Experiment, RunPlan, expand_runs, load_experiment
from swell.experiments.session import Session
from swell.experiments.topology_plan import topology_for
from swell.fsutil import write_json
from swell.generators import registry
from swell.generators.kind import PrepareContext, RunContext, TrafficKind
from swell.progress import Progress

REPO = Path(__file__).resolve().parent.parent


def _cmd_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def host_metadata() -> dict[str, Any]:
    """What a reader of the results needs to know about the host and the code."""
    from swell.topologies.engines import probe_engines

    facts = probe_engines()
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                         text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "swell_version": __version__,
        "git_revision": git.stdout.strip() or None,
        "git_dirty": bool(dirty),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "engine_facts": facts.__dict__ if hasattr(facts, "__dict__") else str(facts),
        "tools": {
            "tc": _cmd_version(["tc", "-V"]),
            "tcpdump": _cmd_version(["tcpdump", "--version"]),
            "httperf": _cmd_version(["httperf", "--version"]),
            "apache2": _cmd_version(["/usr/sbin/apache2", "-v"]),
        },
    }


def _set_congestion_control(topo: Any, algo: str) -> None:
    """Set TCP congestion control in every namespace of the run (and check it took).

    Outside the initial namespace the kernel only accepts algorithms listed in the
    host's ``net.ipv4.tcp_allowed_congestion_control``; swell does not change that
    host-wide setting, it says so instead.
    """
    for node in topo.layout.nodes:
        res = topo.run_in(node, ["sysctl", "-q", "-w",
                                 f"net.ipv4.tcp_congestion_control={algo}"], check=False)
        if res.returncode != 0:
            allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text()
            raise SwellError("congestion_control", f"{algo!r} cannot be set inside a "
                             f"namespace on this host (allowed: {allowed.strip()}); "
                             "choose one of those")


def _kinds(exp: Experiment, ctx: PrepareContext) -> tuple[TrafficKind, TrafficKind]:
    """The run's background and foreground kinds, checked and prepared."""
    bg = registry.make("background", exp.background)
    fg = registry.make("foreground", exp.foreground)
    for kind in (bg, fg):
        kind.check()
        kind.prepare(ctx)
    return bg, fg


def _run_one(plan: RunPlan, study: Path, rdir: Path, engine: str, prog: Progress,
             base_dir: Path) -> dict:
    from swell.topologies.placement import path_facts, placement_of
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import Topology

    exp = plan.spec
    bg, fg = _kinds(exp, PrepareContext(base_dir, study / "models", plan.seed))
    topo_dict = topology_for(exp.topology_spec(), bg.needs())
    topo_dict.setdefault("seed", plan.seed)
    spec = spec_from_dict(topo_dict, f"{plan.key} topology")
    path = path_facts(spec)
    warnings = bg.check_path(path) + fg.check_path(path)
    for w in warnings:
        prog.note(f"warning: {w}")
    write_json(rdir / "topology.json", json.loads(spec.model_dump_json()))
    write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                    "congestion_control": exp.congestion_control})
    total = exp.warmup_s + exp.duration_s
    with Topology(spec, engine=engine if engine != "auto" else None,
                  capture_dir=rdir / "capture") as topo:
        _set_congestion_control(topo, exp.congestion_control)
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
    window = session.window()
    bg_result = bg.result(session.collect_background(exp.warmup_s), window)
    fg_result = None if exp.foreground.kind == "none" else \
        fg.result(session.collect_foreground(), window).to_json()
    result = collect_run(plan, rdir, engine_used, session.timing, bg_result, fg_result, report,
                         topo_dict, bg.model_dir(), prefix=prefix, warnings=warnings,
                         asked_mbps=bg.asked_mbps())
    for problem in result.get("problems", []):
        prog.note(f"problem: {problem}")
    return result


def run_experiment(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                   full: bool = False, engine: str | None = None) -> Path:
    """Run (or continue) a study; return its directory."""
    exp: Experiment = load_experiment(path, full=full)
    plans = expand_runs(exp, str(path))
    study = Path(out) if out else Path("runs") / exp.name
    study.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, study / "experiment.yaml")
    write_json(study / "experiment.json", {"results_version": RESULTS_VERSION, "full": full,
                                           "spec": json.loads(exp.model_dump_json())})
    write_json(study / "host.json", host_metadata())
    done = 0
    for i, plan in enumerate(plans, 1):
        rdir = study / "runs" / plan.key / f"rep{plan.repetition}"
        if (rdir / "run.json").is_file():
            done += 1
            continue
        if rdir.exists():
            shutil.rmtree(rdir)  # a half-done run: redo it
        rdir.mkdir(parents=True)
        label = f"[{i}/{len(plans)}] {plan.label} rep {plan.repetition}"
        total = plan.spec.warmup_s + plan.spec.duration_s
        with Progress(label, total=total, unit="s") as prog:
            result = _run_one(plan, study, rdir, engine or exp.engine, prog,
                              Path(path).resolve().parent)
        write_json(rdir / "run.json", result)
    assemble_results(study)
    return study
