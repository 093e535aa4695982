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
  (sudo), as Emulab and CloudLab let users in, unless ``user`` says otherwise. A
  portal's manifest lists one login per member of the project on every node, so
  with several users ``user`` must say which (an error otherwise); each node is
  reached at that user's login host name and port, and a node whose port differs
  from the router's (a virtual node behind its host's name) gets its own ``port``;
* a LAN that has the router on it is not an access link: its nodes are left out
  (said so), and a manifest whose router reaches the others only through a LAN is
  an error saying how to ask for point-to-point links;
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


def read_manifest(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """Nodes (client_id -> logins, host name, interfaces by client_id) and links
    (client_id -> interface ids)."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise SwellError(path, f"cannot read the manifest: {exc}") from None
    if _local(root.tag) != "rspec":
        raise SwellError(path, f"not an RSpec (its root element is <{_local(root.tag)}>)")
    nodes: dict[str, dict[str, Any]] = {}
    for node in _children(root, "node"):
        name = node.get("client_id") or ""
        logins = []
        for lg in (lg for s in _children(node, "services") for lg in _children(s, "login")):
            try:
                port = int(lg.get("port") or 22)
            except ValueError:
                raise SwellError(path, f"node {name!r}: login port {lg.get('port')!r} "
                                       "is not a number") from None
            logins.append({"hostname": lg.get("hostname"), "port": port,
                           "user": lg.get("username")})
        ifaces = {}
        for i in _children(node, "interface"):
            ips = [ip.get("address") for ip in _children(i, "ip") if ip.get("address")]
            ifaces[i.get("client_id") or ""] = {"mac": i.get("mac_address"), "ips": ips}
        nodes[name] = {"logins": logins, "ifaces": ifaces,
                       "host": next((h.get("name") for h in _children(node, "host")), None)}
    links = {link.get("client_id") or f"link #{k}":
             [r.get("client_id") or "" for r in _children(link, "interface_ref")]
             for k, link in enumerate(_children(root, "link"), 1)}
    return nodes, links


def _user(path: Path, nodes: dict[str, dict[str, Any]], names: list[str],
          user: str | None) -> tuple[str | None, list[str]]:
    """The login user: ``user``, else the one user the manifest lets in. A portal's
    manifest lists a login per member of the project (one per user, on every node),
    so with several the user must say which is theirs."""
    users = list(dict.fromkeys(lg["user"] for n in names for lg in nodes[n]["logins"]
                               if lg["user"]))
    if user:
        notes = [] if not users or user in users else [
            f"--user {user}: not among the manifest's logins ({', '.join(users)})"]
        return user, notes
    if len(users) > 1:
        shown = ", ".join(users[:8]) + (f" and {len(users) - 8} more" if len(users) > 8 else "")
        raise SwellError(path, f"the manifest lets {len(users)} users log in ({shown}): "
                               "give yours with --user")
    return (users[0] if users else None), []


def _login(node: dict[str, Any], user: str | None) -> tuple[str | None, int]:
    """Where ``user`` logs in to ``node`` (host name, port): its own login entry, else the
    first; the node's control host name when it lists none."""
    logins = node["logins"]
    lg = next((lg for lg in logins if lg["user"] == user), logins[0] if logins else None)
    if lg is None:
        return node["host"], 22
    return lg["hostname"] or node["host"], lg["port"]


def manifest_dumbbell(path: str | Path, router: str, roles: dict[str, str] | None = None,
                      user: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The hosts file (as data) of the dumbbell in manifest ``path`` (see the docstring),
    and notes for the user: nodes left out, a user the manifest does not list."""
    path = Path(path)
    nodes, links = read_manifest(path)
    if router not in nodes:
        raise SwellError(path, f"no node {router!r} (nodes: {', '.join(nodes) or 'none'})")
    owner = {i: n for n, node in nodes.items() for i in node["ifaces"]}
    ends: dict[str, tuple[str, str]] = {}  # edge node -> (its interface, the router's)
    lans: dict[str, list[str]] = {}  # a LAN with the router on it -> its other nodes
    for lid, refs in links.items():
        at_router = [r for r in refs if owner.get(r) == router]
        others = [r for r in refs if owner.get(r) not in (None, router)]
        if len(at_router) == 1 and len(others) == 1:
            ends.setdefault(owner[others[0]], (others[0], at_router[0]))
        elif at_router and len(others) > 1:
            lans[lid] = list(dict.fromkeys(owner[r] for r in others))
    on_lan = {n: lid for lid, ns in lans.items() for n in ns if n not in ends}
    roles = dict(roles or {})
    for n, role in roles.items():
        if n not in ends:
            why = (f" (only through the LAN {on_lan[n]}: swell needs a point-to-point link)"
                   if n in on_lan else "")
            raise SwellError(path, f"{n!r} has no link to the router {router!r}{why}")
        if role not in ROLE_ORDER:
            raise SwellError("--role", f"unknown role {role!r} (roles: {', '.join(ROLE_ORDER)})")
    if not ends:
        if lans:
            lid, ns = next(iter(lans.items()))
            raise SwellError(path, f"the router {router!r} reaches {', '.join(ns)} only through "
                                   f"the LAN {lid}: swell's dumbbell needs one point-to-point "
                                   "link from the router to each machine (a link per node in "
                                   "the profile, docs/testbed.md section 3)")
        raise SwellError(path, f"no node has a link to the router {router!r}")
    needed = [r for r in ROLE_ORDER if r not in roles.values()]  # every role once first
    more = (ROLE_ORDER[k % 2] for k in itertools.count())  # then background clients, servers
    for n in (n for n in nodes if n in ends and n not in roles):
        roles[n] = needed.pop(0) if needed else next(more)
    user, notes = _user(path, nodes, [router, *ends], user)
    r_address, r_port = _login(nodes[router], user)
    machines, used = [], []
    for n in (n for n in nodes if n in ends):
        mine, theirs = ends[n]
        try:
            pair = mac(nodes[n]["ifaces"][mine]["mac"] or ""), \
                mac(nodes[router]["ifaces"][theirs]["mac"] or "")
        except ValueError:
            raise SwellError(path, f"the link {mine} - {theirs} has no MAC addresses") from None
        used += [ip for i in (mine, theirs) for ip in nodes[owner[i]]["ifaces"][i]["ips"]]
        address, port = _login(nodes[n], user)
        if not address:
            raise SwellError(path, f"node {n!r} has no login and no host name")
        m = {"name": _NAME.sub("-", n)[:32], "address": address}
        if port != r_port:  # a virtual node behind its host's address (its own ssh port)
            m["port"] = port
        machines.append({**m, "iface": pair[0], "router_iface": pair[1], "role": roles[n]})
    if not r_address:
        raise SwellError(path, f"the router {router!r} has no login and no host name")
    ssh: dict[str, Any] = {"user": user or "root", "port": r_port}
    if ssh["user"] != "root":
        ssh["become"] = True  # testbeds log users in as themselves, with sudo
    notes += [f"{n}: left out, it reaches the router only through the LAN {lid}"
              for n, lid in on_lan.items()]
    return {"ssh": ssh, "links_network": str(_free_range(used)),
            "router": {"name": _NAME.sub("-", router)[:32], "address": r_address},
            "machines": machines}, notes


def hosts_from_manifest(path: str | Path, router: str, roles: dict[str, str] | None = None,
                        user: str | None = None) -> dict[str, Any]:
    """The hosts file (as data) of the dumbbell in manifest ``path`` (see the docstring)."""
    return manifest_dumbbell(path, router, roles, user)[0]


def _free_range(used: list[str]) -> ipaddress.IPv4Network:
    """A /16 for the links' /30s that none of the manifest's addresses is in."""
    addrs = [ipaddress.ip_address(a) for a in used if ":" not in a]
    for second in range(30, 16, -1):
        net = ipaddress.IPv4Network(f"172.{second}.0.0/16")
        if not any(a in net for a in addrs):
            return net
    raise SwellError("manifest", "no free /16 in 172.16/12 for the links")
