"""Foreground web workload: Apache config, httperf parsing, capture-based response times."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.generators.web import Httperf, apache_config, make_objects, parse_httperf, response_times

HTTPERF_OUT = """\
Total: connections 873 requests 873 replies 872 test-duration 2.000 s

Connection rate: 436.6 conn/s (2.3 ms/conn, <=1 concurrent connections)
Connection time [ms]: min 1.9 avg 2.3 max 6.1 median 2.5 stddev 0.4
Errors: total 0 client-timo 0 socket-timo 0 connrefused 0 connreset 0
"""


def test_parse_httperf():
    s = parse_httperf(HTTPERF_OUT)
    assert (s.connections, s.replies, s.errors) == (873, 872, 0)
    assert s.conn_time_ms_avg == 2.3 and s.conn_time_ms_median == 2.5 and s.duration_s == 2.0
    with pytest.raises(SwellError, match="httperf"):
        parse_httperf("httperf: connection refused\n")


def test_a_tool_that_printed_no_statistics_says_what_it_did():
    """A client that ended without its statistics: the error names its exit status and
    the last of its output (CI's TCG guest, 2026-11-29, said only "output lacks")."""
    tool = Httperf("10.9.0.2", 80, 1000)
    script = "echo starting; echo 'httperf: connect: gone'; exit 3"
    tool.proc = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT)
    tool.proc.wait()
    said = r"lacks .*exit status 3.*starting \| httperf: connect: gone"
    with pytest.raises(SwellError, match=said):
        tool.stop()
    assert tool.proc is None


def test_apache_config_is_confined(tmp_path: Path):
    conf = apache_config(tmp_path, "10.9.0.2", 8080)
    assert "Listen 10.9.0.2:8080" in conf
    for line in conf.splitlines():
        if line.startswith(("PidFile", "ErrorLog", "DocumentRoot", "DefaultRuntimeDir")):
            assert str(tmp_path) in line


def test_make_objects_sizes_and_determinism(tmp_path: Path):
    make_objects(tmp_path / "a", [4096, 1000], seed=3)
    make_objects(tmp_path / "b", [4096, 1000], seed=3)
    a = (tmp_path / "a" / "obj_4096").read_bytes()
    assert len(a) == 4096 and a == (tmp_path / "b" / "obj_4096").read_bytes()
    assert (tmp_path / "a" / "obj_1000").stat().st_size == 1000


def test_response_times_two_connections_and_port_reuse():
    srv, cli, port = 0x0A000002, 0x0A000001, 80
    FIN, SYN, ACK, PSH = 1, 2, 16, 8
    # (ts_ms, src, dst, sport, dport, flags, payload)
    pkts = [
        (0, cli, srv, 5000, port, SYN, 0),
        (1, srv, cli, port, 5000, SYN | ACK, 0),
        (2, cli, srv, 5000, port, ACK | PSH, 70),
        (10, srv, cli, port, 5000, ACK, 1448),
        (30, srv, cli, port, 5000, ACK | PSH | FIN, 500),
        (31, cli, srv, 5000, port, ACK, 0),
        # second connection, different port, overlapping in time
        (5, cli, srv, 5001, port, SYN, 0),
        (25, srv, cli, port, 5001, ACK, 100),
        (26, srv, cli, port, 5001, ACK | FIN, 0),
        # the first port reused later
        (100, cli, srv, 5000, port, SYN, 0),
        (140, srv, cli, port, 5000, ACK, 10),
        (141, srv, cli, port, 5000, ACK | FIN, 0),
        # a transfer cut short (no FIN from the server): left out
        (200, cli, srv, 5002, port, SYN, 0),
        (230, srv, cli, port, 5002, ACK, 1448),
        # a connection whose SYN was not captured: left out
        (50, srv, cli, port, 7000, ACK, 10),
    ]
    cols = [np.array(c) for c in zip(*pkts, strict=True)]
    ts = cols[0].astype(np.int64) * 1_000_000
    starts, rts = response_times(ts, *cols[1:], server=srv, port=port)
    got = sorted(zip(np.round(starts * 1e3), np.round(rts * 1e3), strict=True))
    assert got == [(0, 30), (5, 20), (100, 40)]


def test_foreground_result_keeps_what_httperf_counted(tmp_path: Path):
    """Responses completing after httperf's stop (timing["end"]) are left out."""
    from scapy.layers.inet import IP, TCP
    from scapy.utils import wrpcap

    from swell.generators.kind import Window
    from swell.generators.web import foreground_result

    srv, cli, t0 = "10.0.0.2", "10.0.0.1", 1_700_000_000.0
    pkts = []
    for sport, start, dur in ((5000, 0.1, 0.2), (5001, 0.4, 0.2), (5002, 0.7, 0.4)):
        for dt, src, dst, flags, size in ((0, cli, srv, "S", 0), (dur / 2, srv, cli, "A", 1000),
                                           (dur, srv, cli, "FA", 1000)):
            sp, dp = (sport, 80) if src == cli else (80, sport)
            p = IP(src=src, dst=dst) / TCP(sport=sp, dport=dp, flags=flags) / (b"x" * size)
            p.time = t0 + start + dt
            pkts.append(p)
    pcap = tmp_path / "fg.pcap"
    wrpcap(str(pcap), sorted(pkts, key=lambda p: p.time))
    out = foreground_result(pcap, srv, 80, Window(t0, t0 + 1.0, t0), None, object_bytes=2000)
    assert out is not None
    assert out["response_times_s"] == pytest.approx([0.2, 0.2], abs=1e-5)
    assert out["starts_s"] == pytest.approx([0.1, 0.4], abs=1e-5)
    out = foreground_result(pcap, srv, 80, Window(t0, t0 + 10.0, t0), None, object_bytes=2000)
    assert out is not None and len(out["response_times_s"]) == 3
