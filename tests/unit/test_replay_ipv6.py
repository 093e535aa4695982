"""tcpreplay's split and rewrite on an IPv6 address plan (no root: files only).

On an IPv6 plan the split keeps a trace's IPv6 TCP/UDP packets and translates its
IPv4 ones (:func:`swell.generators.replay_split.v4_to_v6`), writes Ethernet type 0x86DD,
renumbers copies under ``fd00::/96``, and names the trace addresses in IPv6 form
(IPv4 as ``::ffff:a.b.c.d``) so tcprewrite's IPv6 pseudo-NAT maps them. The
rewrite runs the real tcprewrite where it is installed.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from pathlib import Path

import dpkt
import pytest

from swell.errors import SwellError
from swell.generators.replay import Inject, pnat_arg, rewrite_argv, round_robin, set_macs
from swell.generators.replay_split import (
    ETHER_IPV6,
    Looping,
    split_trace,
    trace_rates,
    v4_to_v6,
)

REPO = Path(__file__).resolve().parents[2]
TRACE4 = REPO / "data" / "pcap" / "example.pcap"
CLIENT6, SERVER6 = "2001:db8:1::10", "2001:db8:2::20"


def tcp6(src: str, dst: str, sport: int, dport: int, flags: int, seq: int,
         payload: bytes = b"") -> bytes:
    """One Ethernet + IPv6 + TCP frame (checksum computed by dpkt)."""
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, win=65535,
                       data=payload)
    ip = dpkt.ip6.IP6(src=ipaddress.IPv6Address(src).packed,
                      dst=ipaddress.IPv6Address(dst).packed, nxt=6, hlim=64, data=tcp)
    ip.plen = len(bytes(tcp))
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6,
                                        type=dpkt.ethernet.ETH_TYPE_IP6, data=ip))


def write_v6_trace(path: Path, conns: int = 3) -> Path:
    """A small IPv6 trace: ``conns`` HTTP-like exchanges, one client, one server."""
    syn, ack, psh = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_PUSH
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, linktype=1)
        t = 1000.0
        for c in range(conns):
            sp = 40000 + c
            for src, dst, s, d, fl, data in (
                    (CLIENT6, SERVER6, sp, 80, syn, b""),
                    (SERVER6, CLIENT6, 80, sp, syn | ack, b""),
                    (CLIENT6, SERVER6, sp, 80, ack | psh, b"GET / HTTP/1.0\r\n\r\n"),
                    (SERVER6, CLIENT6, 80, sp, ack | psh, b"x" * 1200)):
                w.writepkt(tcp6(src, dst, s, d, fl, 1000 + c, data), ts=t)
                t += 0.01
            t += 0.2
    return path


def test_v4_to_v6_rebuilds_the_header() -> None:
    ip4 = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), p=17, ttl=33,
                     tos=0xB8, data=dpkt.udp.UDP(sport=5, dport=6, data=b"abcd"))
    ip4.len = 20 + 8 + 4
    v6 = dpkt.ip6.IP6(v4_to_v6(bytes(ip4)))
    assert v6.v == 6 and v6.nxt == 17 and v6.hlim == 33 and v6.plen == 12
    assert v6.fc == 0xB8  # traffic class = the IPv4 TOS
    assert str(ipaddress.IPv6Address(v6.src)) == "::ffff:a00:1"
    assert str(ipaddress.IPv6Address(v6.dst)) == "::ffff:a00:2"
    assert bytes(v6.data)[8:] == b"abcd"


def test_pnat_pairs_per_family() -> None:
    arg = pnat_arg({"10.0.0.1": "10.1.0.2", "::ffff:a00:1": "fd00::1"})
    assert arg == "10.0.0.1/32:10.1.0.2/32,[::ffff:a00:1/128]:[fd00::1/128]"


def test_split_ipv6_trace_on_ipv6_plan(tmp_path: Path) -> None:
    trace = write_v6_trace(tmp_path / "v6.pcap")
    res = split_trace(trace, tmp_path / "out", family=6)
    assert res.counts == {"c2s": 6, "s2c": 6, "dropped": 0}
    assert res.clients == [CLIENT6] and res.servers == [SERVER6]
    for name in ("c2s", "s2c"):
        frames = [buf for _, buf in dpkt.pcap.Reader(open(getattr(res, name), "rb"))]
        assert all(b[12:14] == ETHER_IPV6[12:] == b"\x86\xdd" for b in frames)
    # the same trace on an IPv4 plan: nothing to replay, all of it counted as dropped
    res4 = split_trace(trace, tmp_path / "out4", family=4)
    assert res4.counts == {"c2s": 0, "s2c": 0, "dropped": 12}
    with pytest.raises(SwellError, match="no IPv4 TCP/UDP packets"):
        trace_rates(trace, 4)


def test_split_ipv4_trace_on_ipv6_plan_translates_and_copies(tmp_path: Path) -> None:
    """example.pcap (IPv4) on an IPv6 plan, looped with copies: every packet IPv6, the
    trace's addresses IPv4-mapped, copies under fd00::/96, the rate 20 bytes a packet up."""
    res = split_trace(TRACE4, tmp_path, looping=Looping(20.0, True, 6.0, seed=1), family=6)
    res4 = split_trace(TRACE4, tmp_path / "v4", looping=Looping(20.0, True, 6.0, seed=1))
    assert res.counts == res4.counts  # the same packets, translated
    n = res.plan["whole_copies"] + 1
    base = len(res.clients) // n
    assert all(a.startswith("::ffff:") for a in res.clients[:base])
    assert [str(ipaddress.IPv4Address(int(ipaddress.IPv6Address(a)) & 0xFFFFFFFF))
            for a in res.clients[:base]] == res4.clients[:base]
    copies = [ipaddress.IPv6Address(a) for a in res.clients[base:]]
    assert copies and all(a in ipaddress.IPv6Network("fd00::/96") for a in copies)
    # copy k of address i has the low 32 bits an IPv4 copy gets under 100.64.0.0/10
    assert [int(a) & 0xFFFFFFFF for a in copies] == [
        int(ipaddress.IPv4Address(a)) & 0x3FFFFF for a in res4.clients[base:]]
    for _, buf in dpkt.pcap.Reader(open(res.s2c, "rb")):
        assert buf[12:14] == b"\x86\xdd" and buf[14] >> 4 == 6
    r4, r6 = trace_rates(TRACE4, 4), trace_rates(TRACE4, 6)
    assert r6["reverse"] > r4["reverse"] and r6["forward"] > r4["forward"]


@pytest.mark.skipif(shutil.which("tcprewrite") is None,
                    reason="tcprewrite not installed (Debian package tcpreplay)")
def test_tcprewrite_maps_ipv6_and_mapped_addresses(tmp_path: Path) -> None:
    """The real tcprewrite maps both an IPv6 trace and a translated IPv4 one onto the
    plan's hosts, with valid checksums; the MACs (which tcprewrite 4.4.3 turns into
    multicast ones on IPv6 frames) are set by :func:`set_macs`."""
    plan_c, plan_s = "fd00:5e11:0:2::1", "fd00:5e11:1:2::1"
    inject = Inject(None, "x", "02:00:00:00:00:aa", "02:00:00:00:00:bb")  # type: ignore[arg-type]
    for trace in (write_v6_trace(tmp_path / "v6.pcap"), TRACE4):
        out = tmp_path / trace.stem
        res = split_trace(trace, out, family=6)
        mapping = {**round_robin(res.clients, [plan_c]), **round_robin(res.servers, [plan_s])}
        dst = out / "c2s.pcap"
        run = subprocess.run(rewrite_argv(res.c2s, dst, mapping, inject), capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        set_macs(dst, inject.smac, inject.dmac)
        frames = [dpkt.ethernet.Ethernet(buf) for _, buf in dpkt.pcap.Reader(open(dst, "rb"))]
        assert len(frames) == res.counts["c2s"] > 0
        for eth in frames:
            assert (eth.src, eth.dst) == (b"\x02" + b"\x00" * 4 + b"\xaa",
                                          b"\x02" + b"\x00" * 4 + b"\xbb")
            ip = eth.data
            assert isinstance(ip, dpkt.ip6.IP6)
            assert str(ipaddress.IPv6Address(ip.src)) == plan_c
            assert str(ipaddress.IPv6Address(ip.dst)) == plan_s
            seg = ip.data
            want = seg.sum
            seg.sum = 0
            # dpkt recomputes the checksum over the IPv6 pseudo-header when packed
            assert dpkt.ip6.IP6(bytes(ip)).data.sum == want


def test_ipv6_frames_over_the_mtu_are_cut() -> None:
    """An offloaded IPv6 super-frame (and a translated full-size IPv4 packet) is cut to the
    MTU with its payload length set: tcprewrite's --mtu-trunc cuts IPv4 only."""
    from swell.generators.replay_split import _frame

    big = tcp6(CLIENT6, SERVER6, 40000, 80, dpkt.tcp.TH_ACK, 1, b"y" * 4000)
    out = _frame(big, 1, 6, mtu=1500)
    assert len(out) == 14 + 1500
    assert dpkt.ip6.IP6(out[14:]).plen == 1460
    ip4 = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), p=6,
                     data=dpkt.tcp.TCP(data=b"z" * 1440))
    ip4.len = 1500
    v6 = _frame(b"\x00" * 14 + bytes(ip4), 1, 6, mtu=1500)
    assert len(v6) == 14 + 1500 and dpkt.ip6.IP6(v6[14:]).plen == 1460
    assert _frame(big, 1, 6, mtu=9000)[14:] == big[14:]  # fits: unchanged
