"""An observed server's RREs go to emulated servers of its own path (nearest delay).

In a trace the busy servers are seldom typical: example.pcap's HTTP pairs all go to a
server 10.5 ms away while half of its servers are 50 ms or more away. The host mapping
(:mod:`swell.generators.hostmap`) gives each observed server the free hosts whose access
link's one-way delay is nearest its own (in log scale).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.extract.model import load_model, save_model
from swell.extract.pipeline import extract_model
from swell.generators import hostmap
from swell.generators.schedule import _draw_session, app_samples, apps_for_draw
from swell.generators.swing import observed_server_delays, swing_schedule
from swell.placement import AccessLink, Endpoint, Local

DATA = Path(__file__).resolve().parents[2] / "data" / "pcap"
CLIENTS = [f"10.1.0.{i + 1}" for i in range(40)]


def test_delays_are_matched_in_log_scale():
    k = hostmap.delay_keys(np.array([0.0005, 0.001, 0.05, 0.1, 0.0]))
    assert np.isclose(k[1] - k[0], k[3] - k[2]) and k[4] == np.log(1e-6)


def test_pools_take_the_nearest_hosts_and_use_every_host():
    caps = np.full(12, 10.0)
    host_key = np.linspace(0.0, 1.0, 12)
    loads = {0: 4.0, 1: 3.0, 2: 0.5}  # one host each covers them at UTIL
    obs_key = {0: 0.9, 1: 0.1, 2: 0.5}
    pools = hostmap.host_pools(loads, caps, np.random.default_rng(3), (obs_key, host_key))
    assert sorted(h for p in pools.values() for h in p) == list(range(12))
    for v, pool in pools.items():
        # every host of a pool is nearer its observed server's delay than any other's
        for h in pool:
            d = {u: abs(host_key[h] - r) for u, r in obs_key.items()}
            assert d[v] == min(d.values()), (v, h, d)
    # the first host chosen is the nearest one
    assert pools[0][0] == 10 and pools[1][0] == 1 and pools[2][0] in (5, 6)


def test_without_ranks_the_pools_are_as_before():
    caps = np.full(20, 10.0)
    loads = {0: 40.0, 1: 10.0, 2: 1.0}
    plain = hostmap.host_pools(loads, caps, np.random.default_rng(7))
    unranked = hostmap.host_pools(loads, caps, np.random.default_rng(7), ({}, None))
    assert plain == unranked
    # the old order: hosts in one random permutation, taken in turn (the heaviest
    # needs 40 / UTIL / 10 = 8 hosts first)
    perm = np.random.default_rng(7).permutation(20).tolist()
    assert plain[0][:8] == perm[:8] and plain[1][0] == perm[8]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("match")
    return load_model(save_model(extract_model(DATA / "example.pcap", label="test"),
                                 tmp / "base"))


def servers_like(delays_ms: np.ndarray, n: int, seed: int) -> list[Endpoint]:
    """``n`` server endpoints with delays drawn from ``delays_ms`` (as the topology does)."""
    pick = np.random.default_rng(seed).choice(delays_ms, n)
    return [Endpoint(f"10.2.0.{i + 1}", Local(), "g", AccessLink(round(float(d), 3), 10.0, 0.0))
            for i, d in enumerate(pick)]


def pair_delays(sched, servers: list[Endpoint], app: str) -> np.ndarray:
    at = {e.ip: e.link.delay_ms for e in servers}
    return np.array([at[c.server.split(":")[0]] for *_, c in sched.conns() if c.app == app
                     for _ in c.pairs])


def test_the_busy_server_keeps_its_short_path(model):
    """example.pcap: 89% of the bytes come from one server 10.5 ms away; most of the
    others are 50-90 ms away. Matched, the HTTP pairs' median delay is the busy server's
    (within the next drawn value); in any order it was the servers' median."""
    apps, scale = app_samples(model, "example")
    observed = observed_server_delays(model)
    assert observed is not None
    servers = servers_like(observed * 1e3, 60, 1)
    clients = [Endpoint(a, Local(), "g", AccessLink(0.01, 20.0, 0.0)) for a in CLIENTS]
    matched = swing_schedule(apps, clients, servers, 60.0, 4, scale, None,
                             observed_delays=observed)
    anyhost = swing_schedule(apps, clients, servers, 60.0, 4, scale, None)
    # the draw is the same; only the hosts differ
    assert [len(s.rres) for s in matched.sessions] == [len(s.rres) for s in anyhost.sessions]
    busy = float(np.median(pair_delays(matched, servers, "http-tcp")))
    spread = float(np.median(pair_delays(anyhost, servers, "http-tcp")))
    http = observed[model.arrays["app/http-tcp/rreServer"]] * 1e3
    assert busy <= float(np.percentile(http, 50)) * 1.3 + 1.0, (busy, spread)
    assert spread > 2 * busy, (busy, spread)
    info = matched.meta["hosts"]["server_match"]
    assert info["by"] == "delay" and info["rres"] > 0
    assert "server_match" not in anyhost.meta["hosts"]


def test_the_dns_servers_stay_near(model):
    """The light servers choose after the busy one, and still get the hosts of their
    own delay where the pool has them: example.pcap's resolver is 0.56 ms away."""
    apps, scale = app_samples(model, "example")
    observed = observed_server_delays(model)
    servers = servers_like(observed * 1e3, 80, 3)
    sched = swing_schedule(apps, CLIENTS, servers, 60.0, 4, scale, None,
                           observed_delays=observed)
    dns = observed[model.arrays["app/dns-udp/rreServer"]] * 1e3
    got = pair_delays(sched, servers, "dns-udp")
    have = {e.link.delay_ms for e in servers}
    assert np.median(dns) in have  # the pool has hosts of the resolver's delay
    assert np.median(got) <= 1.5 * np.median(dns), (np.median(got), np.median(dns))


def test_every_delay_alike_maps_as_in_any_order(model):
    """HB sets every delay alike: nothing to match, the hosts in the random order."""
    apps, scale = app_samples(model, "example")
    observed = np.full_like(observed_server_delays(model), 0.001)
    servers = [Endpoint(f"10.2.0.{i + 1}", Local(), "g", AccessLink(1.0, 10.0, 0.0))
               for i in range(30)]
    a = swing_schedule(apps, CLIENTS, servers, 30.0, 5, scale, None, observed_delays=observed,
                       start="empty")
    b = swing_schedule(apps, CLIENTS, servers, 30.0, 5, scale, None, start="empty")
    assert [c.server for *_, c in a.conns()] == [c.server for *_, c in b.conns()]


def test_hosts_without_links_are_mapped_as_before(model):
    apps, scale = app_samples(model, "example")
    servers = [f"10.2.0.{i + 1}" for i in range(20)]
    a = swing_schedule(apps, CLIENTS, servers, 30.0, 6, scale, None,
                       observed_delays=observed_server_delays(model))
    b = swing_schedule(apps, CLIENTS, servers, 30.0, 6, scale, None)
    assert [c.server for *_, c in a.conns()] == [c.server for *_, c in b.conns()]
    assert "server_match" not in a.meta["hosts"]


@pytest.mark.parametrize("draw", ["session", "joint"])
def test_a_whole_rre_keeps_its_own_server(model, draw):
    """A whole session (or RRE) of the trace goes to that RRE's own server (then to hosts
    of its path), not to one drawn by popularity: the trace's pages of many pairs go to
    its busy server."""
    apps, _ = app_samples(model, "example")
    (http,) = [a for a in apps_for_draw(apps, draw) if a.name == "http-tcp"]
    assert http.joint and (http.whole or draw == "joint")
    trace = {(tuple(round(float(o), 9) for o in http.rre_shape(r)[0]), int(http.rre_server[r]))
             for r in range(http.rre_conns.size)}
    assert len({s for _, s in trace}) > 1  # its RREs go to several servers
    rng = np.random.default_rng(11)
    for _ in range(100):
        sess = _draw_session(http, 0.0, "", 10, rng, {"raised_requests": 0})
        for rre in sess.rres:
            key = (tuple(c.offset for c in rre.conns), int(rre.conns[0].server.split(":")[0]))
            assert key in trace, key
