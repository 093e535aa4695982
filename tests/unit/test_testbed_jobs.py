"""A testbed run's jobs without machines: recorded from real generator code, run by the
real per-machine executor (``swell testbed host run``) on this machine, read back."""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.experiments.testbed_jobs import (
    JobPlace,
    Recorder,
    abandon,
    replay,
    without_ready_line,
)
from swell.generators.base import Proc
from swell.tcpdump import Tcpdump
from swell.topologies.testbed_files import MachineFiles, machine_roots

REPO = Path(__file__).resolve().parents[2]
SWELL = [sys.executable, "-m", "swell.experiments.testbed_cli", "testbed", "host"]


def recorder(tmp_path: Path, machines: tuple[str, ...] = ("m1",)) -> Recorder:
    files = {}
    for m in machines:
        root = f"{tmp_path}/remote/{m}/files"
        roots = machine_roots(tmp_path / "run", None, tmp_path / "tmp", tmp_path / "native",
                              root, None)
        files[m] = MachineFiles(m, root, roots)
    (tmp_path / "spool").mkdir(parents=True)
    return Recorder(files, tmp_path / "spool")


def test_a_server_sees_its_ready_line_then_the_machines_output(tmp_path):
    rec = recorder(tmp_path)
    place = JobPlace("m1", rec)
    proc = Proc("serve", place, ["/opt/swell/swell-gen", "serve", "--listen", "10.0.0.1:80"])
    assert proc.wait_line(lambda ln: ln == "READY", 2.0) == "READY"  # seen while recording
    assert place.run(["/opt/swell/swell-gen", "probe", "--addr", "10.0.0.1:80"],
                     timeout=7.0).returncode == 0
    rec.step = "bg_client"
    client = Proc("run", place, ["/opt/swell/swell-gen", "run", "--schedule", "x"])
    rec.planning = False
    with pytest.raises(SwellError, match="started after the traffic began"):
        place.popen(["true"])
    jobs = [j.to_json() for j in rec.jobs]
    assert [(j["step"], j["kind"], j["ready"]) for j in jobs] == [
        ("bg_server", "process", {"stream": "stdout", "text": "READY"}),
        ("bg_server", "probe", None), ("bg_client", "process", None)]
    assert jobs[1]["timeout"] == 7.0 and jobs[0]["stop_signal"] == "SIGTERM"
    out = tmp_path / "out"
    out.mkdir()
    (out / "1.out").write_bytes(b"READY\n{\"served\": 3}\n")
    (out / "3.out").write_bytes(b'{"t": 1.0, "conns_started": 2}\n')
    (out / "3.err").write_bytes(b"cut short\n")
    (out / "status.json").write_text(json.dumps(
        {"start": 5.0, "jobs": {"1": {"rc": -15}, "3": {"rc": 0}}}))
    replay(rec, {"m1": out})
    assert proc.stop() == -15 and client.stop() == 0
    assert proc.drain() == ['{"served": 3}']  # READY was handed over already
    assert client.drain() == ['{"t": 1.0, "conns_started": 2}']
    assert list(client.stderr_tail) == ["cut short"]


def test_a_process_waited_for_is_a_probe_and_httperf_stops_with_sigint(tmp_path):
    rec = recorder(tmp_path)
    place = JobPlace("m1", rec)
    apache = place.popen(["/usr/sbin/apache2", "-f", "conf"], stdout=subprocess.DEVNULL)
    assert apache.poll() is None
    assert place.popen(["bash", "-c", "exec 3<>/dev/tcp/10.0.0.2/80"]).wait() == 0
    rec.step = "fg_client"
    httperf = place.popen(["httperf", "--server", "10.0.0.2"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    rec.planning = False
    kinds = [(j.kind, j.stderr, j.stop_signal) for j in rec.jobs]
    assert kinds == [("process", "own", "SIGTERM"), ("probe", "own", "SIGTERM"),
                     ("process", "stdout", "SIGINT")]
    out = tmp_path / "out"
    out.mkdir()
    (out / "3.out").write_text("Total: connections 4 requests 4 replies 4\n")
    (out / "status.json").write_text(json.dumps({"jobs": {"1": {"rc": 0}, "3": {"rc": 0}}}))
    replay(rec, {"m1": out})
    assert httperf.communicate() == ("Total: connections 4 requests 4 replies 4\n", None)


def test_a_tcpdump_stand_in_prints_the_machines_counters(tmp_path):
    rec = recorder(tmp_path)
    rec.step = "fg_ready"
    pcap = tmp_path / "run" / "fg-client.pcap"
    dump = Tcpdump(JobPlace("m1", rec), ["tcpdump", "-i", "any", "-w", str(pcap)], "tcpdump")
    dump.start(timeout=10)  # the stand-in says "listening on"
    job = rec.jobs[0]
    assert job.ready == {"stream": "stderr", "text": "listening on"}
    assert job.argv[-1] == f"{tmp_path}/remote/m1/files/run/fg-client.pcap"
    rec.planning = False
    out = tmp_path / "out"
    out.mkdir()
    (out / "1.err").write_text("tcpdump: listening on any, link-type LINUX_SLL2\n"
                               "12 packets captured\n12 packets received by filter\n"
                               "0 packets dropped by kernel\n")
    (out / "status.json").write_text(json.dumps({"jobs": {"1": {"rc": 0}}}))
    replay(rec, {"m1": out})
    counts = dump.stop()
    assert (counts.written, counts.dropped) == (12, 0)


def test_a_failed_run_ends_every_handle(tmp_path):
    rec = recorder(tmp_path)
    proc = Proc("serve", JobPlace("m1", rec), ["swell-gen", "serve"])
    abandon(rec)
    assert proc.stop() < 0 and proc.drain() == ["READY"]
    out = tmp_path / "out"
    out.mkdir()
    rec2 = recorder(tmp_path / "b")
    Proc("x", JobPlace("m1", rec2), ["sleep", "1"])
    rec2.planning = False
    (out / "status.json").write_text(json.dumps({"jobs": {}}))
    with pytest.raises(SwellError, match="no exit status"):
        replay(rec2, {"m1": out})


def test_without_ready_line():
    assert without_ready_line(b"a\nREADY\nb\n", "READY") == b"a\nb\n"
    assert without_ready_line(b"a\n", "READY") == b"a\n"
    assert without_ready_line(b"x\n", None) == b"x\n"


def test_files_bundle_and_pull(tmp_path):
    rec = recorder(tmp_path)
    sched = tmp_path / "run" / "background" / "schedule-0.jsonl"
    sched.parent.mkdir(parents=True)
    sched.write_text("{}\n")
    mf = rec.files["m1"]
    mf.prepare(["swell-gen", "run", "--schedule", str(sched), "--records",
                str(tmp_path / "run" / "background" / "records-0.jsonl")])
    mf.prepare(["cat", str(sched)])
    with tarfile.open(fileobj=io.BytesIO(mf.bundle())) as tf:
        names = sorted(tf.getnames())
    assert names == ["run", "run/background", "run/background/schedule-0.jsonl"]
    # what collect fetches: the machine's files/run and its jobs
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:") as tf:
        for name, data in (("files/run/background/schedule-0.jsonl", b"{}\n"),
                           ("files/run/background/records-0.jsonl", b'{"ok": 1}\n'),
                           ("jobs/1.out", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    tar = tmp_path / "collect.tar"
    tar.write_bytes(buf.getvalue())
    got: dict[Path, str] = {}
    back = mf.pull(tar, tmp_path / "run", got)
    assert back == [tmp_path / "run" / "background" / "records-0.jsonl"]  # pushed: skipped
    assert back[0].read_text() == '{"ok": 1}\n'


def _executor(state: Path, jobs: list[dict], warmup: float, total: float) -> dict:
    (state / "jobs").mkdir(parents=True, exist_ok=True)
    (state / "jobs.json").write_text(json.dumps({"machine": "m1", "warmup_s": warmup,
                                                 "total_s": total, "jobs": jobs}))
    proc = subprocess.Popen([*SWELL, "run", str(state)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ready = state / "jobs" / "ready"
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    said = ready.read_text()
    t0 = None
    if said.startswith("ready"):
        t0 = time.time() + 0.5
        (state / "jobs" / "start").write_text(f"{t0:.3f}\n")
    _, err = proc.communicate(timeout=60)
    status = json.loads((state / "jobs" / "status.json").read_text())
    return {"rc": proc.returncode, "stderr": err, "ready": said, "t0": t0, "status": status}


def job(i: int, step: str, argv: list[str], kind: str = "process", ready: str | None = None,
        stop: str = "SIGTERM") -> dict:
    return {"id": i, "machine": "m1", "step": step, "kind": kind, "argv": argv,
            "label": f"job {i}", "ready": {"stream": "stdout", "text": ready} if ready else None,
            "stderr": "own", "stop_signal": stop, "timeout": 5.0}


def test_the_executor_times_its_jobs_from_the_start_signal(tmp_path):
    state = tmp_path / "swl0001" / "m1"
    sh = ["sh", "-c"]
    jobs = [job(1, "bg_server", [*sh, "echo READY; trap 'echo bye; exit 0' TERM; "
                                 "while :; do sleep 0.05; done"], ready="READY"),
            job(2, "bg_ready", [*sh, f"test -e {state}/jobs/ready || true"], kind="probe"),
            job(3, "bg_client", [*sh, "date +%s.%N; sleep 30"]),
            job(4, "fg_client", [*sh, "date +%s.%N; trap 'echo stats; exit 0' INT; "
                                 "while :; do sleep 0.05; done"], stop="SIGINT")]
    got = _executor(state, jobs, warmup=0.5, total=1.5)
    assert got["rc"] == 0, got["stderr"]
    st, t0 = got["status"], got["t0"]
    assert st["start"] == pytest.approx(t0, abs=1e-3) and st["error"] is None
    out = {i: (state / "jobs" / f"{i}.out").read_text().split() for i in (1, 3, 4)}
    # the background's client at T0, the foreground's after the warm-up (this machine's
    # clock, so within scheduling noise)
    start = st["start"]
    assert 0 <= float(out[3][0]) - start < 0.5 and 0 <= float(out[4][0]) - (start + 0.5) < 0.5
    assert out[4][1:] == ["stats"] and out[1] == ["READY", "bye"]  # its stop signals
    assert st["jobs"]["3"]["rc"] == -15 and st["jobs"]["4"]["rc"] == 0
    assert st["jobs"]["2"]["probe"] and st["jobs"]["3"]["late_s"] < 0.5
    assert 0 < st["start"] - st["signal_at"] <= 0.5  # the signal came before T0
    # the servers were stopped last, after the end
    assert st["jobs"]["1"]["signalled"] > st["jobs"]["4"]["signalled"] >= start + 1.5
    assert set(json.loads((state / "jobs" / "pids.json").read_text())) == {"1", "3", "4"}


def test_the_executor_says_why_a_server_was_not_ready(tmp_path):
    state = tmp_path / "swl0002" / "m1"
    got = _executor(state, [job(1, "bg_server", ["sh", "-c", "echo no >&2; exit 3"],
                                ready="READY")], 0.0, 1.0)
    assert got["rc"] == 2 and got["ready"].startswith("failed: job 1: exited with status 3")
    assert "no" in got["ready"] and got["status"]["error"]


def test_stop_signal_stops_every_job_at_once(tmp_path):
    state = tmp_path / "swl0003" / "m1"
    (state / "jobs").mkdir(parents=True)
    (state / "jobs.json").write_text(json.dumps({"machine": "m1", "warmup_s": 0, "total_s": 60,
                                                 "jobs": [job(1, "bg_server", ["sleep", "60"])]}))
    proc = subprocess.Popen([*SWELL, "run", str(state)], cwd=REPO, stderr=subprocess.PIPE,
                            text=True)
    pids = state / "jobs" / "pids.json"
    deadline = time.monotonic() + 30
    while not (state / "jobs" / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = json.loads(pids.read_text())["1"]["pid"]
    threading.Timer(0.2, proc.terminate).start()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "stopped by a signal" in err
    assert not Path(f"/proc/{pid}").exists() or \
        Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


def test_the_routers_capture_is_cut_to_the_runs_span(tmp_path):
    from swell.experiments.testbed_study import cut_capture

    src, dst = tmp_path / "in.pcap", tmp_path / "out.pcap"
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    frames = b"".join(struct.pack("<IIII", sec, usec, 4, 4) + bytes([sec] * 4)
                      for sec, usec in ((100, 0), (101, 500_000), (103, 0)))
    src.write_bytes(head + frames)
    assert cut_capture(src, dst, 101.0, 102.0) == 1
    data = dst.read_bytes()
    assert data[:24] == head and data[24:] == struct.pack("<IIII", 101, 500_000, 4, 4) + \
        bytes([101] * 4)
    src.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(20))  # pcapng: refused, named
    with pytest.raises(SwellError, match="not a pcap"):
        cut_capture(src, dst, 0, 1)


def test_kinds_the_testbed_does_not_run_are_refused():
    from swell.experiments.testbed_jobs import check_supported

    check_supported("swing", "httperf")
    with pytest.raises(SwellError, match="'bulk' does not run on a testbed"):
        check_supported("none", "bulk")


def test_a_late_machine_says_whether_its_start_signal_was_late():
    """The run's lateness problems name the cause: a start signal that reached the machine
    after the start time (with the measured rehearsal and the lead), or a machine that
    had it in time and was slow itself."""
    from swell.experiments.testbed_study import lateness_problems, start_and_lateness

    job = {"late_s": 0.0}
    statuses = {"a": {"start": 100.0, "signal_at": 96.0, "jobs": {"1": job}},
                "b": {"start": 100.0, "signal_at": 102.5, "jobs": {"1": {"late_s": 2.55}}},
                "c": {"start": 100.0, "signal_at": 97.0, "jobs": {"1": {"late_s": 1.5}}}}
    t0, late, early = start_and_lateness(statuses)
    assert t0 == 100.0 and early == {"a": 4.0, "b": -2.5, "c": 3.0}
    got = lateness_problems(late, early, {"delivery_s": 1.2, "lead_s": 4.0})
    assert got == ["testbed: b started its clients 2.5 s late (its start signal came 2.5 s "
                   "after the start time: lead 4.0 s, rehearsal 1.2 s)",
                   "testbed: c started its clients 1.5 s late (its start signal came 3.0 s "
                   "before the start time: the machine was slow to start them)"]
    with pytest.raises(SwellError, match="start times"):
        start_and_lateness({**statuses, "d": {"start": 101.0, "jobs": {}}})


def test_the_guide_lists_the_kinds_that_run_on_a_testbed():
    """docs/testbed.md names, per role, exactly the kinds whose class says ``testbed``."""
    import re

    from swell.generators import registry

    text = " ".join((REPO / "docs" / "testbed.md").read_text().split())
    said = re.search(r"backgrounds (.*?); foregrounds (.*?) \(", text)
    assert said, "docs/testbed.md: no list of the testbed's kinds"
    for role, listed in zip(("background", "foreground"), said.groups(), strict=True):
        names = {n for n, cls in registry.kinds(role).items() if cls.testbed}
        assert set(re.findall(r"`([a-z_]+)`", listed)) == names, (role, listed)
