"""A testbed machine's layout as ordered commands: rendered here, checked and run there.

``swell testbed render`` writes every machine's layout as a list of *steps*
(``swell_host.steps`` in its host_vars, readable before anything runs): each
one command of ``ip``, ``tc``, ``sysctl`` or ``ethtool`` (in the router's core
namespace where it says so), with the state it leaves (its *check*) and how
it is undone. Edge machine (:func:`edge_steps`): its experiment interface up,
the link's ``/30``, the emulated hosts as ``/32`` aliases, the route to the
experiment's network via the router (again with ``quickack`` in a table of its own,
and a rule per alias chosen to ACK every segment on a port), offloads off, the
experiment's TCP.
Router (:func:`router_steps`): the core namespace and its two veths, the
per-side routing tables, a policy rule per incoming link, routes to every
machine's emulated subnets, forwarding on and reverse-path filtering off,
offloads off, and, where it shapes with netem (steps tagged ``engine:
netem``), one ``tc`` batch per device: htb classes and netem leaves per host
and for the bottleneck (:func:`swell.topologies.testbed.netem_batches`).

On the machine, ``swell testbed host plan STATE/host.json`` (:func:`plan_host`)
reads the machine's state once (links, addresses, routes, rules, sysctls,
offloads, qdiscs from tc's text output, which every iproute2 prints), keeps
the steps whose state is not there yet, appends their undo to
``STATE/undo.json`` *before* anything changes (the previous value of each
sysctl and offload), and prints them grouped: consecutive steps of one tool
in one namespace become one command (``ip -batch -``, ``tc -batch -``, one
``sysctl -w`` with several keys, ``ethtool`` lines run by ``sh -e``). The layout role
runs each group with ``ansible.builtin.command`` in a loop, so the commands
are Ansible tasks and ``changed`` means a command ran because its state was
missing; a second layout finds everything in place and changes nothing.
Things made inside the run's own objects (the core namespace, the veths)
need no undo: teardown deletes them by the run prefix.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swell.errors import SwellError
from swell.fsutil import write_json
from swell.topologies.layout import HOST_SYSCTLS

Step = dict[str, Any]
QUICKACK_PREF = 7800  # an edge machine's quick-ack rules: QUICKACK_PREF + their index
QUICKACK_TABLE = 7703  # and their table (the router's are 7700.. and 7701/7702)
OFFLOADS = ("tso", "gso", "gro")
_ETHTOOL_NAMES = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                  "generic-receive-offload": "gro"}


def step(what: str, tool: str, args: Sequence[str], check: dict[str, Any],
         undo: Sequence[str] | str | None = None, netns: str | None = None,
         engine: str | None = None) -> Step:
    """One command (``args`` after the tool) and the state it leaves (``check``); ``undo``:
    an argv, ``"restore"`` (the previous value, read on the machine) or None."""
    out: Step = {"what": what, "tool": tool, "args": [str(a) for a in args], "check": check,
                 "undo": list(undo) if isinstance(undo, list | tuple) else undo,
                 "netns": netns}
    if engine:
        out["engine"] = engine
    return out


def _offloads(dev: str, netns: str | None = None, own: bool = False) -> Step:
    return step(f"offloads off on {dev}", "ethtool",
                ["-K", dev, *(x for k in OFFLOADS for x in (k, "off"))], {"offloads": dev},
                None if own else "restore", netns)


def _sysctl(key: str, value: str, own: bool = False, netns: str | None = None) -> Step:
    return step(f"{key} = {value}", "sysctl", [f"{key}={value}"], {"sysctl": key, "value": value},
                None if own else "restore", netns)


def _conf(dev: str, name: str) -> str:
    """A per-device sysctl key in slash form (device names may hold dots)."""
    return f"net/ipv4/conf/{dev}/{name}"


def edge_steps(v: dict[str, Any]) -> list[Step]:
    """An edge machine's layout (``v``: its :class:`~swell.topologies.testbed.EdgeVars`)."""
    dev = v["iface"]
    out = [step(f"{dev} up", "ip", ["link", "set", "dev", dev, "up"], {"up": dev})]
    addrs = [v["link_ip"], *(f"{a}/32" for a in v["aliases"])]
    for a in addrs:
        out.append(step(f"address {a} on {dev}", "ip", ["addr", "add", a, "dev", dev],
                        {"addr": a, "dev": dev}, ["ip", "addr", "del", a, "dev", dev]))
    route = [v["network"], "via", v["router_ip"], "dev", dev]
    if v["aliases"]:  # unbound sockets (e.g. a readiness probe) leave as an emulated host
        route += ["src", v["aliases"][0]]
    out.append(step(f"route to {v['network']} via the router", "ip", ["route", "add", *route],
                    {"route": v["network"], "via": v["router_ip"]},
                    ["ip", "route", "del", *route]))
    out += _quickack_steps(v)
    out.append(_offloads(dev))
    if v.get("congestion_control"):  # the experiment's TCP, as a local run sets per namespace
        out.append(_sysctl("net.ipv4.tcp_congestion_control", v["congestion_control"]))
    # its emulated hosts open connections as a local run's host namespaces do (TIME_WAIT
    # ports reused after 1 s: topologies/layout.py); teardown restores the machine's value
    out += [_sysctl(k, val) for k, val in HOST_SYSCTLS.items()]
    return out


def _quickack_steps(v: dict[str, Any]) -> list[Step]:
    """The machine's aliases that ACK every segment on one port (its ``quickack``,
    :mod:`swell.topologies.quickack`): the experiment's route again in their own table
    with ``quickack 1``, and one policy rule per alias and port into it."""
    if not v.get("quickack"):
        return []
    dev, table = v["iface"], str(QUICKACK_TABLE)
    route = [v["network"], "via", v["router_ip"], "dev", dev, "table", table, "quickack", "1"]
    out = [step(f"table {table}: the route with quickack", "ip", ["route", "add", *route],
                {"route": v["network"], "table": table, "via": v["router_ip"]},
                ["ip", "route", "flush", "table", table])]
    for i, (alias, match, port) in enumerate(v["quickack"]):
        pref = str(QUICKACK_PREF + i)
        out.append(step(f"rule {pref}: {alias} ACKs every segment ({match} {port})", "ip",
                        ["rule", "add", "pref", pref, "from", alias, "ipproto", "tcp", match,
                         str(port), "lookup", table], {"rule": pref},
                        ["ip", "rule", "del", "pref", pref]))
    return out


def router_steps(v: dict[str, Any]) -> list[Step]:
    """The router's layout (``v``: its ``swell_host`` without the steps)."""
    core, prefix = v["core"], v["prefix"]
    ns = core["netns"]
    if not ns.startswith(prefix):
        raise SwellError(ns, "core namespace does not carry the run prefix")
    out = [step(f"namespace {ns}", "ip", ["netns", "add", ns], {"netns": ns},
                ["ip", "netns", "del", ns])]
    # its own command (`ip netns add`, not a line of `ip -batch`): made by a batch line run
    # under `ip netns exec` (a machine that is itself a namespace), the namespace could not
    # be entered afterwards (setns: Invalid argument; the layout test, 2026-11-28)
    out[0]["alone"] = True
    for side in ("left", "right"):
        c = core[side]
        r_if, table = c["router_if"], str(v["tables"][side])
        out += [
            step(f"veth {r_if} into the core ({side})", "ip",
                 ["link", "add", r_if, "address", c["router_mac"], "type", "veth", "peer",
                  "name", c["core_if"], "address", c["core_mac"], "netns", ns], {"link": r_if}),
            step(f"{r_if} up", "ip", ["link", "set", "dev", r_if, "up"], {"up": r_if}),
            step(f"address {c['router_ip']} on {r_if}", "ip",
                 ["addr", "add", c["router_ip"], "dev", r_if], {"addr": c["router_ip"],
                                                                "dev": r_if}),
            step(f"table {table}: default into the core", "ip",
                 ["route", "add", "default", "via", c["gateway"], "dev", r_if, "table", table],
                 {"route": "default", "table": table, "via": c["gateway"]},
                 ["ip", "route", "flush", "table", table]),
        ]
    for i, p in enumerate(v["ports"]):
        dev, pref, table = p["ifname"], str(v["rule_pref"] + i), str(v["tables"][p["side"]])
        out += [
            step(f"{dev} up", "ip", ["link", "set", "dev", dev, "up"], {"up": dev}),
            step(f"address {p['ip']} on {dev}", "ip", ["addr", "add", p["ip"], "dev", dev],
                 {"addr": p["ip"], "dev": dev}, ["ip", "addr", "del", p["ip"], "dev", dev]),
            step(f"rule {pref}: from {dev} into the core ({p['side']})", "ip",
                 ["rule", "add", "pref", pref, "iif", dev, "lookup", table], {"rule": pref},
                 ["ip", "rule", "del", "pref", pref]),
        ]
        for net in p["subnets"]:
            route = [net, "via", p["peer_ip"], "dev", dev]
            out.append(step(f"route to {net} via {p['machine']}", "ip", ["route", "add", *route],
                            {"route": net, "via": p["peer_ip"]}, ["ip", "route", "del", *route]))
    out.append(step("loopback up in the core", "ip", ["link", "set", "dev", "lo", "up"],
                    {"up": "lo"}, netns=ns))
    for side in ("left", "right"):
        c = core[side]
        out.append(step(f"{c['core_if']} up in the core", "ip",
                        ["link", "set", "dev", c["core_if"], "up"], {"up": c["core_if"]},
                        netns=ns))
    out += _router_netem_ip(v)
    out += [_sysctl("net.ipv4.ip_forward", "1"), _sysctl(_conf("all", "rp_filter"), "0")]
    out += [_sysctl(_conf(core[s]["router_if"], "rp_filter"), "0", own=True)
            for s in ("left", "right")]
    out += [_sysctl(_conf(p["ifname"], "rp_filter"), "0") for p in v["ports"]]
    out += _router_netem_sysctls(v)
    out += [_offloads(core[s]["router_if"], own=True) for s in ("left", "right")]
    out += [_offloads(p["ifname"]) for p in v["ports"]]
    out += [_offloads(core[s]["core_if"], ns, own=True) for s in ("left", "right")]
    out += _router_tc(v)
    return out


def _router_netem_ip(v: dict[str, Any]) -> list[Step]:
    """With netem the core forwards by the kernel: its addresses and routes."""
    core = v["core"]
    ns, out = core["netns"], []
    for side in ("left", "right"):
        c = core[side]
        addr = f"{c['gateway']}/30"
        out += [step(f"address {addr} on {c['core_if']} in the core", "ip",
                     ["addr", "add", addr, "dev", c["core_if"]],
                     {"addr": addr, "dev": c["core_if"]}, netns=ns, engine="netem"),
                step(f"route to {core['halves'][side]} in the core", "ip",
                     ["route", "add", core["halves"][side], "via", c["router_ip"].split("/")[0],
                      "dev", c["core_if"]], {"route": core["halves"][side],
                                             "via": c["router_ip"].split("/")[0]}, netns=ns,
                     engine="netem")]
    return out


def _router_netem_sysctls(v: dict[str, Any]) -> list[Step]:
    core = v["core"]
    ns = core["netns"]
    keys = [("net.ipv4.ip_forward", "1"), (_conf("all", "rp_filter"), "0"),
            *((_conf(core[s]["core_if"], "rp_filter"), "0") for s in ("left", "right"))]
    out = []
    for key, value in keys:
        s = _sysctl(key, value, own=True, netns=ns)
        s["engine"] = "netem"
        out.append(s)
    return out


def _router_tc(v: dict[str, Any]) -> list[Step]:
    """One step per shaped device: its whole tc batch (it starts by replacing the root
    qdisc, so running it again rebuilds the device's tree), checked by its qdiscs."""
    batches, ns = v.get("netem") or {}, v["core"]["netns"]
    out = []
    for where in ("router", "core"):
        devs: dict[str, list[list[str]]] = {}
        for cmd in batches.get(where, []):
            devs.setdefault(cmd[cmd.index("dev") + 1], []).append([str(a) for a in cmd])
        for dev, cmds in devs.items():
            want = sorted({(c[c.index("handle") + 1], c[c.index("handle") + 2])
                           for c in cmds if c[0] == "qdisc" and "handle" in c})
            s = step(f"shaping on {dev}{' in the core' if where == 'core' else ''} "
                     f"({sum(1 for h, k in want if k == 'netem')} netem)", "tc", [],
                     {"qdiscs": dev, "want": [list(w) for w in want]},
                     ["tc", "qdisc", "del", "dev", dev, "root"] if where == "router" else None,
                     ns if where == "core" else None, engine="netem")
            s["lines"] = cmds
            out.append(s)
    return out


# --- on the machine ----------------------------------------------------------------------


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=30)


def _in(netns: str | None, argv: Sequence[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


class MachineState:
    """What the machine has now, read once per namespace (see the module docstring)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str | None, str], Any] = {}
        self.netns = set(p.name for p in Path("/run/netns").glob("*")) \
            if Path("/run/netns").is_dir() else set()

    def _read(self, what: str, netns: str | None, key: str, argv: list[str]) -> str | None:
        k = (what, netns, key)
        if k not in self._cache:
            res = _run(argv)
            self._cache[k] = res.stdout if res.returncode == 0 else None
        return self._cache[k]

    def links(self, netns: str | None) -> dict[str, str]:
        """Interface name -> its flags (``UP,LOWER_UP``...)."""
        text = self._read("links", netns, "", ["ip", *(["-n", netns] if netns else []),
                                               "-o", "link", "show"]) or ""
        return {m.group(1): m.group(2) for m in re.finditer(r"^\d+: ([^:@\s]+)[^<]*<([^>]*)>",
                                                           text, re.M)}

    def addrs(self, netns: str | None) -> set[tuple[str, str]]:
        text = self._read("addrs", netns, "", ["ip", *(["-n", netns] if netns else []),
                                               "-o", "addr", "show"]) or ""
        return {(m.group(1), m.group(2)) for m in
                re.finditer(r"^\d+: (\S+)\s+inet6? (\S+)", text, re.M)}

    def routes(self, netns: str | None) -> set[tuple[str, str, str | None]]:
        """(table, destination, gateway) of every route; destinations as networks."""
        text = self._read("routes", netns, "", ["ip", *(["-n", netns] if netns else []),
                                                "route", "show", "table", "all"]) or ""
        out = set()
        for line in text.splitlines():
            words = line.split()
            if not words or words[0] in ("local", "broadcast", "multicast", "unreachable"):
                continue
            table = words[words.index("table") + 1] if "table" in words else "main"
            via = words[words.index("via") + 1] if "via" in words else None
            out.add((table, _net(words[0]), via))
        return out

    def rules(self, netns: str | None) -> set[str]:
        text = self._read("rules", netns, "", ["ip", *(["-n", netns] if netns else []),
                                               "rule", "show"]) or ""
        return {ln.split(":")[0] for ln in text.splitlines() if ":" in ln}

    def sysctl(self, netns: str | None, key: str) -> str | None:
        text = self._read("sysctl", netns, key, _in(netns, ["sysctl", "-n", key]))
        return None if text is None else text.strip()

    def offloads(self, netns: str | None, dev: str) -> dict[str, str] | None:
        """tso/gso/gro -> on, off or fixed (None: no such device)."""
        text = self._read("ethtool", netns, dev, _in(netns, ["ethtool", "-k", dev]))
        if text is None:
            return None
        out = {}
        for line in text.splitlines():
            name, _, rest = line.strip().partition(":")
            if name in _ETHTOOL_NAMES and rest.split():
                out[_ETHTOOL_NAMES[name]] = "fixed" if "[fixed]" in rest else rest.split()[0]
        return out

    def qdiscs(self, netns: str | None, dev: str) -> set[tuple[str, str]]:
        """(handle, kind) of every qdisc on ``dev``, from tc's text output."""
        text = self._read("qdiscs", netns, dev, ["tc", *(["-n", netns] if netns else []),
                                                 "qdisc", "show", "dev", dev]) or ""
        return {(m.group(2), m.group(1)) for m in re.finditer(r"^qdisc (\S+) (\S+)", text, re.M)}

    def done(self, s: Step) -> bool:
        """Is the state ``s`` leaves there already?"""
        ns, c = s["netns"], s["check"]
        if ns and ns not in self.netns:
            return False  # made by an earlier step of this plan
        if "netns" in c:
            return c["netns"] in self.netns
        if "link" in c:
            return c["link"] in self.links(ns)
        if "up" in c:
            return "UP" in self.links(ns).get(c["up"], "").split(",")
        if "addr" in c:
            return (c["dev"], c["addr"]) in self.addrs(ns)
        if "route" in c:
            return (c.get("table", "main"), _net(c["route"]), c.get("via")) in self.routes(ns)
        if "rule" in c:
            return c["rule"] in self.rules(ns)
        if "sysctl" in c:
            return self.sysctl(ns, c["sysctl"]) == c["value"]
        if "offloads" in c:
            state = self.offloads(ns, c["offloads"])
            return state is not None and "on" not in state.values()
        if "qdiscs" in c:
            return {tuple(w) for w in c["want"]} <= self.qdiscs(ns, c["qdiscs"])
        raise SwellError("testbed step", f"unknown check {c}")


def _net(dst: str) -> str:
    if dst == "default":
        return "0.0.0.0/0"
    try:
        return str(ipaddress.ip_network(dst, strict=False))
    except ValueError:
        return dst


def pending(steps: list[Step], state: MachineState) -> list[Step]:
    """The steps still to run, each with its command arguments and its undo argv as this
    machine's state makes them (the previous sysctl value; the offloads that are on)."""
    out = []
    for s in steps:
        if state.done(s):
            continue
        s = dict(s)
        ns, c = s["netns"], s["check"]
        if s["tool"] == "ethtool":
            now = state.offloads(ns, c["offloads"])
            on = [k for k in OFFLOADS if now is None or now.get(k) == "on"]
            s["args"] = ["-K", c["offloads"], *(x for k in on for x in (k, "off"))]
            if s["undo"] == "restore":
                s["undo"] = _in(ns, ["ethtool", "-K", c["offloads"],
                                     *(x for k in on for x in (k, "on"))]) if now else None
        elif s["undo"] == "restore":  # a sysctl
            old = state.sysctl(ns, c["sysctl"])
            s["undo"] = None if old is None else _in(ns, ["sysctl", "-qw",
                                                          f"{c['sysctl']}={old}"])
        out.append(s)
    return out


def batches(steps: list[Step]) -> list[dict[str, Any]]:
    """Consecutive steps of one tool in one namespace as one command (see the docstring)."""
    groups: list[list[Step]] = []
    for s in steps:
        last = groups[-1][0] if groups else None
        if last is not None and not (last.get("alone") or s.get("alone")) and \
                (last["tool"], last["netns"]) == (s["tool"], s["netns"]):
            groups[-1].append(s)
        else:
            groups.append([s])
    out = []
    for g in groups:
        tool, ns = g[0]["tool"], g[0]["netns"]
        name = g[0]["what"] + (f" (and {len(g) - 1} more)" if len(g) > 1 else "")
        if ns:
            name += " [core]"
        item: dict[str, Any] = {"name": f"{tool}: {name}", "steps": len(g)}
        if g[0].get("alone"):  # its own command, not a line of a batch (see router_steps)
            item["argv"] = [tool, *(["-n", ns] if ns else []), *g[0]["args"]]
        elif tool in ("ip", "tc"):
            lines = [ln for s in g for ln in (s.get("lines") or [s["args"]])]
            item["argv"] = [tool, *(["-n", ns] if ns else []), "-batch", "-"]
            item["stdin"] = "".join(" ".join(ln) + "\n" for ln in lines)
        elif tool == "sysctl":
            item["argv"] = _in(ns, ["sysctl", "-qw", *(s["args"][0] for s in g)])
        elif len(g) == 1:
            item["argv"] = _in(ns, ["ethtool", *g[0]["args"]])
        else:  # ethtool has no batch mode: one line per device, stopping at a failure
            item["argv"] = _in(ns, ["sh", "-ec", "".join(
                " ".join(["ethtool", *(shlex.quote(a) for a in s["args"])]) + "\n"
                for s in g)])
        out.append(item)
    return out


def plan_host(v: dict[str, Any], undo_path: Path, engine: str | None = None) -> dict[str, Any]:
    """What is still to do on this machine (``v``: its host.json; ``engine``: the router's
    chosen engine, whose steps are kept): the commands, grouped; their undo is appended
    to ``undo_path`` before this returns."""
    if v["kind"] == "edge" and not Path(f"/sys/class/net/{v['iface']}").exists():
        raise SwellError(v["name"], f"no experiment interface {v['iface']}")
    steps = [s for s in v["steps"] if s.get("engine") in (None, engine)]
    todo = pending(steps, MachineState())
    undo = json.loads(undo_path.read_text()) if undo_path.exists() else []
    undo += [s["undo"] for s in todo if s["undo"]]
    write_json(undo_path, undo)
    return {"engine": engine, "steps": len(steps), "todo": len(todo), "batches": batches(todo)}


def run_batches(items: list[dict[str, Any]]) -> None:
    """Run the grouped commands here, in order (what the layout role does over SSH)."""
    for item in items:
        res = subprocess.run(item["argv"], input=item.get("stdin"), capture_output=True,
                             text=True, timeout=120)
        if res.returncode != 0:
            raise SwellError(item["name"], (res.stderr or res.stdout).strip()[:300]
                             or f"exit status {res.returncode}")
