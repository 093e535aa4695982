"""Interrupts, leftovers, resume and locking of a short ``swell run`` (root).

A one-configuration study (no background, httperf, 3 s) run as a real
``swell`` process and interrupted at a phase:

* SIGKILL once the topology is up: its processes and namespaces survive; the
  next ``swell run`` refuses to start beside them and names ``swell cleanup``;
  ``swell run --cleanup`` removes them, finishes the study, and nothing of
  either run is left on the host;
* SIGINT mid-run: exit 130, nothing left on the host, no ``run.json`` of the
  interrupted run, no temporary in the study; the next run finishes it;
* the file edited (``duration_s``): the finished run is rerun, said so, and
  ``results.json`` holds only the new run;
* a second ``swell run`` into a study in use: refused (the lock), exit 2;
* SIGKILL while the report is written: the previous report stays whole and
  the next report leaves no temporary.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, Mininet)"),
    pytest.mark.slow,
]

SWELL = [sys.executable, "-m", "swell"]
EXP = """
name: it-interrupts
duration_s: {duration}
warmup_s: 1
topology:
  network: 10.81.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 5}}
foreground: {{kind: httperf, object_bytes: 100000}}
"""


def sigint_default() -> None:
    """A child's SIGINT back to the default, in case this test run inherited it ignored
    (a background job of a non-interactive shell does; Python then keeps ignoring it,
    and a fresh-clone run started that way once saw ``swell run`` finish through its
    SIGINT with exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _swell(*argv: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "SWELL_QUIET": "1"}
    return subprocess.Popen([*SWELL, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, preexec_fn=sigint_default, **kw)


def _wait_for(cond, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "timed out"
        time.sleep(0.1)


def _topology_up(study: Path) -> bool:
    for host in study.glob("runs/*/rep0/host.json"):
        try:
            if "network" in json.loads(host.read_text()):
                return True
        except ValueError:
            pass
    return False


def _leftovers() -> list:
    from swell.topologies import cleanup as cl

    return [x for x in (cl.find_leftovers(p) for p in cl.find_prefixes())
            if not x.owner_alive and not x.empty()]


def _temporaries(d: Path) -> list[Path]:
    return [p for p in d.rglob(".*") if ".swell-" in p.name]


def test_kill_interrupt_resume_lock(tmp_path: Path) -> None:
    if _leftovers():
        pytest.skip("leftovers of another (killed) run on this host: run swell cleanup")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(duration=3))
    study = tmp_path / "study"

    # SIGKILL with the topology up: leftovers, refused, then --cleanup
    p = _swell("run", str(exp), "-o", str(study), "--no-report")
    _wait_for(lambda: _topology_up(study))
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert _leftovers(), "a killed run leaves its topology"
    p = _swell("run", str(exp), "-o", str(study), "--no-report")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "swell cleanup" in err, err
    p = _swell("run", str(exp), "-o", str(study), "--cleanup")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "cleaned up sw" in err
    assert _leftovers() == [] and _temporaries(study) == []
    assert (study / "report" / "index.html").is_file()
    report_before = (study / "report" / "index.html").read_bytes()

    # a second run into the study while one uses it: the lock
    exp.write_text(EXP.format(duration=2))
    p1 = _swell("run", str(exp), "-o", str(study), "--no-report")
    _wait_for(lambda: (study / ".lock").read_text().strip() == str(p1.pid))
    p2 = _swell("run", str(exp), "-o", str(study), "--no-report")
    _, err2 = p2.communicate(timeout=60)
    assert p2.returncode == 2 and f"pid {p1.pid}" in err2, err2

    # SIGINT mid-run (that first run reruns the edited spec): clean exit 130
    _wait_for(lambda: not list(study.glob("runs/*/rep0/run.json")) and _topology_up(study))
    time.sleep(1.0)
    p1.send_signal(signal.SIGINT)
    _, err1 = p1.communicate(timeout=60)
    assert p1.returncode == 130, err1
    assert "rerunning" in err1 and "spec changed" in err1
    assert _leftovers() == [] and _temporaries(study) == []
    assert list(study.glob("runs/*/rep0/run.json")) == []

    # resume after the edit: the new spec's run only
    p = _swell("run", str(exp), "-o", str(study), "--no-report")
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    data = json.loads((study / "results.json").read_text())
    assert data["experiment"]["duration_s"] == 2 and len(data["runs"]) == 1
    assert data["runs"][0]["spec"]["duration_s"] == 2
    assert oct((study / "results.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    # provenance read back (the unit of it: host.json of the run)
    host = json.loads(next(study.glob("runs/*/rep0/host.json")).read_text())
    assert host["python_packages"]["numpy"] and host["native_sha256"]["swell-link"]
    assert any("qdisc" in (n["qdiscs"] or "") for n in host["network"].values())

    # SIGKILL while the report is written: the old report stays whole
    p = _swell("report", str(study))
    time.sleep(1.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    page = (study / "report" / "index.html").read_bytes()
    assert page == report_before or page.endswith(b"</html>\n")
    p = _swell("report", str(study))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert _temporaries(study) == []


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old
