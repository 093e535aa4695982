"""Flow inputs other than the decoder itself: nfcapd files through nfdump, pcaps
through swell's tracker and through nfpcapd, the UDP collector on loopback, and the
``swell flows`` CLI (one-line errors, nothing half-written)."""

from __future__ import annotations

import argparse
import shutil
import socket
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import flows_cli
from swell.extract.flows import ExportDecoder, FlowTable, detect_format, read_flows
from swell.extract.flows.nfcapd import pcap_to_nfcapd, read_nfcapd
from swell.extract.flows.sources import collect
from swell.extract.reader import open_trace

REPO = Path(__file__).resolve().parents[2]
PCAPS = REPO / "data" / "pcap"
needs_nfdump = pytest.mark.skipif(
    shutil.which("nfdump") is None or shutil.which("nfpcapd") is None,
    reason="nfdump/nfpcapd not installed (Debian package nfdump, scripts/bootstrap.sh)",
)


def ipfix_datagram(pk: int = 3, by: int = 300, domain: int = 1) -> bytes:
    fields = [(8, 4), (12, 4), (7, 2), (11, 2), (4, 1), (2, 4), (1, 4), (152, 8), (153, 8)]
    tpl = struct.pack("!HH", 256, len(fields)) + b"".join(struct.pack("!HH", *f) for f in fields)
    rec = bytes([10, 0, 0, 1, 10, 0, 0, 2]) + struct.pack(
        "!HHBIIQQ", 1234, 80, 6, pk, by, 1_700_000_000_000, 1_700_000_000_500
    )
    sets = struct.pack("!HH", 2, 4 + len(tpl)) + tpl + struct.pack("!HH", 256, 4 + len(rec)) + rec
    return struct.pack("!HHIII", 10, 16 + len(sets), 1_700_000_001, 1, domain) + sets


def ip_bytes(pcap: Path) -> tuple[int, int]:
    """(packets, sum of IP lengths) of the IP packets of a capture, from swell's reader."""
    n = b = 0
    with open_trace(pcap) as tr:
        for ch in tr.chunks():
            ip = ch.ipver > 0
            n += int(ip.sum())
            b += int(ch.ip_len[ip].sum())
    return n, b


@needs_nfdump
def test_nfcapd_round_trip_from_nfpcapd(tmp_path):
    pcap = PCAPS / "example.pcap"
    files = pcap_to_nfcapd(pcap, tmp_path / "nf")
    assert detect_format(files[0]) == "nfcapd"
    t = read_flows(files)
    packets, ipbytes = ip_bytes(pcap)
    assert len(t) == 271
    assert t.packets == packets == 4631
    assert t.bytes == ipbytes  # nfpcapd counts IP bytes, as the reader's ip_len does
    c = t.cols
    assert (c["end_ns"] >= c["start_ns"]).all()
    with open_trace(pcap) as tr:
        for _ in tr.chunks():
            pass
        info = tr.info  # first/last timestamps are known once the file was read
    assert info.first_ts_ns // 10**6 <= c["start_ns"].min() // 10**6
    assert c["end_ns"].max() // 10**6 <= info.last_ts_ns // 10**6
    assert ((c["tcp_flags"] & 2) > 0).sum() > 0  # SYNs made it through the flag letters
    # the same table read from a directory of nfcapd files
    assert len(read_flows([tmp_path / "nf"], fmt="nfcapd")) == 271


@needs_nfdump
def test_nfcapd_truncated_file_is_a_one_line_error(tmp_path):
    files = pcap_to_nfcapd(PCAPS / "example.pcap", tmp_path / "nf")
    bad = tmp_path / "cut.nfcapd"
    bad.write_bytes(files[0].read_bytes()[:100])
    with pytest.raises(SwellError) as exc:
        read_nfcapd([bad])
    assert str(bad) in exc.value.one_line() and "nfdump cannot read it" in exc.value.one_line()


@needs_nfdump
@pytest.mark.parametrize("name", ["example.pcap", "tls2.pcap", "http-packets.pcap", "sll.pcap"])
def test_tracker_flows_agree_with_nfpcapd(name):
    """Same pcap, two paths. Packets and IP bytes agree exactly (both count the IP
    total length); records nearly: nfpcapd closes a TCP flow at FIN/RST (a late ACK
    opens a second record) and expires idle flows in periodic scans, so a TLS
    keep-alive 60-65 s after the last packet (tls2) stays in its record there, while
    the tracker cuts at 60 s exactly (tls2: 687 records against 667)."""
    pcap = PCAPS / name
    a = read_flows([pcap], fmt="pcap-flows", engine="tracker")
    b = read_flows([pcap], fmt="pcap-flows", engine="nfpcapd")
    assert a.packets == b.packets
    assert a.bytes == b.bytes
    assert abs(len(a) - len(b)) <= max(2, 0.035 * len(b))


def _reference_records(pcap: Path, inactive_ns: int, active_ns: int) -> list[tuple[int, ...]]:
    """Records by hand, one packet at a time: per 5-tuple direction, a record ends
    after ``inactive_ns`` without a packet or at a packet when older than ``active_ns``
    (valid where every 5-tuple is one connection, as in example.pcap)."""
    open_: dict[tuple[int, ...], list[int]] = {}
    out = []
    with open_trace(pcap) as tr:
        for ch in tr.chunks():
            for i in np.argsort(ch.ts_ns, kind="stable"):
                if ch.proto[i] not in (6, 17) or not ch.l4_ok[i]:
                    continue
                key = (int(ch.saddr_lo[i]), int(ch.daddr_lo[i]), int(ch.sport[i]),
                       int(ch.dport[i]), int(ch.proto[i]))
                ts, r = int(ch.ts_ns[i]), open_.get(key)
                if r is not None and (ts - r[1] > inactive_ns or ts - r[0] > active_ns):
                    out.append((*key, *r))
                    r = None
                if r is None:
                    r = open_[key] = [ts, ts, 0, 0, 0]
                r[1] = max(r[1], ts)
                r[2] += 1
                r[3] += int(ch.ip_len[i])
                r[4] |= int(ch.tcp_flags[i]) if ch.proto[i] == 6 else 0
    out += [(*k, *r) for k, r in open_.items()]
    return sorted(out)


@pytest.mark.parametrize("chunk", [1 << 17, 7])
def test_tracker_records_follow_the_timeouts(chunk, monkeypatch):
    """The tracker path's records are an exporter's: per direction, first and last
    packet times of their own, cut at the inactive and active timeouts, IP bytes and
    OR-ed flags; the same in chunks of 7 packets (state carried across chunks) as in
    one chunk. Short timeouts (1 s, 2 s) make example.pcap's 16 s cut often."""
    from swell.extract.flows import tracker

    monkeypatch.setattr(tracker, "DEFAULT_CHUNK", chunk)
    pcap = PCAPS / "example.pcap"
    t = tracker.read_pcap_via_tracker(pcap, inactive_s=1.0, active_s=2.0)
    c = t.cols
    got = sorted(zip(*(c[k].astype(np.int64).tolist() for k in (
        "src_lo", "dst_lo", "sport", "dport", "proto", "start_ns", "end_ns", "packets",
        "bytes", "tcp_flags")), strict=True))
    want = _reference_records(pcap, 10**9, 2 * 10**9)
    assert len(want) > 271  # the timeouts did cut
    assert got == [tuple(int(x) for x in w) for w in want]
    assert ((c["end_ns"] - c["start_ns"]) <= 2 * 10**9).all()


def test_udp_collector_on_loopback():
    dec = ExportDecoder()
    ready = threading.Event()
    bound: list[tuple[str, int]] = []

    def on_ready(addr: tuple[str, int]) -> None:
        bound.append(addr)
        ready.set()

    th = threading.Thread(
        target=collect, args=(dec, "127.0.0.1:0", 10.0, on_ready), kwargs={"max_datagrams": 3}
    )
    th.start()
    assert ready.wait(5)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(ipfix_datagram(pk=3), bound[0])
        s.sendto(ipfix_datagram(pk=4, domain=2), bound[0])
        s.sendto(b"\x00\x0a\x00\xff garbage", bound[0])  # counted, not fatal
    th.join(15)
    assert not th.is_alive()
    t = dec.finish()
    assert sorted(t.cols["packets"].tolist()) == [3, 4]
    assert t.exporters == ["127.0.0.1"]
    assert t.undecodable == {"malformed datagram": 1}


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="swell")
    flows_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except SwellError as exc:  # what swell.cli.main prints
        print(f"swell: {exc.one_line()}", file=__import__("sys").stderr)
        rc = exc.exit_code
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_read_writes_npz_and_csv(tmp_path, capsys):
    d = tmp_path / "dgrams"
    d.mkdir()
    (d / "router_tpldata.bin").write_bytes(ipfix_datagram())
    rc, out, _ = run_cli(["flows", "read", str(d), "-o", str(tmp_path / "f.npz")], capsys)
    assert rc == 0 and "flows          1" in out and "templates      1" in out
    t = FlowTable.load(tmp_path / "f.npz")
    assert t.exporters == ["router"] and int(t.cols["bytes"][0]) == 300
    rc, _, _ = run_cli(["flows", "read", str(d), "-o", str(tmp_path / "f.csv")], capsys)
    lines = (tmp_path / "f.csv").read_text().splitlines()
    assert lines[0].startswith("start_ns,end_ns,src,dst") and ",10.0.0.1,10.0.0.2," in lines[1]


def test_cli_truncated_datagram_one_line_error_nothing_written(tmp_path, capsys):
    d = tmp_path / "dgrams"
    d.mkdir()
    (d / "a_tpldata.bin").write_bytes(ipfix_datagram())
    (d / "b_data.bin").write_bytes(ipfix_datagram()[:45])
    out_file = tmp_path / "flows.npz"
    rc, _, err = run_cli(["flows", "read", str(d), "-o", str(out_file)], capsys)
    assert rc == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"swell: {d / 'b_data.bin'}: malformed NetFlow datagram")
    assert not out_file.exists() and list(tmp_path.iterdir()) == [d]
    # --skip-bad: the good datagram is read, the bad one listed with its reason
    rc, out, _ = run_cli(["flows", "read", str(d), "--skip-bad", "-o", str(out_file)], capsys)
    assert rc == 0 and out_file.exists() and "malformed" in out


def test_detect_format_and_bad_inputs(tmp_path):
    assert detect_format(PCAPS / "example.pcap") == "pcap-flows"
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world")
    with pytest.raises(SwellError, match="not an nfcapd file, a capture or a NetFlow"):
        read_flows([junk])
    with pytest.raises(SwellError, match="no such file"):
        read_flows([tmp_path / "missing"])


def test_export_pcap_round_trip(tmp_path):
    """Export datagrams written into a pcap (Ethernet/IPv4/UDP) are found and decoded."""
    dpkt = pytest.importorskip("dpkt")
    pcap = tmp_path / "export.pcap"
    with open(pcap, "wb") as fh:
        w = dpkt.pcap.Writer(fh)
        for i, payload in enumerate([ipfix_datagram(pk=3), ipfix_datagram(pk=5)]):
            udp = dpkt.udp.UDP(sport=5000, dport=4739, data=payload)
            udp.ulen = 8 + len(payload)
            ip = dpkt.ip.IP(src=bytes([192, 0, 2, 7]), dst=bytes([192, 0, 2, 9]), p=17, data=udp)
            ip.len = 20 + len(udp)
            eth = dpkt.ethernet.Ethernet(type=0x0800, data=ip)
            w.writepkt(bytes(eth), ts=1_700_000_000 + i)
    assert detect_format(pcap) == "pcap-export"
    t = read_flows([pcap])
    assert t.exporters == ["192.0.2.7"] and np.array_equal(np.sort(t.cols["packets"]), [3, 5])
