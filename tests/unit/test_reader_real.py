"""Trace reader on real captures, checked against tshark and capinfos.

For every bundled capture (``data/pcap``) and every shared one
(``../shared/data/pcap/**``, pcap and pcapng), the reader's packet count,
wire and captured bytes, first/last timestamps, IPv4/IPv6 and TCP/UDP/ICMP
counts, SYN and SYN/ACK counts and summed TCP payload bytes must equal what
Wireshark's dissectors report. Only the outermost IP and transport headers
are compared (tshark also lists headers quoted inside ICMP errors; the
reader, like a flow meter, does not count those as TCP).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest

from swell.extract.reader import open_trace, read_all

REPO = Path(__file__).resolve().parents[2]
BUNDLED = sorted((REPO / "data" / "pcap").glob("*.pcap*"))
SHARED = Path(os.environ.get("SWELL_SHARED_DATA", REPO.parent / "shared" / "data"))

needs_tshark = pytest.mark.skipif(
    subprocess.run(["which", "tshark"], capture_output=True).returncode != 0,
    reason="tshark not installed",
)


def _outer(protocols: str) -> tuple[str, str]:
    """Outermost IP layer and the transport right after it, from frame.protocols."""
    l3 = l4 = ""
    for p in protocols.split(":"):
        if not l3 and p in ("ip", "ipv6"):
            l3 = p
        elif l3 and p in ("tcp", "udp", "icmp", "icmpv6"):
            l4 = p
            break
    return l3, l4


_TSHARK: dict[str, dict[str, int]] = {}


def _tshark_counts(path: Path) -> dict[str, int]:
    """Reference counts, once per distinct file content."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest not in _TSHARK:
        _TSHARK[digest] = _run_tshark(path)
    return _TSHARK[digest]


def _run_tshark(path: Path) -> dict[str, int]:
    fields = ["frame.len", "frame.cap_len", "frame.protocols", "tcp.flags", "tcp.len"]
    argv = ["tshark", "-n", "-r", str(path), "-T", "fields", "-E", "occurrence=f"]
    for f in fields:
        argv += ["-e", f]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    c = dict.fromkeys(
        [
            "packets",
            "wire",
            "cap",
            "v4",
            "v6",
            "tcp",
            "udp",
            "icmp",
            "syn",
            "synack",
            "tcp_payload",
        ],
        0,
    )
    for line in out.splitlines():
        wire, cap, protos, flags, tcplen = line.split("\t")
        l3, l4 = _outer(protos)
        c["packets"] += 1
        c["wire"] += int(wire)
        c["cap"] += int(cap)
        c["v4"] += l3 == "ip"
        c["v6"] += l3 == "ipv6"
        c["udp"] += l4 == "udp"
        c["icmp"] += l4 in ("icmp", "icmpv6")
        if l4 == "tcp":
            c["tcp"] += 1
            c["tcp_payload"] += int(tcplen)
            f = int(flags, 16) & 0x12
            c["syn"] += f == 0x02
            c["synack"] += f == 0x12
    return c


def _capinfos(path: Path) -> tuple[int, int, int, int]:
    out = subprocess.run(
        ["capinfos", "-T", "-M", "-r", "-c", "-d", "-a", "-e", "-S", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    _, n, size, first, last = out.split("\t")
    ns = [int(Decimal(t) * 10**9) for t in (first, last)]
    return int(n), int(size), ns[0], ns[1]


def _ours(path: Path) -> dict[str, int]:
    c = read_all(path)
    tcp = (c.proto == 6) & c.l4_ok & (c.ipver != 0)
    flags = c.tcp_flags & 0x12
    return {
        "packets": len(c),
        "wire": int(c.wirelen.sum()),
        "cap": int(c.caplen.sum()),
        "v4": int((c.ipver == 4).sum()),
        "v6": int((c.ipver == 6).sum()),
        "tcp": int(tcp.sum()),
        "udp": int(((c.proto == 17) & c.l4_ok & (c.ipver != 0)).sum()),
        "icmp": int(((c.proto == 1) | (c.proto == 58)).sum()),
        "syn": int((tcp & (flags == 0x02)).sum()),
        "synack": int((tcp & (flags == 0x12)).sum()),
        "tcp_payload": int(c.payload_len[tcp].sum()),
    }


def _check(path: Path) -> list[str]:
    ref = _tshark_counts(path)
    ours = _ours(path)
    bad = [f"{path.name} {k}: swell {ours[k]} tshark {ref[k]}" for k in ref if ours[k] != ref[k]]
    n, size, first, last = _capinfos(path)
    with open_trace(path) as tr:
        for _ in tr.chunks():
            pass
        info = tr.info
    got = (info.packets, info.bytes, info.first_ts_ns, info.last_ts_ns)
    if got != (n, size, first, last):
        bad.append(f"{path.name} capinfos {(n, size, first, last)} swell {got}")
    return bad


@needs_tshark
@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_bundled_capture_matches_tshark(path: Path) -> None:
    assert _check(path) == []


@needs_tshark
def test_every_shared_capture_matches_tshark(shared_data: Path) -> None:
    files = sorted(p for p in (shared_data / "pcap").rglob("*") if p.suffix in (".pcap", ".pcapng"))
    assert len(files) >= 10
    bad = [line for f in files for line in _check(f)]
    assert bad == []


def test_bundled_captures_exist() -> None:
    assert len(BUNDLED) >= 5, "data/pcap should hold the bundled captures"
