"""``swell trace info``: summaries checked against capinfos/tshark, and the CLI."""

from __future__ import annotations

import json
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from swell.cli import main
from swell.extract import traceinfo
from swell.extract.traceinfo import format_table, summarize

DATA = Path(__file__).resolve().parents[2] / "data" / "pcap"


def _tshark(path: Path, *args: str) -> list[str]:
    argv = ["tshark", "-n", "-r", str(path), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()


def test_example_matches_capinfos_and_tshark() -> None:
    path = DATA / "example.pcap"
    s = summarize(path)
    out = subprocess.run(
        ["capinfos", "-T", "-M", "-r", "-c", "-d", "-u", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\t")
    assert (s.packets, s.bytes_wire) == (int(out[1]), int(out[2]))
    assert Decimal(str(s.duration_s)) == Decimal(out[3].strip())
    syn = _tshark(path, "-Y", "tcp.flags.syn==1 && tcp.flags.ack==0 && !icmp")
    synack = _tshark(path, "-Y", "tcp.flags.syn==1 && tcp.flags.ack==1 && !icmp")
    assert (s.tcp_syn, s.tcp_synack) == (len(syn), len(synack)) == (65, 65)
    hosts = set()
    for line in _tshark(path, "-T", "fields", "-e", "ip.src", "-e", "ip.dst"):
        hosts.update(a for a in line.split("\t") if a)
    assert s.hosts == len(hosts)
    assert s.direction == "bidirectional" and s.conversations_both_ways > 100
    assert s.tcp + s.udp == s.packets and s.warnings == {}


def test_syn_only_trace_is_one_directional() -> None:
    s = summarize(DATA / "netml_demo.pcap")
    assert (s.tcp_syn, s.tcp_synack) == (240, 0)
    assert s.direction == "one-directional" and s.conversations_both_ways == 0
    assert "240 SYNs but no SYN/ACK" in s.direction_why
    assert s.format == "pcapng"


def test_sll_and_warnings_in_table() -> None:
    s = summarize(DATA / "sll.pcap")
    assert s.linktypes == {0: "Linux cooked (SLL) [113]"}
    assert s.non_ip == s.warnings["non_ip"] == 7
    s2 = summarize(DATA / "example2.pcap")
    assert s2.warnings.get("ts_jump", 0) >= 1
    table = format_table(s2)
    assert "warning ts_jump" in table and "duration" in table


def test_header_only_capture_reports_cut_payload(tmp_path: Path) -> None:
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 54, 1)
    frame = bytes(12) + b"\x08\x00" + bytes([0x45, 0, 0x05, 0xDC]) + bytes(36)
    rec = struct.pack("<IIII", 1, 0, 54, 1514) + frame
    p = tmp_path / "cut.pcap"
    p.write_bytes(hdr + rec * 3)
    s = summarize(p)
    assert (s.snaplen, s.payload_cut, s.max_caplen, s.bytes_wire) == (54, 3, 54, 3 * 1514)
    assert "yes: 3 packets cut" in format_table(s)


def test_cli_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "info", str(DATA / "example.pcap"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["packets"] == 4631 and d["linktypes"] == {"0": "Ethernet [1]"}
    assert main(["trace", "info", str(DATA / "tls2.pcap")]) == 0
    out = capsys.readouterr().out
    assert "TCP SYN / SYN-ACK" in out and "7,451" in out


def test_cli_bad_file_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"GIF89a not a capture")
    assert main(["trace", "info", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "not a pcap" in err


def test_progress_shown_for_large_files(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SWELL_QUIET", raising=False)
    monkeypatch.setattr(traceinfo, "PROGRESS_MIN_BYTES", 0)
    summarize(DATA / "example.pcap", chunk=1000)
    assert "reading example.pcap" in capsys.readouterr().err


def test_damaged_file_reports_unread_bytes(tmp_path: Path) -> None:
    hdr = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    frame = bytes(12) + b"\x08\x06" + bytes(28)  # ARP-sized, not IP
    good = struct.pack("<IIII", 1, 0, len(frame), len(frame)) + frame
    bad = struct.pack("<IIII", 2, 0, 0x40000000, 60) + frame
    p = tmp_path / "damaged.pcap"
    p.write_bytes(hdr + good + bad + bytes(100))  # nothing after the bad record to resync to
    s = summarize(p)
    assert (s.packets, s.non_ip, s.unread_bytes) == (1, 1, len(bad) + 100)
    assert s.warnings == {"corrupt_record": 1, "non_ip": 1}
    assert "unread bytes" in format_table(s) and "corrupt_record" in format_table(s)
