"""``swell run --testbed``: the demo's study across sshd-namespace machines that share
nothing with the control machine but SSH, against a local run of the same file.

The machines are the ones of ``test_testbed`` (five edge machines and a router,
each a namespace with its own sshd). Two things make them unlike this host:

* every machine has its own work directory (``hosts.yml``: ``workdir`` per
  machine), so each one's copies of the run's files are its own;
* the control machine's folder (the study, its run directories, and the
  temporary folder where the kinds make Apache's objects) is covered, in every
  sshd's mount namespace, by an empty read-only tmpfs: a machine that tried to
  read a schedule or Apache's configuration at the control machine's path
  would find nothing, and the run would fail.

The study is ``experiments/demo.yaml`` itself (no background, Poisson, Swing and
Swing at 4x; httperf fetching 1 MB objects over a 20 Mbit/s, 10 ms dumbbell;
40 client and 10 server hosts), extended only to shorten it for CI: 8 s of
measurement after a 2 s warm-up instead of 60 s after 5 s. The same file and
seed then run locally (``swell run``, no testbed), and the two studies are
compared: same runs, configurations, access links and asked and offered
loads; delivered load and the foreground's median response time within the
tolerances below (measured: docs/testbed.md section 6). ``swell report`` and
``swell fidelity`` run on the testbed's study.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from swell.topologies.testbed import EmulatedHost

from .testbed_machines import (
    MACHINES,
    REPO,
    ROLES,
    SKIPS,
    leftovers,
    processes,
    start_machines,
)

pytestmark = SKIPS
DEMO = REPO / "experiments" / "demo.yaml"
UNDER_DELIVERED = re.compile(r"background (forward|reverse): delivered [\d.]+ of [\d.]+ "
                             r"Mbit/s asked \(\d+%\)(, well above it,)? in the window;")
CI_DEMO = f"extends: {DEMO}\nduration_s: 8\nwarmup_s: 2\n"
# thresholds from the runs measured on this machine (docs/testbed.md section 6; the
# demo's seeds are fixed, so every CI run draws the same schedules):
POISSON_SHARE = 0.9  # of asked, delivered by Poisson (open loop; measured 0.94-0.96)
# of the schedule's offered load in the window, delivered by Swing: an 8 s window
# offers every byte of a session started in it, and a responsive background beside
# back-to-back downloads carries part of it (measured, testbed and local alike:
# Swing 3.3M 0.16-0.17 of 3.90 Mbit/s, Swing 4x 0.55-0.65 of 19.04): 3/4 of the lowest
SWING_SHARE = {"Swing 3.3M": 0.12, "Swing 4x": 0.42}
# testbed against local, same file and seed: delivered load within this share of the
# asked load (measured 0.00-0.14: Swing 4x's testbed runs carried 12.0-12.4 Mbit/s,
# its local ones 10.6-10.7), the foreground's median response time within this ratio
# (measured 0-4%; Swing 4x, seven downloads beside a saturating background, 8-10%),
# the fidelity bench's generated throughput per direction within this ratio
# (measured 0.1-1.7%)
DELIVERED_TOL = 0.25
MEDIAN_TOL = {"default": 0.15, "Swing 4x": 0.35}
FIDELITY_TOL = 0.15
UDP_LOSSES = re.compile(r"background: \d+ connections cut at the end and \d+ failed of \d+ .*"
                        r"connections failed \(\{'udp-timeout': \d+\}\)$")


@pytest.fixture
def machines(netns, tmp_path, monkeypatch):
    control = tmp_path / "control"
    (control / "tmp").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(control / "tmp"))
    # the machines' own work directories, where Apache's workers (www-data) can
    # traverse (pytest's tmp_path is under a 0700 folder)
    work = Path(tempfile.mkdtemp(prefix=f"{netns.prefix}-work-", dir="/tmp"))
    work.chmod(0o755)
    m = start_machines(netns, tmp_path, MACHINES, hide=(control,))
    try:
        yield m, control, work
    finally:
        m.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def _swing_parts(study: Path, run: dict) -> dict[int, tuple[int, list[dict] | None]]:
    """Per client machine's part of a Swing run: the sessions its schedule planned and
    the connection records pulled back from it (None when none came back)."""
    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}" / "background"
    parts = {}
    for sched in sorted(rdir.glob("schedule-*.jsonl")):
        i = int(sched.stem.split("-")[1])
        rec = rdir / f"records-{i}.jsonl"
        recs = [json.loads(ln) for ln in rec.read_text().splitlines()] \
            if rec.exists() else None
        parts[i] = (len(sched.read_text().splitlines()) - 1, recs)
    return parts


def _links(study: Path, run: dict, testbed: bool) -> list[str]:
    """The background hosts' access links of a run, sorted (the testbed places the same
    draws on other addresses: fewer namespaces, one per machine)."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.spec import spec_from_dict
    from swell.topologies.topology import resolve_host_links

    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
    if testbed:
        plan = json.loads((rdir / "testbed" / "testbed.json").read_text())["plan"]
        links = [h["link"] for h in plan["hosts"] if h["role"] == "bg"]
    else:
        spec = spec_from_dict(json.loads((rdir / "topology.json").read_text()))
        links = [link.model_dump(mode="json") for side in
                 resolve_host_links(spec, plan_addresses(spec)).values() for _, link in side]
    return sorted(json.dumps(x, sort_keys=True) for x in links)


def _total(run: dict, what: str) -> float:
    return sum(run["load"][d][what] or 0.0 for d in ("forward", "reverse"))


def _fidelity(study: Path, run: dict, out: Path) -> dict:
    """``swell fidelity`` of a run's bottleneck capture (both directions) against the
    capture its Swing model came from."""
    from swell.cli import main as swell_main

    rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
    merged = out / "generated.pcap"
    out.mkdir(parents=True)
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged),
                    *(str(rdir / "capture" / f"bottleneck-{d}.pcap")
                      for d in ("forward", "reverse"))], check=True)
    assert swell_main(["fidelity", str(REPO / "data" / "pcap" / "example.pcap"), str(merged),
                       "--skip", "2", "--model", run["model"], "-o", str(out)]) == 0
    return json.loads((out / "fidelity.json").read_text())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_study_on_the_testbed_as_locally(machines, tmp_path, monkeypatch):
    from swell.cli import main as swell_main
    from swell.experiments.report import make_report
    from swell.experiments.results import load_results
    from swell.experiments.testbed_study import run_testbed_study

    monkeypatch.setenv("SWELL_QUIET", "1")
    m, control, work = machines
    exp = control / "demo-ci.yaml"
    exp.write_text(CI_DEMO)
    hosts = m.hosts_file(ROLES, work / "common", own_workdirs=work)
    study_dir = control / "study"
    # the machines do not see the control machine's folder
    seen = m.ssh("bgc0", f"ls -A {control}; test -e {DEMO}")
    assert seen.returncode == 0 and seen.stdout.strip() == "", seen

    study = run_testbed_study(exp, hosts, study_dir)
    results = load_results(study)
    runs = results["runs"]
    assert [r["label"] for r in runs] == ["no background", "Poisson 3.3M", "Swing 3.3M",
                                          "Swing 4x"]
    assert make_report(study).exists()
    control_paths = (str(control), str(tmp_path))
    for run in runs:
        label = run["label"]
        assert run["engine"] == "native"  # this kernel has no sch_netem
        assert run["engine_lateness"]["frames"] > 0  # the router's swell-link counted them
        assert run["spec"]["duration_s"] == 8 and run["spec"]["warmup_s"] == 2
        fg = run["foreground"]
        assert fg["response_times_s"], f"{label}: no downloads measured"
        assert fg["httperf"]["status_other"] == 0, fg
        # short runs cut Swing's longer transfers in flight; a responsive background
        # beside back-to-back downloads may deliver under 90% of asked in a direction
        # (a "problem" the runner names, locally too), or over 110% of it (a
        # heavy-tailed draw in an 8 s window, also named); UDP exchanges lost to the
        # drops beside the downloads (the demo shows them locally too) are accepted
        # for Swing; any other problem (failed connections, errors, a machine that
        # started its clients late) is not
        problems = [p for p in run["problems"] if "cut at the end and 0 failed" not in p
                    and not (label.startswith("Swing") and (UNDER_DELIVERED.match(p)
                                                            or UDP_LOSSES.match(p)))]
        assert not problems, (label, problems)
        rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
        tb = run["testbed"]
        assert set(tb["machines"]) == set(MACHINES)
        assert all(late <= 1.0 for late in tb["late_s"].values()), tb["late_s"]
        for name, files in tb["files"].items():
            assert files["root"].startswith(f"{work / name}/{tb['prefix']}/{name}/"), files
        # what every machine ran names its own copies, never the control machine's files
        commands = [json.loads(ln) for ln in
                    (rdir / "testbed" / "commands.jsonl").read_text().splitlines()]
        assert commands
        for c in commands:
            text = " ".join(c["argv"])
            assert not any(p in text for p in control_paths), c
        # the foreground's files went to its machines and its capture came back
        fg_server = tb["files"]["fgs0"]
        assert fg_server["pushed_files"] >= 2, fg_server  # Apache's config and its object
        assert (rdir / "foreground" / "fg-client.pcap").stat().st_size > 24
        data = json.loads((rdir / "testbed" / "testbed.json").read_text())["plan"]
        plan = SimpleNamespace(hosts=[EmulatedHost(**h) for h in data["hosts"]],
                               edges=[SimpleNamespace(**e) for e in data["edges"]],
                               ports=[SimpleNamespace(**p) for p in data["ports"]])
        left = leftovers(m, data["prefix"], [work / n for n in MACHINES], plan)
        assert not left, (label, left)
    by = {r["label"]: r for r in runs}

    # the same file and seed, locally (Apache's objects where its workers can read them:
    # the machines' work folder, not pytest's 0700 one)
    monkeypatch.setattr(tempfile, "tempdir", str(work))
    local_dir = control / "local"
    assert swell_main(["run", str(exp), "-o", str(local_dir), "--no-report"]) == 0
    local = {r["label"]: r for r in load_results(local_dir)["runs"]}
    for label, run in by.items():  # measured (docs/testbed.md section 6)
        loc = local[label]
        med = [statistics.median(r["foreground"]["response_times_s"]) for r in (run, loc)]
        print(f"{label}: delivered testbed {_total(run, 'delivered_mbps'):.2f} local "
              f"{_total(loc, 'delivered_mbps'):.2f} Mbit/s (asked {_total(run, 'asked_mbps'):.2f}, "
              f"offered {_total(run, 'offered_mbps'):.2f}); foreground median testbed "
              f"{med[0] * 1e3:.0f} ms local {med[1] * 1e3:.0f} ms")

    assert all(by["no background"]["bottleneck"][d]["bg_mean_mbps"] < 0.01
               for d in ("forward", "reverse"))
    for label in ("Poisson 3.3M", "Swing 3.3M", "Swing 4x"):
        run = by[label]
        asked = 13.2 if label == "Swing 4x" else 3.3
        assert _total(run, "asked_mbps") == pytest.approx(asked)
        got = _total(run, "delivered_mbps")
        if label.startswith("Poisson"):
            assert got >= POISSON_SHARE * asked, (label, run["load"])
        else:
            offered = _total(run, "offered_mbps")
            assert offered > 0 and got >= SWING_SHARE[label] * offered, (label, run["load"])
            parts = _swing_parts(study, run)
            # every client machine with sessions in the draw ran its part of the schedule
            assert parts, label
            for i, (planned, recs) in parts.items():
                assert recs is not None, (label, i, "records not collected", planned)
                assert sum(r["ok"] for r in recs) >= 1, (label, i, planned, len(recs))
                assert sum(r["rx"] for r in recs) > 0, (label, i)
            tb = run["testbed"]  # schedules pushed, records pulled back
            assert tb["files"]["bgc0"]["pushed_files"] >= 1
            assert tb["files"]["bgc0"]["collected_files"] >= 1
            # the router counted the background
            assert run["bottleneck"]["reverse"]["bg_packets"] > 100
        if got < 0.9 * asked:
            assert any("delivered" in p for p in run["problems"]), (label, run["problems"])
    assert len(_swing_parts(study, by["Swing 4x"])) == 2  # both client machines
    for _, cmd in processes():
        assert not any(w in cmd for w in (b"swell-gen", b"httperf", b"testbed_jobs",
                                          b"testbed\0host\0run", b"apache2\0-f")), cmd[:80]

    # testbed and local: the same runs and results, within the tolerances
    assert list(local) == list(by)
    for label, run in by.items():
        loc = local[label]
        assert set(run) == set(loc) | {"testbed"}, (label, set(run) ^ set(loc))
        for key in ("key", "seed", "spec", "background_kind", "asked_mbps"):
            assert run[key] == loc[key], (label, key)
        assert _links(study, run, True) == _links(local_dir, loc, False), label
        for d in ("forward", "reverse"):
            assert run["load"][d]["asked_mbps"] == loc["load"][d]["asked_mbps"]
            assert run["load"][d]["offered_mbps"] == pytest.approx(
                loc["load"][d]["offered_mbps"]), (label, d)  # the same drawn schedule
        delivered = (_total(run, "delivered_mbps"), _total(loc, "delivered_mbps"))
        assert abs(delivered[0] - delivered[1]) <= DELIVERED_TOL * max(_total(run, "asked_mbps"),
                                                                       1.0), (label, delivered)
        med = [statistics.median(r["foreground"]["response_times_s"]) for r in (run, loc)]
        assert abs(med[0] / med[1] - 1) <= MEDIAN_TOL.get(label, MEDIAN_TOL["default"]), \
            (label, med)

    # swell fidelity reads the testbed's captures as a local run's
    fid = {"testbed": _fidelity(study, by["Swing 4x"], tmp_path / "fid-tb"),
           "local": _fidelity(local_dir, local["Swing 4x"], tmp_path / "fid-local")}
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
