"""``swell testbed render|host``: an experiment file on real machines.

* ``swell testbed render EXPERIMENT.yaml --hosts HOSTS.yml -o DIR``: the
  Ansible inventory, host variables and ``ansible.cfg`` of one run
  (:mod:`swell.experiments.testbed_run`);
* ``swell testbed hosts-from-manifest MANIFEST.xml --router NODE``: a hosts
  file from an Emulab/CloudLab allocation (:mod:`swell.topologies.testbed_manifest`);
* ``swell testbed native-source OUT.tar.gz``: the native programs' source with its
  crates vendored, for the machines ``prepare`` builds them on
  (:mod:`swell.topologies.testbed_source`);
* ``swell testbed host plan|engine|up|run|captures|stop|down|facts``: what the
  playbooks run on each machine (:mod:`swell.topologies.testbed_host`; ``plan``,
  the layout commands still to run there: :mod:`swell.topologies.testbed_steps`;
  ``run``, one machine's part of the traffic: :mod:`swell.topologies.testbed_exec`).

Runnable on its own (``python -m swell.experiments.testbed_cli``) before it is
listed in :data:`swell.cli.COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from swell.errors import SwellError


def _is_render(d: Path) -> bool:
    """A previous ``swell testbed render`` output (its testbed.json)."""
    try:
        return json.loads((d / "testbed.json").read_text()).get("format") == "swell-testbed"
    except (OSError, ValueError, AttributeError):
        return False


def _cmd_render(args: argparse.Namespace) -> int:
    from swell.experiments.testbed_run import render_run
    from swell.fsutil import check_output

    check_output(args.output, is_previous=_is_render, what="swell testbed render output",
                 force=args.force)
    plan = render_run(args.experiment, args.hosts, args.output, run=args.run, full=args.full,
                      prefix=args.prefix)
    n = len(plan.hosts)
    print(f"testbed {plan.prefix}: {n} emulated hosts on {len(plan.edges)} machines and a "
          f"router; inventory: {Path(args.output) / 'inventory.yml'}")
    return 0


def _cmd_manifest(args: argparse.Namespace) -> int:
    import yaml

    from swell.fsutil import write_text
    from swell.topologies.testbed import HostsFile
    from swell.topologies.testbed_manifest import manifest_dumbbell

    roles = {}
    for given in args.role or []:
        node, sep, role = given.partition("=")
        if not sep:
            raise SwellError("--role", f"give NODE=ROLE, not {given!r}")
        roles[node] = role
    data, notes = manifest_dumbbell(args.manifest, args.router, roles, args.user)
    HostsFile.model_validate(data)  # what swell will read back
    for note in notes:
        print(f"swell: {args.manifest}: {note}", file=sys.stderr)
    text = yaml.safe_dump(data, sort_keys=False)
    if args.output:
        write_text(args.output, text)
        for m in data["machines"]:
            port = f" port {m['port']}" if "port" in m else ""
            print(f"{m['name']}: {m['role']} at {m['address']}{port} (its {m['iface']}, the "
                  f"router's {m['router_iface']})")
    else:
        print(text, end="")
    return 0


def _cmd_native_source(args: argparse.Namespace) -> int:
    from swell.topologies.testbed import control_source
    from swell.topologies.testbed_source import write_source_bundle

    root = control_source()
    if root is None:
        raise SwellError("native-source", "swell does not run from its source checkout here: "
                                          "no native source to pack")
    out = write_source_bundle(Path(root), Path(args.output))
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB")
    return 0


def _cmd_host(args: argparse.Namespace) -> int:
    from swell.topologies import testbed_host

    if args.action == "facts":
        print(json.dumps(testbed_host.facts()))
        return 0
    if args.action in ("plan", "engine", "up"):
        if not args.target:
            raise SwellError(f"testbed host {args.action}", "give the host.json file")
        try:
            v = json.loads(Path(args.target).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise SwellError(args.target, f"cannot read: {exc}") from None
        if args.action == "plan":
            print(json.dumps(testbed_host.host_plan(v)))
        elif args.action == "engine":
            print(testbed_host.host_engine(v))
        else:
            print(f"{v['kind']} up ({v['prefix']}): {testbed_host.host_up(v)}")
        return 0
    if args.action == "run":
        from swell.topologies.testbed_exec import run_jobs

        if not args.target:
            raise SwellError("testbed host run", "give the state directory")
        return run_jobs(Path(args.target))
    if not args.target or not args.prefix:
        raise SwellError(f"testbed host {args.action}", "give --prefix and the state directory")
    state = Path(args.target)
    if args.action == "captures":
        print(json.dumps(testbed_host.capture_status(args.prefix, state)))
        return 0
    if args.action == "stop":
        stopped = testbed_host.stop_engine(args.prefix, state)
        print("engine stopped" if stopped else "no engine running")
        return 0
    had = state.exists()
    errors = testbed_host.host_down(args.prefix, state)
    for e in errors:
        print(f"could not undo: {e}", file=sys.stderr)
    print("down" if had else "nothing to undo")
    return 1 if errors else 0


def register(sub: Any) -> None:
    p = sub.add_parser("testbed", help="run experiments on real machines (Ansible)",
                       description="Render an Ansible inventory from an experiment file, "
                       "and the per-machine steps the playbooks in ansible/ run.")
    tsub = p.add_subparsers(dest="testbed_cmd", required=True)
    r = tsub.add_parser("render", help="inventory and host variables for one run")
    r.add_argument("experiment", help="experiment YAML file")
    r.add_argument("--hosts", required=True, help="hosts file (machines, roles, ssh)")
    r.add_argument("-o", "--output", required=True, help="directory to write")
    r.add_argument("--run", help="run key or label (default: the first run)")
    r.add_argument("--full", action="store_true", help="apply the file's full: block")
    r.add_argument("--prefix", help="run prefix (default: a fresh swl<hex>)")
    r.add_argument("--force", action="store_true",
                   help="write into -o DIR even when it is not a previous render")
    r.set_defaults(func=_cmd_render)
    mf = tsub.add_parser("hosts-from-manifest", help="a hosts file from an Emulab/CloudLab "
                         "manifest", description="Write the hosts file of a dumbbell allocated "
                         "on Emulab or CloudLab from its manifest RSpec (geni-get manifest): "
                         "the router node, every node linked to it as a machine, interfaces "
                         "by MAC address (see docs/testbed.md).")
    mf.add_argument("manifest", help="the manifest RSpec (XML)")
    mf.add_argument("--router", required=True, help="the router node's client_id")
    mf.add_argument("--role", action="append", metavar="NODE=ROLE",
                    help="a node's role (bg_clients, bg_servers, fg_clients, fg_servers); "
                    "others take the roles still missing, in manifest order")
    mf.add_argument("--user", help="ssh user, with sudo (default: the manifest's login "
                    "user; needed when it lists several)")
    mf.add_argument("-o", "--output", help="file to write (default: standard output)")
    mf.set_defaults(func=_cmd_manifest)
    ns = tsub.add_parser("native-source", help="the native programs' source with vendored "
                         "crates (run by prepare for the machines that build them)")
    ns.add_argument("output", help="the .tar.gz to write")
    ns.set_defaults(func=_cmd_native_source)
    h = tsub.add_parser("host", help="one machine's step (run by the playbooks)")
    h.add_argument("action", choices=["plan", "engine", "up", "run", "captures", "stop", "down",
                                      "facts"])
    h.add_argument("target", nargs="?", help="plan, engine, up: host.json; run, captures, "
                   "stop, down: the state directory")
    h.add_argument("--prefix", help="captures, stop, down: the run prefix")
    h.set_defaults(func=_cmd_host)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="swell")
    sub = parser.add_subparsers(dest="cmd", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except SwellError as exc:
        print(f"swell: {exc.one_line()}", file=sys.stderr)
        return 3 if type(exc).__name__ == "EnvironmentProblem" else 2


if __name__ == "__main__":
    sys.exit(main())
