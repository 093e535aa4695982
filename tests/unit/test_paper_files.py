"""The paper's figure files (experiments/paper/): they validate and ask the paper's settings.

Every file (Figures 2-14 and base.yaml) loads with and without ``--full`` and
passes ``swell check`` (schema, topology, traces and models, address plan).
Figures 2-9 are then held to the settings of seed 004 that docs/paper.md
compares against: the capacities, the loads per figure (every background of a
figure asks the same server -> client rate, the Swing ones computed from their
models with the variant applied), three distinct traces in Figure 9, the
topology left to the background kind, a header quoting the paper's section.

The Mawi and Mawi2 stand-ins are composites of shared captures built by
``experiments/paper/make_traces.sh`` into out/paper/traces/; this test builds
them when missing and skips the files that need them when the shared captures
are absent, saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paper_composites import PAPER, SHARED, composites, needs_composites

FIGURES = ["fig02_03_backgrounds", "fig04_simple_models", "fig05_fixed_loss", "fig06_poisson",
           "fig07_swing", "fig08_capacity", "fig09_bursty", "fig10_video",
           "fig11_video_buffering", "fig12_bwest", "fig13_reverse", "fig14_timescales"]
IP_PER_PAYLOAD = 1500 / 1448  # a full TCP segment's IP bytes over its payload


def _load(name: str, full: bool = False):  # type: ignore[no-untyped-def]
    from swell.experiments.schema import load_experiment

    return load_experiment(PAPER / f"{name}.yaml", full=full)


@pytest.mark.parametrize("name", ["base", *FIGURES])
@pytest.mark.parametrize("full", [False, True])
def test_file_validates(name: str, full: bool) -> None:
    from swell.experiments.check import check_experiment
    from swell.experiments.schema import expand_runs

    path = PAPER / f"{name}.yaml"
    exp = _load(name, full)
    assert expand_runs(exp, str(path))
    if name == "base":
        return  # no sweep, no background: what the figures extend
    if needs_composites(path) and not composites():
        pytest.skip(f"{name}: the Mawi/Mawi2 composites need the shared captures under {SHARED}")
    summary = check_experiment(path, full=full)
    assert summary.runs == len(expand_runs(exp, str(path)))
    if full and name == "fig12_bwest":  # the paper's 25 runs; each 8 s run gives SLoPS
        assert exp.repetitions == 25  # converged ranges and the chirp estimates (its header)
    elif full:  # the paper's lengths; Figures 2-3 are one long run per background
        assert exp.duration_s >= 60, name
        if name in FIGURES[:9]:  # Figures 12-14 choose their own (docs/bwest.md, fig13-14.md)
            assert exp.repetitions >= (1 if name.startswith("fig02") else 5), name


def test_every_figure_file_is_listed() -> None:
    assert len(FIGURES) == 12  # Figures 2-14, 2 and 3 share one file
    assert sorted(p.stem for p in PAPER.glob("fig*.yaml")) == sorted(FIGURES)


@pytest.mark.parametrize("name", FIGURES[:9])
def test_header_quotes_the_paper(name: str) -> None:
    head = (PAPER / f"{name}.yaml").read_text().split("\nextends:")[0]
    assert "seed 004" in head and "section" in head and '"' in head, name


def _points(name: str) -> list[tuple[dict, object]]:
    from swell.experiments.schema import expand_runs

    exp = _load(name)
    out = []
    seen = set()
    for plan in expand_runs(exp, name):
        if plan.key not in seen:
            seen.add(plan.key)
            out.append((dict(plan.point), plan.spec))
    return out


def _asked_s2c(bg, tmp: Path) -> float:  # type: ignore[no-untyped-def]
    """The server -> client rate (Mbit/s, IP level) a background asks."""
    if bg.kind in ("cbr", "poisson"):
        return float(bg.rate_mbps)
    if bg.kind in ("upb", "tpb"):
        assert bg.loop, "playback must run for the whole run"
        return float(bg.target_mbps)
    assert bg.kind == "swing", bg.kind
    from swell.extract.model import load_model
    from swell.generators.models import apply_variant, base_model

    model = load_model(apply_variant(base_model(None, bg.trace, tmp, PAPER), bg.variant, tmp))
    scale = float(model.meta.get("rate_scale", 1.0))
    s2c = sum(a["bytes_s2c"] for a in model.meta["apps"].values())
    return 8.0 * s2c * scale / model.duration_s / 1e6 * IP_PER_PAYLOAD


@pytest.mark.parametrize("name, capacity, loads", [
    ("fig02_03_backgrounds", 20, {3.3}),
    ("fig04_simple_models", 15, {10.0}),
    ("fig05_fixed_loss", 15, {10.0}),
    ("fig06_poisson", 20, {3.3, 6.6, 13.2}),
    ("fig07_swing", 20, {3.3, 6.6, 13.2}),
    ("fig09_bursty", 20, {3.3, 7.8, 10.8}),
])
def test_loads_are_the_papers(name: str, capacity: float, loads: set[float],
                              tmp_path: Path) -> None:
    if needs_composites(PAPER / f"{name}.yaml") and not composites():
        pytest.skip(f"{name}: the composites need the shared captures under {SHARED}")
    asked = []
    for _, spec in _points(name):
        assert spec.topology.bottleneck.rate_mbps == capacity
        bg = spec.background
        if bg.kind in ("none", "fixed_loss"):
            continue
        rate = _asked_s2c(bg, tmp_path)
        match = [x for x in loads if abs(rate - x) <= 0.05 * x]
        assert match, f"{name} {bg.label}: asks {rate:.2f} Mbit/s, not one of {loads}"
        asked.append(match[0])
    assert set(asked) == loads, name


def test_figure4_has_every_background_of_the_paper() -> None:
    got = {(spec.background.kind, getattr(spec.background, "proto", None))
           for _, spec in _points("fig04_simple_models")}
    assert got == {("none", None), ("cbr", "udp"), ("cbr", "tcp"), ("poisson", "udp"),
                   ("poisson", "tcp"), ("upb", None), ("tpb", None), ("swing", None)}
    traces = {spec.background.trace for _, spec in _points("fig04_simple_models")
              if spec.background.kind in ("upb", "tpb", "swing")}
    assert len(traces) == 1 and traces.pop().endswith("mawi2.pcap")  # one source, Mawi2


def test_figure8_capacities_and_loads() -> None:
    pts = _points("fig08_capacity")
    caps = sorted({spec.topology.bottleneck.rate_mbps for _, spec in pts})
    assert caps == [5, 10, 20, 50, 100]
    for _, spec in pts:
        bg = spec.background
        if bg.kind == "poisson":
            assert bg.rate_mbps == 3.3 and bg.proto == "tcp"
        elif bg.kind == "swing":
            assert bg.variant.target_mbps == 3.4 and bg.variant.hb_rtt_ms is None


def test_figure9_three_traces_and_their_high_burst_variants() -> None:
    by_trace: dict[str, list[float | None]] = {}
    for _, spec in _points("fig09_bursty"):
        bg = spec.background
        if bg.kind == "swing":
            by_trace.setdefault(Path(bg.trace).name, []).append(bg.variant.hb_rtt_ms)
    assert sorted(by_trace) == ["example.pcap", "mawi.pcap", "mawi2.pcap"]
    for hb in by_trace.values():
        assert sorted(hb, key=lambda x: x or 0) == [None, 4]


@pytest.mark.parametrize("name", FIGURES[:7])
def test_topology_left_to_the_background(name: str) -> None:
    """Figures 2-9 let the kind size its host pools for the load (docs/scale.md)."""
    for _, spec in _points(name):
        assert spec.topology.clients.count is None and spec.topology.servers.count is None


@pytest.mark.parametrize("name", FIGURES[7:])
def test_other_figures_keep_base_counts(name: str) -> None:
    """base.yaml's fixed pools still reach the figures 10-14 that rely on them (a file
    that names its own counts keeps those)."""
    import yaml

    raw = yaml.safe_load((PAPER / f"{name}.yaml").read_text())
    topo = raw.get("topology") or {}
    own = ((topo.get("clients") or {}).get("count"), (topo.get("servers") or {}).get("count"))
    want = own if own != (None, None) else (40, 10) if raw.get("extends") == "base.yaml" \
        else (None, None)
    for _, spec in _points(name):
        assert (spec.topology.clients.count, spec.topology.servers.count) == want, name


@pytest.mark.parametrize("name", FIGURES)
def test_tcp_caches_ssthresh_as_the_papers_kernel(name: str) -> None:
    """The paper's Linux 2.6.10 cached ssthresh per destination; base.yaml turns the cache
    on, so every figure that extends it runs its TCP backgrounds beside back-to-back
    downloads as the paper did (docs/paper.md, Figure 4). Figure 12 is self-contained:
    its backgrounds are UDP and Swing against UDP probes, measured without the cache
    (docs/bwest.md)."""
    import yaml

    raw = yaml.safe_load((PAPER / f"{name}.yaml").read_text())
    want = raw.get("extends") == "base.yaml"
    assert want == (name != "fig12_bwest"), name
    assert {spec.tcp_ssthresh_cache for _, spec in _points(name)} == {want}, name
    if want:
        assert "2.6.10" in (PAPER / "base.yaml").read_text()
