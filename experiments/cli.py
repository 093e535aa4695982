"""``swell run``, ``swell report`` and ``swell check`` (experiment files)."""

from __future__ import annotations

import argparse
from typing import Any


def _cmd_run(args: argparse.Namespace) -> int:
    from swell.experiments.report import make_report
    from swell.experiments.runner import run_experiment

    study = run_experiment(args.experiment, args.output, full=args.full, engine=args.engine)
    print(f"study: {study}")
    if not args.no_report:
        print(f"report: {make_report(study)}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from swell.experiments.report import make_report

    print(make_report(args.study, args.output))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from swell.experiments.schema import expand_runs, load_experiment

    for path in args.experiments:
        exp = load_experiment(path, full=args.full)
        runs = expand_runs(exp, path)
        labels = sorted({r.label for r in runs})
        total = sum(r.spec.duration_s + r.spec.warmup_s for r in runs)
        print(f"{path}: ok: {len(labels)} configurations x {exp.repetitions} repetitions = "
              f"{len(runs)} runs, about {total / 60:.1f} min of traffic")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run", help="run an experiment file (resumable) and write its report",
        description="Lay out the topology, run background and foreground, capture, tear "
        "down, repeat; each run's results land in STUDY/runs/. Re-running continues where "
        "an interrupted study stopped.",
    )
    p.add_argument("experiment", help="experiment YAML file")
    p.add_argument("-o", "--output", help="study directory (default: runs/<name>)")
    p.add_argument("--full", action="store_true", help="apply the file's full: block "
                   "(the paper's full durations)")
    p.add_argument("--engine", choices=["auto", "netem", "native"], help="override the engine")
    p.add_argument("--no-report", action="store_true", help="skip writing the report")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", help="plots and an HTML page from a study's results.json",
                       description="Reads only results.json, so any past study can be "
                       "re-plotted.")
    p.add_argument("study", help="study directory or results.json")
    p.add_argument("-o", "--output", help="report directory (default: STUDY/report)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("check", help="validate experiment files without running them")
    p.add_argument("experiments", nargs="+", help="experiment YAML files")
    p.add_argument("--full", action="store_true", help="validate with the full: block applied")
    p.set_defaults(func=_cmd_check)



