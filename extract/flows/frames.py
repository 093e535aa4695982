"""Flow keys from a sampled frame's first bytes (IPFIX dataLinkFrameSection, IE 315).

Packet-sampling exporters (Juniper's IPFIX among them) send, instead of flow
counters, the first bytes of each sampled frame. One such record is one
packet; its addresses, ports, protocol and TCP flags are read here from the
headers: Ethernet (any number of 802.1Q/802.1ad tags), MPLS label stacks (with
the pseudowire control word of Ethernet over MPLS, RFC 4385, or IP directly
under the bottom label), IPv4, IPv6 with its extension headers (SRv6's routing
header included), then TCP/UDP ports. A header cut short by the section's
length leaves the remaining fields zero.
"""

from __future__ import annotations

import struct

from swell.extract.flows.table import addr_pair

ETH_VLAN = (0x8100, 0x88A8, 0x9100)
ETH_MPLS = (0x8847, 0x8848)
IPV6_EXT = (0, 43, 44, 60)  # hop-by-hop, routing, fragment, destination options


class FrameKey:
    """What a frame section gives: addresses, ports, protocol, flags, IP length."""

    __slots__ = ("dst", "dport", "flags", "ip_len", "proto", "sport", "src")

    def __init__(self) -> None:
        self.src = self.dst = (0, 0)
        self.sport = self.dport = self.proto = self.flags = self.ip_len = 0


def parse_frame(b: bytes) -> FrameKey:
    key = FrameKey()
    p = _ethernet(b, 0)
    if p is None:
        return key
    off, kind = p
    if kind == 4 and len(b) >= off + 20:
        ihl = (b[off] & 15) * 4
        key.ip_len, key.proto = struct.unpack_from("!H", b, off + 2)[0], b[off + 9]
        key.src, key.dst = addr_pair(b[off + 12 : off + 16]), addr_pair(b[off + 16 : off + 20])
        frag = struct.unpack_from("!H", b, off + 6)[0] & 0x1FFF
        _l4(b, off + ihl if not frag else len(b), key)
    elif kind == 6 and len(b) >= off + 40:
        key.ip_len = struct.unpack_from("!H", b, off + 4)[0] + 40
        nxt = b[off + 6]
        key.src, key.dst = addr_pair(b[off + 8 : off + 24]), addr_pair(b[off + 24 : off + 40])
        off += 40
        while nxt in IPV6_EXT and len(b) >= off + 8:
            nxt, off = b[off], off + (8 if nxt == 44 else (b[off + 1] + 1) * 8)
        key.proto = nxt
        _l4(b, off, key)
    return key


def _ethernet(b: bytes, off: int) -> tuple[int, int] | None:
    """(offset of the IP header, 4 or 6) below an Ethernet header, or None."""
    for _ in range(4):  # Ethernet over MPLS nests one inner Ethernet header
        if len(b) < off + 14:
            return None
        etype, off = struct.unpack_from("!H", b, off + 12)[0], off + 14
        while etype in ETH_VLAN and len(b) >= off + 4:
            etype, off = struct.unpack_from("!H", b, off + 2)[0], off + 4
        if etype == 0x0800:
            return off, 4
        if etype == 0x86DD:
            return off, 6
        if etype not in ETH_MPLS:
            return None
        while len(b) >= off + 4:  # label stack down to the bottom-of-stack bit
            bottom, off = b[off + 2] & 1, off + 4
            if bottom:
                break
        if len(b) <= off:
            return None
        first = b[off] >> 4
        if first in (4, 6):
            return off, first
        if first == 0:  # pseudowire control word, then an inner Ethernet frame
            off += 4
            continue
        return None
    return None


def _l4(b: bytes, off: int, key: FrameKey) -> None:
    if key.proto in (6, 17, 132) and len(b) >= off + 4:
        key.sport, key.dport = struct.unpack_from("!HH", b, off)
    if key.proto == 6 and len(b) >= off + 14:
        key.flags = b[off + 13]
