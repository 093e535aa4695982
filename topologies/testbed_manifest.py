"""A hosts file from an Emulab/CloudLab allocation: ``swell testbed hosts-from-manifest``.

An allocation's manifest RSpec (GENI v3: the portal's "Manifest" tab, or
``geni-get manifest`` on any node) lists every node (``client_id``), how to log
in (``services/login``: host name, port, user), its experiment interfaces
(``interface``: ``client_id``, ``mac_address``, ``ip``) and the links between
them (``link``/``interface_ref``). For a dumbbell the router is one node with
a link to every edge node; :func:`hosts_from_manifest` turns that into the
hosts file swell reads (:class:`swell.topologies.testbed.HostsFile`):

* every node linked to the router is an edge machine, reached at its login
  host name; its ``iface`` and the router's ``router_iface`` are the two ends
  of their link, given by **MAC address** (the manifest does not know the
  interface names the node's kernel gives them: ``swell testbed host plan``
  finds the interface with that address on the machine);
* roles come from ``roles`` (node -> role); the other edge nodes, in
  manifest order, take each role no node has yet (``bg_clients``,
  ``bg_servers``, ``fg_clients``, ``fg_servers``), then alternately more
  background clients and servers;
* ssh logs in as the manifest's user (``services/login``) with ``become``
  (sudo), as Emulab and CloudLab let users in, unless ``user`` says otherwise;
* ``links_network`` is a range none of the manifest's experiment addresses is in.

Nothing is guessed silently: a node with no link to the router, a link
without MAC addresses or an unknown role is a one-line error naming the file.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from swell.errors import SwellError

ROLE_ORDER = ("bg_clients", "bg_servers", "fg_clients", "fg_servers")
_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _children(el: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in el if _local(c.tag) == name]


def mac(text: str) -> str:
    """``0002b365c3a0`` or ``00:02:B3:65:C3:A0`` as ``00:02:b3:65:c3:a0``."""
    digits = re.sub(r"[^0-9a-fA-F]", "", text)
    if len(digits) != 12:
        raise ValueError(f"not a MAC address: {text!r}")
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2)).lower()


def read_manifest(path: Path) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """Nodes (client_id -> login, interfaces by client_id) and links (interface ids)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SwellError(path, f"cannot read the manifest: {exc}") from None
    nodes: dict[str, dict[str, Any]] = {}
    for node in _children(root, "node"):
        name = node.get("client_id") or ""
        login = next((lg for s in _children(node, "services") for lg in _children(s, "login")),
                     None)
        host = next((h.get("name") for h in _children(node, "host")), None)
        ifaces = {}
        for i in _children(node, "interface"):
            ips = [ip.get("address") for ip in _children(i, "ip") if ip.get("address")]
            ifaces[i.get("client_id") or ""] = {"mac": i.get("mac_address"), "ips": ips}
        nodes[name] = {"address": (login.get("hostname") if login is not None else None)
                       or host, "port": int(login.get("port", 22)) if login is not None else 22,
                       "user": login.get("username") if login is not None else None,
                       "ifaces": ifaces}
    links = [[r.get("client_id") or "" for r in _children(link, "interface_ref")]
             for link in _children(root, "link")]
    return nodes, links


def hosts_from_manifest(path: str | Path, router: str, roles: dict[str, str] | None = None,
                        user: str | None = None) -> dict[str, Any]:
    """The hosts file (as data) of the dumbbell in manifest ``path`` (see the docstring)."""
    path = Path(path)
    nodes, links = read_manifest(path)
    if router not in nodes:
        raise SwellError(path, f"no node {router!r} (nodes: {', '.join(nodes) or 'none'})")
    owner = {i: n for n, node in nodes.items() for i in node["ifaces"]}
    ends: dict[str, tuple[str, str]] = {}  # edge node -> (its interface, the router's)
    for refs in links:
        at_router = [r for r in refs if owner.get(r) == router]
        others = [r for r in refs if owner.get(r) not in (None, router)]
        if len(at_router) == 1 and len(others) == 1:
            ends[owner[others[0]]] = (others[0], at_router[0])
    roles = dict(roles or {})
    for n, role in roles.items():
        if n not in ends:
            raise SwellError(path, f"{n!r} has no link to the router {router!r}")
        if role not in ROLE_ORDER:
            raise SwellError("--role", f"unknown role {role!r} (roles: {', '.join(ROLE_ORDER)})")
    needed = [r for r in ROLE_ORDER if r not in roles.values()]  # every role once first
    more = (ROLE_ORDER[k % 2] for k in itertools.count())  # then background clients, servers
    for n in (n for n in nodes if n in ends and n not in roles):
        roles[n] = needed.pop(0) if needed else next(more)
    machines, used = [], []
    for n in (n for n in nodes if n in ends):
        mine, theirs = ends[n]
        try:
            pair = mac(nodes[n]["ifaces"][mine]["mac"] or ""), \
                mac(nodes[router]["ifaces"][theirs]["mac"] or "")
        except ValueError:
            raise SwellError(path, f"the link {mine} - {theirs} has no MAC addresses") from None
        used += [ip for i in (mine, theirs) for ip in nodes[owner[i]]["ifaces"][i]["ips"]]
        machines.append({"name": _NAME.sub("-", n)[:32], "address": nodes[n]["address"],
                         "iface": pair[0], "router_iface": pair[1], "role": roles[n]})
    if not machines:
        raise SwellError(path, f"no node has a link to the router {router!r}")
    login = nodes[router]["user"]
    ssh: dict[str, Any] = {"user": user or login or "root", "port": nodes[router]["port"]}
    if ssh["user"] != "root":
        ssh["become"] = True  # testbeds log users in as themselves, with sudo
    return {"ssh": ssh, "links_network": str(_free_range(used)),
            "router": {"name": _NAME.sub("-", router)[:32], "address": nodes[router]["address"]},
            "machines": machines}


def _free_range(used: list[str]) -> ipaddress.IPv4Network:
    """A /16 for the links' /30s that none of the manifest's addresses is in."""
    addrs = [ipaddress.ip_address(a) for a in used if ":" not in a]
    for second in range(30, 16, -1):
        net = ipaddress.IPv4Network(f"172.{second}.0.0/16")
        if not any(a in net for a in addrs):
            return net
    raise SwellError("manifest", "no free /16 in 172.16/12 for the links")
