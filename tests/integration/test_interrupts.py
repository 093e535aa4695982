"""Interrupts, leftovers, resume and locking of a short ``swell run`` (root).

A one-configuration study (Poisson UDP background, httperf, 2 s warm-up, 3 s)
run as a real ``swell`` process, and SIGINT and SIGKILL sent at each phase:

* **topology up**: the topology's state says ``up`` and no generator runs yet;
* **background start**: the background's sender (``swell-gen send``) runs and
  the foreground's client (httperf) does not yet;
* **mid-run**: httperf runs, the topology is up, no ``run.json`` yet;
* **report**: ``swell report``'s temporary directory (``.report.swell-PID-*``)
  exists in the study.

Each signal is sent when the phase's marker appears, and lands in the phase
for certain: the process is stopped (SIGSTOP) as soon as the marker is seen,
the phase is checked while it cannot move on (the next phase's marker absent),
and the signal is sent before it continues (SIGCONT). After a SIGKILL the
host holds exactly that phase's leftovers (no generator, the background's
sender, httperf); the next ``swell run`` refuses to start beside them and
names ``swell cleanup``, ``swell run --cleanup`` and ``swell cleanup`` remove
them. After a SIGINT: exit 130, nothing left on the host, no ``run.json`` of
the interrupted run, no temporary in the study. Besides: a second
``swell run`` into a study in use is refused (the lock); the file edited
(``duration_s``) reruns the finished run, says so, and ``results.json`` holds
only the new run; the provenance is read back; a report interrupted either way
leaves the previous one whole (SIGKILL leaves its temporary, which the next
report removes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, Mininet)"),
    pytest.mark.slow,
]

SWELL = [sys.executable, "-m", "swell"]
# marker polling: "topology up" is short and its marker (a state file) cheap to read;
# the others last seconds and walk /proc
POLL_S = {"topology up": 0.005, "background start": 0.02, "mid-run": 0.02, "report": 0.02}
STATE_ROOT = Path(os.environ.get("SWELL_STATE_ROOT", "/run/swell"))
EXP = """
name: it-interrupts
duration_s: {duration}
warmup_s: 2
topology:
  network: 10.81.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 5}}
background: {{kind: poisson, proto: udp, rate_mbps: 2}}
foreground: {{kind: httperf, object_bytes: 100000}}
"""
Phase = tuple[Callable[[subprocess.Popen, Path], bool], Callable[[subprocess.Popen, Path], str]]


def sigint_default() -> None:
    """A child's SIGINT back to the default, in case this test run inherited it ignored
    (a background job of a non-interactive shell does; Python then keeps ignoring it,
    and a fresh-clone run started that way once saw ``swell run`` finish through its
    SIGINT with exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _swell(*argv: str) -> subprocess.Popen:
    """A ``swell`` process whose output goes to a file: a killed run's children keep a
    pipe open, and reading it would wait for them."""
    env = {**os.environ, "SWELL_QUIET": "1"}
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (read back by _finish)
    p = subprocess.Popen([*SWELL, *argv], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                         text=True, env=env, preexec_fn=sigint_default)
    p.log = log  # type: ignore[attr-defined]
    return p


def _output(p: subprocess.Popen) -> str:
    p.log.seek(0)  # type: ignore[attr-defined]
    return p.log.read()  # type: ignore[attr-defined]


def _descendants(root: int) -> list[str]:
    """Command lines of ``root``'s descendants (Mininet's ``mnexec`` children included)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return out


def _running(p: subprocess.Popen, *words: str) -> bool:
    return any(w in c for c in _descendants(p.pid) for w in words)


# the traffic processes by their arguments (the run also starts ``httperf --version``
# and the like for its provenance)
GENERATORS = ("swell-gen recv", "swell-gen send", "swell-gen probe")
SENDER, HTTPERF = "swell-gen send", "httperf --hog"


def _state(p: subprocess.Popen) -> str | None:
    """The status of the topology ``p`` owns (``starting``, ``up``), None without one."""
    for f in STATE_ROOT.glob("sw*/state.json"):
        try:
            s = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if s.get("owner_pid") == p.pid:
            return s.get("status")
    return None


def _report_tmp(study: Path) -> list[Path]:
    return [d for d in study.glob(".report.swell-*") if d.is_dir()]


def _ok(cond: bool, why: str) -> str:
    return "" if cond else why


# phase -> (its marker, what must hold while the process is stopped: "" or what does not)
PHASES: dict[str, Phase] = {
    "topology up": (
        lambda p, s: _state(p) == "up",
        lambda p, s: _ok(not _running(p, *GENERATORS), "a generator already runs")),
    "background start": (
        lambda p, s: _running(p, SENDER),
        lambda p, s: _ok(not _running(p, HTTPERF), "httperf already runs")),
    "mid-run": (
        lambda p, s: _running(p, HTTPERF),
        lambda p, s: _ok(_state(p) == "up" and not list(s.glob("runs/*/rep*/run.json")),
                         "the topology is down or the run finished")),
    "report": (
        lambda p, s: bool(_report_tmp(s)),
        lambda p, s: _ok(bool(_report_tmp(s)), "the report's temporary is gone")),
}


def _signal_in(p: subprocess.Popen, study: Path, phase: str, sig: int,
               timeout: float = 120.0) -> str:
    """Send ``sig`` to ``p`` in ``phase``: stop it when the phase's marker appears, check
    the phase while it cannot move on, signal it, let it go on. Returns "" when the
    signal went, else why the phase was missed (the process goes on unsignalled)."""
    marker, holds = PHASES[phase]
    t0 = time.monotonic()
    while not marker(p, study):
        if p.poll() is not None:
            pytest.fail(f"swell exited {p.returncode} before {phase}: {_output(p)[-2000:]}")
        assert time.monotonic() - t0 < timeout, f"no {phase} within {timeout} s"
        time.sleep(POLL_S[phase])
    os.kill(p.pid, signal.SIGSTOP)
    try:
        why = holds(p, study)
        if not why:
            os.kill(p.pid, sig)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    return why


def _run_signalled(phase: str, study: Path, sig: int, *flags: str) -> subprocess.Popen:
    """A ``swell run`` sent ``sig`` in ``phase``. "topology up" lasts about 0.1 s here
    (state ``up`` to the first generator): a run that went past it before it could be
    stopped (a busy host) is killed, cleaned up, and tried again, at most 3 times."""
    why = ""
    for _ in range(3 if not flags else 1):
        p = _swell("run", str(study.parent / "exp.yaml"), "-o", str(study), "--no-report",
                   *flags)
        why = _signal_in(p, study, phase, sig)
        if not why:
            return p
        p.kill()
        p.wait()
        subprocess.run([*SWELL, "cleanup"], capture_output=True, timeout=120)
    pytest.fail(f"stopped after {phase}: {why}")


def _leftovers() -> list:
    from swell.topologies import cleanup as cl

    return [x for x in (cl.find_leftovers(p) for p in cl.find_prefixes())
            if not x.owner_alive and not x.empty()]


def _left_processes() -> str:
    return " | ".join(c for x in _leftovers() for c in x.processes.values())


def _temporaries(d: Path) -> list[Path]:
    return [p for p in d.rglob(".*") if ".swell-" in p.name]


def _finish(p: subprocess.Popen, code: int, timeout: float = 120.0) -> str:
    """Wait for ``p``; its exit status must be ``code``; its output."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail(f"swell {p.args[3:]} still ran after {timeout} s: {_output(p)[-2000:]}")
    out = _output(p)
    assert p.returncode == code, out[-3000:]
    return out


def _killed_in(phase: str, study: Path, *flags: str) -> str:
    """A run SIGKILLed in ``phase``; its output."""
    err = _finish(_run_signalled(phase, study, signal.SIGKILL, *flags), -signal.SIGKILL)
    assert _leftovers(), f"a run killed at {phase} leaves its topology"
    return err


def _interrupted_in(phase: str, study: Path) -> str:
    """A run SIGINTed in ``phase``: it unwinds, exit 130, and leaves nothing."""
    err = _finish(_run_signalled(phase, study, signal.SIGINT), 130)
    assert _leftovers() == [], f"SIGINT at {phase} left {_leftovers()}"
    assert _temporaries(study) == [], phase
    assert list(study.glob("runs/*/rep*/run.json")) == [], phase
    return err


def test_signals_at_every_phase(tmp_path: Path) -> None:
    if _leftovers():
        pytest.skip("leftovers of another (killed) run on this host: run swell cleanup")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(duration=3))
    study = tmp_path / "study"

    # SIGKILL at each phase of a run: that phase's leftovers, found and removed
    _killed_in("topology up", study)
    assert not any(g in _left_processes() for g in GENERATORS)
    p = _swell("run", str(exp), "-o", str(study), "--no-report")
    assert "swell cleanup" in _finish(p, 2, 60)
    assert "cleaned up sw" in _killed_in("background start", study, "--cleanup")
    assert SENDER in _left_processes() and HTTPERF not in _left_processes()
    assert "cleaned up sw" in _killed_in("mid-run", study, "--cleanup")
    assert HTTPERF in _left_processes()
    p = subprocess.run([*SWELL, "cleanup"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert _leftovers() == []

    # SIGINT at each phase: a clean unwind
    for phase in ("topology up", "background start", "mid-run"):
        _interrupted_in(phase, study)

    # the study finishes (the killed runs' stale temporaries go with the next writes)
    p = _swell("run", str(exp), "-o", str(study))
    _finish(p, 0)
    assert _leftovers() == [] and _temporaries(study) == []
    report_before = (study / "report" / "index.html").read_bytes()
    host = json.loads(next(study.glob("runs/*/rep0/host.json")).read_text())
    assert host["python_packages"]["numpy"] and host["native_sha256"]["swell-link"]
    assert any("qdisc" in (n["qdiscs"] or "") for n in host["network"].values())

    # the file edited: a second run into the study in use is refused (the lock); the
    # first one reruns the edited spec and says so (SIGINT mid-run, again)
    exp.write_text(EXP.format(duration=2))
    p1 = _swell("run", str(exp), "-o", str(study), "--no-report")
    t0 = time.monotonic()
    while _lock_holder(study) != str(p1.pid):
        assert time.monotonic() - t0 < 60 and p1.poll() is None, "the run took no lock"
        time.sleep(0.05)
    p2 = _swell("run", str(exp), "-o", str(study), "--no-report")
    assert f"pid {p1.pid}" in _finish(p2, 2, 60)
    assert not _signal_in(p1, study, "mid-run", signal.SIGINT)
    err = _finish(p1, 130)
    assert "rerunning" in err and "spec changed" in err, err
    assert _leftovers() == [] and _temporaries(study) == []
    assert list(study.glob("runs/*/rep0/run.json")) == []

    # resume after the edit: the new spec's run only
    _finish(_swell("run", str(exp), "-o", str(study), "--no-report"), 0)
    data = json.loads((study / "results.json").read_text())
    assert data["experiment"]["duration_s"] == 2 and len(data["runs"]) == 1
    assert data["runs"][0]["spec"]["duration_s"] == 2
    assert oct((study / "results.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())

    # the report: SIGINT while it is written removes its temporary; SIGKILL leaves it
    # (proof that the kill landed mid-write) and the next report removes it; the
    # previous report stays whole throughout
    p = _swell("report", str(study))
    assert not _signal_in(p, study, "report", signal.SIGINT)
    _finish(p, 130)
    assert _report_tmp(study) == []
    assert (study / "report" / "index.html").read_bytes() == report_before
    p = _swell("report", str(study))
    assert not _signal_in(p, study, "report", signal.SIGKILL)
    _finish(p, -signal.SIGKILL)
    assert _report_tmp(study), "a report killed mid-write leaves its temporary"
    assert (study / "report" / "index.html").read_bytes() == report_before
    _finish(_swell("report", str(study)), 0)
    assert _temporaries(study) == []
    page = (study / "report" / "index.html").read_bytes()
    assert page != report_before and page.rstrip().endswith(b"</html>")


def _lock_holder(study: Path) -> str:
    try:
        return (study / ".lock").read_text().strip()
    except OSError:
        return ""


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
