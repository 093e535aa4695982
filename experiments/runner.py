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
import time
from pathlib import Path
from typing import Any

from swell import __version__
from swell.errors import SwellError
from swell.experiments import backgrounds as bgs
from swell.experiments.collect import collect_run
from swell.experiments.results import RESULTS_VERSION, assemble_results
from swell.experiments.schema import Experiment, RunPlan, expand_runs, load_experiment
from swell.fsutil import write_json
from swell.generators.base import host_place, live_status
from swell.generators.bulk import Bulk
from swell.generators.web import ApacheServer, Httperf
from swell.progress import Progress

REPO = Path(__file__).resolve().parent.parent
FG_PORT = 80


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


def _run_one(plan: RunPlan, study: Path, rdir: Path, engine: str, prog: Progress,
             base_dir: Path) -> dict:
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import Topology

    exp = plan.spec
    bg = exp.background
    models = study / "models"
    base = bgs.base_model(bg, models, base_dir)
    model = bgs.apply_variant(base, bg.variant, models) if base is not None else None
    topo_dict = bgs.topology_for(
        exp.topology if isinstance(exp.topology, dict) else {}, bg, model
    )
    topo_dict.setdefault("seed", plan.seed)
    bgs.check_rate(bg, topo_dict, model)
    spec = spec_from_dict(topo_dict, f"{plan.key} topology")
    write_json(rdir / "topology.json", json.loads(spec.model_dump_json()))
    write_json(rdir / "host.json", {**host_metadata(), "seed": plan.seed,
                                    "congestion_control": exp.congestion_control})
    total = exp.warmup_s + exp.duration_s
    fg = exp.foreground
    timing: dict[str, float] = {}
    with Topology(spec, engine=engine if engine != "auto" else None,
                  capture_dir=rdir / "capture") as topo:
        _set_congestion_control(topo, exp.congestion_control)
        gen = bgs.make_background(bg, topo, model, rdir / "background", total, plan.seed,
                                  base_dir, exp.warmup_s)
        apache = httperf = bulk = None
        bulk_result = None
        fg_client_pcap = rdir / "capture" / "fg-client.pcap"
        tcpdump = None
        try:
            if gen is not None:
                gen.check()
                gen.start_server()
                gen.wait_ready(15)
                gen.start_client()
            t0 = time.monotonic()
            timing["background_start"] = time.time()
            if fg.kind == "httperf":
                srv, cli = topo.fg_servers[0], topo.fg_clients[0]
                apache = ApacheServer(rdir / "apache", srv.ip, FG_PORT)
                apache.start(host_place(topo, srv), [fg.object_bytes], plan.seed)
                apache.wait_ready(host_place(topo, cli))
                tcpdump = _client_capture(topo, cli, srv.ip, fg_client_pcap)
            elif fg.kind == "bulk":
                srv, cli = topo.fg_servers[0], topo.fg_clients[0]
                bulk = Bulk(srv.ip, cli.ip, exp.duration_s)
                bulk.start_server(host_place(topo, srv))
                bulk.wait_ready(host_place(topo, cli))
            while time.monotonic() - t0 < exp.warmup_s:
                _tick(gen, prog, time.monotonic() - t0)
            timing["foreground_start"] = time.time()
            if fg.kind == "httperf":
                max_conns = fg.objects or 10_000_000
                httperf = Httperf(topo.fg_servers[0].ip, FG_PORT, fg.object_bytes, max_conns)
                httperf.start(host_place(topo, topo.fg_clients[0]))
            if bulk is not None:
                bulk.start_client(host_place(topo, topo.fg_clients[0]))
            while time.monotonic() - t0 < total:
                if httperf is not None and httperf.proc is not None and \
                        httperf.proc.poll() is not None:
                    break
                if bulk is not None and not bulk.running():
                    break
                _tick(gen, prog, time.monotonic() - t0)
            timing["end"] = time.time()
            summary = httperf.stop() if httperf is not None else None
            bulk_result = bulk.finish() if bulk is not None else None
            if summary is not None and summary.status_other:
                raise SwellError("httperf", f"{summary.status_other} replies were not 2xx "
                                 f"(see {rdir / 'apache' / 'apache-error.log'})")
        finally:
            if bulk is not None:
                bulk.stop()
            if gen is not None:
                gen.stop()
            if apache is not None:
                apache.stop()
            if tcpdump is not None:
                fg_capture = tcpdump.stop()
                if fg_capture.dropped:
                    raise SwellError(fg_client_pcap, f"capture dropped {fg_capture.dropped} "
                                     "packets: response times would be incomplete")
        gen_result = gen.collect(exp.warmup_s) if gen is not None else None
        engine_used = topo.engine_name
        prefix = topo.prefix
    report = topo.report
    if report.get("problems"):
        raise SwellError(rdir, "; ".join(report["problems"]))
    return collect_run(
        plan, rdir, engine_used, timing, summary, gen_result, report,
        fg_client_pcap if fg.kind == "httperf" else None, topo_dict, model, bulk_result,
        prefix=prefix,
    )


def _client_capture(topo: Any, cli: Any, server_ip: str, path: Path) -> Any:
    """tcpdump at the foreground client (both directions, headers only), started and ready."""
    from swell.topologies.capture import TCPDUMP_BUFFER_KIB, TcpdumpCapture
    from swell.topologies.layout import in_ns

    cap = TcpdumpCapture(topo.layout, "forward", path, 96, node=cli.node, dev="any")
    cap.argv = in_ns(topo.layout.pid(cli.node), [
        "tcpdump", "-i", "any", "-n", "-s", "96", "-B", str(TCPDUMP_BUFFER_KIB),
        "--immediate-mode", "--time-stamp-precision=nano", "-w", str(path),
        f"host {server_ip} and tcp port {FG_PORT}",
    ])
    cap.start()
    return cap


def _tick(gen: Any, prog: Progress, elapsed: float) -> None:
    status = ""
    if gen is not None:
        gen.poll()
        status = live_status(gen.counter_lines)
    prog.update(done=elapsed, status=status)
    time.sleep(0.2)  # display cadence, not a readiness wait


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
