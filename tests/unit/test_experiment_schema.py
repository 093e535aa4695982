"""Experiment files: schema, extends, full overrides, sweeps, errors with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from swell.errors import SwellError
from swell.experiments.schema import derive_seed, expand_runs, load_experiment

TOPO = "topology: {bottleneck: {rate_mbps: 10}}\n"


def write(tmp: Path, name: str, text: str, topo: bool = True) -> Path:
    """An experiment file; a topology is appended (after the lines tests point at)
    unless the file extends another or names its own."""
    p = tmp / name
    if topo and "extends:" not in text and "topology" not in text:
        text += TOPO
    p.write_text(text)
    return p


def test_minimal_and_defaults(tmp_path):
    exp = load_experiment(write(tmp_path, "a.yaml", "name: a\n"))
    assert exp.name == "a" and exp.background.kind == "none" and exp.repetitions == 1
    assert exp.foreground.kind == "httperf" and exp.topology_spec().bottleneck.rate_mbps == 10
    with pytest.raises(SwellError, match="topology: Field required"):
        load_experiment(write(tmp_path, "b.yaml", "name: b\n", topo=False))


def test_misspelled_topology_key_names_line_and_field(tmp_path):
    p = write(tmp_path, "a.yaml", "name: a\ntopology:\n  bottleneck:\n    capacity_mbps: 10\n")
    with pytest.raises(SwellError) as ei:
        load_experiment(p)
    assert f"{p}:4" in str(ei.value) and "topology.bottleneck.capacity_mbps" in str(ei.value)
    p = write(tmp_path, "b.yaml", "name: b\ntopology:\n  bottleneck: {rate_mbps: 10}\n"
              "  clients: {count: 2, namespaces: 3}\n")
    with pytest.raises(SwellError, match=r"b.yaml:4: topology.clients: .*namespaces"):
        load_experiment(p)


def test_a_topology_file_is_validated(tmp_path):
    write(tmp_path, "t.yaml", "bottleneck: {rate_mbps: 10}\nservers: {cont: 3}\n", topo=False)
    exp = load_experiment(write(tmp_path, "a.yaml", "name: a\ntopology: t.yaml\n"))
    with pytest.raises(SwellError, match=r"t.yaml:2: servers.cont"):
        exp.topology_spec()


def test_a_kind_switch_in_a_child_file_replaces_the_options(tmp_path):
    write(tmp_path, "base.yaml", "name: base\nforeground: {kind: httperf, object_bytes: 5}\n")
    p = write(tmp_path, "c.yaml", "extends: base.yaml\nforeground: {kind: none}\n")
    assert load_experiment(p).foreground.kind == "none"


def test_unknown_key_names_line_and_field(tmp_path):
    p = write(tmp_path, "a.yaml", "name: a\nbackground:\n  kind: poisson\n  rate_mpbs: 3\n")
    with pytest.raises(SwellError) as ei:
        load_experiment(p)
    msg = str(ei.value)
    assert f"{p}:4" in msg and "background.rate_mpbs" in msg


def test_bad_enum_and_semantic_check(tmp_path):
    p = write(tmp_path, "a.yaml", "name: a\nbackground:\n  kind: swirl\n")
    with pytest.raises(SwellError, match=r"a.yaml:3: background.kind"):
        load_experiment(p)
    p = write(tmp_path, "b.yaml", "name: b\nbackground: {kind: poisson}\n")
    with pytest.raises(SwellError, match="needs rate_mbps"):
        load_experiment(p)


def test_yaml_syntax_error_has_line(tmp_path):
    p = write(tmp_path, "a.yaml", "name: a\nfoo: [1, 2\nbar: 3\n")
    with pytest.raises(SwellError, match=r"a.yaml:\d+: not valid YAML"):
        load_experiment(p)


def test_extends_and_full(tmp_path):
    write(tmp_path, "base.yaml", "name: base\nduration_s: 30\nforeground: {object_bytes: 4096}\n"
          "full:\n  duration_s: 600\n")
    p = write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\nforeground: {objects: 5}\n")
    exp = load_experiment(p)
    assert exp.name == "child" and exp.duration_s == 30
    assert exp.foreground.object_bytes == 4096 and exp.foreground.objects == 5
    assert load_experiment(p, full=True).duration_s == 600


def test_extends_cycle_and_missing(tmp_path):
    write(tmp_path, "x.yaml", "extends: y.yaml\nname: x\n")
    write(tmp_path, "y.yaml", "extends: x.yaml\nname: y\n")
    with pytest.raises(SwellError, match="cycle"):
        load_experiment(tmp_path / "x.yaml")
    with pytest.raises(SwellError, match="no such file"):
        load_experiment(write(tmp_path, "z.yaml", "extends: nope.yaml\nname: z\n"))


def test_sweep_expands_product_with_stable_seeds(tmp_path):
    p = write(tmp_path, "s.yaml", """
name: s
repetitions: 2
sweep:
  background:
    - {kind: none}
    - {kind: poisson, rate_mbps: 3}
  topology.bottleneck.rate_mbps: [10, 20]
topology: {bottleneck: {rate_mbps: 5}}
""")
    exp = load_experiment(p)
    runs = expand_runs(exp)
    assert len(runs) == 2 * 2 * 2
    assert {r.spec.topology_spec().bottleneck.rate_mbps for r in runs} == {10, 20}
    assert len({(r.key, r.repetition) for r in runs}) == 8
    assert [r.seed for r in runs] == [r.seed for r in expand_runs(load_experiment(p))]
    assert len({r.seed for r in runs}) == 8
    assert derive_seed(1, "a", 0) != derive_seed(2, "a", 0)
    common = expand_runs(load_experiment(write(tmp_path, "c.yaml", p.read_text()
                                               + "seeds: common\n")))
    assert [(r.key, r.repetition) for r in common] == [(r.key, r.repetition) for r in runs]
    by_rep = {rep: {r.seed for r in common if r.repetition == rep} for rep in (0, 1)}
    assert all(len(v) == 1 for v in by_rep.values()) and by_rep[0] != by_rep[1]
    assert by_rep[0] == {derive_seed(1, "common", 0)}


def test_keys_and_seeds_do_not_depend_on_the_location(tmp_path):
    """The same study in another checkout draws the same runs: trace and model paths
    are absolute after loading, but a run's key and seed use their file names."""
    text = """
name: s
sweep:
  background:
    - {kind: swing, trace: data/a.pcap, label: A}
    - {kind: swing, trace: data/b.pcap, label: B}
"""
    for sub in ("one", "elsewhere/two", "three"):
        (tmp_path / sub).mkdir(parents=True)
    one = expand_runs(load_experiment(write(tmp_path / "one", "s.yaml", text)))
    two = expand_runs(load_experiment(write(tmp_path / "elsewhere" / "two", "s.yaml", text)))
    assert [r.spec.background.trace for r in one] != [r.spec.background.trace for r in two]
    assert [(r.key, r.seed) for r in one] == [(r.key, r.seed) for r in two]
    assert len({r.seed for r in one}) == 2
    # the same file name in two folders, otherwise alike: the labels tell them apart
    # (two equal labels are refused), so do their keys and seeds
    same = text.replace("data/b.pcap", "other/a.pcap")
    runs = expand_runs(load_experiment(write(tmp_path / "three", "s.yaml", same)))
    assert len({r.key for r in runs}) == len({r.seed for r in runs}) == 2


def test_sweep_point_invalid_is_reported(tmp_path):
    p = write(tmp_path, "s.yaml", "name: s\nsweep:\n  background: [{kind: poisson}]\n")
    with pytest.raises(SwellError, match="sweep point"):
        expand_runs(load_experiment(p))


def test_sweep_unknown_field(tmp_path):
    p = write(tmp_path, "s.yaml", "name: s\nsweep:\n  durration_s: [1]\n")
    with pytest.raises(SwellError, match="no such field"):
        load_experiment(p)


def test_paths_stay_relative_to_the_file_that_names_them(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a", "base.yaml", "name: base\nbackground: {kind: upb, trace: t.pcap}\n"
          "sweep:\n  background:\n    - {kind: swing, model: m}\n")
    child = write(tmp_path / "b", "c.yaml", "extends: ../a/base.yaml\nname: c\n")
    exp = load_experiment(child)
    assert exp.background.trace == str(tmp_path / "a" / "t.pcap")
    assert exp.sweep["background"][0]["model"] == str(tmp_path / "a" / "m")
    own = write(tmp_path / "b", "d.yaml", "name: d\nbackground: {kind: tpb, trace: x.pcap}\n")
    assert load_experiment(own).background.trace == str(tmp_path / "b" / "x.pcap")
