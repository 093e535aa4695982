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
* **a server's own path** (``match``): an observed server's pool is made of
  the free hosts whose access link's one-way delay is nearest (in log scale) to
  the observed server's own (the heaviest observed servers choose first; ties
  in the random order above), and hosts left over go to the observed server
  nearest their delay. In a trace the busy servers are seldom typical ones:
  example.pcap's HTTP pairs all go to one server 10.5 ms away while half of
  its servers are 50 ms or more away, so hosts taken in any order gave its
  pages round trips several times the trace's (docs/fidelity.md, "A server's
  own path"). A variant that sets every delay alike (HB) maps as in any order.
* **clients**: a whole session (``rre_draw: session``) carries its observed
  client, and the observed clients get pools as the servers do, matched on
  their access links (:func:`link_keys`: capacity and delay, the client match,
  :mod:`.sessionmap`). A session without one (Swing's independent draw) goes
  (in start order) to the client host least loaded relative to its capacity.

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


def delay_keys(delays_s: np.ndarray) -> np.ndarray:
    """What a path is matched on: the log of its one-way delay (at least 1 us), so
    0.5 ms is as far from 1 ms as 50 ms from 100 ms."""
    return np.log(np.maximum(np.asarray(delays_s, dtype=float), 1e-6))


LINK_DELAY_FLOOR_S = 1e-3  # client delays below this are alike: a LAN's, a capture host's


def link_keys(rates_mbps: np.ndarray, delays_s: np.ndarray) -> np.ndarray:
    """What a client's access link is matched on, one row per link: the logs of its rate
    (Mbit/s, at least 1 kbit/s) and of its one-way delay (at least
    ``LINK_DELAY_FLOOR_S``), nearest by the sum of the two distances, so halving the
    rate counts as much as doubling the delay. Delays under a millisecond do not tell
    clients apart: a capture taken on the users' machines measures microseconds that no
    transfer notices, and would otherwise outweigh the rates."""
    r = np.log(np.maximum(np.asarray(rates_mbps, dtype=float), 1e-3))
    d = np.log(np.maximum(np.asarray(delays_s, dtype=float), LINK_DELAY_FLOOR_S))
    return np.stack([r, d], axis=-1)


def _dist(keys: np.ndarray, key: Any) -> np.ndarray:
    """Distance of each key (scalars, or rows summed) to ``key``."""
    d = np.abs(keys - key)
    return d if d.ndim == 1 else d.sum(axis=1)


class FreeHosts:
    """Hosts not yet in a pool: taken in a random order, or the nearest by key."""

    def __init__(self, n: int, rng: np.random.Generator,
                 host_key: np.ndarray | None = None) -> None:
        self.order = rng.permutation(n)  # position -> host
        self.key = None if host_key is None else np.asarray(host_key, float)[self.order]
        self.free = np.ones(n, dtype=bool)
        self.left = n

    def take(self, key: Any = None) -> int:
        """A free host: the first in the random order, or (``key`` given and the hosts
        keyed) the one nearest ``key``, the first in that order among equals."""
        if key is None or self.key is None:
            pos = int(np.argmax(self.free))
        else:
            d = np.where(self.free, _dist(self.key, key), np.inf)
            pos = int(np.flatnonzero(d <= d.min() + 1e-12)[0])
        self.free[pos] = False
        self.left -= 1
        return int(self.order[pos])


def host_pools(loads: dict[int, float], caps: np.ndarray, rng: np.random.Generator,
               match: tuple[dict[int, Any], np.ndarray] | None = None
               ) -> dict[int, list[int]]:
    """Emulated host indices per observed host of one side (the module docstring says
    it for the servers; the clients' pools are made alike). ``match``: each observed
    host's key (:func:`delay_keys` or :func:`link_keys`; those without one take any
    host) and each emulated host's, to give an observed host the hosts nearest its own."""
    obs_key, host_key = match if match is not None else ({}, None)
    free = FreeHosts(caps.size, rng, host_key)
    order = sorted(loads, key=lambda v: (-loads[v], v))
    pools: dict[int, list[int]] = {}
    spare: list[tuple[float, int]] = []  # (-spare capacity, host) of hosts in use
    for k, v in enumerate(order):
        left = len(order) - k - 1  # observed servers still waiting for a host
        need, got, cap = loads[v] / UTIL, [], 0.0
        while free.left and (not got or (cap < need and free.left > left)):
            got.append(free.take(obs_key.get(v)))
            cap += caps[got[-1]]
        if got:
            for h in got:
                heapq.heappush(spare, (-(caps[h] * UTIL - loads[v] * caps[h] / cap), h))
        else:  # fewer hosts than observed servers: share the one with the most room
            room, h = heapq.heappop(spare)
            heapq.heappush(spare, (room + loads[v], h))
            got = [h]
        pools[v] = got
    if free.left and host_key is not None and obs_key:
        _widen_by_key(pools, loads, caps, free, obs_key, np.asarray(host_key, float))
        return pools
    # hosts left over widen the pools of the most loaded observed servers
    ratio = [(-loads[v] / sum(caps[h] for h in pools[v]), v) for v in order]
    heapq.heapify(ratio)
    while free.left and ratio:
        _, v = heapq.heappop(ratio)
        pools[v].append(free.take(obs_key.get(v)))
        heapq.heappush(ratio, (-loads[v] / sum(caps[h] for h in pools[v]), v))
    return pools


def _widen_by_key(pools: dict[int, list[int]], loads: dict[int, float], caps: np.ndarray,
                  free: FreeHosts, obs_key: dict[int, Any], host_key: np.ndarray) -> None:
    """Hosts left over, in the random order, each to the observed host nearest its key
    (a server's delay, a client's link; among equals, the one most loaded for its
    pool's capacity): the whole pool is used and a host serves a path like its own."""
    vs = np.array(sorted(obs_key), dtype=np.int64)
    rk = np.array([obs_key[int(v)] for v in vs])
    load = np.array([loads[int(v)] for v in vs])
    cap = np.array([sum(caps[h] for h in pools[int(v)]) for v in vs], dtype=float)
    while free.left:
        h = free.take()
        d = _dist(rk, host_key[h])
        near = np.flatnonzero(d <= d.min() + 1e-12)
        k = int(near[np.argmax(load[near] / cap[near])])
        pools[int(vs[k])].append(h)
        cap[k] += caps[h]


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
    """Least relatively loaded client host, from a heap (thousands of hosts). A host
    loaded by another picker since its entry was pushed is re-keyed when it comes up."""

    def __init__(self, usage: Usage, rng: np.random.Generator) -> None:
        self.u = usage
        tie = rng.permutation(usage.caps_mbps.size)
        # empty hosts: the fastest first, then in a random order
        self.heap = [(0.0, -usage.caps_mbps[h], int(tie[h]), h) for h in range(tie.size)]
        heapq.heapify(self.heap)

    def pick(self, up: float, down: float) -> int:
        while True:
            key, negcap, tie, h = heapq.heappop(self.heap)
            if key == self.u.key(h):
                break
            heapq.heappush(self.heap, (self.u.key(h), negcap, tie, h))
        self.u.up[h] += up
        self.u.down[h] += down
        heapq.heappush(self.heap, (self.u.key(h), negcap, tie, h))
        return h


def hosts_needed(load_mbps: float, caps: np.ndarray) -> int:
    """Hosts of the median capacity that carry ``load_mbps`` at the planned utilisation."""
    if load_mbps <= 0 or caps.size == 0:
        return 1
    return max(1, int(np.ceil(load_mbps / (UTIL * float(np.median(caps))))))
