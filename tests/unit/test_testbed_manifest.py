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


# Portal manifests as they are published (the shapes below follow two public ones, their
# names and addresses changed: bucket-xv/cephcluster setup/manifest.xml, a CloudLab
# Wisconsin "4 servers on a LAN" profile; and an Emulab profile with an NFS server, a
# blockstore and raw PCs). What they have that a hand-written manifest lacks: the root
# says type="request"; every node lists one login per member of the project; interface
# ids are "interface-N" as often as "node:ifN"; a LAN is one <link> with many
# interface_refs; virtual nodes log in at their host's name on a port of their own.
PORTAL_NODE = """  <node xmlns:emulab="http://www.protogeni.net/resources/rspec/ext/emulab/1"
        client_id="{name}" exclusive="{excl}"
        component_manager_id="urn:publicid:IDN+wisc.cloudlab.us+authority+cm"
        component_id="urn:publicid:IDN+wisc.cloudlab.us+node+{pc}"
        sliver_id="urn:publicid:IDN+wisc.cloudlab.us+sliver+9210{k:02d}">
    <sliver_type name="raw-pc"/>
    <services>
{logins}      <emulab:console server="boss.wisc.cloudlab.us"/>
    </services>
    <interface client_id="{iface}" mac_address="{mac}"
        component_id="urn:publicid:IDN+wisc.cloudlab.us+interface+{pc}:eth2">
      <ip address="10.10.1.{k}" type="ipv4" netmask="255.255.255.0"/>
    </interface>{more}
    <emulab:vnode name="{pc}" hardware_type="c220g1"/>
    <host name="{name}.exp-1.proj-PG0.wisc.cloudlab.us" ipv4="128.105.145.{k}"/>
  </node>
"""
USERS = ["ana", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ida", "jo"]


def _logins(host: str, port: int = 22) -> str:
    return "".join(f'      <login authentication="ssh-keys" hostname="{host}" port="{port}" '
                   f'username="{u}"/>\n' for u in USERS)


def _portal(nodes: str, links: str) -> str:
    return ('<rspec xmlns="http://www.geni.net/resources/rspec/3" '
            'xmlns:emulab="http://www.protogeni.net/resources/rspec/ext/emulab/1" '
            'type="request">\n' + nodes + links +
            '  <emulab:portal name="cloudlab" project="proj" experiment="exp-1"/>\n</rspec>\n')


def test_a_portal_lan_is_refused_saying_how_to_ask_for_links(tmp_path):
    names = ["host", "server-1", "server-2", "server-3"]
    nodes = "".join(PORTAL_NODE.format(name=n, excl="true", pc=f"c220g1-0308{k:02d}", k=k,
                                       iface=f"interface-{k}", mac=f"90e2ba26f0{k:02x}",
                                       more="", logins=_logins(f"c220g1-0308{k:02d}.wisc"))
                    for k, n in enumerate(names, 1))
    refs = "".join(f'    <interface_ref client_id="interface-{k}"/>\n' for k in range(1, 5))
    path = tmp_path / "manifest.xml"
    path.write_text(_portal(nodes, f'  <link client_id="link-0" vlantag="1161">\n'
                                    f'    <link_type name="lan"/>\n{refs}  </link>\n'))
    with pytest.raises(SwellError) as err:
        hosts_from_manifest(path, "host", user="bo")
    msg = err.value.one_line()
    assert "only through the LAN link-0" in msg and "server-1, server-2, server-3" in msg
    assert "point-to-point" in msg and "\n" not in msg
    with pytest.raises(SwellError, match="only through the LAN link-0: swell needs"):
        hosts_from_manifest(path, "host", {"server-2": "bg_servers"}, user="bo")


def _star_with_vms(path) -> None:
    """A router with a link to each of four nodes, one of them a VM on a shared host (its
    own ssh port), and a LAN from the router to an NFS server and a blockstore."""
    edges = [("client0", "pc427", 22), ("server0", "pcvm2-21", 30754),
             ("fgclient", "pc402", 22), ("fgserver", "pc762", 22)]
    r_ifaces, nodes, links = [], [], []
    for k, (name, pc, port) in enumerate(edges, 1):
        r_ifaces.append(f'\n    <interface client_id="router:if{k}" '
                        f'mac_address="02e7457e10{k:02x}"><ip address="10.10.{k}.1" '
                        'type="ipv4" netmask="255.255.255.0"/></interface>')
        nodes.append(PORTAL_NODE.format(name=name, excl="false" if port != 22 else "true",
                                        pc=pc, k=10 + k, iface=f"{name}:if0",
                                        mac=f"0239e2fd3a{k:02x}", more="",
                                        logins=_logins(f"{pc}.emulab.net", port)))
        links.append(f'  <link client_id="link-{k}"><interface_ref client_id="router:if{k}"/>'
                     f'<interface_ref client_id="{name}:if0"/></link>\n')
    r_ifaces.append('\n    <interface client_id="router:if9" mac_address="02bdfa22baf2">'
                    '<ip address="10.254.254.254" type="ipv4" netmask="255.255.255.252"/>'
                    "</interface>")
    router = PORTAL_NODE.format(name="router", excl="true", pc="pc836", k=1,
                                iface="router:if0", mac="0257519c3c19", more="".join(r_ifaces),
                                logins=_logins("pc836.emulab.net"))
    for k, name in enumerate(["nfs", "dsnode"], 20):
        nodes.append(PORTAL_NODE.format(name=name, excl="true", pc=f"dbox{k}", k=k,
                                        iface=f"{name}:if1", mac=f"0221bd7b16{k:02x}", more="",
                                        logins=_logins(f"dbox{k}.emulab.net", 29042)))
    links.append('  <link client_id="lan-store"><interface_ref client_id="router:if9"/>'
                 '<interface_ref client_id="nfs:if1"/><interface_ref client_id="dsnode:if1"/>'
                 "</link>\n")
    path.write_text(_portal(router + "".join(nodes), "".join(links)))


def test_a_portal_star_with_many_users_and_a_virtual_node(tmp_path, capsys):
    from swell.cli import main as swell_main

    path = tmp_path / "manifest.xml"
    _star_with_vms(path)
    with pytest.raises(SwellError) as err:  # ten members of the project can log in
        hosts_from_manifest(path, "router")
    msg = err.value.one_line()
    assert "lets 10 users log in (ana, bo, cy, dee, eli, fay, gus, hal and 2 more)" in msg
    assert "--user" in msg and "\n" not in msg
    data = hosts_from_manifest(path, "router", user="dee")
    hosts = HostsFile.model_validate(data)
    assert hosts.ssh.user == "dee" and hosts.ssh.become and hosts.ssh.port == 22
    by = {m.name: m for m in hosts.machines}
    assert list(by) == ["client0", "server0", "fgclient", "fgserver"]  # not nfs, dsnode
    assert by["server0"].address == "pcvm2-21.emulab.net" and by["server0"].port == 30754
    assert by["client0"].port is None and hosts.router.address == "pc836.emulab.net"
    assert by["server0"].router_iface == "02:e7:45:7e:10:02"
    assert str(hosts.links_network) == "172.30.0.0/16"
    out = tmp_path / "hosts.yml"
    assert swell_main(["testbed", "hosts-from-manifest", str(path), "--router", "router",
                       "--user", "zed", "-o", str(out)]) == 0
    got = capsys.readouterr()
    assert "server0: bg_servers at pcvm2-21.emulab.net port 30754" in got.out
    assert "--user zed: not among the manifest's logins (ana, bo," in got.err
    assert "nfs: left out, it reaches the router only through the LAN lan-store" in got.err
    assert yaml.safe_load(out.read_text())["ssh"]["user"] == "zed"
    assert swell_main(["testbed", "hosts-from-manifest", str(path), "--router", "router",
                       "-o", str(tmp_path / "h2.yml")]) == 2
    assert "give yours with --user" in capsys.readouterr().err


def test_a_file_that_is_not_an_rspec(tmp_path):
    path = tmp_path / "manifest.xml"
    path.write_text("<html><body>Sign in</body></html>")
    with pytest.raises(SwellError, match="not an RSpec"):
        hosts_from_manifest(path, "router")
    path.write_text("<rspec><node client_id='r'")
    with pytest.raises(SwellError, match="cannot read the manifest"):
        hosts_from_manifest(path, "router")
