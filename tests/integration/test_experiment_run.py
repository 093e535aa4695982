"""End to end: a short study through `swell run` on this machine, then the report.

Checks that the runner lays out the dumbbell, runs no background and a Poisson
background with httperf in front, collects per-request response times from the
client capture that agree with httperf's own mean, writes consistent results
and a report, resumes without redoing finished runs, and leaves nothing behind.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np

from swell.cli import main as swell_main

EXP = """
name: it-mini
duration_s: 4
warmup_s: 1
topology:
  network: 10.79.0.0/16
  bottleneck: {rate_mbps: 20, delay_ms: 5, queue_bytes: 100000}
foreground: {kind: httperf, object_bytes: 200000}
sweep:
  background:
    - {kind: none, label: NBG}
    - {kind: poisson, rate_mbps: 8, label: Poisson 8M}
"""

def _leftovers(prefixes: set[str], study: Path) -> set[str]:
    """Namespaces, interfaces and processes of these runs (by prefix or study path)."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    found = {ln.split()[0] for ln in ns.splitlines() if any(p in ln for p in prefixes)}
    found |= {ln.split(":")[1].strip() for ln in links.splitlines()
              if any(p in ln for p in prefixes)}
    found |= {ln for ln in procs.splitlines()
              if str(study) in ln or any(f"--name {p}" in ln for p in prefixes)}
    return found


def test_short_study_end_to_end(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SWELL_QUIET", "1")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP)
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    data = json.loads((study / "results.json").read_text())
    assert data["format"] == "swell-results" and len(data["runs"]) == 2
    by = {r["label"]: r for r in data["runs"]}
    prefixes = {r["prefix"] for r in data["runs"]}
    assert all(re.fullmatch(r"sw[0-9a-f]{4}", p) for p in prefixes)
    assert _leftovers(prefixes, study) == set()
    for r in by.values():
        fg = r["foreground"]
        rts = np.asarray(fg["response_times_s"])
        assert rts.size >= 5, r["label"]
        # Capture-based times against httperf's own mean connection time (which also
        # counts the close): within 5% or 3 ms.
        hp = fg["httperf"]["conn_time_ms_avg"] / 1e3
        # The capture keeps what httperf counted: the replies completed before its stop
        # (a stop racing a reply's last packet can move one either way).
        assert abs(rts.size - fg["httperf"]["replies"]) <= 1, (rts.size, fg["httperf"])
        assert abs(rts.mean() - hp) <= max(0.05 * hp, 0.003), (rts.mean(), hp)
        # 200 kB over 20 Mbit/s takes at least 80 ms.
        assert rts.min() > 0.08
        assert all(c["dropped"] == 0 for c in r["captures"])
        assert r["engine"] in ("native", "netem")
    poisson = by["Poisson 8M"]["bottleneck"]["reverse"]
    assert 8 * 0.85 < poisson["bg_mean_mbps"] < 8 * 1.1
    assert poisson["energy"] is not None
    assert by["NBG"]["bottleneck"]["reverse"]["bg_mean_mbps"] == 0.0
    # Background load slows the downloads down.
    assert np.median(by["Poisson 8M"]["foreground"]["response_times_s"]) > np.median(
        by["NBG"]["foreground"]["response_times_s"])
    page = study / "report" / "index.html"
    assert page.exists() and "Poisson 8M" in page.read_text()
    # Re-running resumes: finished runs are not redone.
    stamp = {p: p.stat().st_mtime_ns for p in study.glob("runs/*/rep*/run.json")}
    assert swell_main(["run", str(exp), "-o", str(study), "--no-report"]) == 0
    assert {p: p.stat().st_mtime_ns for p in study.glob("runs/*/rep*/run.json")} == stamp
