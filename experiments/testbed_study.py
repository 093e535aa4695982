"""``swell run EXPERIMENT --testbed HOSTS``: a study on real machines, driven by Ansible.

Every run goes the way a local run goes (:mod:`swell.experiments.runner`), with
the topology replaced by a testbed:

1. render: the run's topology spec (access links drawn from the model with the
   run's seed) mapped onto the machines of the hosts file, into
   ``RUN/testbed/`` (:func:`~swell.experiments.testbed_run.render_run`'s steps);
2. ``prepare`` (first run of the study only: installs, kernel features) and
   ``layout`` (addresses, routes, the router's engine with its captures);
3. the record of the testbed: ``swell testbed host facts`` on every machine
   (kernel, engines, tool versions) into ``RUN/host.json`` and the results;
4. the traffic: the same kinds from the registry, driven by the same
   :class:`~swell.experiments.session.Session`, on a placement whose endpoints
   are the machines (:class:`~swell.topologies.testbed.SshPlace`; signals reach
   the remote processes, which die with their local relay). The run's clock is
   the control machine's: servers, then background, then foreground, all timed
   from the session's start;
5. ``collect`` (stops the engine, fetches its captures and counters into
   ``RUN/testbed/collected``; the bottleneck captures are moved to
   ``RUN/capture``), then ``teardown``, always;
6. :func:`~swell.experiments.collect.collect_run` makes the same results entry
   as a local run, plus a ``testbed`` entry, so ``swell report`` is unchanged.

Files: the machines share nothing with the control machine but SSH. The kinds
write their inputs (schedules, Apache's configuration and objects) on the
control machine; every command a machine runs is rewritten to name its own
copies under its work directory (``<workdir>/<prefix>/<machine>/files``),
pushed just before the command starts, and what the machines wrote there is
pulled back into the run directory once the traffic stopped, before
``collect`` and ``teardown`` (:mod:`swell.topologies.testbed_files`). What
each machine ran is kept in ``RUN/testbed/commands.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.experiments.collect import collect_run
from swell.experiments.results import RESULTS_VERSION, assemble_results
from swell.experiments.runner import host_metadata, is_study, prepare_kinds, run_digest
from swell.experiments.schema import RunPlan, expand_runs, load_experiment
from swell.experiments.session import Session
from swell.experiments.testbed_run import playbook, run_topology
from swell.fsutil import check_output, dir_lock, write_json, write_text
from swell.generators.kind import PrepareContext, RunContext
from swell.native import native_dir
from swell.placement import Endpoint, Placement
from swell.progress import Progress
from swell.topologies.testbed import (
    HostsFile,
    SshPlace,
    TestbedPlan,
    load_hosts,
    plan_testbed,
    ssh_args,
    write_inventory,
)
from swell.topologies.testbed_files import MachineFiles, machine_roots


def hosts_of(testbed: str | Path) -> tuple[HostsFile, Path]:
    """The hosts file behind ``--testbed``: a hosts file, or a rendered directory."""
    p = Path(testbed)
    if p.is_dir():
        try:
            data = json.loads((p / "testbed.json").read_text())["hosts"]
        except (OSError, ValueError, KeyError):
            raise SwellError(p, "not a rendered testbed (no testbed.json); give the "
                             "hosts file or a 'swell testbed render' directory") from None
        path = p / "hosts.yml"
        write_text(path, json.dumps(data))
        return load_hosts(path), path
    return load_hosts(p), p


def render_plan(plan: RunPlan, hosts: HostsFile, base_dir: Path, models: Path,
                out: Path, prefix: str) -> tuple[TestbedPlan, dict[str, Any]]:
    """The testbed of one run (its inventory in ``out``) and its topology spec."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import resolve_host_links

    topo = run_topology(plan, hosts, base_dir, models)
    spec = spec_from_dict(topo, f"{plan.key} topology")
    links = resolve_host_links(spec, plan_addresses(spec))
    tb = plan_testbed(spec, {k: list(v) for k, v in links.items()}, hosts, prefix,
                      congestion_control=plan.spec.congestion_control)
    write_inventory(tb, hosts, out)
    return tb, topo


def machine_files(tb: TestbedPlan, hosts: HostsFile, facts: dict[str, Any], rdir: Path,
                  models: Path) -> dict[str, MachineFiles]:
    """Each edge machine's copies of the run's files (:mod:`swell.topologies.testbed_files`)."""
    args = ssh_args(hosts)
    out = {}
    for m in hosts.machines:
        root = f"{hosts.state_of(m.name, tb.prefix)}/files"
        roots = machine_roots(rdir, models, Path(tempfile.gettempdir()), native_dir(), root,
                              facts.get(m.name, {}).get("native_dir"))
        out[m.name] = MachineFiles(m.name, m.address, args, root, roots)
    return out


def placement_for(tb: TestbedPlan, hosts: HostsFile,
                  files: dict[str, MachineFiles] | None = None) -> Placement:
    """Every emulated host of the run, placed on its machine (commands over ssh; with
    ``files``, on the machine's own copies of the run's files)."""
    from swell.topologies.placement import access_link, path_facts
    from swell.topologies.spec import LinkDir, spec_from_dict

    args = ssh_args(hosts)
    files = files or {}
    address = {m.name: m.address for m in hosts.machines}
    roles: dict[str, list[Endpoint]] = {"bg_clients": [], "bg_servers": [],
                                        "fg_clients": [], "fg_servers": []}
    for h in tb.hosts:
        role = f"{h.role}_{'clients' if h.side == 'left' else 'servers'}"
        link = None if h.link is None else access_link(LinkDir.model_validate(h.link))
        roles[role].append(Endpoint(ip=h.ip, place=SshPlace(address[h.machine], args,
                                                            h.machine, files.get(h.machine)),
                                    group=h.machine, link=link))
    spec = spec_from_dict(tb.spec, "testbed spec")
    return Placement(**{k: tuple(v) for k, v in roles.items()}, path=path_facts(spec))


def machine_facts(hosts: HostsFile) -> dict[str, Any]:
    """``swell testbed host facts`` of every machine (kernel, engines, tool versions)."""
    from concurrent.futures import ThreadPoolExecutor

    args = ssh_args(hosts)
    machines = [(hosts.router.name, hosts.router.address, "router"),
                *((m.name, m.address, m.role) for m in hosts.machines)]
    argv = [*hosts.swell.split(), "testbed", "host", "facts"]
    with ThreadPoolExecutor(max_workers=8) as pool:  # all machines at once
        answers = list(pool.map(lambda m: SshPlace(m[1], args, m[0]).run(argv, timeout=60),
                                machines))
    out: dict[str, Any] = {}
    for (name, addr, role), res in zip(machines, answers, strict=True):
        if res.returncode != 0:
            raise SwellError(name, f"facts: {res.stderr.strip()[-300:] or 'failed'}")
        out[name] = {"role": role, "address": addr, **json.loads(res.stdout)}
    return out


def pull_files(files: dict[str, MachineFiles], rdir: Path, tdir: Path) -> dict[str, Any]:
    """Every machine's results back into the run directory (before teardown removes
    them); the commands each machine ran into ``RUN/testbed/commands.jsonl``."""
    got: dict[Path, str] = {}
    summary = {}
    for name, mf in files.items():
        back = mf.pull(rdir.resolve(), got)
        summary[name] = {"pushed_files": len(mf.pushed), "pushed_bytes": mf.bytes_pushed,
                         "collected_files": len(back), "root": mf.root}
    lines = [json.dumps(c) for mf in files.values() for c in mf.commands]
    write_text(tdir / "commands.jsonl", "".join(f"{ln}\n" for ln in lines))
    return summary


def _router_engine(collected: Path) -> str:
    """The router's shaping engine as it reported it (netem or native)."""
    try:
        return str(json.loads((collected / "engine.json").read_text())["engine"])
    except (OSError, ValueError, KeyError):
        raise SwellError(collected, "the router did not say which engine shaped the run "
                         "(no engine.json collected)") from None


def _engine_stats(collected: Path) -> dict[str, Any] | None:
    path = collected / "link-stats.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return json.loads(lines[-1]) if lines else None


def run_one(plan: RunPlan, study: Path, rdir: Path, hosts: HostsFile, base_dir: Path,
            prog: Progress, prepare: bool) -> dict[str, Any]:
    from swell.experiments.testbed_run import new_testbed_prefix
    from swell.topologies.placement import path_facts
    from swell.topologies.spec import spec_from_dict

    rdir = rdir.resolve()
    exp = plan.spec
    bg, fg = prepare_kinds(exp, PrepareContext(base_dir, study / "models", plan.seed))
    tdir = rdir / "testbed"
    tb, topo_dict = render_plan(plan, hosts, base_dir, study / "models", tdir,
                                new_testbed_prefix())
    spec = spec_from_dict(topo_dict, f"{plan.key} topology")
    warnings = bg.check_path(path_facts(spec)) + fg.check_path(path_facts(spec))
    write_json(rdir / "topology.json", json.loads(spec.model_dump_json()))
    total = exp.warmup_s + exp.duration_s
    if prepare:
        playbook("prepare", tdir)
    collected = tdir / "collected"
    try:
        playbook("layout", tdir)
        facts = machine_facts(hosts)
        record: dict[str, Any] = {"prefix": tb.prefix, "machines": facts}
        write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                        "congestion_control": exp.congestion_control,
                                        "testbed": record})
        files = machine_files(tb, hosts, facts, rdir, study / "models")
        placement = placement_for(tb, hosts, files)
        session = Session(
            bg.build(RunContext(rdir / "background", placement, plan.seed, total, exp.warmup_s)),
            fg.build(RunContext(rdir / "foreground", placement, plan.seed, exp.duration_s, 0.0)),
        )
        try:
            session.run(exp.warmup_s, total, prog)
        except BaseException:
            with contextlib.suppress(Exception):  # what there is, for the post-mortem
                pull_files(files, rdir, tdir)
            raise
        record["files"] = pull_files(files, rdir, tdir)
        playbook("collect", tdir, {"collect_dest": str(collected)})
    finally:
        playbook("teardown", tdir)
    router = collected / hosts.router.name
    (rdir / "capture").mkdir(exist_ok=True)
    for pcap in sorted(router.glob("bottleneck-*.pcap")):
        shutil.move(str(pcap), rdir / "capture" / pcap.name)
    engine = _router_engine(router)
    record["engine"] = engine
    write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                    "congestion_control": exp.congestion_control,
                                    "testbed": record})
    report = {"engine_stats": _engine_stats(router) if engine == "native" else None,
              "problems": []}
    bg_result, fg_result = session.results(bg, fg, exp.warmup_s)
    result = collect_run(plan, rdir, engine, session.timing, bg_result, fg_result, report,
                         topo_dict, bg.model_dir(), prefix=tb.prefix, warnings=warnings,
                         asked_mbps=bg.asked_mbps())
    result["testbed"] = record
    for problem in result.get("problems", []):
        prog.note(f"problem: {problem}")
    return result


def run_testbed_study(path: str | Path, testbed: str | Path,
                      out: str | Path | None = None, full: bool = False) -> Path:
    """Run (or continue) a study on the machines of ``testbed``; its directory."""
    from swell.experiments.check import check_experiment

    path = Path(path)
    check_experiment(path, full=full)
    hosts, _ = hosts_of(testbed)
    exp = load_experiment(path, full=full)
    plans = expand_runs(exp, str(path))
    if any(p.spec.tcp_ssthresh_cache for p in plans):
        raise SwellError(path, "tcp_ssthresh_cache: applies to local runs; a testbed's "
                         "machines keep their own net.ipv4.tcp_no_ssthresh_metrics_save")
    # absolute: what the machines and tools are given never depends on the working directory
    study = (Path(out) if out else Path("runs") / exp.name).absolute()
    check_output(study, is_previous=is_study, what="swell study directory")
    with dir_lock(study, "study directory"):
        write_text(study / "experiment.yaml", path.read_text())
        write_json(study / "experiment.json", {"results_version": RESULTS_VERSION,
                                               "full": full, "testbed": True,
                                               "spec": json.loads(exp.model_dump_json())})
        write_json(study / "host.json", host_metadata())
        wanted: dict[tuple[str, int], str] = {}
        for i, plan in enumerate(plans, 1):
            rdir = study / "runs" / plan.key / f"rep{plan.repetition}"
            digest = run_digest(plan, full, "testbed")
            wanted[(plan.key, plan.repetition)] = digest
            if (rdir / "run.json").is_file():
                try:
                    if json.loads((rdir / "run.json").read_text()).get("spec_digest") == digest:
                        continue
                except (OSError, ValueError):
                    pass
                print(f"swell: rerunning {plan.label} rep {plan.repetition}", file=sys.stderr)
            if rdir.exists():
                shutil.rmtree(rdir)
            rdir.mkdir(parents=True)
            label = f"[{i}/{len(plans)}] {plan.label} rep {plan.repetition} (testbed)"
            with Progress(label, total=plan.spec.warmup_s + plan.spec.duration_s,
                          unit="s") as prog:
                result = run_one(plan, study, rdir, hosts, path.resolve().parent, prog,
                                 prepare=(i == 1))
            write_json(rdir / "run.json", {**result, "spec_digest": digest})
        assemble_results(study, wanted)
    return study
