"""``swell run --testbed``: a Swing + httperf study across sshd-namespace machines that
share nothing with the control machine but SSH, against a local run of the same file.

The machines are the ones of ``test_testbed`` (five edge machines and a router,
each a namespace with its own sshd). Three things make them unlike this host:

* every machine has its own work directory (``hosts.yml``: ``workdir`` per
  machine), so each one's copies of the run's files are its own;
* the control machine's folder (the study, its run directories, and the
  temporary folder where the kinds make Apache's objects) is covered, in every
  sshd's mount namespace, by an empty read-only tmpfs: a machine that tried to
  read a schedule or Apache's configuration at the control machine's path
  would find nothing, and the run would fail;
* the machines' swell looks for its native programs in an empty folder
  (``SWELL_NATIVE_DIR`` in the hosts file's swell command): ``prepare`` must
  install ``swell-gen`` on the background's machines and ``swell-link`` on the
  router (this kernel has no ``sch_netem``) from the control machine's build.

The study (:data:`STUDY`) is ``experiments/demo.yaml`` with one configuration:
Swing at the demo's 4x load (13.2 Mbit/s) with httperf fetching 1 MB objects,
35 s (the demo's 5 s warm-up, then 30 s), over a 100 Mbit/s, 2 ms bottleneck
with the demo's 40 ms of queue (500 kB): over the demo's 20 Mbit/s httperf's
back-to-back downloads saturate it and a responsive background there moves
less than asked however long the run (docs/scale.md section 8). It runs
through the commands, as a user runs it: ``swell run STUDY --testbed HOSTS``
(with its report), then ``swell run STUDY`` locally, same file and seed.
Checked: the testbed names no problem the local run does not, and on both
the background delivers at least 90% of asked per direction (the runner's own
line: neither run names a delivery problem; docs/testbed.md section 7 has the
runs, docs/scale.md section 9 why 30 s); every machine started
its clients on time (its start signal came before the start time); what the
machines ran names their own copies; the same runs, access links and offered
load on both sides, delivered load and the foreground's median response time
within the tolerances below; ``swell fidelity`` reads the testbed's captures
as the local run's; nothing is left afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .testbed_machines import (
    MACHINES,
    REPO,
    ROLES,
    SKIPS,
    leftovers,
    plan_of,
    start_machines,
    traffic_processes,
)

pytestmark = SKIPS
DEMO = REPO / "experiments" / "demo.yaml"
STUDY = f"""extends: {DEMO}
name: demo-testbed
duration_s: 30
warmup_s: 5
topology:
  bottleneck: {{rate_mbps: 100, delay_ms: 2, queue_bytes: 500000}}
sweep:
  background:
    - {{kind: swing, trace: {REPO}/data/pcap/example.pcap, variant: {{target_mbps: 13.2}},
       label: Swing 4x}}
"""
DELIVERED_MIN = 0.9  # of asked, per direction (the runner's own line)
# testbed against local, same file and seed (measured: docs/testbed.md section 7):
# delivered load within this share of the asked load, the foreground's median response
# time within this ratio, the fidelity bench's generated throughput per direction
# within this ratio
DELIVERED_TOL = 0.1
MEDIAN_TOL = 0.25
FIDELITY_TOL = 0.15
SWELL = [str(REPO / ".venv/bin/python"), "-m", "swell"]


@pytest.fixture
def machines(netns, tmp_path):
    control = tmp_path / "control"
    (control / "tmp").mkdir(parents=True)
    # the machines' own work directories and native folder, where Apache's workers
    # (www-data) can traverse (pytest's tmp_path is under a 0700 folder)
    work = Path(tempfile.mkdtemp(prefix=f"{netns.prefix}-work-", dir="/tmp"))
    work.chmod(0o755)
    m = start_machines(netns, tmp_path, MACHINES, hide=(control,))
    try:
        yield m, control, work
    finally:
        m.stop()
        shutil.rmtree(work, ignore_errors=True)


def swell(*argv: str, tmpdir: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``swell ARGV`` as a user runs it (its temporary files in ``tmpdir``)."""
    env = {**os.environ, "SWELL_QUIET": "1", "TMPDIR": str(tmpdir)}
    return subprocess.run([*SWELL, *argv], capture_output=True, text=True, env=env,
                          timeout=timeout)


def only_run(study: Path) -> dict:
    runs = json.loads((study / "results.json").read_text())["runs"]
    assert len(runs) == 1, [r["label"] for r in runs]
    return runs[0]


def _links(study: Path, run: dict, testbed: bool) -> list[str]:
    """The background hosts' access links of a run, sorted (the testbed places the same
    draws on other addresses: fewer namespaces, one per machine)."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import resolve_host_links

    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
    if testbed:
        links = [h.link for h in plan_of(rdir / "testbed").hosts if h.role == "bg"]
    else:
        spec = spec_from_dict(json.loads((rdir / "topology.json").read_text()))
        links = [link.model_dump(mode="json") for side in
                 resolve_host_links(spec, plan_addresses(spec)).values() for _, link in side]
    return sorted(json.dumps(x, sort_keys=True) for x in links)


def _fidelity(study: Path, run: dict, out: Path, tmpdir: Path) -> dict:
    """``swell fidelity`` of a run's bottleneck capture (both directions) against the
    capture its Swing model came from."""
    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
    merged = out / "generated.pcap"
    out.mkdir(parents=True)
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged),
                    *(str(rdir / "capture" / f"bottleneck-{d}.pcap")
                      for d in ("forward", "reverse"))], check=True)
    res = swell("fidelity", str(REPO / "data" / "pcap" / "example.pcap"), str(merged),
                "--skip", "2", "--model", run["model"], "-o", str(out), tmpdir=tmpdir,
                timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads((out / "fidelity.json").read_text())


def _delivered(run: dict) -> dict[str, float]:
    """Delivered over asked, per direction."""
    return {d: run["load"][d]["delivered_mbps"] / run["load"][d]["asked_mbps"]
            for d in ("forward", "reverse")}


def check_testbed_run(run: dict, rdir: Path, m, work: Path, control_paths: tuple[str, ...]):
    """What only a testbed run has: machines, timing, files, commands, nothing left."""
    tb = run["testbed"]
    assert set(tb["machines"]) == set(MACHINES)
    assert all(late <= 1.0 for late in tb["late_s"].values()), tb["late_s"]
    early = tb["start_signal"]["before_start_s"]
    assert all(e is not None and e > 0 for e in early.values()), tb["start_signal"]
    for name, files in tb["files"].items():
        assert files["root"].startswith(f"{work / name}/{tb['prefix']}/{name}/"), files
    # prepare installed the control machine's native programs where the machines look
    native = work / "native"
    assert {f.name for f in native.iterdir()} == {"swell-gen", "swell-link"}
    for name in ("bgc0", "bgc1", "bgs0", "rtr"):
        facts = tb["machines"][name]
        assert facts["native_dir"] == str(native), facts
        assert facts["swell_gen"] and (name != "rtr" or facts["native_engine"]), facts
    # what every machine ran names its own copies, never the control machine's files
    commands = [json.loads(ln) for ln in
                (rdir / "testbed" / "commands.jsonl").read_text().splitlines()]
    assert commands
    for c in commands:
        assert not any(p in " ".join(c["argv"]) for p in control_paths), c
    # the foreground's files went to its machines and its capture came back
    assert tb["files"]["fgs0"]["pushed_files"] >= 2  # Apache's config and its object
    assert (rdir / "foreground" / "fg-client.pcap").stat().st_size > 24
    # Swing's schedules went to both client machines and their records came back
    for i in (0, 1):
        recs = [json.loads(ln) for ln in
                (rdir / "background" / f"records-{i}.jsonl").read_text().splitlines()]
        assert sum(r["ok"] for r in recs) >= 1 and sum(r["rx"] for r in recs) > 0, i
    assert tb["files"]["bgc0"]["pushed_files"] >= 1
    assert tb["files"]["bgc0"]["collected_files"] >= 1
    assert run["bottleneck"]["reverse"]["bg_packets"] > 100  # the router counted it
    plan = plan_of(rdir / "testbed")
    left = leftovers(m, plan.prefix, [work / n for n in MACHINES], plan)
    assert not left, left


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_study_on_the_testbed_as_locally(machines, tmp_path):
    m, control, work = machines
    exp = control / "demo-testbed.yaml"
    exp.write_text(STUDY)
    hosts = m.hosts_file(ROLES, work / "common", own_workdirs=work,
                         env=f"SWELL_NATIVE_DIR={work / 'native'}")
    # the machines do not see the control machine's folder
    seen = m.ssh("bgc0", f"ls -A {control}; test -e {DEMO}")
    assert seen.returncode == 0 and seen.stdout.strip() == "", seen

    study = control / "study"
    t0 = time.monotonic()
    res = swell("run", str(exp), "--testbed", str(hosts), "-o", str(study),
                tmpdir=control / "tmp", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (study / "report" / "index.html").exists()
    run = only_run(study)
    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
    assert run["label"] == "Swing 4x" and run["engine"] == "native"  # no sch_netem here
    assert run["engine_lateness"]["frames"] > 0  # the router's swell-link counted them
    check_testbed_run(run, rdir, m, work, (str(control), str(tmp_path)))

    # the same file and seed, locally (Apache's objects where its workers can read them)
    local_dir = control / "local"
    took = {"testbed run": time.monotonic() - t0}
    t0 = time.monotonic()
    res = swell("run", str(exp), "-o", str(local_dir), "--no-report", tmpdir=work,
                timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    loc = only_run(local_dir)
    med = [statistics.median(r["foreground"]["response_times_s"]) for r in (run, loc)]
    shares = {"testbed": _delivered(run), "local": _delivered(loc)}
    took["local run"] = time.monotonic() - t0
    print(f"delivered / asked: {shares}; foreground median testbed {med[0] * 1e3:.0f} ms, "
          f"local {med[1] * 1e3:.0f} ms; start signal {run['testbed']['start_signal']}; "
          f"seconds {took}")

    # The same draw on both: the background reached its asked load on both (at least
    # DELIVERED_MIN per direction, so no delivery problem), and the testbed names no
    # problem the local run does not name too
    said = {w: [p.split(":")[0] for p in r["problems"]] for w, r in (("testbed", run),
                                                                     ("local", loc))}
    assert set(said["testbed"]) <= set(said["local"]), (run["problems"], loc["problems"])
    for where, share in shares.items():
        for d, x in share.items():
            assert x >= DELIVERED_MIN, (where, d, shares)
        assert not [p for p in said[where] if p.startswith("background ")], (where, said)
    for where, r in (("testbed", run), ("local", loc)):
        assert r["foreground"]["response_times_s"], f"{where}: no downloads measured"
        assert r["foreground"]["httperf"]["status_other"] == 0, r["foreground"]["httperf"]
    assert not traffic_processes()

    # testbed and local: the same run and results, within the tolerances
    assert set(run) == set(loc) | {"testbed"}, set(run) ^ set(loc)
    for key in ("key", "seed", "spec", "background_kind", "asked_mbps"):
        assert run[key] == loc[key], key
    assert _links(study, run, True) == _links(local_dir, loc, False)
    asked = sum(run["load"][d]["asked_mbps"] for d in ("forward", "reverse"))
    for d in ("forward", "reverse"):
        assert run["load"][d]["asked_mbps"] == loc["load"][d]["asked_mbps"]
        assert run["load"][d]["offered_mbps"] == pytest.approx(loc["load"][d]["offered_mbps"])
        delivered = [r["load"][d]["delivered_mbps"] for r in (run, loc)]
        assert abs(delivered[0] - delivered[1]) <= DELIVERED_TOL * asked, (d, delivered)
    assert abs(med[0] / med[1] - 1) <= MEDIAN_TOL, med

    # swell fidelity reads the testbed's captures as a local run's
    t0 = time.monotonic()
    with ThreadPoolExecutor(2) as pool:  # (both at once: the traffic is over)
        fid = dict(zip(("testbed", "local"), pool.map(
            lambda a: _fidelity(*a, control / "tmp"),
            [(study, run, tmp_path / "fid-tb"), (local_dir, loc, tmp_path / "fid-local")]),
            strict=True))
    took["fidelity"] = time.monotonic() - t0
    print("seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in took.items()))
    dirs = {where: {d["direction"]: d for d in f["directions"]} for where, f in fid.items()}
    assert set(dirs["testbed"]) == set(dirs["local"]) == {"c2s", "s2c"}
    for d, tb in dirs["testbed"].items():
        lo = dirs["local"][d]
        rates = (tb["throughput"]["generated_bps"], lo["throughput"]["generated_bps"])
        print(f"fidelity {d}: generated testbed {rates[0] / 1e6:.3f} local "
              f"{rates[1] / 1e6:.3f} Mbit/s; octaves passed {tb['octaves_passed']} and "
              f"{lo['octaves_passed']} of {tb['octaves_judged']}")
        assert abs(rates[0] / rates[1] - 1) <= FIDELITY_TOL, (d, rates)
        assert tb["octaves_judged"] == lo["octaves_judged"] > 0, d
    assert fid["testbed"]["ks"] and len(fid["testbed"]["ks"]) == len(fid["local"]["ks"])
