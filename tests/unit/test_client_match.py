"""A whole session runs behind a client link like its own client's (issue 19).

* the extractor records each whole session's observed client (``sessClient``), in
  ``sessRres``' order, as an index into ``net/client/hosts``; a bad one is a
  one-line error naming the model, and a model without it draws as before;
* with the clients' links known, :func:`swell.generators.sessionmap.map_hosts` gives
  each observed client the client hosts nearest its link (rate, then delay: a
  millisecond and less are alike), and ``meta.hosts.client_match`` reports how near;
* sessions without a client (the independent draw) go to the least loaded host,
  and their schedule is what it was before the match existed;
* the least-loaded picker sees load that the match put on a host.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.model import FORMAT, FORMAT_VERSION, load_model, save_model
from swell.extract.pipeline import extract_model
from swell.extract.sessions import Thresholds, app_parameters
from swell.generators import hostmap
from swell.generators.schedule import load_app_samples
from swell.generators.swing import observed_client_links, swing_schedule
from swell.placement import AccessLink, Endpoint, Local
from tests.unit.test_joint_rre import EXAMPLE, http_table

SERVERS = [f"10.2.0.{i + 1}" for i in range(20)]


def test_session_clients_extracted_by_hand() -> None:
    """Client 0: a session of two RREs (connections at 0.0, 0.2 and 5.0); client 1: one."""
    p = {"conn": np.array([1, 2]), "req_size": np.array([11, 21]),
         "rsp_size": np.array([110, 210]), "think_before": np.array([np.nan, np.nan])}
    t = http_table([5.0, 0.2, 1.0, 0.0], [5.1, 0.4, 1.5, 0.5], [0, 0, 1, 0],
                   np.array([0, 1, 3, 2]), p)
    params, _ = app_parameters(t, Thresholds(rre_gap_s=1.0, session_timeout_s=60.0))
    a = params["http-tcp"]
    assert a["sessRres"].tolist() == [2, 1]
    assert a["sessClient"].tolist() == [0, 1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_model(extract_model(EXAMPLE, label="test"),
                      tmp_path_factory.mktemp("cm") / "model")


def test_session_clients_on_the_trace(model_dir: Path, tmp_path: Path) -> None:
    m = load_model(model_dir)
    hosts = list(m.hosts("client"))
    for app in m.apps:
        cl = m.samples(app, "sessClient")
        assert cl.dtype.kind == "i" and len(cl) == len(m.samples(app, "sessRres"))
        assert ((cl >= 0) & (cl < len(hosts))).all()
    # example.pcap: the HTTP sessions of 10.0.0.4 and of 10.0.0.6
    assert sorted(hosts[i] for i in m.samples("http-tcp", "sessClient")) == [
        "10.0.0.4", "10.0.0.6"]
    links = observed_client_links(m)
    assert links is not None and links.shape == (len(hosts), 2)
    meta, arrays = modeldir.load(model_dir, FORMAT, FORMAT_VERSION, "swing")
    arrays["app/http-tcp/sessClient"] = np.array([0, len(hosts)])
    modeldir.save(tmp_path / "bad", meta, arrays, default=str)
    with pytest.raises(SwellError, match="sessClient must hold 2 client indices"):
        load_model(tmp_path / "bad")


def test_link_keys() -> None:
    k = hostmap.link_keys(np.array([10.0, 5.0, 10.0, 10.0, 10.0]),
                          np.array([0.0, 0.0, 0.01, 0.02, 0.0005]))
    d = np.abs(k - k[0]).sum(axis=1)
    assert np.isclose(d[1], np.log(2)) and np.isclose(d[3] - d[2], np.log(2))
    assert d[4] == 0.0  # half a millisecond is a millisecond: no transfer notices


def endpoints(prefix: str, rates: list[float], delay_ms: float = 0.005) -> list[Endpoint]:
    return [Endpoint(f"{prefix}{i + 1}", Local(), "g", AccessLink(delay_ms, r, 0.0))
            for i, r in enumerate(rates)]


def owner(sess) -> int:
    """example.pcap's observed client of a whole session (index into its client hosts
    10.0.0.4, 10.0.0.6, 10.0.0.138), by its shape: 10.0.0.4 had the HTTP session of two
    RREs and the other-tcp one, 10.0.0.138 the other-udp one."""
    apps = {c.app for r in sess.rres for c in r.conns}
    if apps == {"other-tcp"} or (apps == {"http-tcp"} and len(sess.rres) == 2):
        return 0
    return 2 if apps == {"other-udp"} else 1


def test_whole_sessions_run_behind_their_clients_links(model_dir: Path) -> None:
    apps, scale = load_app_samples(model_dir)
    m = load_model(model_dir)
    hosts = list(m.hosts("client"))
    # 10.0.0.4 behind a 15 Mbit/s home link, the two others on a fast LAN
    link = {"10.0.0.4": [15e6, 6e-6], "10.0.0.6": [100e6, 6e-6], "10.0.0.138": [100e6, 1e-6]}
    observed = np.array([link[h] for h in hosts])
    assert observed_client_links(m).shape == observed.shape
    clients = endpoints("10.1.0.", [10.0] * 20 + [100.0] * 20)
    rate = {e.ip: e.link.rate_mbps for e in clients}
    servers = endpoints("10.2.0.", [10.0] * 20, 20.0)
    sched = swing_schedule(apps, clients, servers, 60.0, 3, scale, None, rre_draw="session",
                           start="empty", observed_clients=observed)  # no cut sessions
    want = {0: 10.0, 1: 100.0, 2: 100.0}
    owners = [owner(s) for s in sched.sessions]
    assert {0, 1} <= set(owners)
    assert all(rate[s.client] == want[o] for s, o in zip(sched.sessions, owners, strict=True))
    cm = sched.meta["hosts"]["client_match"]
    assert cm["by"] == "link" and cm["sessions"] == len(sched.sessions)
    assert cm["observed_mbps_p10_50_90"][0] == 15.0
    assert cm["emulated_mbps_p10_50_90"][0] == 10.0
    # without the match, by load alone: the fast hosts come first, whoever's session it is
    plain = swing_schedule(apps, clients, servers, 60.0, 3, scale, None, rre_draw="session",
                           start="empty")
    assert "client_match" not in plain.meta["hosts"]
    assert any(rate[s.client] == 100.0 and owner(s) == 0 for s in plain.sessions)
    # the independent draw has no clients to match: the same schedule either way
    ind = [swing_schedule(apps, clients, servers, 60.0, 3, scale, None,
                          observed_clients=obs) for obs in (observed, None)]
    assert ind[0].sessions == ind[1].sessions and "client_match" not in ind[0].meta["hosts"]


def test_the_least_loaded_picker_sees_what_others_put_on_a_host() -> None:
    use = hostmap.Usage(["a", "b"], np.array([10.0, 10.0]))
    picker = hostmap.ClientPicker(use, np.random.default_rng(1))
    first = picker.pick(1.0, 1.0)
    other = 1 - first
    hostmap.LeastLoaded(use).pick([other], 5.0, 5.0)  # the match loads the other host
    assert picker.pick(1.0, 1.0) == first  # 1 + 1 is less than 5 + 1
    assert use.down[first] == 2.0 and use.down[other] == 5.0
