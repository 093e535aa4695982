"""``swell run --testbed``: the demo's study across sshd-namespace machines that share
nothing with the control machine but SSH.

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
measurement after a 2 s warm-up instead of 60 s after 5 s.
"""

from __future__ import annotations

import json
import re
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
# the keys of a local run's entry in results.json (experiments.collect.collect_run and
# the runner's spec digest): a testbed run has the same, plus its testbed record
LOCAL_KEYS = {"key", "label", "repetition", "seed", "point", "spec", "background",
              "background_kind", "model", "engine", "prefix", "timing", "bottleneck",
              "foreground", "generator", "captures", "problems", "warnings", "asked_mbps",
              "load", "spec_digest", "engine_lateness"}
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


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_demo_study_on_the_testbed(machines, tmp_path):
    from swell.experiments.report import make_report
    from swell.experiments.results import load_results
    from swell.experiments.testbed_study import run_testbed_study

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
        assert set(run) == LOCAL_KEYS | {"testbed"}, (label, set(run) ^ LOCAL_KEYS)
        assert run["engine"] == "native"  # this kernel has no sch_netem
        assert run["engine_lateness"]["frames"] > 0  # the router's swell-link counted them
        assert run["spec"]["duration_s"] == 8 and run["spec"]["warmup_s"] == 2
        fg = run["foreground"]
        assert fg["response_times_s"], f"{label}: no downloads measured"
        assert fg["httperf"]["status_other"] == 0, fg
        # short runs cut Swing's longer transfers in flight; a responsive background
        # beside back-to-back downloads may deliver under 90% of asked in a direction
        # (a "problem" the runner names, locally too: checked against 80% below for
        # Swing 3.3M), or over 110% of it (a heavy-tailed draw in an 8 s window, also
        # named); nothing else (failed connections, errors) is accepted
        # UDP exchanges lost to the drops beside the downloads (the demo shows them
        # locally too) are accepted for Swing; any other failure is not
        problems = [p for p in run["problems"] if "cut at the end and 0 failed" not in p
                    and not (label.startswith("Swing") and (UNDER_DELIVERED.match(p)
                                                            or UDP_LOSSES.match(p)))]
        assert not problems, (label, problems)
        rdir = study / "runs" / run["key"] / f"rep{run['repetition']}"
        tb = run["testbed"]
        assert set(tb["machines"]) == set(MACHINES)
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
    assert all(by["no background"]["bottleneck"][d]["bg_mean_mbps"] < 0.01
               for d in ("forward", "reverse"))
    for label in ("Poisson 3.3M", "Swing 3.3M", "Swing 4x"):
        run = by[label]
        assert sum(run["load"][d]["asked_mbps"] for d in ("forward", "reverse")) == \
            pytest.approx(13.2 if label == "Swing 4x" else 3.3)
        got = sum(run["load"][d]["delivered_mbps"] for d in ("forward", "reverse"))
        # Swing's schedule may offer less than asked in an 8 s window (a heavy-tailed
        # draw: docs/scale.md): the testbed is held to carrying what was offered, at most
        # what was asked; Poisson to what was asked
        offered = sum(run["load"][d]["offered_mbps"] or 0.0 for d in ("forward", "reverse"))
        asked = 13.2 if label == "Swing 4x" else 3.3
        goal = min(offered, asked) if label.startswith("Swing") else asked
        # Poisson (open loop) shows the testbed carries the asked load (measured 95-97%).
        # Swing is responsive: its sessions share the saturated reverse bottleneck
        # (hundreds of queue drops) with back-to-back downloads, and an 8 s window of
        # Swing 3.3M holds a handful of heavy sessions, some cut at the end: it delivered
        # 18-88% of asked in the seven draws measured (the local demo, 60 s: 78-105%). Swing 4x's
        # thousand connections average that out (79-84% in 8 s). A broken testbed shows
        # as a machine whose generator carried nothing (checked per machine below) or as
        # Swing 4x far short; any shortfall must be said
        share = {"Poisson 3.3M": 0.9, "Swing 4x": 0.5}.get(label, 0.0)
        assert goal > 0 and got > 0 and got >= share * goal, (label, run["load"])
        if label.startswith("Swing"):
            parts = _swing_parts(study, run)
            # every client machine with sessions in the draw ran its part of the schedule
            # (a draw of a few heavy sessions may put them all on one machine; Swing 4x's
            # many sessions span both, checked below)
            assert parts, label
            for i, (planned, recs) in parts.items():
                assert recs is not None, (label, i, "records not collected", planned)
                assert sum(r["ok"] for r in recs) >= 1, (label, i, planned, len(recs))
                assert sum(r["rx"] for r in recs) > 0, (label, i)
        if got < 0.9 * asked:
            assert any("delivered" in p for p in run["problems"]), (label, run["problems"])
    assert len(_swing_parts(study, by["Swing 4x"])) == 2  # both client machines
    for label in ("Swing 3.3M", "Swing 4x"):  # schedules pushed, records pulled back
        tb = by[label]["testbed"]
        assert tb["files"]["bgc0"]["pushed_files"] >= 1
        assert tb["files"]["bgc0"]["collected_files"] >= 1
        # the router counted the background (Swing 3.3M: 480 in an 18% draw)
        assert by[label]["bottleneck"]["reverse"]["bg_packets"] > 100
    for _, cmd in processes():
        assert not any(w in cmd for w in (b"swell-gen", b"httperf", b"ssh_relay",
                                          b"apache2 -f")), cmd[:80]
