"""Paced requests: the model keeps how each whole-session pair's request left the client
(``pairReqPkts``: its packets; ``pairReqSpan``: first to last, s), a whole session's UDP
request becomes a connection's ``pace`` (TCP requests stay one write), the file keeps
it, bad ones are refused, the steady start's cut and the transfer-time estimate count
it. ``tests/integration/test_gen_swing.py`` checks the datagrams on the wire."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import dpkt
import numpy as np
import pytest

from swell.analysis.swing_window import PathEstimate, pair_times
from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.model import FORMAT, FORMAT_VERSION, load_model, save_model
from swell.extract.pipeline import extract_model
from swell.extract.sessions import request_pace, request_segment
from swell.generators import schedule_file as sf
from swell.generators import steady_start
from swell.generators.samples import load_app_samples
from swell.generators.schedule import build_schedule

REPO = Path(__file__).resolve().parents[2]
CLIENTS, SERVERS = [f"10.0.3.{i}" for i in range(1, 5)], ["10.0.4.1", "10.0.4.2"]


def test_a_requests_packets_are_its_bytes_over_its_connections_mean_payload() -> None:
    nan = np.nan
    c = {"data_pkts_c2s": np.array([4, 0, 10]), "new_bytes_c2s": np.array([1000, 0, 5000])}
    seg = request_segment(c)
    assert seg is not None and seg[0] == 250 and np.isnan(seg[1]) and seg[2] == 500
    p = {"conn": np.array([0, 0, 1, 2, 2]), "req_size": np.array([750, 0, 80, 5000, 40]),
         "req_t0": np.array([1.0, nan, 2.0, 3.0, 4.0]),
         "req_t1": np.array([1.2, nan, 2.0, 3.9, nan])}
    out = request_pace(p, np.arange(5), seg)
    # 3 packets; no request; no payload counted (one packet); 10; never more than bytes
    assert out["pairReqPkts"].tolist() == [3, 0, 1, 10, 1]
    assert out["pairReqSpan"] == pytest.approx([0.2, 0.0, 0.0, 0.9, 0.0])
    assert request_segment({"start": np.zeros(2)}) is None  # a table built by hand


def _game_pcap(path: Path) -> Path:
    """A game client's UDP flow (port 27015: no well-known service): five requests of
    four 250-byte datagrams 0.1 s apart, each answered with one of 100 bytes, 2 s apart;
    and a DNS client's one-datagram queries."""
    def pkt(src: str, dst: str, sport: int, dport: int, n: int) -> bytes:
        udp = dpkt.udp.UDP(sport=sport, dport=dport, data=b"\0" * n)
        udp.ulen = 8 + n
        ip = dpkt.ip.IP(src=bytes(map(int, src.split("."))), dst=bytes(map(int, dst.split("."))),
                        p=17, data=udp, ttl=64)
        ip.len = 20 + len(udp)
        return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, data=ip))

    out = []
    for i in range(5):
        t = 1.0 + 2.0 * i
        out += [(t + 0.1 * j, pkt("10.9.0.1", "10.9.0.2", 40000, 27015, 250)) for j in range(4)]
        out.append((t + 0.32, pkt("10.9.0.2", "10.9.0.1", 27015, 40000, 100)))
        out.append((t + 0.5, pkt("10.9.0.3", "10.9.0.4", 41000 + i, 53, 40)))
        out.append((t + 0.51, pkt("10.9.0.4", "10.9.0.3", 53, 41000 + i, 90)))
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for ts, buf in sorted(out):
            w.writepkt(buf, ts=ts)
    return path


def test_a_game_clients_requests_keep_their_datagrams_and_span(tmp_path: Path) -> None:
    m = extract_model(_game_pcap(tmp_path / "game.pcap"))
    k, span = m.arrays["app/other-udp/pairReqPkts"], m.arrays["app/other-udp/pairReqSpan"]
    assert k.tolist() == [4] * 5 and span == pytest.approx([0.3] * 5)
    assert m.arrays["app/dns-udp/pairReqPkts"].tolist() == [1] * 5
    assert not m.arrays["app/dns-udp/pairReqSpan"].any()
    model = save_model(m, tmp_path / "m")
    apps, _ = load_app_samples(model)
    sched = build_schedule(apps, CLIENTS, SERVERS, 30.0, 3, rre_draw="session", start="empty")
    conns = [c for *_, c in sched.conns()]
    game = [c for c in conns if c.app == "other-udp"]
    assert game and all(c.pace == ((4, 0.3),) * len(c.pairs) for c in game)
    assert all(c.pace == () for c in conns if c.app == "dns-udp")  # one datagram each
    path = sf.write_schedule(tmp_path / "s.jsonl", sched)
    assert sf.read_schedule(path).sessions == sched.sessions
    line = next(json.loads(ln) for ln in path.read_text().splitlines()[1:] if "pace" in ln)
    assert line["rres"][0]["conns"][0]["pace"][0] == [4, 0.3]
    # the estimate of when its bytes move holds each request for its span
    pairs, _ = pair_times(game[0], 0.0, PathEstimate(0.01, 8e6))
    assert all(p.req_end - p.start > 0.3 - 1e-9 for p in pairs)


@pytest.fixture(scope="module")
def example_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pace") / "model"
    return save_model(extract_model(REPO / "data/pcap/example.pcap"), out)


def test_tcp_requests_are_not_paced(example_model: Path) -> None:
    """A TCP request's span in a trace is mostly its transport's (windows and round
    trips), which the emulated path makes again: the campus trace's HTTPS requests of
    several segments spanned 0.2 ms at p90."""
    apps, _ = load_app_samples(example_model)
    tcp = [a for a in apps if a.proto == "tcp"]
    assert tcp and any((a.pair_req_pkts > 1).any() for a in tcp)  # in the model ...
    sched = build_schedule(apps, CLIENTS, SERVERS, 30.0, 2, rre_draw="session", start="empty")
    assert all(c.pace == () for *_, c in sched.conns() if c.proto == "tcp")  # ... not sent


def test_bad_paces_are_refused(tmp_path: Path) -> None:
    udp = sf.Conn("10.0.2.1:9", "udp", "game", 0.0, ((1000, 10, 0.0), (500, 10, 0.0)),
               pace=((4, 0.3), (1, 0.0)))
    ok = sf.Schedule(1, 5.0, [sf.Session(0, 0.0, "10.0.1.1", (sf.Rre(0.0, (udp,)),))])
    assert sf.read_schedule(sf.write_schedule(tmp_path / "ok.jsonl", ok)).sessions == ok.sessions
    for bad, why in ((replace(udp, pace=((4, 0.3),)), "1 for 2"),
                     (replace(udp, pace=((0, 0.3), (1, 0.0))), "datagrams >= 1"),
                     (replace(udp, pace=((4, -0.1), (1, 0.0))), "span >= 0"),
                     (replace(udp, pace=((4, float("nan")), (1, 0.0))), "span >= 0"),
                     (replace(udp, proto="tcp"), "UDP only")):
        s = sf.Schedule(1, 5.0, [sf.Session(0, 0.0, "10.0.1.1", (sf.Rre(0.0, (bad,)),))])
        with pytest.raises(SwellError, match=why):
            sf.write_schedule(tmp_path / "bad.jsonl", s)
        assert not (tmp_path / "bad.jsonl").exists()
    text = (tmp_path / "ok.jsonl").read_text().replace("[4,0.3]", "[4]")
    (tmp_path / "odd.jsonl").write_text(text)
    with pytest.raises(SwellError, match="pace is not a list of"):
        sf.read_schedule(tmp_path / "odd.jsonl")


def test_a_model_with_part_of_the_pace_is_refused(tmp_path: Path) -> None:
    model = save_model(extract_model(_game_pcap(tmp_path / "g.pcap")), tmp_path / "m")
    meta, arrays = modeldir.load(model, FORMAT, FORMAT_VERSION, "swing")
    for change, why in (
            (lambda a: a.pop("app/other-udp/pairReqSpan"), "pairReqPkts without"),
            (lambda a: a.__setitem__("app/other-udp/pairReqPkts",
                                     a["app/other-udp/pairReqPkts"][:-1]), "must hold 5"),
            (lambda a: a.__setitem__("app/other-udp/pairReqSpan",
                                     -a["app/other-udp/pairReqSpan"]), "times >= 0")):
        bad = dict(arrays)
        change(bad)
        modeldir.save(tmp_path / "bad", meta, bad, default=str)
        with pytest.raises(SwellError, match=why):
            load_model(tmp_path / "bad")


def test_a_cut_session_keeps_the_paces_of_what_is_left() -> None:
    path = PathEstimate(0.01, 8e6)
    c = sf.Conn("10.0.2.1:9", "udp", "game", 0.0,
             ((1000, 100, 0.5), (1000, 100, 0.5), (1000, 100, 0.0)),
             pace=((4, 0.3), (4, 0.3), (2, 0.1)))
    pairs, _ = pair_times(c, 0.0, path)
    assert pairs[1].req_end - pairs[1].start > 0.3 - 1e-9
    # cut during the second request: its rest leaves at once, the third keeps its pace
    at = pairs[1].start + 0.1
    s = sf.Session(0, -at, "10.0.1.1", (sf.Rre(0.0, (c,)),))
    cut = steady_start.remaining(s, path, sf.MIN_REQ, wait_req=sf.WAIT_MIN_REQ)
    assert cut is not None
    (kept,) = cut.rres[0].conns
    assert len(kept.pairs) == 2 and kept.pace == ((1, 0.0), (2, 0.1))
    # cut in the think time after the first pair: both paces as they were
    at = pairs[0].rsp_end + 0.1
    cut = steady_start.remaining(replace(s, t=-at), path, sf.MIN_REQ, wait_req=sf.WAIT_MIN_REQ)
    assert cut is not None and cut.rres[0].conns[0].pace == ((4, 0.3), (2, 0.1))
