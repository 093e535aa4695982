"""``swell trace compose`` (:mod:`swell.extract.compose`): many-user composites.

Read back with swell's own reader: every copy is a time-shifted image of its
source (same sizes, same inter-packet gaps, same flags), copies never share an
address, every copy lies whole inside the span, and the file is in time order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract.compose import build
from swell.extract.reader import read_all

REPO = Path(__file__).resolve().parents[2]

SRC = REPO / "data/pcap/example.pcap"


def test_copies_are_shifted_images_with_their_own_addresses(tmp_path: Path) -> None:
    copies, span = 3, 40.0
    info = build(tmp_path / "c.pcap", [SRC], copies, span, seed=3)
    src, out = read_all(SRC), read_all(tmp_path / "c.pcap")
    keep = (src.ipver == 4) & ((src.proto == 6) | (src.proto == 17))
    n = int(keep.sum())
    assert info["packets"] == len(out) == copies * n
    assert np.all(np.diff(out.ts_ns) >= 0)
    assert (out.ts_ns.max() - out.ts_ns.min()) / 1e9 < span

    # copy k = the packets whose addresses lie in 10.0.0.0 + (k << 12) + [0, 4096)
    s_lo = np.asarray(src.saddr_lo[keep], np.int64) & 0xFFFFFFFF
    table = np.unique(np.r_[s_lo, np.asarray(src.daddr_lo[keep], np.int64) & 0xFFFFFFFF])
    o_lo = np.asarray(out.saddr_lo, np.int64) & 0xFFFFFFFF
    o_dst = np.asarray(out.daddr_lo, np.int64) & 0xFFFFFFFF
    for k in range(1, copies + 1):
        m = (o_lo >> 12) == (10 << 12) + k
        assert m.sum() == n, f"copy {k}: {m.sum()} packets, source has {n}"
        assert np.all((o_dst[m] >> 12) == (10 << 12) + k), "a copy talks to another copy"
        # one to one: the source's address table, renumbered in order
        assert np.array_equal(table[o_lo[m] & 0xFFF], s_lo)
        # same sizes, flags and gaps as the source, shifted as a whole
        assert np.array_equal(out.wirelen[m], src.wirelen[keep])
        assert np.array_equal(out.tcp_flags[m], src.tcp_flags[keep])
        gaps_o = np.diff(out.ts_ns[m])
        gaps_s = np.diff(np.asarray(src.ts_ns[keep], np.int64))
        assert np.abs(gaps_o - gaps_s).max() < 1000  # microsecond records


def test_same_seed_same_file_and_span_checked(tmp_path: Path) -> None:
    a = build(tmp_path / "a.pcap", [SRC], 2, 30.0, seed=5)
    b = build(tmp_path / "b.pcap", [SRC], 2, 30.0, seed=5)
    assert a["packets"] == b["packets"]
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()
    build(tmp_path / "c.pcap", [SRC], 2, 30.0, seed=6)
    assert (tmp_path / "a.pcap").read_bytes() != (tmp_path / "c.pcap").read_bytes()
    with pytest.raises(SwellError, match="not shorter than the span"):
        build(tmp_path / "d.pcap", [SRC], 2, 10.0)
    assert not (tmp_path / "d.pcap").exists()


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"not a capture at all", "editcap cannot convert"),
])
def test_bad_sources_are_one_line_errors(tmp_path: Path, content, message) -> None:
    src = tmp_path / "src.pcap"
    if content is not None:
        src.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "swell", "trace", "compose",
                           str(tmp_path / "out.pcap"), str(src)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == ([src] if content is not None else [])


def test_cli_writes_a_composite(tmp_path: Path) -> None:
    out = tmp_path / "lan.pcap"
    proc = subprocess.run([sys.executable, "-m", "swell", "trace", "compose", str(out),
                           str(SRC), "--copies", "2", "--span", "30"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "9,262 packets over 30 s" in proc.stdout
    assert len(read_all(out)) == 9262


def test_a_cut_last_record_is_left_out(tmp_path: Path) -> None:
    raw = SRC.read_bytes()
    whole = build(tmp_path / "a.pcap", [SRC], 1, 30.0)["packets"]
    (tmp_path / "cut.pcap").write_bytes(raw[:-10])  # the last record loses 10 bytes
    assert build(tmp_path / "b.pcap", [tmp_path / "cut.pcap"], 1, 30.0)["packets"] == whole - 1
    (tmp_path / "tail.pcap").write_bytes(raw + raw[24:30])  # a partial header after the end
    assert build(tmp_path / "c.pcap", [tmp_path / "tail.pcap"], 1, 30.0)["packets"] == whole
