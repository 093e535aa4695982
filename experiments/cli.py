"""``swell run``, ``swell report`` and ``swell check`` (experiment files).

``swell check`` goes as far as a run goes without the host
(:mod:`swell.experiments.check`); ``swell run --cleanup`` removes a killed
run's leftovers first; ``swell report -o DIR --force`` replaces a DIR that is
not a previous report.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _cmd_run(args: argparse.Namespace) -> int:
    # the report's module (Matplotlib, SciPy's stats) only when a report is made: under
    # the VM layer's TCG its import took about half of a short `--no-report` study
    from swell.experiments.runner import run_experiment

    if args.testbed:
        from swell.errors import SwellError
        from swell.experiments.testbed_study import run_testbed_study

        for flag, given, why in (
                ("--engine", args.engine, "the router's engine is the hosts file's "
                 "router_engine"),
                ("--cleanup", args.cleanup, "a testbed run removes only its own prefix; "
                 "ansible/teardown.yml clears a killed run on the machines")):
            if given:
                raise SwellError(flag, f"applies to local runs, not with --testbed: {why}")

        study = run_testbed_study(args.experiment, args.testbed, args.output, full=args.full)
    else:
        study = run_experiment(args.experiment, args.output, full=args.full,
                               engine=args.engine, cleanup=args.cleanup)
    print(f"study: {study}")
    if not args.no_report:
        from swell.experiments.report import make_report

        print(f"report: {make_report(study)}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from swell.experiments.report import make_report

    print(make_report(args.study, args.output, force=args.force))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from swell.experiments.check import check_experiment

    for path in args.experiments:
        s = check_experiment(path, full=args.full)
        for w in s.warnings:
            print(f"swell: {path}: warning: {w}", file=sys.stderr)
        print(f"{path}: ok: {s.configurations} configurations x {s.repetitions} repetitions "
              f"= {s.runs} runs, about {s.traffic_s / 60:.1f} min of traffic")
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
    p.add_argument("--cleanup", action="store_true", help="remove a killed run's leftovers "
                   "(as 'swell cleanup' does) instead of refusing to start beside them")
    p.add_argument("--testbed", metavar="HOSTS", help="run on the machines of a hosts file "
                   "(or a 'swell testbed render' directory) with Ansible; see docs/testbed.md")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("report", help="plots and an HTML page from a study's results.json",
                       description="Reads only results.json, so any past study can be "
                       "re-plotted.")
    p.add_argument("study", help="study directory or results.json")
    p.add_argument("-o", "--output", help="report directory (default: STUDY/report)")
    p.add_argument("--force", action="store_true",
                   help="replace OUTPUT even when it is not a previous report")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("check", help="validate experiment files without running them")
    p.add_argument("experiments", nargs="+", help="experiment YAML files")
    p.add_argument("--full", action="store_true", help="validate with the full: block applied")
    p.set_defaults(func=_cmd_check)



