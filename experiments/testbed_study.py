"""``swell run EXPERIMENT --testbed HOSTS``: a study on real machines, driven by Ansible.

Every run goes the way a local run goes (:mod:`swell.experiments.runner`), with
the topology replaced by a testbed and every remote step a playbook:

1. render: the run's topology spec (access links drawn from the model with the
   run's seed) mapped onto the machines of the hosts file, into
   ``RUN/testbed/`` (:func:`~swell.experiments.testbed_run.render_run`'s steps);
2. ``prepare`` (first run of the study only: packages, swell itself where a
   machine's differs from the control machine's, kernel features) and
   ``layout`` (addresses, routes, the router's engine with its captures; every
   machine's facts: kernel, engines, tool versions, into ``RUN/host.json`` and
   the results);
3. the traffic, recorded: the same kinds from the registry build the same
   generators on a placement whose places are the machines, and
   :mod:`swell.experiments.testbed_jobs` turns what they would start into each
   machine's jobs (``RUN/testbed/jobs/<machine>.json``) and the files those
   need (``RUN/testbed/push/<machine>.tar``, :mod:`swell.topologies.testbed_files`);
4. ``run``: Ansible launches every machine's part (``swell testbed host run``):
   the router's captures checked, servers' machines first, then the
   background's clients, then the foreground's, each group ready before the
   next is launched; one start signal (a start time written on every machine)
   times the background's clients, the foreground's after the warm-up and the
   end; Ansible waits for every part to end;
5. ``collect`` (stops the router's engine, fetches its captures and counters
   and every machine's job output and the files its jobs wrote into
   ``RUN/testbed/collected``; the bottleneck captures are moved to
   ``RUN/capture``, the files into the run directory), then ``teardown``,
   always (also after a failed or interrupted run);
6. the generators get their jobs' exit status and output, stop and collect as
   after a local run, and :func:`~swell.experiments.collect.collect_run` makes
   the same results entry as a local run, plus a ``testbed`` entry, so
   ``swell report`` and ``swell fidelity`` are unchanged.

The run's clock is the start signal: the measurement window is
``[T0 + warmup, T0 + warmup + duration]`` on the machines' clocks (in sync on
a real testbed: docs/testbed.md); a foreground that ends by itself does not
end the run early here. What each machine ran is kept in
``RUN/testbed/commands.jsonl`` and its jobs' output in ``RUN/testbed/jobs-out``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import struct
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from swell.errors import SwellError
from swell.experiments.collect import collect_run
from swell.experiments.results import RESULTS_VERSION, assemble_results
from swell.experiments.runner import (
    host_metadata,
    is_study,
    prepare_kinds,
    run_digest,
    run_inputs,
)
from swell.experiments.schema import RunPlan, expand_runs, load_experiment
from swell.experiments.session import Session, stop_generators
from swell.experiments.testbed_jobs import (
    JobPlace,
    Recorder,
    abandon,
    check_supported,
    record_traffic,
    replay,
    write_jobs,
)
from swell.experiments.testbed_run import playbook, run_topology, task_output
from swell.fsutil import check_output, dir_lock, write_json, write_text
from swell.generators.kind import PrepareContext, RunContext
from swell.native import native_dir
from swell.placement import Endpoint, Placement
from swell.progress import Progress
from swell.topologies.testbed import (
    HostsFile,
    TestbedPlan,
    load_hosts,
    plan_testbed,
    write_inventory,
)
from swell.topologies.testbed_files import MachineFiles, machine_roots

FACTS_TASK = "Record this machine's facts (swell testbed host facts)"
START_LEAD_S = 4.0  # the least lead of the start time (run.yml: 2 x the measured delivery + 1 s)
LATE_S = 1.0  # a machine that started its clients later than this is a problem
# the router's bottleneck captures are kept over the run's span, as a local run's: from
# just before the start signal (the last readiness probes) to just after the end
CAPTURE_BEFORE_S, CAPTURE_AFTER_S = 0.5, 0.5
_PCAP_MAGIC = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}


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
    out = {}
    for m in hosts.machines:
        root = f"{hosts.state_of(m.name, tb.prefix)}/files"
        roots = machine_roots(rdir, models, Path(tempfile.gettempdir()), native_dir(), root,
                              facts.get(m.name, {}).get("native_dir"))
        out[m.name] = MachineFiles(m.name, root, roots)
    return out


def placement_for(tb: TestbedPlan, recorder: Recorder) -> Placement:
    """Every emulated host of the run, placed on its machine (what is started there
    becomes one of the machine's jobs)."""
    from swell.topologies.placement import access_link, path_facts
    from swell.topologies.spec import LinkDir, spec_from_dict

    roles: dict[str, list[Endpoint]] = {"bg_clients": [], "bg_servers": [],
                                        "fg_clients": [], "fg_servers": []}
    for h in tb.hosts:
        role = f"{h.role}_{'clients' if h.side == 'left' else 'servers'}"
        link = None if h.link is None else access_link(LinkDir.model_validate(h.link))
        roles[role].append(Endpoint(ip=h.ip, place=JobPlace(h.machine, recorder),
                                    group=h.machine, link=link))
    spec = spec_from_dict(tb.spec, "testbed spec")
    return Placement(**{k: tuple(v) for k, v in roles.items()}, path=path_facts(spec))


def layout_facts(report: dict[str, Any], hosts: HostsFile) -> dict[str, Any]:
    """Every machine's ``swell testbed host facts``, from the layout playbook's report."""
    said = task_output(report, FACTS_TASK)
    machines = [(hosts.router.name, hosts.router.address, "router"),
                *((m.name, m.address, m.role) for m in hosts.machines)]
    out: dict[str, Any] = {}
    for name, addr, role in machines:
        try:
            out[name] = {"role": role, "address": addr, **json.loads(said[name])}
        except (KeyError, ValueError):
            raise SwellError(name, "layout reported no facts for this machine") from None
    return out


def unpack_collected(files: dict[str, MachineFiles], collected: Path, rdir: Path,
                     tdir: Path) -> tuple[dict[str, Path], dict[str, Any]]:
    """Every machine's collected tar: its jobs' output into ``RUN/testbed/jobs-out/<m>``,
    the files its jobs wrote into the run directory. Returns the jobs folders and the
    per-machine file counts."""
    outputs: dict[str, Path] = {}
    got: dict[Path, str] = {}
    summary = {}
    for name, mf in files.items():
        tar = collected / name / "collect.tar"
        folder = tdir / "jobs-out" / name
        folder.mkdir(parents=True, exist_ok=True)
        if tar.exists():
            with tarfile.open(tar, mode="r:") as tf:
                for member in tf:
                    parts = PurePosixPath(member.name).parts
                    if member.isfile() and len(parts) == 2 and parts[0] == "jobs":
                        src = tf.extractfile(member)
                        (folder / parts[1]).write_bytes(src.read() if src else b"")
            outputs[name] = folder
        back = mf.pull(tar, rdir, got)
        summary[name] = {"pushed_files": len(mf.pushed), "pushed_bytes": mf.bytes_pushed,
                         "collected_files": len(back), "root": mf.root}
    lines = [json.dumps(c) for mf in files.values() for c in mf.commands]
    write_text(tdir / "commands.jsonl", "".join(f"{ln}\n" for ln in lines))
    return outputs, summary


def cut_capture(src: Path, dst: Path, start: float, end: float) -> int:
    """Copy the packets of pcap ``src`` stamped within ``[start, end]`` (epoch seconds)
    to ``dst``; returns how many. The router's engine captures from the layout on; the
    run's capture is its span (see :data:`CAPTURE_BEFORE_S`)."""
    kept = 0
    with src.open("rb") as fi, dst.open("wb") as fo:
        head = fi.read(24)
        if head[:4] not in _PCAP_MAGIC:
            raise SwellError(src, "not a pcap capture (unknown magic)")
        order, unit = _PCAP_MAGIC[head[:4]]
        fo.write(head)
        rec = struct.Struct(f"{order}IIII")
        while len(h := fi.read(16)) == 16:
            sec, frac, incl, _ = rec.unpack(h)
            data = fi.read(incl)
            if start <= sec + frac * unit <= end:
                fo.write(h + data)
                kept += 1
    return kept


def start_and_lateness(statuses: dict[str, Any]) -> tuple[float, dict[str, float],
                                                          dict[str, float | None]]:
    """The run's start time (the same on every machine), each machine's latest client
    start after its due time, and how long before the start time its start signal came
    (negative: after it)."""
    starts = {s.get("start") for s in statuses.values()} - {None}
    if len(starts) != 1:
        raise SwellError("testbed run", f"the machines report start times {sorted(starts)}")
    t0 = float(starts.pop())
    late = {m: max([j.get("late_s") or 0.0 for j in s.get("jobs", {}).values()] or [0.0])
            for m, s in statuses.items()}
    early = {m: None if s.get("signal_at") is None else round(t0 - float(s["signal_at"]), 3)
             for m, s in statuses.items()}
    return t0, late, early


def lateness_problems(late: dict[str, float], early: dict[str, float | None],
                      signal: dict[str, Any]) -> list[str]:
    """A machine that started its clients over :data:`LATE_S` late, and why."""
    out = []
    for m, s in late.items():
        if s <= LATE_S:
            continue
        e = early.get(m)
        why = "" if e is None else (
            f" (its start signal came {-e:.1f} s after the start time: lead "
            f"{signal.get('lead_s', '?')} s, rehearsal {signal.get('delivery_s', '?')} s)"
            if e < 0 else f" (its start signal came {e:.1f} s before the start time: "
            "the machine was slow to start them)")
        out.append(f"testbed: {m} started its clients {s:.1f} s late{why}")
    return out


def start_signal(report: dict[str, Any]) -> dict[str, Any]:
    """The start signal's measured delivery and the lead chosen from it (the run
    playbook's "Say the lead" task: ``delivery X s, lead Y s``)."""
    said = task_output(report, "Say the lead (start signal)", "msg").get("localhost", "")
    got = re.match(r"delivery ([\d.]+) s, lead ([\d.]+) s", said)
    return {"delivery_s": float(got.group(1)), "lead_s": float(got.group(2))} if got else {}


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
    from swell.topologies.testbed_host import source_digest

    rdir = rdir.resolve()
    exp = plan.spec
    check_supported(exp.background.kind, exp.foreground.kind)
    bg, fg = prepare_kinds(exp, PrepareContext(base_dir, study / "models", plan.seed))
    tdir = rdir / "testbed"
    tb, topo_dict = render_plan(plan, hosts, base_dir, study / "models", tdir,
                                new_testbed_prefix())
    spec = spec_from_dict(topo_dict, f"{plan.key} topology")
    warnings = bg.check_path(path_facts(spec)) + fg.check_path(path_facts(spec))
    write_json(rdir / "topology.json", json.loads(spec.model_dump_json()))
    total = exp.warmup_s + exp.duration_s
    if prepare:
        playbook("prepare", tdir, {"swell_digest": source_digest()})
    collected = tdir / "collected"
    session: Session | None = None
    recorder: Recorder | None = None
    try:
        facts = layout_facts(playbook("layout", tdir), hosts)
        record: dict[str, Any] = {"prefix": tb.prefix, "machines": facts}
        write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                        "congestion_control": exp.congestion_control,
                                        "testbed": record})
        files = machine_files(tb, hosts, facts, rdir, study / "models")
        recorder = Recorder(files, tdir / "spool")
        recorder.spool.mkdir(parents=True, exist_ok=True)
        placement = placement_for(tb, recorder)
        session = Session(
            bg.build(RunContext(rdir / "background", placement, plan.seed, total, exp.warmup_s)),
            fg.build(RunContext(rdir / "foreground", placement, plan.seed, exp.duration_s, 0.0)),
        )
        record_traffic(session.bg, session.fg, recorder)
        write_jobs(recorder, [m.name for m in hosts.machines], tdir, exp.warmup_s, total)
        failure: SwellError | None = None
        try:
            ran = playbook("run", tdir, {"swell_run_dir": str(tdir), "swell_run_total_s": total,
                                         "swell_run_lead_s": START_LEAD_S},
                           timeout=total + 900, tick=lambda t: prog.update(
                               done=min(t, total), status="ansible: run playbook"))
            record["start_signal"] = start_signal(ran)
        except SwellError as exc:
            failure = exc
        try:  # also after a failed run: what the machines said, for the post-mortem
            playbook("collect", tdir, {"collect_dest": str(collected)})
            outputs, record["files"] = unpack_collected(files, collected, rdir, tdir)
        except SwellError:
            if failure is None:
                raise
        if failure is not None:
            raise failure
        statuses = replay(recorder, outputs)
        t0, late, early = start_and_lateness(statuses)
        record["start"], record["late_s"] = t0, late
        record.setdefault("start_signal", {})["before_start_s"] = early
        session.timing = {"background_start": t0, "foreground_start": t0 + exp.warmup_s,
                          "end": t0 + total}
        stop_generators(session.bg, session.fg)
    except BaseException:
        if recorder is not None:
            abandon(recorder)
        if session is not None:
            with contextlib.suppress(Exception):
                stop_generators(session.bg, session.fg)
        raise
    finally:
        playbook("teardown", tdir)
    prog.update(done=total)
    router = collected / hosts.router.name
    (rdir / "capture").mkdir(exist_ok=True)
    span = (t0 - CAPTURE_BEFORE_S, t0 + total + CAPTURE_AFTER_S)
    record["capture_span"] = [round(t, 3) for t in span]
    for pcap in sorted(router.glob("bottleneck-*.pcap")):
        cut_capture(pcap, rdir / "capture" / pcap.name, *span)
        pcap.unlink()
    engine = _router_engine(router)
    record["engine"] = engine
    write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                    "congestion_control": exp.congestion_control,
                                    "testbed": record})
    report = {"engine_stats": _engine_stats(router) if engine == "native" else None,
              "problems": lateness_problems(late, early, record["start_signal"])}
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
    for p in plans:  # every run's kinds, before anything is laid out
        check_supported(p.spec.background.kind, p.spec.foreground.kind)
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
            # as a local run's: the spec and what it reads (traces, models, topology file)
            inputs = run_inputs(plan, path.resolve().parent)
            digest = run_digest(plan, full, "testbed", path.resolve().parent)
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
            write_json(rdir / "run.json", {**result, "spec_digest": digest, "inputs": inputs})
        assemble_results(study, wanted)
    return study
