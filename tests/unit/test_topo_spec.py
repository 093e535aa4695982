"""Topology spec validation and the address plan."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from swell.errors import SwellError
from swell.topologies.addressing import check_plan, plan_addresses, split_blocks, subnet_prefix_for
from swell.topologies.spec import (
    LinkDir,
    TopologySpec,
    load_spec,
    spec_from_dict,
    validation_problems,
)

BASE = {"bottleneck": {"rate_mbps": 20, "delay_ms": 10, "queue_bytes": 100_000}}


def spec(**extra):
    return spec_from_dict({**BASE, **extra})


def test_minimal_spec_defaults():
    s = spec()
    assert s.network == ipaddress.IPv4Network("10.77.0.0/16")
    assert s.bottleneck.reverse_dir() == s.bottleneck.forward_dir()
    assert s.bottleneck.forward_dir().queue_bytes == 100_000
    assert s.foreground.clients == 1 and s.clients.count == 0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({**BASE, "bottlenek": {}}, "bottlenek: unknown key"),
        ({"bottleneck": {"rate_mbps": 20, "dealy_ms": 1}}, "bottleneck.dealy_ms: unknown key"),
        ({**BASE, "clients": {"count": 2, "access": {"delay": 1}}}, "clients.access"),
        ({"bottleneck": {"rate_mbps": 0}}, "bottleneck.rate_mbps: Input should be greater than 0"),
        ({"bottleneck": {"rate_mbps": -5}}, "bottleneck.rate_mbps: Input should be greater than 0"),
        ({"bottleneck": {"rate_mbps": 1, "delay_ms": -1}}, "bottleneck.delay_ms"),
        ({"bottleneck": {"rate_mbps": 1, "queue_packets": 0}}, "bottleneck.queue_packets"),
        ({"bottleneck": {"rate_mbps": 1, "loss": {"kind": "pareto"}}}, "bottleneck.loss.kind"),
        ({"bottleneck": {"rate_mbps": 1, "loss": {"kind": "none", "p": 0.1}}}, "takes no"),
        ({"bottleneck": {"delay_ms": 1}}, "bottleneck.rate_mbps: Field required"),
        ({"bottleneck": {"rate_mbps": 1, "queue_bytes": 9000, "queue_packets": 5}}, "not both"),
        ({**BASE, "network": "8.8.0.0/16"}, "not inside a private range"),
        ({**BASE, "network": "10.1.2.0/25"}, "too small"),
        ({**BASE, "network": "10.1.2.3/16"}, "not an IPv4 network"),
        ({**BASE, "clients": {"count": 3}}, "exactly one of 'access'"),
        ({**BASE, "clients": {"count": 3, "access": [{}, {}]}}, "lists 2 links but count is 3"),
        ({**BASE, "clients": {"count": 2, "namespaces": 3, "access": {}}}, "exceeds count"),
        ({**BASE, "clients": {"count": 1, "access": {"loss": 1.5}}}, "loss"),
        ({**BASE, "engine": "ns3"}, "engine"),
        ({**BASE, "bottleneck": {"rate_mbps": 1, "loss": {"kind": "gilbert", "p_gb": 0.1}}},
         "p_bg > 0"),
    ],
)
def test_bad_specs_name_the_field(data, message):
    with pytest.raises(SwellError) as err:
        spec_from_dict(data, "my.yaml")
    assert err.value.where == "my.yaml"
    assert message in err.value.message


def test_strict_model_is_the_core_one():
    from swell.topologies import spec as spec_module
    from swell.typed import StrictModel

    assert spec_module.StrictModel is StrictModel and issubclass(TopologySpec, StrictModel)
    assert LinkDir.model_config["extra"] == "forbid" and LinkDir.model_config["frozen"]


def test_engine_units():
    link = LinkDir(rate_mbps=2.5, delay_ms=12.3456)
    assert link.rate_bps == 2.5e6 and link.delay_us == 12346
    assert LinkDir().rate_bps is None and LinkDir().delay_us == 0


def test_model_validate_gives_field_paths_for_line_lookup():
    """An experiment file validates its inline topology with TopologySpec.model_validate;
    the locations must be plain key/index paths inside the spec."""
    data = {"bottleneck": {"rate_mbps": 1},
            "clients": {"count": 2, "access": [{"delay_ms": 1}, {"dealy_ms": 1}]},
            "servers": {"count": 1, "access": {"loss": 1.5}}}
    with pytest.raises(ValidationError) as err:
        TopologySpec.model_validate(data)
    assert validation_problems(err.value) == [
        (("clients", "access", 1, "dealy_ms"), "unknown key"),
        (("servers", "access", "loss", "p"), "Input should be less than or equal to 1"),
    ]


def test_loss_shorthand_and_gilbert():
    s = spec(clients={"count": 1, "access": {"loss": 0.02}})
    assert s.clients.access.loss.kind == "bernoulli" and s.clients.access.loss.p == 0.02
    s = spec(clients={"count": 1, "access": {"loss": 0}})
    assert s.clients.access.loss.kind == "none"
    g = {"kind": "gilbert", "p_gb": 0.01, "p_bg": 0.25}
    s = spec(clients={"count": 1, "access": {"loss": g}})
    assert s.clients.access.loss.p_bg == 0.25


def test_reverse_direction_override():
    s = spec_from_dict({"bottleneck": {"rate_mbps": 20, "delay_ms": 5,
                                       "reverse": {"rate_mbps": 2, "delay_ms": 7}}})
    assert s.bottleneck.forward_dir().rate_mbps == 20
    assert s.bottleneck.reverse_dir().rate_mbps == 2 and s.bottleneck.reverse_dir().delay_ms == 7


def test_load_yaml_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("bottleneck:\n  rate_mbps: [1\n")
    with pytest.raises(SwellError, match=r"bad\.yaml: line \d+"):
        load_spec(bad)
    with pytest.raises(SwellError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    typo = tmp_path / "typo.yaml"
    typo.write_text("bottleneck: {rate_mbps: 10}\nclients: {count: 1, acess: {}}\n")
    with pytest.raises(SwellError, match=r"typo\.yaml: clients\.acess: unknown key"):
        load_spec(typo)


def test_model_path_resolved_against_spec_folder(tmp_path):
    f = tmp_path / "sub" / "s.yaml"
    f.parent.mkdir()
    f.write_text("bottleneck: {rate_mbps: 10}\n"
                 "clients: {count: 3, model: {path: ../m, side: client}}\n")
    s = load_spec(f)
    assert s.clients.model.path == f.parent / "../m"


def test_example_specs_load():
    from pathlib import Path

    import swell.topologies as topo

    examples = sorted((Path(topo.__file__).parent / "examples").glob("*.yaml"))
    assert len(examples) >= 2
    for path in examples:
        plan = plan_addresses(load_spec(path))
        assert plan.nodes


def test_split_blocks_and_subnet_sizes():
    assert split_blocks(10, 3) == [4, 3, 3]
    assert split_blocks(2, 5) == [1, 1]
    assert split_blocks(0, 3) == []
    assert subnet_prefix_for(1) == 30  # net, gateway, host, broadcast
    assert subnet_prefix_for(2) == 29
    assert subnet_prefix_for(253) == 24
    assert subnet_prefix_for(254) == 23


@pytest.mark.parametrize("network", ["10.77.0.0/16", "172.20.0.0/16", "192.168.0.0/20"])
def test_plan_no_collisions_inside_range(network):
    s = spec(network=network, clients={"count": 1000, "namespaces": 3, "access": {}},
             servers={"count": 100, "namespaces": 2, "access": {}},
             foreground={"clients": 2, "servers": 1})
    plan = plan_addresses(s)
    net = ipaddress.IPv4Network(network)
    addrs = [h for n in plan.nodes for h in (n.gateway, *n.hosts)]
    addrs += [a for t in plan.transit.values() for a in (t.edge_ip, t.core_ip)]
    assert len(addrs) == len(set(addrs))
    assert all(a in net for a in addrs)
    assert len(plan.bg_hosts("left")) == 1000 and len(plan.bg_hosts("right")) == 100
    for side in ("left", "right"):
        for n in plan.side_nodes(side):
            assert n.subnet.subnet_of(plan.halves[side])
            assert all(h in n.subnet and h != n.subnet.broadcast_address for h in n.hosts)
        assert plan.transit[side].subnet.subnet_of(plan.halves[side])
    assert [n.suffix for n in plan.nodes] == ["c0", "c1", "c2", "fc0", "fc1", "s0", "s1", "fs0"]
    check_plan(plan)


def test_plan_range_too_small():
    s = spec(network="10.1.0.0/24", clients={"count": 200, "access": {}})
    with pytest.raises(SwellError, match="no room"):
        plan_addresses(s)


def test_check_plan_detects_overlap():
    from dataclasses import replace

    s = spec(clients={"count": 4, "namespaces": 2, "access": {}})
    plan = plan_addresses(s)
    clash = replace(plan.nodes[1], subnet=plan.nodes[0].subnet, hosts=plan.nodes[0].hosts)
    with pytest.raises(SwellError, match="overlap"):
        check_plan(replace(plan, nodes=(plan.nodes[0], clash, *plan.nodes[2:])))
