"""``swell trace compose`` keeps IPv6 packets: each copy of an IPv6 capture is a
time-shifted image with its own addresses under ``fd00::/96``, beside IPv4 copies."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from swell.extract.compose import build
from swell.extract.reader import addr_to_str, read_all

REPO = Path(__file__).resolve().parents[2]
V4 = REPO / "data/pcap/example.pcap"
V6 = REPO.parent / "shared/data/pcap/ndpi/pinterest.pcap"


def _v6_source() -> Path:
    if not V6.exists():
        pytest.skip(f"{V6} not present (shared data, LGPL: not copied into the project)")
    return V6


def _addr128(hi: np.ndarray, lo: np.ndarray) -> list[int]:
    return [(int(h) << 64) | int(x) for h, x in zip(hi, lo, strict=True)]


def test_ipv6_copies_are_shifted_images_with_their_own_addresses(tmp_path: Path) -> None:
    src_path, copies = _v6_source(), 3
    info = build(tmp_path / "c.pcap", [src_path], copies, 40.0, seed=2)
    src, out = read_all(src_path), read_all(tmp_path / "c.pcap")
    keep = (src.ipver == 6) & ((src.proto == 6) | (src.proto == 17))
    n = int(keep.sum())
    assert n > 0 and info["packets"] == len(out) == copies * n
    assert info["sources"][0]["ipv6_packets"] == n
    assert np.all(out.ipver == 6) and np.all(np.diff(out.ts_ns) >= 0)
    s_addr = np.array(_addr128(src.saddr_hi[keep], src.saddr_lo[keep]), dtype=object)
    table = sorted(set(s_addr) | set(_addr128(src.daddr_hi[keep], src.daddr_lo[keep])))
    o_src = np.array(_addr128(out.saddr_hi, out.saddr_lo), dtype=object)
    o_dst = np.array(_addr128(out.daddr_hi, out.daddr_lo), dtype=object)
    prefix = 0xFD00 << 112
    assert all(a >> 32 == prefix >> 32 for a in o_src) and all(a >> 32 == prefix >> 32
                                                               for a in o_dst)
    low_src = np.array([a & 0xFFFFFFFF for a in o_src])
    low_dst = np.array([a & 0xFFFFFFFF for a in o_dst])
    for k in range(1, copies + 1):
        m = (low_src >> 12) == k
        assert m.sum() == n, f"copy {k}: {m.sum()} packets, source has {n}"
        assert np.all((low_dst[m] >> 12) == k), "a copy talks to another copy"
        # one to one: the source's address table, renumbered in order
        assert [table[i] for i in (low_src[m] & 0xFFF)] == list(s_addr)
        assert np.array_equal(out.wirelen[m], src.wirelen[keep])
        assert np.array_equal(out.tcp_flags[m], src.tcp_flags[keep])
        assert np.array_equal(out.seq[m], src.seq[keep])
        gaps_o = np.diff(out.ts_ns[m])
        gaps_s = np.diff(np.asarray(src.ts_ns[keep], np.int64))
        assert np.abs(gaps_o - gaps_s).max() < 1000  # microsecond records
    assert addr_to_str(int(out.saddr_hi[0]), int(out.saddr_lo[0])).startswith("fd00::")


def test_mixed_families_keep_both(tmp_path: Path) -> None:
    info = build(tmp_path / "m.pcap", [V4, _v6_source()], 2, 60.0, seed=4)
    out = read_all(tmp_path / "m.pcap")
    v4_n = info["sources"][0]["packets"]
    v6_n = info["sources"][1]["packets"]
    assert info["sources"][0]["ipv6_packets"] == 0 and info["sources"][1]["ipv6_packets"] == v6_n
    assert int((out.ipver == 4).sum()) == 2 * v4_n and int((out.ipver == 6).sum()) == 2 * v6_n
    # copy ids are unique across sources: the IPv6 source's copies are 3 and 4
    v6 = out.ipver == 6
    ids = np.unique((np.asarray(out.saddr_lo[v6], np.int64) & 0xFFFFFFFF) >> 12)
    assert ids.tolist() == [3, 4]
    ids4 = np.unique(((np.asarray(out.saddr_lo[~v6], np.int64) & 0xFFFFFFFF) >> 12) & 0xFFF)
    assert ids4.tolist() == [1, 2]


def test_a_model_extracted_from_an_ipv6_composite(tmp_path: Path) -> None:
    """The composite of an IPv6 capture fits a Swing model with one user per copy."""
    from swell.extract.pipeline import extract_model

    build(tmp_path / "c.pcap", [_v6_source()], 4, 60.0, seed=1)
    one = extract_model(_v6_source(), label="test")
    four = extract_model(tmp_path / "c.pcap", label="test")
    n1 = sum(a["connections"] for a in one.meta["apps"].values())
    n4 = sum(a["connections"] for a in four.meta["apps"].values())
    assert n4 == 4 * n1
