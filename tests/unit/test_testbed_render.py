"""Testbed rendering without machines: hosts file checks, plan, inventory, engine config."""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml

from swell.errors import SwellError
from swell.topologies.addressing import plan_addresses
from swell.topologies.linkemu import EngineConfig
from swell.topologies.spec import spec_from_dict
from swell.topologies.testbed import (
    GROUPS,
    host_vars,
    load_hosts,
    plan_testbed,
    write_inventory,
)
from swell.topologies.topology import resolve_host_links

HOSTS = {
    "ssh": {"key": "/k", "known_hosts": "/kh", "strict_host_keys": False},
    "router": {"name": "core", "address": "192.168.1.1"},
    "machines": [
        {"name": "c0", "address": "192.168.1.2", "iface": "eth1", "router_iface": "eth1",
         "role": "bg_clients"},
        {"name": "c1", "address": "192.168.1.3", "iface": "eth1", "router_iface": "eth2",
         "role": "bg_clients"},
        {"name": "s0", "address": "192.168.1.4", "iface": "eth1", "router_iface": "eth3",
         "role": "bg_servers"},
        {"name": "fc", "address": "192.168.1.5", "iface": "eth1", "router_iface": "eth4",
         "role": "fg_clients"},
        {"name": "fs", "address": "192.168.1.6", "iface": "eth1", "router_iface": "eth5",
         "role": "fg_servers"},
    ],
}
SPEC = {"network": "10.78.0.0/16", "bottleneck": {"rate_mbps": 20, "delay_ms": 10},
        "clients": {"count": 5, "namespaces": 2,
                    "access": [{"delay_ms": d, "rate_mbps": 10} for d in (1, 2, 3, 4, 5)]},
        "servers": {"count": 2, "access": {"delay_ms": 7}}, "seed": 3}


def _plan(tmp_path, hosts=HOSTS, spec_data=SPEC):
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(hosts))
    hf = load_hosts(path)
    spec = spec_from_dict(spec_data)
    links = resolve_host_links(spec, plan_addresses(spec))
    return hf, plan_testbed(spec, {k: list(v) for k, v in links.items()}, hf, "swl0001")


def test_plan_maps_hosts_to_machines_and_links(tmp_path):
    hf, plan = _plan(tmp_path)
    by_machine = {e.name: e for e in plan.edges}
    assert len(by_machine["c0"].aliases) + len(by_machine["c1"].aliases) == 5
    assert len(by_machine["s0"].aliases) == 2 and len(by_machine["fc"].aliases) == 1
    delays = sorted(h.link["delay_ms"] for h in plan.hosts if h.side == "left" and h.link)
    assert delays == [1, 2, 3, 4, 5]
    nets = [ipaddress.IPv4Network(e.link_ip, strict=False) for e in plan.edges]
    assert len(set(nets)) == 5 and all(n.prefixlen == 30 for n in nets)
    for e, p in zip(plan.edges, plan.ports, strict=True):
        assert p.peer_ip == e.link_ip.split("/")[0] and p.ip.split("/")[0] == e.router_ip
        assert p.subnets == e.subnets


def test_engine_config_and_inventory(tmp_path):
    hf, plan = _plan(tmp_path)
    hv = host_vars(plan, hf)
    engine = EngineConfig.from_json(hv["core"]["swell_host"]["engine"])
    assert len(engine.hosts) == 7 and {p.name for p in engine.ports} == {"left", "right"}
    assert engine.name == "swl0001" and engine.ports[0].netns == "/run/netns/swl0001-core"
    out = write_inventory(plan, hf, tmp_path / "tb")
    inv = yaml.safe_load((out / "inventory.yml").read_text())
    assert set(inv["all"]["children"]) == set(GROUPS)
    assert set(inv["all"]["children"]["bg_clients"]["hosts"]) == {"c0", "c1"}
    assert "StrictHostKeyChecking=no" in (out / "ansible.cfg").read_text()
    tb = json.loads((out / "testbed.json").read_text())
    assert tb["plan"]["prefix"] == "swl0001"


@pytest.mark.parametrize("change, message", [
    (lambda h: h["machines"][1].update(router_iface="eth1"), "same router interface"),
    (lambda h: h["machines"].pop(2), "bg_servers"),
    (lambda h: h["machines"][0].update(role="nope"), "role"),
])
def test_bad_hosts_files_are_one_line_errors(tmp_path, change, message):
    hosts = json.loads(json.dumps(HOSTS))
    change(hosts)
    with pytest.raises(SwellError) as err:
        _plan(tmp_path, hosts)
    assert message in str(err.value) and "\n" not in err.value.one_line()


def test_links_network_must_not_overlap(tmp_path):
    hosts = {**HOSTS, "links_network": "10.78.0.0/16"}
    with pytest.raises(SwellError, match="overlaps"):
        _plan(tmp_path, hosts)


def test_netem_router_shapes_every_access_link_and_the_bottleneck(tmp_path):
    hf, plan = _plan(tmp_path)
    tc = host_vars(plan, hf)["core"]["swell_host"]["netem"]
    core = plan.core

    def on(cmds, dev):
        return [c for c in cmds if c[c.index("dev") + 1] == dev]

    def netems(cmds, dev):
        return [c for c in on(cmds, dev) if c[0] == "qdisc" and "netem" in c]

    # bottleneck: forward leaves the core towards the servers, reverse towards the clients
    fwd = netems(tc["core"], core["right"]["core_if"])
    rev = netems(tc["core"], core["left"]["core_if"])
    assert len(fwd) == len(rev) == 1 and "10000us" in fwd[0] and "10000us" in rev[0]
    assert ["rate", "20000000bit"] == on(tc["core"], core["right"]["core_if"])[1][9:11]
    # uplinks by source on the router's veths into the core, one class per shaped host
    left_up = netems(tc["router"], core["left"]["router_if"])
    right_up = netems(tc["router"], core["right"]["router_if"])
    assert sorted(c[c.index("delay") + 1] for c in left_up) == \
        ["1000us", "2000us", "3000us", "4000us", "5000us"]
    assert [c[c.index("delay") + 1] for c in right_up] == ["7000us", "7000us"]
    srcs = [c for c in on(tc["router"], core["left"]["router_if"]) if "flowid" in c]
    assert {c[c.index("src") + 1] for c in srcs} == \
        {f"{h.ip}/32" for h in plan.hosts if h.side == "left" and h.link}
    # downlinks by destination on each machine's port, only that machine's hosts
    for port in plan.ports:
        mine = {f"{h.ip}/32" for h in plan.hosts if h.machine == port.machine and h.link}
        dsts = {c[c.index("dst") + 1] for c in on(tc["router"], port.ifname) if "flowid" in c}
        assert dsts == mine
    assert not on(tc["router"], "eth4")  # the foreground client machine: unshaped


def test_each_machine_may_have_its_own_workdir(tmp_path):
    hosts = json.loads(json.dumps(HOSTS))
    hosts["workdir"] = "/var/tmp/common"
    hosts["machines"][0]["workdir"] = "/srv/c0"
    hf, plan = _plan(tmp_path, hosts)
    hv = host_vars(plan, hf)
    assert hv["c0"]["swell_state"] == "/srv/c0/swl0001/c0"
    assert hv["c0"]["swell_workdir"] == "/srv/c0/swl0001"
    assert hv["c1"]["swell_state"] == "/var/tmp/common/swl0001/c1"
    assert hv["core"]["swell_host"]["engine_choice"] == "auto"


def test_a_machine_may_have_its_own_ssh_port(tmp_path):
    """A virtual node of a shared testbed host is reached at its host's name on a port of
    its own (what hosts-from-manifest writes for it): Ansible gets it for that machine."""
    hosts = json.loads(json.dumps(HOSTS))
    hosts["machines"][2]["port"] = 30754
    hf, plan = _plan(tmp_path, hosts)
    hv = host_vars(plan, hf)
    assert hv["s0"]["ansible_port"] == 30754
    assert "ansible_port" not in hv["c0"] and "ansible_port" not in hv["core"]
    out = write_inventory(plan, hf, tmp_path / "tb")
    common = yaml.safe_load((out / "inventory.yml").read_text())["all"]["vars"]
    assert common["ansible_port"] == 22 and common["swell_native_mode"] == "auto"
    hosts["native"] = "build"  # prepare builds the native programs on the machines
    hf, plan = _plan(tmp_path, hosts)
    out = write_inventory(plan, hf, tmp_path / "tb2")
    assert yaml.safe_load((out / "inventory.yml").read_text())["all"]["vars"][
        "swell_native_mode"] == "build"
    hosts["native"] = "compile"
    with pytest.raises(SwellError, match="native"):
        _plan(tmp_path, hosts)
    hosts["native"] = "auto"
    hosts["machines"][2]["port"] = 0
    with pytest.raises(SwellError, match="port"):
        _plan(tmp_path, hosts)


@pytest.mark.parametrize("flag", [["--engine", "native"], ["--cleanup"]])
def test_local_only_run_flags_are_refused_with_a_testbed(tmp_path, capsys, flag):
    """--engine and --cleanup act on local runs only: beside --testbed they are an error
    (exit 2, one line), not silently ignored; nothing is run or written."""
    from swell.cli import main as swell_main

    out = tmp_path / "study"
    rc = swell_main(["run", "experiments/demo.yaml", "--testbed", str(tmp_path / "hosts.yml"),
                     "-o", str(out), *flag])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0, err
    assert flag[0] in err and "--testbed" in err
    assert not out.exists()


@pytest.mark.parametrize("choice", ["auto", "netem", "native"])
def test_links_that_pair_packets_need_swell_link_on_the_router(tmp_path, choice):
    """A link with ``pairing``: the router runs swell-link (auto and native), netem is
    refused at planning (it has no such delivery), and no netem batch is written."""
    data = {**SPEC, "servers": {"count": 2, "access": {"delay_ms": 7, "rate_mbps": 10,
                                                       "pairing": 0.2}}}
    hf, plan = _plan(tmp_path, {**HOSTS, "router_engine": choice}, data)
    if choice == "netem":
        with pytest.raises(SwellError, match="router_engine.*pairing"):
            host_vars(plan, hf)
        return
    router = host_vars(plan, hf)["core"]["swell_host"]
    assert router["engine_choice"] == "native" and router["netem"] is None
    engine = EngineConfig.from_json(router["engine"])
    assert sorted(h.up.pairing for h in engine.hosts) == [0.0] * 5 + [0.2] * 2
