"""A study's run digest covers what a run reads, not only the experiment file.

Resume keeps a finished run only when its digest matches
(:func:`swell.experiments.runner.run_digest`). A run reads a separate topology
file and its traces and models; an edit there used to leave the digest as it
was, and the old runs were reused for the new inputs. Here: the digest moves
when those contents move, stays when they do not (a touched file, plots
written into a model), a run that reads no file keeps the digest older swells
gave it, and the rerun message names what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from swell.experiments import runner
from swell.experiments.runner import run_digest, run_inputs
from swell.experiments.schema import expand_runs, load_experiment

REPO = Path(__file__).resolve().parents[2]
TOPO = "network: 10.77.0.0/16\nbottleneck: {{rate_mbps: {rate}, delay_ms: 10}}\n"
HEAD = "name: d\nduration_s: 10\nwarmup_s: 1\n"


def plan_of(exp: Path):
    return expand_runs(load_experiment(exp), str(exp))[0]


def digest(exp: Path) -> str:
    return run_digest(plan_of(exp), False, "native", exp.parent)


def test_topology_file_edit_changes_the_digest(tmp_path: Path) -> None:
    """The issue's case: ``topology: topo.yaml``, the bottleneck edited there."""
    topo, exp = tmp_path / "topo.yaml", tmp_path / "exp.yaml"
    topo.write_text(TOPO.format(rate=20))
    exp.write_text(HEAD + "topology: topo.yaml\n")
    before = digest(exp)
    topo.write_text(TOPO.format(rate=10))
    after = digest(exp)
    assert after != before
    assert run_inputs(plan_of(exp))["topology"]["bottleneck"]["rate_mbps"] == 10
    topo.write_text("# a comment, same spec\n" + TOPO.format(rate=20))
    assert digest(exp) == before  # the resolved spec counts, not the text


def test_trace_and_model_contents_change_the_digest(tmp_path: Path) -> None:
    trace, model = tmp_path / "t.pcap", tmp_path / "m"
    shutil.copy(REPO / "data" / "pcap" / "example.pcap", trace)
    model.mkdir()
    (model / "model.json").write_text("{}")
    (model / "arrays.npz").write_bytes(b"x")
    exp = tmp_path / "exp.yaml"
    exp.write_text(HEAD + "topology: {network: 10.77.0.0/16, bottleneck: {rate_mbps: 20}}\n"
                   "sweep:\n  background:\n    - {kind: swing, trace: t.pcap, label: a}\n")
    exp_m = tmp_path / "exp-m.yaml"
    exp_m.write_text(exp.read_text().replace("trace: t.pcap", "model: m"))
    d_trace, d_model = digest(exp), digest(exp_m)
    assert set(run_inputs(plan_of(exp), tmp_path)["files"]) == {"background.trace"}
    st = trace.stat()
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same bytes
    (model / "plots").mkdir()
    (model / "plots" / "cdf.svg").write_text("<svg/>")  # swell model show's plots
    assert (digest(exp), digest(exp_m)) == (d_trace, d_model)
    data = bytearray(trace.read_bytes())
    data[-1] ^= 0xFF  # one payload byte of the last packet
    trace.write_bytes(bytes(data))
    (model / "arrays.npz").write_bytes(b"y")
    assert digest(exp) != d_trace and digest(exp_m) != d_model


def test_a_run_without_input_files_keeps_its_older_digest(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(HEAD + "topology: {network: 10.77.0.0/16, bottleneck: {rate_mbps: 20}}\n"
                   "background: {kind: poisson, rate_mbps: 2}\n")
    p = plan_of(exp)
    assert run_inputs(p, tmp_path) == {}
    spec = json.loads(p.spec.model_dump_json())
    del spec["tcp_ssthresh_cache"]
    old = hashlib.sha256(json.dumps({"spec": spec, "key": p.key, "repetition": p.repetition,
                                     "seed": p.seed, "full": False, "engine": "native"},
                                    sort_keys=True).encode()).hexdigest()[:16]
    assert run_digest(p, False, "native", tmp_path) == old


@pytest.mark.parametrize("case", ["same", "legacy", "topology", "trace"])
def test_the_rerun_says_why(tmp_path: Path, case: str) -> None:
    """What ``swell run`` prints for a finished run it does not keep."""
    topo, trace, exp = tmp_path / "topo.yaml", tmp_path / "t.pcap", tmp_path / "exp.yaml"
    topo.write_text(TOPO.format(rate=20))
    shutil.copy(REPO / "data" / "pcap" / "example.pcap", trace)
    exp.write_text(HEAD + "topology: topo.yaml\nbackground: {kind: swing, trace: t.pcap}\n")
    p = plan_of(exp)
    inputs = run_inputs(p, tmp_path)
    legacy = runner._digest(p, False, "native", {})
    rdir = tmp_path / "run"
    rdir.mkdir()
    digest = legacy if case == "legacy" else runner._digest(p, False, "native", inputs)
    (rdir / "run.json").write_text(json.dumps({"spec_digest": digest, "inputs": inputs}))
    if case == "topology":
        topo.write_text(TOPO.format(rate=10))
    elif case == "trace":
        trace.write_bytes(trace.read_bytes()[:-1])
    p = plan_of(exp)
    now = run_inputs(p, tmp_path)
    why = runner._reusable(rdir, runner._digest(p, False, "native", now), legacy, now)
    assert why == {"same": None,
                   "legacy": "its input files were not recorded (an older swell)",
                   "topology": "its inputs changed (the topology file)",
                   "trace": "its inputs changed (background.trace)"}[case]
