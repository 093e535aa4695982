"""A missing pathload binary: ``swell run`` exits 3 before anything runs, ``swell check``
warns.

pathload and pathChirp are not packaged (docs/bwest.md), so a file with ``kind:
pathload`` meets hosts without them. ``swell run`` asks every configuration's
kinds for their programs before its first run (experiments/check.py,
``host_problems``): exit 3 with one line naming the program, and no study
directory (the subprocess's sweep lists pathload first, so that a regression
fails here without building a network; the in-process test shows a second
configuration is asked too).
``swell check`` checks the file, which may be meant for other machines (a
testbed, or CI without the hand-built tools): exit 0, with a warning naming the
program and what ``swell run`` would do here. Both run as the ``swell`` command
in a subprocess whose PATH is an empty directory; no root is needed (nothing
is built).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swell.errors import EnvironmentProblem
from swell.experiments.check import check_experiment

EXP = """name: missing-pathload
duration_s: 5
warmup_s: 1
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: 20, delay_ms: 5, queue_bytes: 300000}}
background: {{kind: none}}
sweep:
  foreground:
    - {{kind: {first}, label: {first}}}
    - {{kind: {second}, label: {second}}}
"""


def _swell(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    empty = tmp / "empty-bin"
    empty.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": str(empty), "SWELL_QUIET": "1"}
    return subprocess.run([sys.executable, "-m", "swell", *args], env=env, text=True,
                          capture_output=True, timeout=120, cwd=tmp)


def test_run_exits_3_before_its_first_run(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(first="pathload", second="slops"))
    study = tmp_path / "study"
    p = _swell(tmp_path, "run", str(exp), "-o", str(study))
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("swell: pathload_snd: not on PATH"), lines
    assert "docs/bwest.md" in lines[0] and "Traceback" not in p.stderr
    assert not study.exists()  # refused by the check, before the first run


def test_check_warns_and_passes(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(first="slops", second="pathload"))
    p = _swell(tmp_path, "check", str(exp))
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "ok: 2 configurations" in p.stdout
    (line,) = [x for x in p.stderr.splitlines() if "pathload_snd" in x]
    assert line.startswith(f"swell: {exp}: warning: configuration 'pathload': foreground: "
                           "pathload_snd: not on PATH"), line
    assert line.endswith("'swell run' on this host stops there (exit 3)"), line


def test_check_with_host_raises_what_run_raises(tmp_path: Path, monkeypatch) -> None:
    """The same pass in process, pathload the second configuration: warnings by
    default, exit 3 with ``host``; with the programs present (stand-ins on PATH)
    neither."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(first="slops", second="pathload"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert any("pathload_snd" in w for w in check_experiment(exp).warnings)
    with pytest.raises(EnvironmentProblem, match="pathload_snd: not on PATH") as err:
        check_experiment(exp, host=True)
    assert err.value.exit_code == 3
    for prog in ("pathload_snd", "pathload_rcv"):
        stub = tmp_path / prog
        stub.write_text("#!/bin/sh\nexit 1\n")
        stub.chmod(0o755)
    assert not any("pathload" in w for w in check_experiment(exp, host=True).warnings)
