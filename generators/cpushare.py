"""How busy the machine and the emulation's own processes were during a run.

A background can fall short of its asked load because the machine could not
emulate it: on a small machine the link engine (``swell-link``, one packet
loop per thread) reaches a full core, and the receivers' TCP work runs in its
context when it hands frames to the hosts' interfaces (docs/scale.md). The
links then look barely busy, so only the CPU tells the real limit.

:class:`CpuSampler` reads ``/proc`` (no tools, no root needed): the machine's
busy share over every core (``/proc/stat``), and the CPU time of each thread
of this process's descendants whose command is one of ``names`` (the link
engine the topology started and the generators' processes). Two snapshots
give each share over the time between them, as a share of one core
(1.0 = a core at its limit). A remote engine (testbed) is not a descendant:
its share is then unknown (``None``), never zero.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
NAMES = ("swell-link", "swell-gen")


def _stat_fields(path: Path) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of a ``stat`` file; None when it is gone."""
    try:
        raw = path.read_text()
    except OSError:
        return None
    left, right = raw.find("("), raw.rfind(")")
    if left < 0 or right < 0:
        return None
    return raw[left + 1:right], raw[right + 2:].split()


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root`` (pid -> command name)."""
    children: dict[int, list[int]] = {}
    comm: dict[int, str] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        got = _stat_fields(entry / "stat")
        if got is None:
            continue
        pid = int(entry.name)
        comm[pid] = got[0]
        children.setdefault(int(got[1][1]), []).append(pid)  # field 4: ppid
    out: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out[pid] = comm.get(pid, "")
        todo += children.get(pid, [])
    return out


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over every core since boot."""
    fields = [int(x) for x in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


@dataclass
class Snapshot:
    t: float
    machine: tuple[int, int]
    threads: dict[tuple[str, int, int], int] = field(default_factory=dict)  # (comm, pid, tid)


class CpuSampler:
    """CPU shares of the emulation's processes and of the machine between two snapshots."""

    def __init__(self, names: tuple[str, ...] = NAMES, root: int | None = None) -> None:
        self.names = names
        self.root = os.getpid() if root is None else root
        self.first: Snapshot | None = None
        self.last: Snapshot | None = None

    def snapshot(self) -> Snapshot:
        snap = Snapshot(time.monotonic(), machine_ticks())
        for pid, comm in descendants(self.root).items():
            if comm not in self.names:
                continue
            try:
                tids = [int(t.name) for t in (PROC / str(pid) / "task").iterdir()]
            except OSError:
                continue
            for tid in tids:
                got = _stat_fields(PROC / str(pid) / "task" / str(tid) / "stat")
                if got is not None:  # fields 14, 15: utime, stime
                    snap.threads[(comm, pid, tid)] = int(got[1][11]) + int(got[1][12])
        return snap

    def start(self) -> None:
        self.first = self.last = self.snapshot()

    def sample(self) -> None:
        """Take the latest snapshot (call while the traffic runs)."""
        if self.first is not None:
            self.last = self.snapshot()

    def shares(self) -> dict[str, Any] | None:
        """Per name: the process family's share of a core and its busiest thread's;
        the machine's busy share of all its cores. None before two snapshots."""
        a, b = self.first, self.last
        if a is None or b is None or b.t - a.t < 0.5:
            return None
        dt = b.t - a.t
        out: dict[str, Any] = {"interval_s": round(dt, 3), "cores": os.cpu_count() or 1}
        busy = b.machine[0] - a.machine[0]
        total = b.machine[1] - a.machine[1]
        out["machine_busy"] = round(busy / total, 4) if total > 0 else None
        for name in self.names:
            deltas = [(ticks - a.threads.get(key, 0)) / HZ / dt
                      for key, ticks in b.threads.items() if key[0] == name]
            # a thread seen only at the end started during the interval: all its time counts
            out[name] = None if not deltas else {
                "processes": len({key[1] for key in b.threads if key[0] == name}),
                "core_share": round(sum(deltas), 4),
                "busiest_thread": round(max(deltas), 4)}
        return out
