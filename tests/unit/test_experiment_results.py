"""Results files, background-to-topology mapping, and the report from results alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter

from swell.analysis.energy import energy_plot
from swell.errors import SwellError
from swell.experiments.report import make_report
from swell.experiments.results import (
    assemble_results,
    baseline_label,
    group_runs,
    load_results,
)
from swell.experiments.schema import BackgroundSpec, ExperimentTopology
from swell.experiments.topology_plan import topology_for
from swell.generators import registry
from swell.placement import HostNeeds, PathFacts
from swell.topologies.spec import LinkDir, spec_from_dict

_BG: TypeAdapter = TypeAdapter(BackgroundSpec)

TOPO = ExperimentTopology.model_validate(
    {"network": "10.77.0.0/16", "bottleneck": {"rate_mbps": 20, "delay_ms": 10},
     "clients": {"count": 40}, "servers": {"count": 10}})

# the shared data beside the checkout (sources and licences: its README); optional
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def _needs(bg: dict, model: str | None = None) -> HostNeeds:
    kind = registry.make("background", _BG.validate_python(bg))
    if model is not None:
        kind.model = Path(model)  # as prepare() would set it
    return kind.needs()


def test_topology_for_each_background_kind():
    swing = topology_for(TOPO, _needs({"kind": "swing", "model": "m"}, "/m"))
    assert swing["clients"]["count"] == 40
    assert swing["clients"]["model"] == {"path": "/m", "side": "client"}
    assert "access" not in swing["clients"]
    assert swing["servers"]["model"]["side"] == "server"
    cbr = topology_for(TOPO, _needs({"kind": "cbr", "rate_mbps": 3}))
    assert cbr["clients"]["count"] == 1 and cbr["clients"]["access"] == {}
    none = topology_for(TOPO, _needs({"kind": "none"}))
    assert none["clients"] == {"count": 0} and none["servers"] == {"count": 0}
    lossy = topology_for(TOPO, _needs({"kind": "fixed_loss", "loss": 0.01}))
    assert lossy["bottleneck"]["loss"] == 0.01 and lossy["clients"] == {"count": 0}
    assert TOPO.clients.count == 40  # the input is not changed
    explicit = TOPO.model_copy(update={"clients": TOPO.clients.model_copy(
        update={"count": 2, "access": LinkDir(delay_ms=3)})})
    got = topology_for(explicit, _needs({"kind": "swing", "model": "m"}, "/m"))["clients"]
    assert got["count"] == 2 and got["access"]["delay_ms"] == 3 and "model" not in got
    default = ExperimentTopology.model_validate({"bottleneck": {"rate_mbps": 20}})
    swing = topology_for(default, _needs({"kind": "swing", "model": "m"}, "/m"))
    assert swing["clients"]["count"] == 50 and swing["servers"]["count"] == 10
    # every result is a valid topology spec
    for bg in ({"kind": "swing", "model": "m"}, {"kind": "cbr", "rate_mbps": 3},
               {"kind": "none"}, {"kind": "fixed_loss", "loss": 0.01}):
        spec_from_dict(topology_for(TOPO, _needs(bg, "/m")))


def test_open_loop_rate_above_the_bottleneck_is_an_error():
    def check(bg: dict, fwd: float, rev: float | None = None) -> list[str]:
        kind = registry.make("background", _BG.validate_python(bg))
        return kind.check_path(PathFacts(forward_mbps=fwd, reverse_mbps=rev or fwd))

    assert check({"kind": "cbr", "rate_mbps": 19}, 20) == []
    with pytest.raises(SwellError, match="at or above the bottleneck"):
        check({"kind": "poisson", "rate_mbps": 25}, 20)
    with pytest.raises(SwellError, match="5 Mbit/s"):
        check({"kind": "cbr", "rate_mbps": 8}, 20, 5)


def _run(label: str, kind: str, rep: int, rts: np.ndarray, rng: np.random.Generator) -> dict:
    x = rng.poisson(50, 4096).astype(float)
    d = {"bg_mean_mbps": 3.3, "all_mean_mbps": 10.0, "series_bin_s": 0.1,
         "series_mbps": rng.uniform(2, 4, 50).tolist(), "energy": energy_plot(x, 1e-3).to_dict()}
    return {"key": label.replace(" ", "-"), "label": label, "repetition": rep, "seed": rep,
            "background_kind": kind, "engine": "native", "bottleneck": {"forward": d,
            "reverse": d}, "foreground": {"response_times_s": rts.tolist()}, "captures": []}


def _study(tmp: Path) -> Path:
    rng = np.random.default_rng(1)
    (tmp / "runs").mkdir()
    write = {}
    for label, kind, scale in (("no background", "none", 1.0), ("Poisson", "poisson", 1.5)):
        for rep in range(2):
            rts = rng.lognormal(np.log(0.5 * scale), 0.2, 40)
            d = tmp / "runs" / label.replace(" ", "-") / f"rep{rep}"
            d.mkdir(parents=True)
            (d / "run.json").write_text(json.dumps(_run(label, kind, rep, rts, rng)))
            write[(label, rep)] = rts
    (tmp / "experiment.json").write_text(json.dumps({"spec": {"name": "t", "duration_s": 5,
                                                              "warmup_s": 1, "seed": 1}}))
    (tmp / "host.json").write_text(json.dumps({"kernel": "x", "swell_version": "0"}))
    return tmp


def test_assemble_and_load(tmp_path: Path):
    study = _study(tmp_path)
    assemble_results(study)
    data = load_results(study)
    groups = group_runs(data)
    assert list(groups) == ["Poisson", "no background"] or list(groups) == [
        "no background", "Poisson"]
    assert all(len(v) == 2 for v in groups.values())
    assert baseline_label(data) == "no background"


def test_load_rejects_other_versions(tmp_path: Path):
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"format": "swell-results", "version": 99, "runs": [{}]}))
    with pytest.raises(SwellError, match="version 99"):
        load_results(p)
    p.write_text("{not json")
    with pytest.raises(SwellError, match="not valid JSON"):
        load_results(p)


def test_report_from_results_alone(tmp_path: Path):
    study = _study(tmp_path)
    assemble_results(study)
    page = make_report(study)
    text = page.read_text()
    for name in ("energy-reverse", "timeseries-reverse", "response-cdf", "slowdown"):
        assert (page.parent / f"{name}.png").stat().st_size > 1000
        assert (page.parent / f"{name}.svg").exists()
    assert text.count("data:image/png;base64,") >= 4
    assert "Poisson" in text and "no background" in text
    # slowdown of the 1.5x-slower configuration shows in the table (median ~1.5)
    row = next(r for r in text.split("<tr>") if r.startswith("<td>Poisson"))
    cells = [c.split("</td>")[0] for c in row.split("<td>")[1:]]
    assert 1.2 < float(cells[6]) < 1.8
    assert "Problems and warnings" not in text


def test_report_shows_problems_and_warnings(tmp_path: Path):
    study = _study(tmp_path)
    run = next((study / "runs").glob("Poisson/rep0/run.json"))
    entry = json.loads(run.read_text())
    entry["problems"] = ["delivered 41% of the asked load"]
    entry["warnings"] = ["the stream rate is above the bottleneck"]
    run.write_text(json.dumps(entry))
    assemble_results(study)
    text = make_report(study).read_text()
    assert "Problems and warnings" in text
    assert "Poisson rep 0: problem: delivered 41% of the asked load" in text
    assert "warning: the stream rate is above the bottleneck" in text


def test_baseline_is_the_no_background_run_at_the_same_sweep_point():
    def run(label, kind, cap):
        return {"label": label, "background_kind": kind, "key": label, "repetition": 0,
                "point": {"topology.bottleneck.rate_mbps": cap, "background": kind}}

    data = {"experiment": {}, "runs": [run("5 / NBG", "none", "5"), run("5 / P", "poisson", "5"),
                                       run("20 / NBG", "none", "20"),
                                       run("20 / P", "poisson", "20")]}
    from swell.experiments.report import slowdown_title
    from swell.experiments.results import baseline_for

    assert baseline_for(data, "5 / P") == "5 / NBG"
    assert baseline_for(data, "20 / P") == "20 / NBG"
    slow = {"5 / P": {}, "20 / P": {}}
    # the plot's title names one baseline only when every bar has that one
    assert slowdown_title(data, slow) == "Slowdown against no background at the same point"
    assert slowdown_title(data, {"5 / P": {}}) == "Slowdown against 5 / NBG"
    data["experiment"]["baseline"] = "20 / NBG"
    assert baseline_for(data, "5 / P") == "20 / NBG"
    assert slowdown_title(data, slow) == "Slowdown against 20 / NBG"


def test_every_experiment_file_validates():
    from swell.experiments.schema import expand_runs, load_experiment

    root = Path(__file__).resolve().parents[2] / "experiments"
    files = sorted(root.glob("*.yaml")) + sorted((root / "paper").glob("*.yaml"))
    assert len(files) >= 9
    for f in files:
        for full in (False, True):
            runs = expand_runs(load_experiment(f, full=full), str(f))
            assert runs, f
            for r in runs:
                bg = r.spec.background
                for p in (getattr(bg, "trace", None), getattr(bg, "model", None)):
                    # the paper's composites are built from the shared captures by
                    # experiments/paper/make_traces.sh (test_paper_files checks them)
                    if p and "out/paper/traces/" not in str(p):
                        if "shared/data/" in str(p) and not SHARED.exists():
                            continue  # the shared data is optional (tests skip without it)
                        assert (f.parent / p).exists(), (f, p)


def test_tcp_ssthresh_cache_is_validated_and_keeps_older_digests(tmp_path: Path):
    """The ssthresh cache is a typed run-wide option (off by default); off, a run's digest
    is what it was before the option existed, so finished studies stay resumable; on, the
    runs are different runs."""
    from swell.experiments.runner import run_digest
    from swell.experiments.schema import expand_runs, load_experiment

    text = (Path(__file__).resolve().parents[2] / "experiments" / "demo.yaml").read_text()
    plain, on, bad = (tmp_path / f"{n}.yaml" for n in ("plain", "on", "bad"))
    plain.write_text(text)
    on.write_text(text + "\ntcp_ssthresh_cache: true\n")
    bad.write_text(text + "\ntcp_ssthresh_cache: sometimes\n")
    with pytest.raises(SwellError, match="tcp_ssthresh_cache"):
        load_experiment(bad)
    p0 = expand_runs(load_experiment(plain), str(plain))[0]
    p1 = expand_runs(load_experiment(on), str(on))[0]
    assert p0.spec.tcp_ssthresh_cache is False and p1.spec.tcp_ssthresh_cache is True
    spec = json.loads(p0.spec.model_dump_json())
    del spec["tcp_ssthresh_cache"]
    import hashlib

    old = hashlib.sha256(json.dumps({"spec": spec, "key": p0.key, "repetition": p0.repetition,
                                     "seed": p0.seed, "full": False, "engine": "native"},
                                    sort_keys=True).encode()).hexdigest()[:16]
    assert run_digest(p0, False, "native") == old
    assert run_digest(p1, False, "native") != old
