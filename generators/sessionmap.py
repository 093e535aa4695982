"""A drawn schedule's sessions onto the emulated hosts: servers by path, clients by link.

Drawn sessions name observed hosts: each RRE's server is ``OBS:PORT`` (the
model's ``rreServer``), and a whole session's client (``rre_draw: session``, a
model with ``sessClient``) is the observed client's index as text; an
independent draw's session has no client (``""``). :func:`map_hosts` gives
each an emulated host (:mod:`.hostmap` does the arithmetic):

* **servers**: each observed server gets a pool of hosts by its share of the
  load, with ``observed_delays`` the hosts whose access delay is nearest its own
  (the server match, docs/scale.md section 1); an RRE goes to the least
  loaded host of its server's pool.
* **clients**: with ``observed_clients`` (the model's capacity and one-way delay
  per observed client) and every client host's link known, the same pools for
  the observed clients, nearest by :func:`hostmap.link_keys` (the client match):
  a whole session of a user behind a 15 Mbit/s home link runs behind an emulated
  link like it, and one of a user on a 100 Mbit/s LAN behind a fast one, where
  a session placed by load alone meets whichever link is least loaded. A
  session without an observed client goes to the least loaded client host.

``meta["hosts"]`` says how it went: per side the asked rates and the
overloaded hosts, the hosts the load needs, and for each match how near the
emulated links came to the observed ones (p10/50/90).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from swell.generators import hostmap
from swell.generators.schedule_file import Rre, Session, session_bytes
from swell.inet import hostport, split_hostport

Match = tuple[dict[int, Any], np.ndarray]


def _delay_match(loads: dict[int, float], observed_delays: np.ndarray | None,
                 server_delays: list[float | None] | None, n_servers: int) -> Match | None:
    """What :func:`hostmap.host_pools` matches servers on: the log delay of each observed
    server (the model's, s) and of each emulated server's link (ms); None when either
    is unknown (hosts without links, a model without the delays)."""
    if observed_delays is None or observed_delays.size == 0 or not server_delays \
            or len(server_delays) != n_servers or any(d is None for d in server_delays):
        return None
    obs = hostmap.delay_keys(observed_delays)
    ok = np.isfinite(observed_delays)
    return ({v: float(obs[v]) for v in loads if 0 <= v < obs.size and ok[v]},
            hostmap.delay_keys(np.array(server_delays, dtype=float) / 1e3))


def _link_match(loads: dict[int, float], observed_clients: np.ndarray | None,
                client_rates: list[float | None] | None,
                client_delays: list[float | None] | None, n_clients: int) -> Match | None:
    """What the client pools match on: :func:`hostmap.link_keys` of each observed client
    (the model's capacity, bit/s, and delay, s) and of each client host's link (Mbit/s,
    ms); None without observed clients or when a host has no link."""
    if observed_clients is None or not loads or not client_rates or not client_delays \
            or len(client_rates) != n_clients or len(client_delays) != n_clients \
            or any(r is None for r in client_rates) or any(d is None for d in client_delays):
        return None
    obs = hostmap.link_keys(observed_clients[:, 0] / 1e6, observed_clients[:, 1])
    ok = np.isfinite(obs).all(axis=1)
    host = hostmap.link_keys(np.array(client_rates, dtype=float),
                             np.array(client_delays, dtype=float) / 1e3)
    return ({v: obs[v] for v in loads if 0 <= v < len(obs) and ok[v]}, host)


def _pct(x: list[float]) -> list[float]:
    return [round(float(v), 3) for v in np.percentile(x, [10, 50, 90])]


def _server_match_info(sessions: list[Session], drawn: list[Session], servers: list[str],
                       observed_delays: np.ndarray, server_delays: list[float | None]
                       ) -> dict[str, Any]:
    """How near the emulated servers' delays came to the observed ones', per RRE."""
    at = {a.strip("[]"): float(d or 0.0) for a, d in zip(servers, server_delays, strict=True)}
    obs, emu = [], []
    for s, d in zip(sessions, drawn, strict=True):
        for rre, orig in zip(s.rres, d.rres, strict=True):
            v = int(orig.conns[0].server.split(":")[0])
            if 0 <= v < observed_delays.size and np.isfinite(observed_delays[v]):
                obs.append(float(observed_delays[v]) * 1e3)
                emu.append(at[split_hostport(rre.conns[0].server)[0]])
    if not obs:
        return {"by": "delay", "rres": 0}
    return {"by": "delay", "rres": len(obs), "observed_owd_ms_p10_50_90": _pct(obs),
            "emulated_owd_ms_p10_50_90": _pct(emu)}


def _client_match_info(picked: list[tuple[int, int]], observed_clients: np.ndarray,
                       rates: list[float | None], delays: list[float | None]
                       ) -> dict[str, Any]:
    """How near the client hosts' links came to the observed clients', per session."""
    if not picked:
        return {"by": "link", "sessions": 0}
    obs = np.array([observed_clients[v] for v, _ in picked])
    return {"by": "link", "sessions": len(picked),
            "observed_mbps_p10_50_90": _pct(list(obs[:, 0] / 1e6)),
            "emulated_mbps_p10_50_90": _pct([float(rates[h] or 0.0) for _, h in picked]),
            "observed_owd_ms_p10_50_90": _pct(list(obs[:, 1] * 1e3)),
            "emulated_owd_ms_p10_50_90": _pct([float(delays[h] or 0.0) for _, h in picked])}


def _observed_client(s: Session) -> int | None:
    return int(s.client) if s.client.isdigit() else None


def map_hosts(drawn: list[Session], clients: list[str], servers: list[str],
              client_rates: list[float | None] | None, server_rates: list[float | None] | None,
              duration_s: float, rng: np.random.Generator,
              observed_delays: np.ndarray | None = None,
              server_delays: list[float | None] | None = None,
              observed_clients: np.ndarray | None = None,
              client_delays: list[float | None] | None = None
              ) -> tuple[list[Session], dict[str, Any]]:
    """Clients and servers of the sessions on emulated hosts (module docstring):
    ``observed_delays`` (s, per observed server) with ``server_delays`` (ms, per server
    host) match the servers; ``observed_clients`` (per observed client: capacity bit/s,
    one-way delay s) with ``client_rates`` and ``client_delays`` match the clients."""
    obs_up: dict[int, float] = {}
    obs_down: dict[int, float] = {}
    cl_up: dict[int, float] = {}
    cl_down: dict[int, float] = {}
    for s in drawn:
        for rre in s.rres:
            obs = int(rre.conns[0].server.split(":")[0])
            obs_up[obs] = obs_up.get(obs, 0.0) + sum(c.rsp_bytes for c in rre.conns)
            obs_down[obs] = obs_down.get(obs, 0.0) + sum(c.req_bytes for c in rre.conns)
        if (v := _observed_client(s)) is not None:
            req, rsp = session_bytes(s)
            cl_up[v] = cl_up.get(v, 0.0) + req
            cl_down[v] = cl_down.get(v, 0.0) + rsp
    to_mbps = 8 / duration_s / 1e6
    loads = {v: max(obs_up[v], obs_down[v]) * to_mbps for v in obs_up}
    c_loads = {v: max(cl_up[v], cl_down[v]) * to_mbps for v in cl_up}
    s_use = hostmap.Usage(servers, hostmap.capacities(server_rates or [], len(servers)))
    c_use = hostmap.Usage(clients, hostmap.capacities(client_rates or [], len(clients)))
    match = _delay_match(loads, observed_delays, server_delays, len(servers))
    pools = hostmap.host_pools(loads, s_use.caps_mbps, rng, match)
    c_match = _link_match(c_loads, observed_clients, client_rates, client_delays, len(clients))
    c_pools = hostmap.host_pools(c_loads, c_use.caps_mbps, rng, c_match) \
        if c_match is not None else {}
    pick_server = hostmap.LeastLoaded(s_use)
    pick_pooled = hostmap.LeastLoaded(c_use)
    pick_client = hostmap.ClientPicker(c_use, rng)
    out, picked = [], []
    for i, s in enumerate(drawn):
        req, rsp = session_bytes(s)
        v = _observed_client(s)
        if v is not None and v in c_pools:
            h = pick_pooled.pick(c_pools[v], req, rsp)
            picked.append((v, h))
        else:
            h = pick_client.pick(req, rsp)
        rres = []
        for rre in s.rres:
            obs, port = rre.conns[0].server.split(":")
            up = sum(c.rsp_bytes for c in rre.conns)
            down = sum(c.req_bytes for c in rre.conns)
            host = servers[pick_server.pick(pools[int(obs)], up, down)]
            rres.append(Rre(rre.gap, tuple(replace(c, server=hostport(host, port))
                                           for c in rre.conns)))
        out.append(Session(i, s.t, clients[h], tuple(rres)))
    total_up = sum(obs_up.values()) * to_mbps
    info: dict[str, Any] = {
        "observed_servers": len(loads),
        "servers": s_use.summary(duration_s), "clients": c_use.summary(duration_s),
        "servers_needed": hostmap.hosts_needed(total_up, s_use.caps_mbps),
        "clients_needed": hostmap.hosts_needed(total_up, c_use.caps_mbps)}
    if match is not None:
        assert observed_delays is not None and server_delays is not None
        info["server_match"] = _server_match_info(out, drawn, servers, observed_delays,
                                                  server_delays)
    if c_match is not None:
        assert observed_clients is not None and client_rates and client_delays
        info["client_match"] = _client_match_info(picked, observed_clients, client_rates,
                                                  client_delays)
    return out, info
