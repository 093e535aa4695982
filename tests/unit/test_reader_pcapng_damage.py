"""pcapng damage: one bad block length costs one block, and what is lost is said.

The issue's case: ``data/pcap/example.pcap`` converted to pcapng (by ``editcap``,
the tool a user converts with) and one enhanced packet block's length set to
200000. The reader read 2,002 of 4,631 packets (the damaged block's one too) and
stopped; ``extract`` and ``energy`` said "0 packets not returned (corrupt_block 2)"
and the model stored ``skipped_packets: 0`` while 1.95 MB were left unread. It now
resyncs at the next plausible chain of blocks (``extract/native/src/resync.rs``) and
reads 4,630. When
no resync point exists, the bytes left unread are counted in the damage line and
the JSON (``unread_bytes``, ``lost_bytes``, an estimate of the packets in them).
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from swell.cli import main
from swell.extract.reader import open_bytes, open_trace

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
PACKETS = 4631


@pytest.fixture(scope="module")
def pcapng(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """example.pcap as editcap writes it in pcapng."""
    if shutil.which("editcap") is None:
        pytest.skip("editcap not installed (Debian package wireshark-common)")
    out = tmp_path_factory.mktemp("ng") / "example.pcapng"
    subprocess.run(["editcap", "-F", "pcapng", str(EXAMPLE), str(out)], check=True)
    return out.read_bytes()


def _blocks(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of every block of a little-endian pcapng."""
    out, off = [], 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        out.append((off, btype, blen))
        off += blen
    return out


def _epbs(data: bytes) -> list[tuple[int, int]]:
    return [(off, blen) for off, btype, blen in _blocks(data) if btype == 6]


def _read(data: bytes) -> tuple[int, dict]:
    with open_bytes(data, "t.pcapng") as tr:
        n = sum(len(c) for c in tr.chunks())
        return n, tr.damage.to_json()


def test_the_issues_case_costs_one_packet(pcapng: bytes, tmp_path: Path, capsys,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    monkeypatch.chdir(tmp_path)
    epbs = _epbs(pcapng)
    assert len(epbs) == PACKETS
    off, blen = epbs[2001]  # after 2,001 packets, as the audit's file
    bad = bytearray(pcapng)
    struct.pack_into("<I", bad, off + 4, 200_000)
    n, damage = _read(bytes(bad))
    assert n == PACKETS - 1
    assert damage["reasons"] == {"corrupt_block": 1, "corrupt_record": 1,
                                 "resync_skipped_bytes": blen}
    assert (damage["skipped_packets"], damage["lost_bytes"], damage["first_offset"]) == \
        (1, blen, off)
    path = tmp_path / "bad.pcapng"
    path.write_bytes(bytes(bad))
    line = (f"bad.pcapng: damaged capture: 1 packet not returned (corrupt_block 1, "
            f"corrupt_record 1, resync_skipped_bytes {blen:,}), {blen:,} bytes lost, first "
            f"at byte {off:,}")
    assert main(["extract", str(path), "-o", "m"]) == 0
    assert line in capsys.readouterr().err
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["provenance"]["reader"]["damage"]["skipped_packets"] == 1
    assert meta["provenance"]["reader"]["packets"] == PACKETS - 1
    assert main(["energy", str(path), "-o", "en"]) == 0
    assert line in capsys.readouterr().err
    stored = json.loads((tmp_path / "en" / "energy.json").read_text())["damage"]
    assert stored[str(path)]["lost_bytes"] == blen


def test_any_one_bad_block_length_costs_one_packet(pcapng: bytes) -> None:
    """Seeded: a leading length replaced anywhere (too long, too short, not a multiple
    of 4, past the end of the file, landing on a later block's boundary) loses that
    block's packet; a trailing length alone loses nothing."""
    data = pcapng[:300_000]
    epbs = [e for e in _epbs(data) if e[0] + e[1] <= len(data)]
    data = data[:epbs[-1][0] + epbs[-1][1]]  # whole blocks only
    total, clean = _read(data)
    assert total == len(epbs) and not clean["reasons"]
    rng = random.Random(18)
    for _ in range(40):
        k = rng.randrange(len(epbs) - 4)
        off, blen = epbs[k]
        bad = bytearray(data)
        landing = epbs[k + 2][0] - off  # ends on a real block boundary, two blocks on
        value = rng.choice([blen + 4, blen - 4, blen + 2, 8, 200_000, 1 << 24, landing,
                            len(data) - off + 4, rng.randrange(1 << 32)])
        struct.pack_into("<I", bad, off + 4, value)
        n, damage = _read(bytes(bad))
        assert (n, damage["skipped_packets"], damage["first_offset"]) == (total - 1, 1, off), \
            (off, value)
        assert damage["lost_bytes"] == blen and "unread_bytes" not in damage["reasons"]
    off, blen = epbs[10]
    bad = bytearray(data)
    struct.pack_into("<I", bad, off + blen - 4, blen + 8)
    n, damage = _read(bytes(bad))
    assert n == total and damage["reasons"] == {"corrupt_block": 1}


def test_unread_bytes_are_counted(tmp_path: Path, capsys,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged length with no resync point within 1 MiB (zeros follow): the reader
    stops, and the bytes it left are said and stored, with the packets they held
    estimated at the file's mean record size."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    data = EXAMPLE.read_bytes()
    off = 24
    for _ in range(1000):
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    bad = bytearray(data[:off]) + bytes(1_100_000) + data[off:]
    struct.pack_into("<I", bad, off + 8, 200_000)
    path = tmp_path / "stop.pcap"
    path.write_bytes(bytes(bad))
    with open_trace(path) as tr:
        assert sum(len(c) for c in tr.chunks()) == 1000
        damage = tr.damage.to_json()
    unread = len(bad) - off
    assert damage["reasons"] == {"corrupt_record": 1, "unread_bytes": unread}
    assert damage["lost_bytes"] == unread
    # unread bytes over the mean size of the records read (file header included)
    assert damage["unread_packets_estimate"] == int(unread / (off / 1000))
    assert main(["extract", str(path), "-o", str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert (f"{unread:,} bytes lost ({unread:,} unread at the end, about "
            f"{damage['unread_packets_estimate']:,} packets more)") in err, err
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert meta["provenance"]["reader"]["damage"]["lost_bytes"] == unread
