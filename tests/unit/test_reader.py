"""Trace reader on crafted captures: every format, link type and bad-input case.

Packets are built with Scapy (an independent encoder) and wrapped in pcap or
pcapng written byte by byte here, so each case tests one thing the reader
must get right.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    fragment6,
)
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from swell.extract.reader import (
    FRAG_ANY,
    FRAG_FIRST,
    FRAG_LATER,
    SYN,
    PacketChunk,
    TraceError,
    addr_to_str,
    is_v4,
    open_trace,
    read_all,
    v4_to_int,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "pcap"
T0 = 1_600_000_000_123_456_789


def pcap_bytes(
    records: list[tuple[int, bytes, int]],
    linktype: int = 1,
    nano: bool = False,
    be: bool = False,
    snaplen: int = 65535,
) -> bytes:
    """Classic pcap: records are (ts_ns, captured bytes, wire length or 0)."""
    e = ">" if be else "<"
    out = struct.pack(
        e + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype
    )
    for ts, data, wire in records:
        sec, frac = divmod(ts, 10**9)
        out += struct.pack(
            e + "IIII", sec, frac if nano else frac // 1000, len(data), wire or len(data)
        )
        out += data
    return out


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = len(body) + 12
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


def pcapng_bytes(
    ifaces: list[tuple[int, int | None]], packets: list[tuple[int, int, bytes]]
) -> bytes:
    """pcapng: ifaces are (linktype, if_tsresol byte or None); packets (iface, ts units, data)."""
    out = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    for lt, tsresol in ifaces:
        opts = b""
        if tsresol is not None:
            opts = struct.pack("<HHB3x", 9, 1, tsresol) + struct.pack("<HH", 0, 0)
        out += _block(1, struct.pack("<HHI", lt, 0, 0) + opts)
    for iface, ts, data in packets:
        hdr = struct.pack("<IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        out += _block(6, hdr + data)
    return out


def write(tmp_path: Path, data: bytes, name: str = "t.pcap") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def tcp_pkt(payload: int = 100, flags: str = "PA", **kw: object) -> Ether:
    return (
        Ether()
        / IP(src="10.1.2.3", dst="192.168.9.8")
        / TCP(sport=40000, dport=80, flags=flags, seq=1000, ack=2000, window=512, **kw)
        / Raw(b"x" * payload)
    )


def test_microsecond_and_nanosecond_pcap_both_byte_orders(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    for nano in (False, True):
        for be in (False, True):
            c = read_all(write(tmp_path, pcap_bytes([(T0, pkt, 0)], nano=nano, be=be)))
            want = T0 if nano else T0 - T0 % 1000
            assert len(c) == 1 and int(c.ts_ns[0]) == want
            assert (int(c.sport[0]), int(c.dport[0]), int(c.seq[0]), int(c.ack[0])) == (
                40000,
                80,
                1000,
                2000,
            )
            assert int(c.win[0]) == 512 and int(c.payload_len[0]) == 100
            assert addr_to_str(c.saddr_hi[0], c.saddr_lo[0]) == "10.1.2.3"
            assert int(c.ip_len[0]) == 140 and int(c.wirelen[0]) == len(pkt)


def test_pcapng_two_interfaces_with_own_linktype_and_resolution(tmp_path: Path) -> None:
    eth = bytes(tcp_pkt(flags="S"))
    raw = bytes(IP(src="1.1.1.1", dst="2.2.2.2") / UDP(sport=5, dport=6) / Raw(b"y" * 7))
    sec = 1_700_000_000
    data = pcapng_bytes(
        [(1, None), (101, 9), (1, 0x80 | 20)],
        [(0, sec * 10**6 + 5, eth), (1, sec * 10**9 + 123, raw), (2, (sec << 20) + (1 << 19), eth)],
    )
    with open_trace(write(tmp_path, data, "t.pcapng")) as tr:
        c = PacketChunk.concat(list(tr.chunks()))
        info = tr.info
    assert info.format == "pcapng" and info.linktypes == {0: 1, 1: 101, 2: 1}
    assert info.tsresol[1] == pytest.approx(1e-9)
    assert c.iface.tolist() == [0, 1, 2] and c.linktype.tolist() == [1, 101, 1]
    assert c.ts_ns.tolist() == [sec * 10**9 + 5000, sec * 10**9 + 123, sec * 10**9 + 500_000_000]
    assert c.proto.tolist() == [6, 17, 6] and int(c.payload_len[1]) == 7
    assert int(c.tcp_flags[0]) == SYN
    assert info.packets == 3 and info.complete


def _ip_payloads() -> tuple[bytes, bytes]:
    v4 = bytes(IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1, dport=2, flags="SA") / Raw(b"a"))
    v6 = bytes(IPv6(src="2001:db8::1", dst="2001:db8::2") / UDP(sport=3, dport=4) / Raw(b"bb"))
    return v4, v6


@pytest.mark.parametrize(
    ("linktype", "prefix4", "prefix6"),
    [
        (12, b"", b""),
        (14, b"", b""),
        (101, b"", b""),
        (0, struct.pack("<I", 2), struct.pack("<I", 30)),
        (0, struct.pack(">I", 2), struct.pack(">I", 24)),
        (108, struct.pack(">I", 2), struct.pack(">I", 28)),
        (113, bytes(14) + b"\x08\x00", bytes(14) + b"\x86\xdd"),
        (276, b"\x08\x00" + bytes(18), b"\x86\xdd" + bytes(18)),
    ],
)
def test_link_types(tmp_path: Path, linktype: int, prefix4: bytes, prefix6: bytes) -> None:
    v4, v6 = _ip_payloads()
    recs = [(T0, prefix4 + v4, 0), (T0 + 1000, prefix6 + v6, 0)]
    c = read_all(write(tmp_path, pcap_bytes(recs, linktype=linktype)))
    assert c.ipver.tolist() == [4, 6]
    assert c.proto.tolist() == [6, 17]
    assert c.sport.tolist() == [1, 3] and c.dport.tolist() == [2, 4]
    assert c.payload_len.tolist() == [1, 2]
    assert addr_to_str(c.daddr_hi[1], c.daddr_lo[1]) == "2001:db8::2"
    assert c.l4_ok.all()


def test_raw_ipv4_and_ipv6_linktypes(tmp_path: Path) -> None:
    v4, v6 = _ip_payloads()
    assert read_all(write(tmp_path, pcap_bytes([(T0, v4, 0)], linktype=228))).ipver[0] == 4
    assert read_all(write(tmp_path, pcap_bytes([(T0, v6, 0)], linktype=229))).ipver[0] == 6


def test_qinq_vlan(tmp_path: Path) -> None:
    pkt = Ether() / Dot1AD(vlan=100) / Dot1Q(vlan=200) / IP() / UDP(sport=7, dport=9) / Raw(b"z")
    c = read_all(write(tmp_path, pcap_bytes([(T0, bytes(pkt), 0)])))
    assert (int(c.vlan[0]), int(c.proto[0]), int(c.dport[0]), int(c.payload_len[0])) == (
        100,
        17,
        9,
        1,
    )


def test_ipv6_extension_headers(tmp_path: Path) -> None:
    pkt = (
        Ether()
        / IPv6(src="fe80::1", dst="ff02::1")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting()
        / IPv6ExtHdrDestOpt()
        / TCP(sport=443, dport=5555, flags="A", seq=7)
        / Raw(b"q" * 33)
    )
    c = read_all(write(tmp_path, pcap_bytes([(T0, bytes(pkt), 0)])))
    assert (int(c.ipver[0]), int(c.proto[0]), int(c.sport[0]), int(c.seq[0])) == (6, 6, 443, 7)
    assert int(c.payload_len[0]) == 33 and int(c.ip_len[0]) == len(pkt) - 14
    assert not c.frag[0] and bool(c.l4_ok[0])


def test_ipv4_and_ipv6_fragments(tmp_path: Path) -> None:
    big4 = IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=11, dport=12) / Raw(b"f" * 3000)
    big6 = (
        IPv6(src="::1", dst="::2")
        / IPv6ExtHdrFragment()
        / UDP(sport=13, dport=14)
        / Raw(b"g" * 3000)
    )
    frags = [bytes(Ether() / f) for f in fragment(big4, fragsize=1000)]
    frags += [bytes(Ether() / f) for f in fragment6(big6, 1280)]
    c = read_all(write(tmp_path, pcap_bytes([(T0 + i, f, 0) for i, f in enumerate(frags)])))
    v4, v6 = c.ipver == 4, c.ipver == 6
    assert c.frag[v4].tolist() == [FRAG_ANY | FRAG_FIRST] + [FRAG_ANY | FRAG_LATER] * (v4.sum() - 1)
    assert (
        c.frag[v6][0] == FRAG_ANY | FRAG_FIRST and (c.frag[v6][1:] == FRAG_ANY | FRAG_LATER).all()
    )
    assert c.sport[v4].tolist()[:2] == [11, 0] and int(c.sport[v6][0]) == 13
    assert (c.proto == 17).all()
    # Later fragments: payload_len is the fragment's share of the IP payload.
    assert int(c.payload_len[v4].sum()) == 3008 - 8
    assert not c.l4_ok[c.frag == FRAG_ANY | FRAG_LATER].any()


def test_header_only_capture_keeps_true_sizes(tmp_path: Path) -> None:
    full = bytes(tcp_pkt(payload=1400, options=[("Timestamp", (1, 2))]))
    c = read_all(write(tmp_path, pcap_bytes([(T0, full[:52], len(full))], snaplen=52)))
    assert (int(c.caplen[0]), int(c.wirelen[0])) == (52, len(full))
    assert int(c.payload_len[0]) == 1400 and int(c.ip_len[0]) == len(full) - 14
    assert bool(c.l4_ok[0]) and int(c.seq[0]) == 1000 and int(c.win[0]) == 512


def test_truncated_last_record_is_counted(tmp_path: Path) -> None:
    recs = [(T0 + i * 1000, bytes(tcp_pkt()), 0) for i in range(5)]
    data = pcap_bytes(recs)
    for cut in (10, 150, len(data) - 24 - 4 * 170 - 3):
        with open_trace(write(tmp_path, data[:-cut])) as tr:
            n = sum(len(c) for c in tr.chunks())
            assert n == 4 and tr.warnings == {"truncated_last_record": 1}
            assert n + tr.skipped == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"\x00\x01", "too short"),
        (b"hello, this is not a capture at all", "not a pcap or pcapng file"),
        (b"\x1f\x8b\x08\x00" + bytes(30), "gzip-compressed file"),
        (struct.pack("<I", 0xA1B2C3D4) + b"\x02\x00", "truncated pcap file header"),
        (struct.pack("<II", 0x0A0D0D0A, 28) + b"\x01\x02\x03\x04", "byte-order magic"),
    ],
)
def test_unusable_files_raise_one_line_trace_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    p = write(tmp_path, content)
    with pytest.raises(TraceError) as exc:
        open_trace(p)
    assert message in str(exc.value) and str(p) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        open_trace(tmp_path / "nope.pcap")
    with pytest.raises(TraceError, match="directory"):
        open_trace(tmp_path)


def test_unknown_linktype_and_short_packets_are_returned_and_counted(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    c = read_all(write(tmp_path, pcap_bytes([(T0, pkt, 0)] * 3, linktype=147)))
    assert len(c) == 3 and (c.ipver == 0).all() and (c.linktype == 147).all()
    with open_trace(write(tmp_path, pcap_bytes([(T0, pkt, 0)] * 3, linktype=147))) as tr:
        list(tr.chunks())
        assert tr.warnings == {"unknown_linktype": 3}
    short = [(T0, pkt[:10], 0), (T0, pkt[:30], 0), (T0, pkt[:40], 0), (T0, pkt, 0)]
    with open_trace(write(tmp_path, pcap_bytes(short))) as tr:
        c = PacketChunk.concat(list(tr.chunks()))
        assert tr.warnings == {"short_packet": 3}
    assert c.ipver.tolist() == [0, 4, 4, 4] and c.l4_ok.tolist() == [False, False, False, True]
    assert int(c.sport[2]) == 40000 and int(c.payload_len[2]) == 100


def test_timestamps_backwards_and_jumps_are_counted_not_fixed(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    day = 86_400 * 10**9
    ts = [T0, T0 + 10**9, T0 + 5 * 10**8, T0 + 400 * day, T0 + 2 * 10**9]
    with open_trace(write(tmp_path, pcap_bytes([(t, pkt, 0) for t in ts], nano=True))) as tr:
        c = PacketChunk.concat(list(tr.chunks()))
        assert tr.warnings == {"ts_backwards": 2, "ts_jump": 2}
        info = tr.info
    assert c.ts_ns.tolist() == ts
    assert (info.first_ts_ns, info.last_ts_ns) == (T0, T0 + 400 * day)


def test_corrupt_record_length_resyncs_with_counts(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    data = bytearray(pcap_bytes([(T0 + i * 10**9, pkt, 0) for i in range(4)]))
    second = 24 + 16 + len(pkt)
    data[second + 8 : second + 12] = struct.pack("<I", 0x7FFFFFFF)
    with open_trace(write(tmp_path, bytes(data))) as tr:
        c = PacketChunk.concat(list(tr.chunks()))
        assert tr.warnings == {"corrupt_record": 1, "resync_skipped_bytes": 16 + len(pkt)}
        assert tr.offset == len(data)
    assert c.ts_ns.tolist() == [T0 - T0 % 1000 + i * 10**9 for i in (0, 2, 3)]


def test_corrupt_record_without_resync_point_stops(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    data = bytearray(pcap_bytes([(T0, pkt, 0)] * 2)) + bytes(500)
    data[24 + 16 + len(pkt) + 8 : 24 + 16 + len(pkt) + 12] = b"\xff\xff\xff\x7f"
    with open_trace(write(tmp_path, bytes(data))) as tr:
        assert sum(len(c) for c in tr.chunks()) == 1
        assert tr.warnings == {"corrupt_record": 1}
        assert tr.offset == 24 + 16 + len(pkt) and tr.info.complete


def test_pcapng_bad_interface_and_truncated_block(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    data = pcapng_bytes([(1, None)], [(0, 1, pkt), (3, 2, pkt), (0, 3, pkt), (0, 4, pkt)])
    with open_trace(write(tmp_path, data[:-20], "t.pcapng")) as tr:
        n = sum(len(c) for c in tr.chunks())
        assert n == 2
        assert tr.warnings == {"bad_interface_id": 1, "truncated_last_record": 1}
        assert tr.skipped == 2


def test_chunking_gives_the_same_packets() -> None:
    path = DATA / "example.pcap"
    whole = read_all(path)
    with open_trace(path) as tr:
        parts = list(tr.chunks(max_packets=1000))
    assert [len(p) for p in parts] == [1000] * 4 + [631]
    joined = PacketChunk.concat(parts)
    for name, col in whole.columns().items():
        assert np.array_equal(col, getattr(joined, name)), name


def test_address_helpers() -> None:
    c = read_all(DATA / "example.pcap")
    assert is_v4(c.saddr_hi, c.saddr_lo).all()
    ints = v4_to_int(c.saddr_lo)
    assert ints.dtype == np.uint32
    first = addr_to_str(c.saddr_hi[0], c.saddr_lo[0])
    assert ".".join(str(int(ints[0]) >> s & 255) for s in (24, 16, 8, 0)) == first
    assert not is_v4(0x20010DB800000000, 1) and addr_to_str(0x20010DB800000000, 1) == "2001:db8::1"
    fwd = c.forward()
    rev = PacketChunk(
        **{
            **c.columns(),
            "saddr_hi": c.daddr_hi,
            "saddr_lo": c.daddr_lo,
            "daddr_hi": c.saddr_hi,
            "daddr_lo": c.saddr_lo,
            "sport": c.dport,
            "dport": c.sport,
        }
    ).forward()
    assert not (fwd & rev).any()


def test_dtypes_match_the_contract() -> None:
    c = read_all(DATA / "sll.pcap")
    want = {
        "ts_ns": "int64",
        "caplen": "uint32",
        "iface": "uint16",
        "ipver": "uint8",
        "saddr_hi": "uint64",
        "sport": "uint16",
        "tcp_flags": "uint8",
        "seq": "uint32",
        "win": "uint16",
        "ip_len": "uint32",
        "payload_len": "uint32",
        "vlan": "uint16",
        "l4_ok": "bool",
    }
    for name, dtype in want.items():
        assert str(getattr(c, name).dtype) == dtype, name
    assert (c.linktype == 113).all() and len(c) == 518


def test_big_endian_pcapng_sections_simple_and_obsolete_blocks(tmp_path: Path) -> None:
    """Second section in big-endian order, with its own interface numbering, SPB and PB."""
    pkt = bytes(tcp_pkt(payload=10))

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack(">II", btype, len(body) + 12) + body + struct.pack(">I", len(body) + 12)

    be = block(0x0A0D0D0A, struct.pack(">IHHq", 0x1A2B3C4D, 1, 0, -1))
    be += block(1, struct.pack(">HHI", 113, 0, 0))
    be += block(1, struct.pack(">HHI", 1, 0, 0))
    sll = bytes(14) + b"\x08\x00" + pkt[14:]
    be += block(6, struct.pack(">IIIII", 0, 0, 3_000_000, len(sll), len(sll)) + sll)
    be += block(3, struct.pack(">I", len(sll)) + sll)  # SPB: interface 0, no timestamp
    be += block(2, struct.pack(">HHIIII", 1, 0, 0, 4_000_000, len(pkt), len(pkt)) + pkt)
    be += block(0xBAD, b"unknown block type is skipped")
    data = pcapng_bytes([(1, None)], [(0, 1_000_000, pkt)]) + be
    with open_trace(write(tmp_path, data, "t.pcapng")) as tr:
        c = PacketChunk.concat(list(tr.chunks(2)))
        info = tr.info
        assert tr.warnings == {"no_timestamp": 1}
    assert info.linktypes == {0: 1, 1: 113, 2: 1}
    assert c.iface.tolist() == [0, 1, 1, 2] and c.linktype.tolist() == [1, 113, 113, 1]
    assert c.ts_ns.tolist() == [10**9, 3 * 10**9, 3 * 10**9, 4 * 10**9]
    assert (c.payload_len == 10).all() and (c.dport == 80).all()


def test_modified_pcap_format(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt(payload=5))
    hdr = struct.pack("<IHHiIII", 0xA1B2CD34, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack("<IIII", 7, 8, len(pkt), len(pkt)) + bytes(8) + pkt
    c = read_all(write(tmp_path, hdr + rec * 2))
    assert len(c) == 2 and c.ts_ns.tolist() == [7_000_008_000] * 2
    assert (c.payload_len == 5).all()


def test_ipv4_options_and_offload_zero_length(tmp_path: Path) -> None:
    from scapy.layers.inet import IPOption_RR

    opt = Ether() / IP(options=[IPOption_RR()]) / TCP(sport=9, dport=10) / Raw(b"o" * 20)
    tso = bytearray(bytes(tcp_pkt(payload=3000)))
    tso[16:18] = b"\x00\x00"  # total length left 0 by segmentation offload
    c = read_all(write(tmp_path, pcap_bytes([(T0, bytes(opt), 0), (T0, bytes(tso), 0)])))
    assert (int(c.sport[0]), int(c.payload_len[0]), int(c.ip_len[0])) == (9, 20, len(opt) - 14)
    assert (int(c.ip_len[1]), int(c.payload_len[1])) == (len(tso) - 14, 3000)


def test_pcapng_if_tsoffset(tmp_path: Path) -> None:
    pkt = bytes(tcp_pkt())
    opts = struct.pack("<HHq", 14, 8, 1_000_000_000) + struct.pack("<HH", 0, 0)
    data = _block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    data += _block(1, struct.pack("<HHI", 1, 0, 0) + opts)
    data += _block(6, struct.pack("<IIIII", 0, 0, 2_500_000, len(pkt), len(pkt)) + pkt)
    c = read_all(write(tmp_path, data, "t.pcapng"))
    assert c.ts_ns.tolist() == [1_000_000_002_500_000_000]


def test_skip_reasons_match_the_native_library() -> None:
    from swell.extract import reader

    assert set(reader.SKIP_REASONS) == reader._skip_reasons()
    names = set(reader.warning_reasons())
    contract = {"truncated_last_record", "short_packet", "unknown_linktype", "ts_backwards"}
    assert contract | {"ts_jump", "non_ip"} <= names
