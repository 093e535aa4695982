"""Swing extraction on Scapy-crafted traces where the truth is known exactly.

The crafted monitor sits between clients and one server: each handshake has a
known monitor-server leg (SYN -> SYN/ACK) and monitor-client leg (SYN/ACK ->
ACK); requests and responses have known sizes; responses leave the server as
back-to-back 1460-byte segments paced at a known capacity; one segment is
retransmitted (known loss); request think times, RRE gaps and session gaps are
known. Every extracted value must match (timestamps are microseconds in pcap,
hence the 2 us tolerances).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, Ether
from scapy.utils import PcapNgWriter, wrpcap

from swell.extract.connections import CAP_NBINS, ConnectionBuilder, ConnTable, build_connections
from swell.extract.model import load_model, save_model
from swell.extract.pipeline import extract_model
from swell.extract.reader import open_trace
from swell.extract.sessions import Thresholds

MSS = 1460
SERVER = "10.0.1.1"
CAP_BPS = 10e6


@dataclass
class Crafter:
    """Builds packets for TCP connections with exact timing."""

    pkts: list[Any] = field(default_factory=list)
    v6: bool = False
    sll: bool = False

    def _pkt(
        self,
        src: str,
        dst: str,
        sport: int,
        dport: int,
        flags: str,
        seq: int,
        ack: int,
        payload: int,
        t: float,
    ) -> None:
        ip = IPv6(src=src, dst=dst) if self.v6 else IP(src=src, dst=dst)
        l2 = (
            CookedLinux(proto=0x86DD if self.v6 else 0x0800)
            if self.sll
            else Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
        )
        p = l2 / ip / TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack)
        if payload:
            p = p / (b"x" * payload)
        p.time = t
        self.pkts.append(p)

    def connection(
        self,
        client: str,
        cport: int,
        t: float,
        server_leg: float,
        client_leg: float,
        pairs: list[tuple[int, int]],
        think: float,
        retransmit: bool = False,
        server: str = SERVER,
        cap_bps: float = CAP_BPS,
    ) -> float:
        """One connection starting at ``t``; returns the time of its last packet."""
        c_isn, s_isn = 1000, 50000
        P = self._pkt  # noqa: N806
        P(client, server, cport, 80, "S", c_isn, 0, 0, t)
        t += server_leg
        P(server, client, 80, cport, "SA", s_isn, c_isn + 1, 0, t)
        t += client_leg
        P(client, server, cport, 80, "A", c_isn + 1, s_isn + 1, 0, t)
        cs, ss = c_isn + 1, s_isn + 1
        gap = (MSS + 40) * 8 / cap_bps
        for i, (req, rsp) in enumerate(pairs):
            t += 0.001 if i == 0 else think
            P(client, server, cport, 80, "PA", cs, ss, req, t)
            cs += req
            t += server_leg
            sizes = [MSS] * (rsp // MSS) + ([rsp % MSS] if rsp % MSS else [])
            off = 0
            for j, sz in enumerate(sizes):
                if j:
                    t += gap
                P(server, client, 80, cport, "A", ss + off, cs, sz, t)
                if retransmit and i == 0 and j == 2:
                    t += 0.2
                    P(server, client, 80, cport, "A", ss + off, cs, sz, t)
                off += sz
            ss += rsp
            t += client_leg
            P(client, server, cport, 80, "A", cs, ss, 0, t)
        t += 0.01
        P(client, server, cport, 80, "FA", cs, ss, 0, t)
        P(server, client, 80, cport, "FA", ss, cs + 1, 0, t + server_leg)
        P(client, server, cport, 80, "A", cs + 1, ss + 1, 0, t + server_leg + client_leg)
        return t + server_leg + client_leg

    def write(self, path: Path, pcapng: bool = False) -> Path:
        pkts = sorted(self.pkts, key=lambda p: float(p.time))
        if pcapng:
            with PcapNgWriter(str(path)) as w:
                for p in pkts:
                    w.write(p)
        else:
            wrpcap(str(path), pkts)
        return path


PAIRS = [(300, 20000), (500, 8000), (200, 4000)]
THINK = 0.5
CLIENTS = {"10.0.0.1": (0.040, 0.010), "10.0.0.2": (0.040, 0.025)}


def scenario(cr: Crafter, base: float = 1_600_000_000.0, v6: bool = False) -> dict:
    """Client 1: session 1 = RRE(2 conns) + 5 s gap + RRE(1 conn); 100 s later session 2."""
    c1, c2 = ("fd00::1", "fd00::2") if v6 else ("10.0.0.1", "10.0.0.2")
    srv = "fd00::100" if v6 else SERVER
    sl, cl = CLIENTS["10.0.0.1"]
    e1 = cr.connection(c1, 40001, base, sl, cl, PAIRS, THINK, retransmit=True, server=srv)
    e2 = cr.connection(c1, 40002, base + 0.2, sl, cl, PAIRS, THINK, server=srv)
    rre2 = max(e1, e2) + 5.0
    e3 = cr.connection(c1, 40003, rre2, sl, cl, PAIRS, THINK, server=srv)
    cr.connection(c1, 40004, e3 + 100.0, sl, cl, PAIRS, THINK, server=srv)
    sl2, cl2 = CLIENTS["10.0.0.2"]
    cr.connection(c2, 41001, base + 1.0, sl2, cl2, PAIRS, THINK, server=srv)
    return {"inter_rre": 5.0}


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    cr = Crafter()
    truth = scenario(cr)
    return cr.write(tmp_path_factory.mktemp("craft") / "craft.pcap"), truth


def _table(path: Path, chunk: int = 1 << 18) -> ConnTable:
    with open_trace(path) as tr:
        return build_connections(tr.chunks(chunk))


def test_connections_exact(crafted: tuple[Path, dict]) -> None:
    path, _ = crafted
    for chunk in (1 << 18, 7):  # chunk boundaries must not change anything
        t = _table(path, chunk)
        c = t.cols
        assert len(t) == 5
        assert set(np.array(t.hosts)[c["server"]]) == {SERVER}
        assert (c["sport"] == 80).all() and not c["client_inferred"].any()
        assert not c["lower_bound"].any() and not c["one_way"].any()
        for i in range(len(t)):
            sl, cl = CLIENTS[t.hosts[c["client"][i]]]
            assert abs(c["server_leg"][i] - sl) < 2e-6
            assert abs(c["client_leg"][i] - cl) < 2e-6
        assert (c["new_bytes_c2s"] == sum(r for r, _ in PAIRS)).all()
        assert (c["new_bytes_s2c"] == sum(s for _, s in PAIRS)).all()
        assert int(c["retx_s2c"].sum()) == 1 and int(c["retx_c2s"].sum()) == 0
        assert (c["num_pairs"] == 3).all()
        p = t.pairs
        assert list(p["req_size"][p["conn"] == 0]) == [r for r, _ in PAIRS]
        assert list(p["rsp_size"][p["conn"] == 0]) == [s for _, s in PAIRS]
        # seen at the monitor: the client's think time plus its leg (response out, request in)
        for i in range(len(t)):
            th = p["think_before"][p["conn"] == i][1:]
            cl = CLIENTS[t.hosts[c["client"][i]]][1]
            assert np.allclose(th, THINK + cl, atol=2e-6)


def test_model_exact(crafted: tuple[Path, dict], tmp_path: Path) -> None:
    path, truth = crafted
    model = extract_model(path, Thresholds(rre_gap_s=1.0, session_timeout_s=60.0))
    save_model(model, tmp_path / "m")
    m = load_model(tmp_path / "m")
    assert m.apps == ["http-tcp"]
    s = lambda p: m.samples("http-tcp", p)  # noqa: E731
    # client 1: sessions [RRE(2), RRE(1)] and [RRE(1)]; client 2: [RRE(1)]
    assert sorted(s("numConn")) == [1, 1, 1, 2]
    assert sorted(s("numRRE")) == [1, 1, 2]
    assert len(s("interRRE")) == 1 and abs(s("interRRE")[0] - truth["inter_rre"]) < 2e-6
    assert len(s("interConn")) == 1 and abs(s("interConn")[0] - 0.2) < 2e-6
    assert sorted(set(s("reqSize"))) == sorted(r for r, _ in PAIRS)
    assert sorted(set(s("rspSize"))) == sorted(x for _, x in PAIRS)
    think = np.sort(s("reqThink"))
    assert np.allclose(think, [THINK + 0.010] * 8 + [THINK + 0.025] * 2, atol=2e-6)
    assert (s("numPairs") == 3).all()
    assert m.app_info("http-tcp")["sessions"] == 3
    hosts = m.hosts("client")
    delay = dict(zip(hosts, m.net("client", "delay_s"), strict=True))
    assert abs(delay["10.0.0.1"] - 0.005) < 2e-6 and abs(delay["10.0.0.2"] - 0.0125) < 2e-6
    assert np.allclose(m.net("server", "delay_s"), 0.020, atol=2e-6)
    cap = m.net("server", "capacity_bps", measured_only=True)
    assert len(cap) == 1 and abs(cap[0] / CAP_BPS - 1) < 0.06  # one 40-per-decade bin
    data_segments = 5 * sum(-(-x // MSS) for _, x in PAIRS) + 1
    assert m.net("server", "loss", measured_only=True)[0] == pytest.approx(1 / data_segments)
    assert m.meta["fallback_counts"]["client/capacity_bps"] == 2  # clients sent no pairs
    assert not m.arrays["net/client/capacity_bps_measured"].any()


def _upload(cr: Crafter, client: str, t: float, bursts: list[int], rtt: float, gap: float) -> None:
    """A client sending full-size segments to the server: ``bursts`` segments back to
    back ``gap`` apart, each burst acknowledged once by the server ``rtt`` later."""
    P = cr._pkt  # noqa: N806
    cs, ss = 1001, 50001
    P(client, SERVER, 4000, 80, "S", 1000, 0, 0, t)
    P(SERVER, client, 80, 4000, "SA", 50000, 1001, 0, t + rtt / 2)
    t += rtt
    P(client, SERVER, 4000, 80, "A", cs, ss, 0, t)
    for k in bursts:
        for j in range(k):
            t += gap if j else 0.001
            P(client, SERVER, 4000, 80, "A", cs, ss, MSS, t)
            cs += MSS
        t += rtt
        P(SERVER, client, 80, 4000, "A", ss, cs, 0, t)


def test_capacity_only_from_back_to_back_segments(tmp_path: Path) -> None:
    """ACK-clocked segments (an ACK of the other direction between each two) are no
    packet pairs: their gap is a round trip, not the bottleneck's dispersion (a phone
    uploading one segment per round trip used to get a capacity of kbit/s)."""
    gap = (MSS + 40) * 8 / CAP_BPS
    cr = Crafter()
    _upload(cr, "10.0.0.1", 1_600_000_000.0, [1] * 12, rtt=0.25, gap=gap)
    _upload(cr, "10.0.0.2", 1_600_000_000.0, [4] * 6, rtt=0.25, gap=gap)
    m = extract_model(cr.write(tmp_path / "upload.pcap"))
    hosts = list(m.hosts("client"))
    measured = m.arrays["net/client/capacity_bps_measured"]
    cap = m.net("client", "capacity_bps")
    assert not measured[hosts.index("10.0.0.1")]  # one segment per round trip: no pairs
    i = hosts.index("10.0.0.2")  # 3 back-to-back pairs in each of 6 bursts
    assert measured[i] and abs(cap[i] / CAP_BPS - 1) < 0.06
    # both engines, every chunking: the same histogram (the rule spans chunk borders)
    hists = []
    for chunk in (1, 3, 1 << 18):
        for engine in ("native", "numpy"):
            b = ConnectionBuilder(engine=engine)
            with open_trace(tmp_path / "upload.pcap") as tr:
                for ch in tr.chunks(chunk):
                    b.add(ch)
            b.finish()
            hists.append(b.pair_hist)
    assert all(hists[k] == hists[k + 1] for k in range(0, len(hists), 2))  # native == numpy
    # host ids depend on the chunking (new addresses are numbered per chunk); bins do not
    assert {sorted(h.values())[0] for h in hists} == {3 * 6}
    assert len({tuple(k % CAP_NBINS for k in h) for h in hists}) == 1


@pytest.mark.parametrize("kind", ["ipv6", "sll", "pcapng"])
def test_other_encodings(kind: str, tmp_path: Path) -> None:
    cr = Crafter(v6=kind == "ipv6", sll=kind == "sll")
    scenario(cr, v6=kind == "ipv6")
    path = cr.write(tmp_path / f"t.{kind}", pcapng=kind == "pcapng")
    m = extract_model(path)
    assert m.apps == ["http-tcp"] and m.app_info("http-tcp")["connections"] == 5
    assert sorted(m.samples("http-tcp", "numConn")) == [1, 1, 1, 2]
    assert np.allclose(m.net("server", "delay_s"), 0.020, atol=2e-6)


def test_timestamp_jump_years(tmp_path: Path) -> None:
    cr = Crafter()
    scenario(cr)
    for p in cr.pkts[len(cr.pkts) // 2 :]:
        p.time = float(p.time) + 3 * 365 * 86400.0
    m = extract_model(cr.write(tmp_path / "jump.pcap"))
    assert m.app_info("http-tcp")["connections"] >= 5
    assert any("timestamps jump" in a for a in m.assumed)


def test_one_direction_only(crafted: tuple[Path, dict], tmp_path: Path) -> None:
    cr = Crafter()
    scenario(cr)
    cr.pkts = [p for p in cr.pkts if p[IP].src != SERVER]
    m = extract_model(cr.write(tmp_path / "oneway.pcap"))
    assert any("only one direction" in x for x in m.not_estimated)
    assert any("SYN -> client ACK" in x for x in m.assumed)
    # full round trip SYN -> ACK seen at the monitor, halved into the server delay
    d = m.net("server", "delay_s", measured_only=True)
    assert len(d) == 1 and 0.025 <= d[0] <= 0.0326
    # the unseen responses come back from the client's acknowledgement numbers
    assert sorted(set(m.samples("http-tcp", "rspSize"))) == sorted(x for _, x in PAIRS)
    assert sorted(set(m.samples("http-tcp", "reqSize"))) == sorted(r for r, _ in PAIRS)
    assert (m.samples("http-tcp", "numPairs") == 3).all()


def test_udp_flows_idle_split_and_pairs(tmp_path: Path) -> None:
    from scapy.layers.inet import UDP

    pkts = []
    t = 1_600_000_000.0
    for start in (0.0, 1.0, 2.0, 200.0):  # three queries, 198 s of silence, one more
        for src, dst, sport, dport, size, dt in (
            ("10.0.0.9", "10.0.1.53", 5353 + 1, 53, 40, 0.0),
            ("10.0.1.53", "10.0.0.9", 53, 5354, 120, 0.03),
        ):
            p = Ether() / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / (b"q" * size)
            p.time = t + start + dt
            pkts.append(p)
    path = tmp_path / "dns.pcap"
    wrpcap(str(path), pkts)
    tab = _table(path)
    assert len(tab) == 2 and (tab.cols["proto"] == 17).all()
    assert sorted(tab.cols["num_pairs"].tolist()) == [1, 3]
    assert set(tab.pairs["req_size"].tolist()) == {40} and set(tab.pairs["rsp_size"].tolist()) == {
        120
    }
    assert (tab.cols["sport"] == 53).all() and tab.hosts[tab.cols["client"][0]] == "10.0.0.9"
    m = extract_model(path)
    assert m.apps == ["dns-udp"] and m.app_info("dns-udp")["bytes_s2c"] == 4 * 120


def test_downlink_bound_beside_the_clients(tmp_path: Path) -> None:
    """A capture taken on the clients (their legs 20 us): a server -> client packet pair
    is timed after the client's downlink, so a client is at least as fast as a server
    seen through it alone. 10.0.0.1 reads 8 and 40 Mbit/s servers of its own: 40. 10.0.0.2
    shares its only measured server with 10.0.0.3, whose link may be what that server's
    pairs show: no bound, a draw from the bounded client. With the monitor in the middle
    (legs of 10 ms) nobody is bounded and the clients draw from the servers' rates."""
    for leg, bounded in ((20e-6, True), (0.010, False)):
        cr = Crafter()
        t = 1_600_000_000.0
        for k, (client, server, cap) in enumerate([
                ("10.0.0.1", "10.0.1.1", 8e6), ("10.0.0.1", "10.0.1.2", 40e6),
                ("10.0.0.2", "10.0.1.3", 20e6), ("10.0.0.3", "10.0.1.3", 20e6)]):
            cr.connection(client, 40001 + k, t + 3 * k, 0.02, leg, PAIRS, 0.1, server=server,
                          cap_bps=cap)
        m = extract_model(cr.write(tmp_path / f"beside-{leg}.pcap"))
        hosts = list(m.hosts("client"))
        cap = m.net("client", "capacity_bps")
        measured = m.arrays["net/client/capacity_bps_measured"]
        note = [a for a in m.assumed if a.startswith("monitor beside the clients")]
        if bounded:
            i = hosts.index("10.0.0.1")
            assert measured[i] and abs(cap[i] / 40e6 - 1) < 0.06
            assert list(measured) == [h == "10.0.0.1" for h in hosts]
            assert np.allclose(cap, cap[i])  # the others drew from the bounded client
            assert len(note) == 1 and "1 of 3 clients" in note[0]
        else:
            assert not measured.any() and not note
            servers = set(m.net("server", "capacity_bps", measured_only=True))
            assert set(cap) <= servers
