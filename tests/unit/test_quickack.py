"""Which emulated hosts ACK every segment, and the rules that make them
(swell.topologies.quickack): pure planning, no root."""

from __future__ import annotations

import ipaddress

import pytest

from swell.topologies.addressing import plan_addresses
from swell.topologies.quickack import RULE_PREF, TABLE, chosen_hosts, quickack_lines
from swell.topologies.spec import spec_from_dict


def _spec(network: str = "10.77.0.0/16", **groups: dict) -> dict:
    return {"network": network, "bottleneck": {"rate_mbps": 20},
            "clients": {"count": 10, "namespaces": 2, "access": {}},
            "servers": {"count": 4, "access": {}}, **groups}


def test_the_share_of_a_group_gets_rules_in_its_own_namespace() -> None:
    spec = spec_from_dict(_spec(
        clients={"count": 10, "namespaces": 2, "access": {},
                 "quickack": [{"port": 443, "share": 0.3}, {"port": 80, "share": 0.0}]},
        servers={"count": 4, "access": {}, "quickack": [{"port": 443, "share": 1.0}]}))
    plan = plan_addresses(spec)
    intf = {n.suffix: f"x-{n.suffix}" for n in plan.nodes}
    lines = quickack_lines(spec, plan, intf)
    rules = [ln for node in lines.values() for ln in node if ln.startswith("rule")]
    assert sum("dport 443" in r for r in rules) == 3  # round(0.3 * 10)
    assert sum("sport 443" in r for r in rules) == 4
    assert not any(" 80 " in r for r in rules)
    for suffix, node_lines in lines.items():
        node = next(n for n in plan.nodes if n.suffix == suffix)
        assert node_lines[0] == (f"route add 0.0.0.0/0 via {node.gateway} dev x-{suffix} "
                                 f"table {TABLE} quickack 1")
        for r in node_lines[1:]:
            host = ipaddress.ip_address(r.split(" from ")[1].split()[0])
            assert host in node.hosts and r.startswith(f"rule add pref {RULE_PREF} ")
            assert r.endswith(f"table {TABLE}")
    assert quickack_lines(spec, plan, intf) == lines  # the same draw every time
    assert quickack_lines(spec_from_dict(_spec()), plan, intf) == {}


def test_ipv6_routes_and_the_draw() -> None:
    spec = spec_from_dict(_spec("fd00:5e11::/48", clients={
        "count": 10, "access": {}, "quickack": [{"port": 443, "share": 0.5}]}))
    plan = plan_addresses(spec)
    lines = quickack_lines(spec, plan, {n.suffix: "eth" for n in plan.nodes})
    (node_lines,) = lines.values()
    assert node_lines[0].startswith("route add ::/0 via ")
    assert len(node_lines) == 6
    hosts = plan.bg_hosts("left")
    one = chosen_hosts(hosts, 0.5, 1, 443, "left")
    assert len(one) == 5 and len(set(one)) == 5 and one == sorted(one)
    assert chosen_hosts(hosts, 0.5, 2, 443, "left") != one  # the seed draws
    assert chosen_hosts(hosts, 1.0, 1, 443, "left") == hosts
    assert chosen_hosts(hosts, 0.04, 1, 443, "left") == []


def test_a_port_named_twice_is_refused() -> None:
    with pytest.raises(Exception, match="quickack names a port twice"):
        spec_from_dict(_spec(clients={"count": 2, "access": {}, "quickack": [
            {"port": 443, "share": 0.5}, {"port": 443, "share": 0.2}]}))
