"""IPv6 address handling in the traffic kinds: address text, headers, Apache, ab, captures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.inet import (
    header_bytes,
    hostport,
    is_v6,
    require_ipv4,
    same_family,
    split_hostport,
    url_host,
    version,
)

AB_OUT = """\
Benchmarking fd00::2:1 (be patient)
Concurrency Level:      1
Time taken for tests:   9.874 seconds
Complete requests:      21
Failed requests:        1
Non-2xx responses:      2
Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:       21   22   0.9     22      25
Processing:   401  447  52.3    431     611
Waiting:       22   23   1.0     23      26
Total:        423  469  52.6    452     634
"""


def test_hostport_both_families():
    assert hostport("10.0.2.1", 80) == "10.0.2.1:80"
    assert hostport("fd00::2:1", 8080) == "[fd00::2:1]:8080"
    assert hostport("[fd00::2:1]", "8080") == "[fd00::2:1]:8080"  # already bracketed
    assert url_host("fd00::1") == "[fd00::1]" and url_host("10.0.0.1") == "10.0.0.1"
    for text in ("10.0.2.1:80", "[fd00::2:1]:8080"):
        assert hostport(*split_hostport(text)) == text
    assert split_hostport("[fd00::2:1]:8080") == ("fd00::2:1", 8080)


@pytest.mark.parametrize("bad", ["fd00::1:80", "[fd00::1:80", "10.0.0.1", "x.y:80", ":80"])
def test_split_hostport_rejects_in_one_line(bad: str):
    with pytest.raises(SwellError) as exc:
        split_hostport(bad)
    assert "\n" not in str(exc.value)


def test_versions_and_header_bytes():
    assert (version("10.0.0.1"), version("fd00::1"), version("[::1]")) == (4, 6, 6)
    assert is_v6("fd00::1") and not is_v6("10.0.0.1")
    with pytest.raises(SwellError, match="not an IPv4 or IPv6 address"):
        version("host.example")
    # what the open-loop kinds add to a payload to ask a rate at the IP level
    assert header_bytes("10.0.0.1", "udp") == 28 and header_bytes("10.0.0.1", "tcp") == 52
    assert header_bytes("fd00::1", "udp") == 48 and header_bytes("fd00::1", "tcp") == 72


def test_family_checks():
    assert same_family(["fd00::1", "fd00::2"], "x") == 6
    assert same_family([], "x") == 4
    with pytest.raises(SwellError, match="mixes IPv4 and IPv6"):
        same_family(["fd00::1", "10.0.0.1"], "schedule")
    require_ipv4("pathload", ["10.0.0.1"], "IPv4 only")
    with pytest.raises(SwellError, match="pathload: cannot run over IPv6: IPv4 only"):
        require_ipv4("pathload", ["10.0.0.1", "fd00::1"], "IPv4 only")


def test_cbr_rate_counts_ipv6_headers(tmp_path: Path):
    from swell.generators.cbr import CbrConfig, CbrGenerator

    v4 = CbrConfig(dst="10.0.0.1", rate_bps=1e6, out_dir=tmp_path, size=1400)
    v6 = CbrConfig(dst="fd00::1", rate_bps=1e6, out_dir=tmp_path, size=1400)
    assert v4.pps == pytest.approx(1e6 / 8 / 1428)
    assert v6.pps == pytest.approx(1e6 / 8 / 1448)
    argv = CbrGenerator(v6).sender_argv()
    assert argv[argv.index("--dst") + 1] == "[fd00::1]:9600"


def test_apache_listens_on_bracketed_ipv6(tmp_path: Path):
    from swell.generators.web import apache_config

    assert "Listen [fd00::2:1]:8080" in apache_config(tmp_path, "fd00::2:1", 8080)


def test_ab_is_the_ipv6_client_and_parses_like_httperf():
    from swell.generators.web import Ab, parse_ab

    argv = Ab("fd00::2:1", 80, 1_000_000).argv()
    assert argv[0] == "ab" and argv[-1] == "http://[fd00::2:1]:80/obj_1000000"
    assert argv[argv.index("-c") + 1] == "1"  # one connection at a time, back to back
    s = parse_ab(AB_OUT)
    assert (s.connections, s.replies, s.errors) == (22, 21, 1)
    assert (s.status_2xx, s.status_other) == (19, 2)
    assert (s.conn_time_ms_avg, s.conn_time_ms_median, s.duration_s) == (469, 452, 9.874)
    with pytest.raises(SwellError, match="ab: output lacks"):
        parse_ab("apr_socket_connect(): Connection refused (111)\n")


def test_foreground_result_over_ipv6(tmp_path: Path):
    """Response times from an IPv6 client capture; other hosts' packets are left out."""
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6
    from scapy.utils import wrpcap

    from swell.generators.kind import Window
    from swell.generators.web import foreground_result

    srv, cli, other, t0 = "fd00::2:1", "fd00::1:1", "fd00::2:9", 1_700_000_000.0
    pkts = []
    for sport, start, dur, server in ((5000, 0.1, 0.2, srv), (5001, 0.4, 0.3, srv),
                                      (5002, 0.5, 0.1, other)):
        for dt, frm, flags, size in ((0, cli, "S", 0), (dur / 2, server, "A", 1000),
                                     (dur, server, "FA", 1000)):
            sp, dp = (sport, 80) if frm == cli else (80, sport)
            to = server if frm == cli else cli
            p = IPv6(src=frm, dst=to) / TCP(sport=sp, dport=dp, flags=flags) / (b"x" * size)
            p.time = t0 + start + dt
            pkts.append(p)
    pcap = tmp_path / "fg.pcap"
    wrpcap(str(pcap), sorted(pkts, key=lambda p: p.time))
    out = foreground_result(pcap, srv, 80, Window(t0, t0 + 1.0, t0), None, object_bytes=2000)
    assert out["response_times_s"] == pytest.approx([0.2, 0.3], abs=1e-5)
    assert out["starts_s"] == pytest.approx([0.1, 0.4], abs=1e-5)
    assert out["capture_packets"] == 9


def test_schedule_servers_are_bracketed_for_ipv6(tmp_path: Path):
    """A Swing schedule on IPv6 hosts names servers as [addr]:port, which swell-gen reads."""
    from swell.extract.model import save_model
    from swell.extract.pipeline import extract_model
    from swell.generators.schedule import load_app_samples, write_schedule
    from swell.generators.swing import swing_schedule

    trace = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
    model = save_model(extract_model(trace, label="test"), tmp_path / "model")
    apps, scale = load_app_samples(model)
    clients = [f"fd00::1:{i}" for i in range(1, 4)]
    servers = [f"fd00::2:{i}" for i in range(1, 4)]
    sched = swing_schedule(apps, clients, servers, 10.0, 3, scale, None)
    assert sched.sessions
    for srv in sched.servers():
        host, _ = split_hostport(srv)
        assert host in servers and srv.startswith("[")
    path = tmp_path / "sched.jsonl"
    write_schedule(path, sched)
    first = json.loads(path.read_text().splitlines()[1])
    assert first["client"] in clients


def test_reader_columns_hold_ipv6_addresses():
    """The IPv6 captures of the shared data read with their full addresses."""
    from swell.extract.reader import addr_to_str, read_all

    pcap = Path(__file__).resolve().parents[3] / "shared" / "data" / "pcap" / "ndpi" / \
        "pinterest.pcap"
    if not pcap.exists():
        pytest.skip(f"{pcap} not present (shared data)")
    ch = read_all(pcap)
    assert np.all(np.asarray(ch.ipver) == 6)
    assert all(":" in addr_to_str(int(h), int(lo))
               for h, lo in zip(ch.saddr_hi[:20], ch.saddr_lo[:20], strict=True))


def test_video_reads_rtp_and_tcp_from_ipv6_captures(tmp_path: Path):
    from scapy.layers.inet import TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    from swell.generators import video_client as vc

    srv, cli, t0 = "fd00::2:1", "fd00::1:1", 1_700_000_000.0
    rtp = [bytes([0x80, 0x60 | (0x80 if k == 2 else 0)]) + k.to_bytes(2, "big")
           + (9000 * k).to_bytes(4, "big") + (77).to_bytes(4, "big") + b"v" * 100
           for k in range(3)]
    pkts = [Ether() / IPv6(src=srv, dst=cli) / UDP(sport=5004, dport=5004) / r for r in rtp]
    pkts.append(Ether() / IPv6(src=srv, dst="fd00::1:9") / UDP(sport=5004, dport=5004) / rtp[0])
    for i, p in enumerate(pkts):
        p.time = t0 + i * 0.01
    wrpcap(str(tmp_path / "rtp.pcap"), pkts)
    got = vc.read_udp(tmp_path / "rtp.pcap", cli, 5004)
    assert got.seq.tolist() == [0, 1, 2] and got.marker.tolist() == [False, False, True]
    assert got.payload.tolist() == [100, 100, 100] and got.ssrc == 77

    down = IPv6(src=srv, dst=cli)  # the RTSP sender at the server connects to the client
    segs = [down / TCP(sport=4000, dport=7000, flags="S", seq=1000),
            IPv6(src=cli, dst=srv) / TCP(sport=7000, dport=4000, flags="SA", seq=10),
            down / TCP(sport=4000, dport=7000, flags="A", seq=1001) / (b"a" * 500),
            down / TCP(sport=4000, dport=7000, flags="A", seq=1501) / (b"b" * 300)]
    for i, p in enumerate(segs):
        p.time = t0 + i * 0.01
    wrpcap(str(tmp_path / "tcp.pcap"), segs)
    seg = vc.read_tcp_stream(tmp_path / "tcp.pcap", srv, cli, 7000)
    assert seg.offset.tolist() == [0, 500] and seg.length.tolist() == [500, 300]
    assert seg.data == b"a" * 500 + b"b" * 300
    url = "rtsp://[fd00::1:1]:7000/live"
    assert url in vc.rtsp_receiver_argv(cli, 7000, tmp_path / "out")
    assert vc.rtsp_sender_argv(tmp_path / "f", 30, cli, 7000)[-1] == url


def test_upb_sizes_keep_the_trace_ip_length_over_ipv6(tmp_path: Path):
    """UPB writes payloads so the bottleneck sees the trace's IP lengths: 20 bytes fewer
    over IPv6, whose header is 20 bytes longer."""
    from swell.generators.playback import PlaybackConfig, PlaybackGenerator

    trace = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
    v4 = PlaybackGenerator(PlaybackConfig(trace=trace, out_dir=tmp_path, dst="10.1.0.2"))
    v6 = PlaybackGenerator(PlaybackConfig(trace=trace, out_dir=tmp_path, dst="fd00::1:2"))
    s4, s6 = v4.leg_sizes(v4.legs[0]), v6.leg_sizes(v6.legs[0])
    big = s4 > 21
    assert big.any() and np.array_equal(s4[big] - s6[big], np.full(int(big.sum()), 20))
    assert s6.min() >= 1


def test_packets_asked_rate_counts_ipv6_headers(tmp_path: Path):
    """A VoIP preset asks its IP rate: 20 header bytes more per packet on IPv6 hosts."""
    from swell.generators.kind import RunContext
    from swell.generators.packets import PacketsKind, PacketsSpec
    from swell.placement import Endpoint, Local, Placement

    def asked(client: str, server: str) -> tuple[float, float]:
        kind = PacketsKind(PacketsSpec(kind="packets", preset="VoIP:G.711.1:RTP"))
        pl = Placement(bg_clients=(Endpoint(client, Local(), "c"),),
                       bg_servers=(Endpoint(server, Local(), "s"),))
        kind.build(RunContext(tmp_path, pl, 1, 5.0, 1.0))
        pps = sum(kind.s.flows / fc.idt.mean() for fc in kind.classes())
        return sum((kind.asked_mbps() or {}).values()), pps

    (v4, pps), (v6, _) = asked("10.0.0.1", "10.0.1.1"), asked("fd00::1", "fd00::1:1")
    assert pps > 0 and v6 - v4 == pytest.approx(20 * 8 * pps / 1e6, rel=1e-9)
