"""Physically consistent mapping of a schedule's load onto emulated hosts.

A Swing model's sessions talk to observed servers (``rreServer``: the trace's
server index of each RRE, which carries the popularity). Scaling the session
rate (a ``scale`` or ``target_mbps`` variant) means more users on the link,
and more users visit more servers: folding the observed servers onto a few
emulated ones (``index % servers``) would ask a handful of hosts for more than
their drawn access links carry, and the sessions would pile up behind them.
Like ModelNet (many flows on many virtual nodes), swell maps the load onto a
pool of emulated hosts, each with its own access link drawn from the model:

* **servers**: each observed server keeps its share of the RREs (the
  popularity's shape), and gets as many emulated hosts as its share of the
  load needs for a planned utilisation of ``UTIL`` of their links (heaviest
  first, at least one each while hosts last; when there are fewer hosts than
  observed servers, the light ones share the host with the most spare
  capacity). Hosts left over go, one at a time, to the observed server with the
  highest load per capacity, so the whole pool is used. Within its pool, an
  RRE goes to the host least loaded relative to its capacity (in start order).
* **clients**: sessions carry no observed client identity; each goes (in start
  order) to the client host least loaded relative to its capacity.

The load of a host is the bytes it is scheduled to carry in its busier
direction over the run; after mapping, every host asked for more than
``OVERLOAD`` of its link's rate over the run is listed (``overloaded``), and
:func:`hosts_needed` says how many hosts of the model's median capacity the
load needs. A link without a rate counts as ``UNLIMITED_MBPS``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np

UTIL = 0.5  # planned mean utilisation of an access link: headroom for bursty sessions
OVERLOAD = 0.9  # asked above this share of a link's rate over the run: overloaded
UNLIMITED_MBPS = 10_000.0


def capacities(rates: list[float | None], n: int) -> np.ndarray:
    """Link rates in Mbit/s (None, or no list: unlimited)."""
    if not rates:
        return np.full(n, UNLIMITED_MBPS)
    return np.array([UNLIMITED_MBPS if r is None or r <= 0 else float(r) for r in rates])


@dataclass
class Usage:
    """Bytes each host of one side is scheduled to carry, both directions."""

    addrs: list[str]
    caps_mbps: np.ndarray
    up: np.ndarray = field(init=False)  # host -> network (servers: responses)
    down: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.up = np.zeros(len(self.addrs))
        self.down = np.zeros(len(self.addrs))

    def key(self, h: int) -> float:
        return max(self.up[h], self.down[h]) / self.caps_mbps[h]

    def summary(self, duration_s: float, limit: int = 10) -> dict[str, Any]:
        """Asked rates per host over the run; the overloaded ones, worst first."""
        up = self.up * 8 / duration_s / 1e6
        down = self.down * 8 / duration_s / 1e6
        busy = np.maximum(up, down) / self.caps_mbps
        order = np.argsort(-busy)
        over = [i for i in order if busy[i] > OVERLOAD]
        return {
            "hosts": len(self.addrs),
            "hosts_used": int(((self.up + self.down) > 0).sum()),
            "max_asked_share": round(float(busy.max()), 4) if busy.size else 0.0,
            "overloaded": len(over),
            "overloaded_hosts": [self.addrs[i] for i in over],
            "worst": [{"host": self.addrs[i], "asked_up_mbps": round(float(up[i]), 3),
                       "asked_down_mbps": round(float(down[i]), 3),
                       "link_mbps": round(float(self.caps_mbps[i]), 3)}
                      for i in (over or list(order[:3]))[:limit]],
        }


def server_pools(loads: dict[int, float], caps: np.ndarray, rng: np.random.Generator
                 ) -> dict[int, list[int]]:
    """Emulated host indices per observed server (see the module docstring)."""
    hosts = [int(h) for h in rng.permutation(caps.size)]
    order = sorted(loads, key=lambda v: (-loads[v], v))
    pools: dict[int, list[int]] = {}
    spare: list[tuple[float, int]] = []  # (-spare capacity, host) of hosts in use
    i = 0
    for k, v in enumerate(order):
        left = len(order) - k - 1  # observed servers still waiting for a host
        need, got, cap = loads[v] / UTIL, [], 0.0
        while i < len(hosts) and (not got or (cap < need and len(hosts) - i > left)):
            got.append(hosts[i])
            cap += caps[hosts[i]]
            i += 1
        if got:
            for h in got:
                heapq.heappush(spare, (-(caps[h] * UTIL - loads[v] * caps[h] / cap), h))
        else:  # fewer hosts than observed servers: share the one with the most room
            room, h = heapq.heappop(spare)
            heapq.heappush(spare, (room + loads[v], h))
            got = [h]
        pools[v] = got
    # hosts left over widen the pools of the most loaded observed servers
    ratio = [(-loads[v] / sum(caps[h] for h in pools[v]), v) for v in order]
    heapq.heapify(ratio)
    while i < len(hosts) and ratio:
        _, v = heapq.heappop(ratio)
        pools[v].append(hosts[i])
        i += 1
        heapq.heappush(ratio, (-loads[v] / sum(caps[h] for h in pools[v]), v))
    return pools


class LeastLoaded:
    """Picks, among candidate hosts, the one least loaded relative to its capacity."""

    def __init__(self, usage: Usage) -> None:
        self.u = usage

    def pick(self, candidates: list[int], up: float, down: float) -> int:
        u = self.u
        best = min(candidates, key=lambda h: (max(u.up[h] + up, u.down[h] + down)
                                              / u.caps_mbps[h], h))
        u.up[best] += up
        u.down[best] += down
        return best


class ClientPicker:
    """Least relatively loaded client host, from a heap (thousands of hosts)."""

    def __init__(self, usage: Usage, rng: np.random.Generator) -> None:
        self.u = usage
        tie = rng.permutation(usage.caps_mbps.size)
        # empty hosts: the fastest first, then in a random order
        self.heap = [(0.0, -usage.caps_mbps[h], int(tie[h]), h) for h in range(tie.size)]
        heapq.heapify(self.heap)

    def pick(self, up: float, down: float) -> int:
        _, negcap, tie, h = heapq.heappop(self.heap)
        self.u.up[h] += up
        self.u.down[h] += down
        heapq.heappush(self.heap, (self.u.key(h), negcap, tie, h))
        return h


def hosts_needed(load_mbps: float, caps: np.ndarray) -> int:
    """Hosts of the median capacity that carry ``load_mbps`` at the planned utilisation."""
    if load_mbps <= 0 or caps.size == 0:
        return 1
    return max(1, int(np.ceil(load_mbps / (UTIL * float(np.median(caps))))))
