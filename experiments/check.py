"""``swell check``: everything ``swell run`` would refuse, found before anything runs.

Loading an experiment (:func:`~swell.experiments.schema.load_experiment`)
checks the file itself: encoding, YAML, duplicate keys, the typed schema
(rates, loss, private address ranges, absurd values, misspelt keys) and the
sweep (items with their line, unique labels). This pass goes on as far as a
run goes without touching the host, for every configuration of the sweep:

* the topology, also when it is a separate file (with its own file and line);
* each traffic kind's :meth:`~swell.generators.kind.TrafficKind.validate`:
  traces open as captures, models load (nothing is extracted or written), and
  a kind checks what its ``prepare`` would refuse (a trace with no packets to
  model, replay or play); damage the reader met in a trace is a warning, as
  a run gives it;
* the concrete topology of the run (the background's host needs applied),
  validated as ``swell run`` builds it, and its address plan (a network too
  small for the hosts is an error here, not after earlier runs finished);
* the kinds' path checks (an open-loop rate at or above the bottleneck);
* last, what this host lacks for each configuration (:func:`host_problems`: a
  kind's programs on PATH, such as ``pathload_snd``, and swell's native
  binaries). ``swell run`` refuses them here, exit 3 before its first run
  (``host=True``), so a study never stops at its fifth configuration for a
  program missing from the start. ``swell check`` reports them as warnings
  and exits 0: it checks the file, and the file may be meant for other
  machines (``swell run --testbed`` checks the tools on them, CI checks files
  without the hand-built tools).

An error names the file and line of the sweep item it came from, then the
configuration, then the problem.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from swell.errors import EnvironmentProblem, SwellError
from swell.experiments.schema import (
    Experiment,
    RunPlan,
    _sweep_lines,
    expand_runs,
    load_experiment,
    sweep_item_where,
)
from swell.experiments.topology_plan import topology_for
from swell.generators import registry
from swell.generators.kind import PrepareContext


@dataclass(frozen=True)
class CheckSummary:
    configurations: int
    runs: int
    repetitions: int
    traffic_s: float
    warnings: tuple[str, ...] = ()  # what a run would warn about, per configuration


def check_plan(plan: RunPlan, base_dir: Path) -> list[str]:
    """Everything ``swell run`` checks for one configuration, without running it; the
    warnings its kinds' path checks give (a run prints them too)."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.placement import path_facts
    from swell.topologies.spec import spec_from_dict

    exp = plan.spec
    topology = exp.topology_spec()
    with tempfile.TemporaryDirectory(prefix="swell-check-") as tmp:
        ctx = PrepareContext(base_dir, Path(tmp), plan.seed)
        bg = registry.make("background", exp.background)
        fg = registry.make("foreground", exp.foreground)
        warnings: list[str] = []
        for part, kind in (("background", bg), ("foreground", fg)):
            try:
                kind.validate(ctx)
            except SwellError as exc:
                exc.part = part  # type: ignore[attr-defined]
                raise
            if damage := getattr(kind, "trace_damage", None):  # a run warns of it too
                warnings.append(f"{part}: {damage.one_line()}")
        topo = topology_for(topology, bg.needs())
        topo.setdefault("seed", plan.seed)
        spec = spec_from_dict(topo, "topology")
        plan_addresses(spec)
        if fg.needs_fg_hosts and spec.foreground.clients < 1:
            raise SwellError("topology.foreground.clients",
                             f"the {exp.foreground.kind} foreground needs at least one client")
        path = path_facts(spec)
        for part, kind in (("background", bg), ("foreground", fg)):
            try:
                warnings += [f"{part}: {w}" for w in kind.check_path(path) or ()]
            except SwellError as exc:
                exc.part = part  # type: ignore[attr-defined]
                raise
            except Exception:  # noqa: BLE001, S112 - needs what prepare() computes; run checks it
                continue
    return warnings


def host_problems(exp: Experiment) -> list[tuple[str, EnvironmentProblem]]:
    """What this host lacks to run one configuration, per part: each kind's
    :meth:`~swell.generators.kind.TrafficKind.check` (its programs on PATH, swell's
    native binaries), as ``swell run`` asks it before the run."""
    found = []
    for part, spec in (("background", exp.background), ("foreground", exp.foreground)):
        try:
            registry.make(part, spec).check()
        except EnvironmentProblem as exc:
            found.append((part, exc))
    return found


def check_experiment(path: str | os.PathLike[str], full: bool = False,
                     host: bool = False) -> CheckSummary:
    """Validate an experiment file as far as a run goes without the host; raise the first
    problem as a one-line :class:`SwellError` naming file and line.

    Then what this host lacks for any configuration (:func:`host_problems`): with
    ``host`` the first is raised (exit 3; ``swell run``), else each is a warning."""
    path = str(path)
    exp = load_experiment(path, full=full)
    plans = expand_runs(exp, path)
    lines = _sweep_lines(path)
    keys = list(exp.sweep)
    base_dir = Path(path).resolve().parent
    seen: set[str] = set()
    warnings: list[str] = []
    lacking: list[tuple[str, EnvironmentProblem]] = []  # (configuration and part, problem)
    for plan in plans:
        if plan.key in seen:
            continue
        seen.add(plan.key)
        try:
            cfg = f"configuration {plan.label!r}: " if keys else ""
            warnings += [f"{cfg}{w}" for w in check_plan(plan, base_dir)]
        except EnvironmentProblem:
            raise
        except SwellError as exc:
            part = getattr(exc, "part", "topology")
            where = f"{path}:{lines[(part,)]}" if (part,) in lines else path
            if any(k.split(".")[0] == part for k in keys):
                # the sweep item of the last key that varies names the configuration
                idx = _item_index(exp.sweep, keys, plan)
                vary = [j for j, k in enumerate(keys) if len(exp.sweep[k]) > 1] or [0]
                j = vary[-1]
                where = sweep_item_where(path, lines, keys[j], idx[j])
            cfg = f"configuration {plan.label!r}: " if keys else ""
            raise SwellError(where, f"{cfg}{exc.one_line()}") from None
        cfg = f"configuration {plan.label!r}: " if keys else ""
        lacking += [(f"{cfg}{part}: ", exc) for part, exc in host_problems(plan.spec)]
    if lacking and host:
        raise lacking[0][1]  # only after every configuration's file checks passed
    for cfg, exc in lacking:
        line = f"{cfg}{exc.one_line()}; 'swell run' on this host stops there (exit 3)"
        if line not in warnings:
            warnings.append(line)
    return CheckSummary(
        configurations=len(seen),
        runs=len(plans),
        repetitions=exp.repetitions,
        traffic_s=sum(r.spec.duration_s + r.spec.warmup_s for r in plans),
        warnings=tuple(warnings),
    )


def _item_index(sweep: dict, keys: list[str], plan: RunPlan) -> tuple[int, ...]:
    """The sweep item indexes of a plan (its point's value labels, in key order)."""
    from swell.experiments.schema import _value_label

    out = []
    for key, label in plan.point:
        values = sweep[key]
        out.append(next((i for i, v in enumerate(values) if _value_label(v) == label), 0))
    return tuple(out)
