"""`swell run FILE -o RELATIVE_DIR` from another working directory, through the real command.

The tools a run starts are given paths inside the study directory: Apache's
PidFile and ErrorLog (which Apache resolves against its ServerRoot,
/etc/apache2), pathload's log beside its working directory. A relative study
directory once reached them as relative paths and Apache exited at start
("apache2: exited at start: no log"). The runner makes the study directory
absolute at its edge; this test runs the ``swell`` executable with a relative
experiment file and a relative ``-o`` from a temporary working directory and
checks that the run completes, its downloads are measured, and everything it
wrote is under that directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXP = """
name: it-relative
duration_s: 3
warmup_s: 1
topology:
  network: 10.81.0.0/16
  bottleneck: {rate_mbps: 20, delay_ms: 5, queue_bytes: 100000}
foreground: {kind: httperf, object_bytes: 200000}
background: {kind: none}
"""


def test_relative_study_directory(tmp_path: Path) -> None:
    (tmp_path / "exps").mkdir()
    (tmp_path / "exps" / "mini.yaml").write_text(EXP)
    swell = Path(sys.executable).with_name("swell")
    proc = subprocess.run([str(swell), "run", "exps/mini.yaml", "-o", "out/study",
                           "--no-report"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "SWELL_QUIET": "1"}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    study = tmp_path / "out" / "study"
    assert f"study: {study}" in proc.stdout  # said as the absolute path
    runs = json.loads((study / "results.json").read_text())["runs"]
    assert len(runs) == 1
    rts = runs[0]["foreground"]["response_times_s"]
    assert len(rts) >= 3 and min(rts) > 0.08  # 200 kB over 20 Mbit/s: at least 80 ms
    # Apache ran with its files in the run's own directory, nowhere else
    logs = list(study.glob("runs/*/rep0/foreground/apache/apache-error.log"))
    assert len(logs) == 1, sorted(p.relative_to(study) for p in study.rglob("*"))
    assert not (Path("/etc/apache2") / "out").exists()
