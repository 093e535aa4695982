"""Fixed-seed fuzzing of the commands' inputs: mutated real captures, experiment files.

Complements the reader's own fuzzers (``test_reader_fuzz.py``, the Rust
``tests/fuzz.rs``) at the level a user meets: every mutated capture must
either be read (what it lost counted as damage, with an offset inside the
file) or refused with a one-line :class:`SwellError`; never a crash. And the
property behind the resync: a record length damaged beyond the snap length,
anywhere in a real capture, costs exactly that one packet.

Counts (CI): ``CAPTURE_CASES`` mutated captures (classic pcap, and the same
captures as pcapng: ``_pcapng``) through the reader and ``EXTRACT_CASES`` of
them through ``swell extract``; ``LENGTH_CASES`` damaged lengths;
``YAML_CASES`` mutated experiment files through ``swell check``;
``COMPOSE_CASES`` mutated captures through ``swell trace compose``,
``REPLAY_CASES`` through tcpreplay's split and ``COMMAND_CASES`` through each of
``fit packets``, ``flows read``, ``harpoon extract`` and the trace reads of ``swell
gen upb|tpb|replay``.
``SWELL_FUZZ_SCALE=K`` multiplies them (by hand; docs/robustness.md has the
counts run).
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from swell.cli import main
from swell.errors import SwellError
from swell.extract.reader import open_bytes

ROOT = Path(__file__).resolve().parents[2]
PCAPS = sorted((ROOT / "data" / "pcap").glob("*.pcap"))
SCALE = max(1, int(os.environ.get("SWELL_FUZZ_SCALE", "1")))
CAPTURE_CASES = 300 * SCALE
EXTRACT_CASES = 20 * SCALE
LENGTH_CASES = 100 * SCALE
YAML_CASES = 100 * SCALE
COMPOSE_CASES = 100 * SCALE
REPLAY_CASES = 60 * SCALE
COMMAND_CASES = 10 * SCALE
SEED = 18


def _records(data: bytes) -> list[int]:
    """Offsets of the records of a classic little-endian pcap."""
    off, out = 24, []
    while off + 16 <= len(data):
        out.append(off)
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not b:
            break
        op = rng.randrange(5)
        if op == 0:  # bit flips
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # an interesting value in a length-like field
            i = rng.randrange(max(1, len(b) - 4))
            v = rng.choice([0, 1, 0xFFFF, 0x10000, 0x7FFFFFFF, 0xFFFFFFFF, 200000, 65535])
            b[i:i + 4] = struct.pack("<I", v)
        elif op == 2:  # truncation
            del b[rng.randrange(len(b)):]
        elif op == 3:  # a splice from elsewhere
            i, j = rng.randrange(len(b)), rng.randrange(len(b))
            b[i:i + 64] = b[j:j + 64]
        else:  # a deleted or duplicated run of bytes
            i = rng.randrange(len(b))
            n = rng.randint(1, 40)
            b[i:i] = b[i:i + n] if rng.random() < 0.5 else b""
            del b[i:i + (0 if rng.random() < 0.5 else n)]
    return bytes(b)


def _seeds(pcapng: bool = False) -> list[bytes]:
    """The first 24 KiB of each real capture (and, with ``pcapng``, each also as pcapng)."""
    out = [p.read_bytes()[:24 * 1024] for p in PCAPS]
    return out + [_pcapng(d) for d in out if d[:4] == bytes.fromhex("d4c3b2a1")] \
        if pcapng else out


def _pcapng(pcap: bytes) -> bytes:
    """A little-endian microsecond pcap as pcapng: section header, one interface of its
    link type and snap length, one enhanced packet block per whole record."""
    def block(btype: int, body: bytes) -> bytes:
        body += bytes(-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)

    snaplen, linktype = struct.unpack_from("<II", pcap, 16)
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", linktype, 0, snaplen))
    for off in _records(pcap):
        sec, usec, cap, wire = struct.unpack_from("<IIII", pcap, off)
        if off + 16 + cap > len(pcap):
            break
        ts = sec * 1_000_000 + usec
        out += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, cap, wire)
                     + pcap[off + 16: off + 16 + cap])
    return out


def test_mutated_captures_are_read_or_refused() -> None:
    rng = random.Random(SEED)
    seeds = _seeds(pcapng=True)
    outcomes = {"read": 0, "refused": 0, "damaged": 0}
    for _ in range(CAPTURE_CASES):
        data = _mutate(rng, rng.choice(seeds))
        try:
            tr = open_bytes(data, "fuzz")
        except SwellError as exc:
            assert "\n" not in exc.one_line()
            outcomes["refused"] += 1
            continue
        with tr:
            try:
                n = sum(len(c) for c in tr.chunks(max_packets=64))
            except SwellError:
                outcomes["refused"] += 1
                continue
            d = tr.damage
            assert n >= 0 and d.skipped_packets >= 0
            if d:
                outcomes["damaged"] += 1
                assert d.first_offset is not None and 0 <= d.first_offset <= len(data)
            outcomes["read"] += 1
    print(f"reader fuzz: {outcomes}")  # the counts docs/robustness.md gives (pytest -s)
    assert sum(outcomes.values()) - outcomes["damaged"] == CAPTURE_CASES
    assert outcomes["read"] and outcomes["refused"] and outcomes["damaged"], outcomes


def test_mutated_captures_through_extract(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    rng = random.Random(SEED + 1)
    seeds = _seeds()
    codes = []
    for i in range(EXTRACT_CASES):
        f = tmp_path / f"m{i}.pcap"
        f.write_bytes(_mutate(rng, rng.choice(seeds)))
        code = main(["extract", str(f), "-o", str(tmp_path / f"model{i}")])
        err = capsys.readouterr().err
        assert code in (0, 2), err
        assert "Traceback" not in err
        assert (tmp_path / f"model{i}" / "model.json").is_file() == (code == 0)
        codes.append(code)
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert 0 in codes


@pytest.mark.parametrize("path", PCAPS[:3], ids=lambda p: p.name)
def test_one_damaged_length_costs_one_packet(path: Path) -> None:
    data = path.read_bytes()[:256 * 1024]
    if data[:4] != bytes.fromhex("d4c3b2a1"):
        pytest.skip("not a little-endian microsecond pcap")
    recs = _records(data)
    with open_bytes(data) as tr:
        total = sum(len(c) for c in tr.chunks())
        base = tr.skipped  # the cut at 256 KiB may leave a truncated last record
    snaplen = struct.unpack_from("<I", data, 16)[0]
    rng = random.Random(SEED + 2)
    for _ in range(LENGTH_CASES // 3):
        k = rng.randrange(len(recs) - 6)  # a resync needs 4 whole records after it
        b = bytearray(data)
        bad = rng.randint(max(snaplen, 65535) + 1, 1 << 24)
        struct.pack_into("<I", b, recs[k] + 8, bad)
        with open_bytes(bytes(b)) as tr:
            n = sum(len(c) for c in tr.chunks())
            assert (n, tr.skipped, tr.damage.first_offset) == (total - 1, base + 1, recs[k]), k


def test_mutated_experiment_files(tmp_path: Path, capsys) -> None:
    text = (ROOT / "experiments" / "demo.yaml").read_text()
    rng = random.Random(SEED + 3)
    codes = {0: 0, 2: 0}
    for i in range(YAML_CASES):
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            j = rng.randrange(len(b))
            b[j] = rng.choice(b": -{}[]#\n0123456789xq\t\"'\xe9")
        f = tmp_path / f"e{i}.yaml"
        f.write_bytes(bytes(b).replace(b"../data", str(ROOT / "data").encode()))
        code = main(["check", str(f)])
        out = capsys.readouterr()
        assert code in (0, 2) and "Traceback" not in out.err, out.err
        if code == 2:
            line = out.err.strip()
            assert "\n" not in line and line.startswith("swell: ") and f"e{i}.yaml" in line
        codes[code] += 1
    assert codes[0] and codes[2], codes


def test_mutated_captures_through_compose(tmp_path: Path) -> None:
    """``swell trace compose`` keeps what the reader returns: every record the reader
    reads is composed or counted as dropped (not TCP/UDP over IP), none is lost at a
    damaged length (compose walked records itself once and stopped there); only a
    converted source (pcapng, through editcap, which stops at damage) may count
    packets as ``unconverted``; a capture it cannot use is a one-line refusal with
    nothing written."""
    from swell.extract.compose import build
    from swell.extract.reader import open_trace

    rng = random.Random(SEED + 4)
    seeds = _seeds()
    outcomes = {"composed": 0, "refused": 0, "damaged": 0}
    for i in range(COMPOSE_CASES):
        src = tmp_path / f"c{i}.pcap"
        src.write_bytes(_mutate(rng, rng.choice(seeds)))
        out = tmp_path / f"out{i}.pcap"
        try:
            with open_trace(src) as tr:
                n = sum(len(c) for c in tr.chunks())
                damaged = bool(tr.damage)
            info = build(out, [src], 1, float(1 << 31))
        except SwellError as exc:
            assert "\n" not in exc.one_line()
            assert not out.exists()
            outcomes["refused"] += 1
            continue
        s = info["sources"][0]
        assert s["packets"] + s["dropped"] + s["unconverted"] == n, (i, s, n)
        assert s["unconverted"] == 0 or src.read_bytes()[:4] != bytes.fromhex("d4c3b2a1")
        with open_trace(out) as tr:
            assert sum(len(c) for c in tr.chunks()) == s["packets"] and not tr.damage
        outcomes["composed"] += 1
        outcomes["damaged"] += damaged
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert outcomes["composed"] and outcomes["refused"] and outcomes["damaged"], outcomes


def test_mutated_captures_through_replay_split(tmp_path: Path) -> None:
    """tcpreplay's split copies the packets the reader returns from the file by their
    offsets (it compared dpkt's record count with the reader's and failed the run on
    any damage): every packet read is written (IPv4 TCP/UDP) or counted as dropped,
    at its time with its bytes; or the capture is refused in one line."""
    from swell.extract.reader import read_all
    from swell.generators.replay_split import split_trace

    rng = random.Random(SEED + 5)
    seeds = _seeds(pcapng=True)
    outcomes = {"split": 0, "refused": 0, "damaged": 0}
    for i in range(REPLAY_CASES):
        src = tmp_path / f"r{i}.cap"
        src.write_bytes(_mutate(rng, rng.choice(seeds)))
        try:
            pk = read_all(src)
            res = split_trace(src, tmp_path / f"s{i}")
        except SwellError as exc:
            assert "\n" not in exc.one_line()
            outcomes["refused"] += 1
            continue
        assert res.counts["c2s"] + res.counts["s2c"] + res.counts["dropped"] == len(pk), i
        written = read_all(res.c2s), read_all(res.s2c)
        assert sum(len(c) for c in written) == res.counts["c2s"] + res.counts["s2c"]
        sent = sorted(t for c in written for t in c.ts_ns.tolist())
        keep = (pk.ipver == 4) & ((pk.proto == 6) | (pk.proto == 17))
        assert sent == sorted(pk.ts_ns[keep].tolist()), i
        outcomes["split"] += 1
        outcomes["damaged"] += bool(res.damage)
    print(f"replay split fuzz: {outcomes}")
    # a refusal is a reader refusal (the corpus of test_bad_inputs_kinds has gen replay's);
    # what this test is for is the damaged traces split
    assert outcomes["split"] and outcomes["damaged"], outcomes


COMMANDS = {
    "fit packets": lambda src, out: ["fit", "packets", src, "-o", out, "--no-plots"],
    "flows read": lambda src, out: ["flows", "read", src, "-o", f"{out}.npz"],
    "harpoon extract": lambda src, out: ["harpoon", "extract", src, "-o", out],
}


def test_mutated_captures_through_the_other_commands(tmp_path: Path, capsys,
                                                     monkeypatch) -> None:
    """``fit packets``, ``flows read`` and ``harpoon extract`` on mutated captures: exit 0,
    or exit 2 with one line naming the capture (after any damage warning) and nothing
    written; the trace reads of ``swell gen`` (upb/tpb's schedule, replay's census) give
    a result or a one-line :class:`SwellError`."""
    from swell.generators.playback import trace_schedule
    from swell.generators.replay import trace_census

    monkeypatch.setenv("SWELL_QUIET", "1")
    rng = random.Random(SEED + 6)
    seeds = _seeds(pcapng=True)
    codes = {0: 0, 2: 0}
    for i in range(COMMAND_CASES):
        src = tmp_path / f"x{i}.cap"
        src.write_bytes(_mutate(rng, rng.choice(seeds)))
        for name, argv in COMMANDS.items():
            out = tmp_path / f"{name.split()[0]}{i}"
            code = main(argv(str(src), str(out)))
            err = capsys.readouterr().err
            assert code in (0, 2) and "Traceback" not in err, (name, i, err)
            if code == 2:
                lines = [ln for ln in err.splitlines() if not ln.startswith("swell: warning:")]
                assert len(lines) == 1 and lines[0].startswith("swell: "), (name, i, err)
                assert not out.exists() and not Path(f"{out}.npz").exists(), (name, i)
            codes[code] += 1
        for read in (lambda p: trace_schedule(p, "server"), trace_census):
            try:
                read(src)
            except SwellError as exc:
                assert "\n" not in exc.one_line()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    print(f"fit/flows/harpoon fuzz: exit codes {codes}")
    assert codes[0] and codes[2], codes
