"""A hosts file from an Emulab/CloudLab manifest (``swell testbed hosts-from-manifest``).

The manifest is in the form ``geni-get manifest`` prints on a CloudLab node (GENI RSpec
v3 with the ProtoGENI extensions; MACs without separators, as Emulab writes them): a
router node with one link to each of five edge nodes, plus a LAN that does not touch the
router.
"""

from __future__ import annotations

import pytest
import yaml

from swell.errors import SwellError
from swell.topologies.testbed import HostsFile
from swell.topologies.testbed_manifest import hosts_from_manifest

NODE = """  <node client_id="{name}" exclusive="true"
        component_manager_id="urn:publicid:IDN+emulab.net+authority+cm"
        component_id="urn:publicid:IDN+emulab.net+node+{pc}"
        sliver_id="urn:publicid:IDN+emulab.net+sliver+{sliver}">
    <sliver_type name="raw-pc">
      <disk_image name="urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"/>
    </sliver_type>
{ifaces}
    <emulab:vnode name="{pc}" hardware_type="d430"/>
    <host name="{name}.swell-demo.myproj.emulab.net" ipv4="155.98.36.{ip}"/>
    <services>
      <login authentication="ssh-keys" hostname="{pc}.emulab.net" port="22"
             username="alice"/>
    </services>
  </node>
"""
IFACE = """    <interface client_id="{cid}"
        component_id="urn:publicid:IDN+emulab.net+interface+{pc}:eth{k}"
        sliver_id="urn:publicid:IDN+emulab.net+sliver+{sl}" mac_address="{mac}">
      <ip address="10.10.{net}.{host}" type="ipv4" netmask="255.255.255.0"/>
    </interface>"""
EDGES = ["client0", "client1", "server0", "fgclient", "fgserver"]


def manifest() -> str:
    nodes, links, ifaces = [], [], []
    for i, name in enumerate(EDGES, 1):
        ifaces.append(IFACE.format(cid=f"router:if{i}", pc="pc401", k=i, sl=100 + i,
                                   mac=f"0002b365c3{i:02x}", net=i, host=1))
        edge = IFACE.format(cid=f"{name}:if0", pc=f"pc41{i}", k=1, sl=200 + i,
                            mac=f"0026b9fb{i:02x}a0", net=i, host=2)
        if name == "client0":  # a LAN of the clients, not to the router
            edge += "\n" + IFACE.format(cid="client0:if1", pc="pc411", k=2, sl=300,
                                        mac="0026b9fb01a1", net=9, host=1)
        nodes.append(NODE.format(name=name, pc=f"pc41{i}", sliver=i, ifaces=edge, ip=10 + i))
        links.append(f'  <link client_id="link-{i}"><interface_ref client_id="router:if{i}"/>'
                     f'<interface_ref client_id="{name}:if0"/></link>\n')
    nodes.insert(0, NODE.format(name="router", pc="pc401", sliver=0, ifaces="\n".join(ifaces),
                                ip=10))
    links.append('  <link client_id="lan-0"><interface_ref client_id="client0:if1"/></link>\n')
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<rspec xmlns="http://www.geni.net/resources/rspec/3" '
            'xmlns:emulab="http://www.protogeni.net/resources/rspec/ext/emulab/1" '
            'type="manifest">\n' + "".join(nodes) + "".join(links) + "</rspec>\n")


def test_a_dumbbell_allocation_becomes_a_hosts_file(tmp_path):
    path = tmp_path / "manifest.xml"
    path.write_text(manifest())
    data = hosts_from_manifest(path, "router", {"client1": "bg_clients"})
    hosts = HostsFile.model_validate(data)
    assert hosts.router.address == "pc401.emulab.net"
    assert hosts.ssh.user == "alice" and hosts.ssh.become
    by = {m.name: m for m in hosts.machines}
    assert list(by) == EDGES
    # the roles no node was given, in manifest order; then more background
    assert [by[n].role for n in EDGES] == ["bg_servers", "bg_clients", "fg_clients",
                                          "fg_servers", "bg_clients"]
    assert by["server0"].iface == "00:26:b9:fb:03:a0"
    assert by["server0"].router_iface == "00:02:b3:65:c3:03"
    assert by["client0"].address == "pc411.emulab.net"
    assert str(hosts.links_network) == "172.30.0.0/16"  # the manifest uses 10.10/16


def test_cli_writes_it_and_bad_input_is_one_line(tmp_path, capsys):
    from swell.cli import main as swell_main

    path = tmp_path / "manifest.xml"
    path.write_text(manifest())
    out = tmp_path / "hosts.yml"
    assert swell_main(["testbed", "hosts-from-manifest", str(path), "--router", "router",
                       "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["machines"][0]["role"] == "bg_clients"
    assert "client0: bg_clients at pc411.emulab.net" in capsys.readouterr().out
    assert swell_main(["testbed", "hosts-from-manifest", str(path), "--router", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no node 'nope'" in err and "\n" not in err
    with pytest.raises(SwellError, match="no link to the router"):
        hosts_from_manifest(path, "router", {"router": "bg_clients"})
    with pytest.raises(SwellError, match="unknown role"):
        hosts_from_manifest(path, "router", {"client0": "clients"})
