"""``swell cleanup``: remove what crashed runs left behind, and nothing else.

A run's objects all carry its prefix ``sw<4 hex>`` (exactly: ``sw`` and four
lower-case hex digits, then ``-`` in every name). For each prefix found, the
leftovers are:

* processes: Mininet node shells (``bash ... mininet:<prefix>-<node>``),
  ``swell-link --name <prefix>``, and every process whose network namespace is
  one of the run's namespaces (found by the namespace's inode, not by name);
* named network namespaces ``<prefix>-*`` (``ip netns``);
* interfaces in the host namespace named ``<prefix>-*`` (with their qdiscs);
* iptables rules in the host namespace tagged ``-m comment --comment swell:<prefix>``;
* the state directory ``/run/swell/<prefix>``.

Interfaces, qdiscs and rules inside the run's namespaces go with the
namespaces. A prefix whose owner (``state.json``'s ``owner_pid``) is still
alive is a running topology, not a leftover: it is skipped unless forced.
Unlike ``mn -c`` nothing is matched by a loose pattern: names must start with
a well-formed prefix and a dash.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from swell.topologies.topology import (
    STATE_ROOT,
    kill_and_wait,
    netns_inode,
    pids_in_netns,
    process_start,
)

PREFIX = r"swl?[0-9a-f]{4}"  # local runs: sw + 4 hex; testbed runs: swl + 4 hex
NAME_RE = re.compile(rf"^({PREFIX})-")
PREFIX_RE = re.compile(rf"^{PREFIX}$")
SHELL_RE = re.compile(rf"mininet:({PREFIX})-")
NETNS_DIR = Path("/var/run/netns")
STARTING_GRACE_S = 60.0


@dataclass
class Leftovers:
    prefix: str
    owner_alive: bool = False
    processes: dict[int, str] = field(default_factory=dict)  # pid -> command line
    namespaces: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)
    iptables: list[tuple[str, str]] = field(default_factory=list)  # (table, rule)
    state_dir: Path | None = None

    def empty(self) -> bool:
        return not (
            self.processes or self.namespaces or self.interfaces or self.iptables or self.state_dir
        )

    def describe(self) -> list[str]:
        out = [f"process {pid}: {cmd[:80]}" for pid, cmd in sorted(self.processes.items())]
        out += [f"netns {n}" for n in self.namespaces]
        out += [f"interface {i}" for i in self.interfaces]
        out += [f"iptables -t {t} {r}" for t, r in self.iptables]
        out += [f"state {self.state_dir}"] if self.state_dir else []
        return out


def _cmdlines() -> dict[int, list[str]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            with contextlib.suppress(OSError):
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
                if raw:
                    out[int(entry)] = raw.rstrip(b"\0").decode(errors="replace").split("\0")
    return out


def netns_names() -> list[str]:
    return sorted(os.listdir(NETNS_DIR)) if NETNS_DIR.is_dir() else []


def _root_links() -> list[str]:
    proc = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    names = []
    for line in proc.stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 2:
            names.append(parts[1].strip().split("@")[0])
    return names


def _iptables_rules(prefix: str) -> list[tuple[str, str]]:
    if not shutil.which("iptables-save"):
        return []
    proc = subprocess.run(["iptables-save"], capture_output=True, text=True)
    rules, table = [], ""
    for line in proc.stdout.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A ") and f"swell:{prefix}" in line:
            rules.append((table, line))
    return rules


def _engine_prefix(argv: list[str]) -> str | None:
    if not argv or not argv[0].endswith("swell-link") or "--name" not in argv[:-1]:
        return None
    name = argv[argv.index("--name") + 1]
    return name if PREFIX_RE.match(name) else None


def find_prefixes() -> set[str]:
    """Every run prefix with something on this host."""
    found = {m.group(1) for n in netns_names() + _root_links() if (m := NAME_RE.match(n))}
    if STATE_ROOT.is_dir():
        found |= {d for d in os.listdir(STATE_ROOT) if PREFIX_RE.match(d)}
    for argv in _cmdlines().values():
        line = " ".join(argv)
        if m := SHELL_RE.search(line):
            found.add(m.group(1))
        if p := _engine_prefix(argv):
            found.add(p)
    return found


def owner_alive(prefix: str) -> bool:
    """Is the process that brought ``prefix`` up still running (same pid and start time)?"""
    state = STATE_ROOT / prefix / "state.json"
    if not state.exists():  # a run between mkdir and its first state write is starting
        with contextlib.suppress(OSError):
            return time.time() - state.parent.stat().st_mtime < STARTING_GRACE_S
    try:
        data = json.loads(state.read_text())
        pid, start = int(data["owner_pid"]), data.get("owner_start")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    now = process_start(pid)
    return now is not None and (start is None or now == start)


def find_leftovers(prefix: str) -> Leftovers:
    if not PREFIX_RE.match(prefix):
        raise ValueError(f"not a swell run prefix: {prefix!r}")
    left = Leftovers(prefix, owner_alive=owner_alive(prefix))
    left.namespaces = [n for n in netns_names() if n.startswith(prefix + "-")]
    left.interfaces = [n for n in _root_links() if n.startswith(prefix + "-")]
    left.iptables = _iptables_rules(prefix)
    inodes = {os.stat(NETNS_DIR / n).st_ino for n in left.namespaces if (NETNS_DIR / n).exists()}
    cmdlines = _cmdlines()
    for pid, argv in cmdlines.items():
        line = " ".join(argv)
        if f"mininet:{prefix}-" in line or _engine_prefix(argv) == prefix:
            left.processes[pid] = line
            if (ino := netns_inode(pid)) is not None and f"mininet:{prefix}-" in line:
                inodes.add(ino)
    for pid in pids_in_netns(inodes):
        left.processes.setdefault(pid, " ".join(cmdlines.get(pid, ["?"])))
    if (STATE_ROOT / prefix).exists():
        left.state_dir = STATE_ROOT / prefix
    return left


def remove(left: Leftovers) -> list[str]:
    """Remove the leftovers; returns problems (empty when all went)."""
    problems = []
    alive = kill_and_wait(list(left.processes))
    problems += [f"process {pid} would not die" for pid in alive]
    for name in left.namespaces:
        proc = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True)
        if proc.returncode != 0:
            problems.append(f"netns {name}: {proc.stderr.strip()}")
    for name in left.interfaces:
        proc = subprocess.run(["ip", "link", "del", name], capture_output=True, text=True)
        if proc.returncode != 0 and "Cannot find" not in proc.stderr:
            problems.append(f"interface {name}: {proc.stderr.strip()}")
    for table, rule in left.iptables:
        argv = ["iptables", "-t", table, "-D", *rule.split()[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            problems.append(f"iptables {rule}: {proc.stderr.strip()}")
    if left.state_dir is not None:
        shutil.rmtree(left.state_dir, ignore_errors=True)
    return problems


def cleanup(
    prefix: str | None = None, force: bool = False, dry_run: bool = False
) -> list[tuple[Leftovers, list[str], str]]:
    """Clean one prefix or every crashed run: [(leftovers, problems, what happened)]."""
    prefixes = [prefix] if prefix else sorted(find_prefixes())
    results = []
    for p in prefixes:
        left = find_leftovers(p)
        if left.owner_alive and not force:
            results.append((left, [], "skipped: its owner is running (swell topo down)"))
        elif left.empty():
            results.append((left, [], "nothing left"))
        elif dry_run:
            results.append((left, [], "would remove"))
        else:
            results.append((left, remove(left), "removed"))
    return results
