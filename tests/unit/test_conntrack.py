"""The native connection tracker against the numpy reference (``ConnectionBuilder``).

Both implementations run on every bundled and shared capture, on the crafted traces
of ``test_extract_crafted.py`` (IPv4, IPv6, SLL, pcapng, a years-long time jump, one
direction only, UDP flows) and on random synthetic chunks (duplicates, idle splits,
new ISNs, sequence wrap, backwards timestamps, non-IP and fragments), each with several
chunk sizes; every column of the ``ConnTable``, its pairs, statistics, host table and
packet-pair histogram must be identical, and so must the models ``swell extract`` fits.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from swell.extract.connections import ConnectionBuilder, ConnTable
from swell.extract.conntrack import NativeTracker, _columns
from swell.extract.pipeline import extract_model
from swell.extract.reader import COLUMNS, PacketChunk, open_trace

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "pcap" / "example.pcap"
# the crafted traces of the extraction tests (loaded by path: tests are no package)
_spec = importlib.util.spec_from_file_location(
    "_swell_crafted", Path(__file__).with_name("test_extract_crafted.py")
)
assert _spec and _spec.loader
_crafted_mod = sys.modules.setdefault("_swell_crafted", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(_crafted_mod)
SERVER, Crafter, scenario = _crafted_mod.SERVER, _crafted_mod.Crafter, _crafted_mod.scenario
CHUNKS = (7, 1000, 1 << 18)


def _build(chunks: Any, engine: str) -> tuple[ConnTable, dict[int, int]]:
    b = ConnectionBuilder(engine=engine)
    for ch in chunks:
        b.add(ch)
    return b.finish(), b.pair_hist


def _differences(a: ConnTable, b: ConnTable) -> list[str]:
    bad = [k for k in ("t0_ns", "hosts", "stats") if getattr(a, k) != getattr(b, k)]
    for part in ("cols", "pairs"):
        x, y = getattr(a, part), getattr(b, part)
        if x.keys() != y.keys():
            bad.append(f"{part} keys")
            continue
        for k in x:
            u, v = x[k], y[k]
            nan = u.dtype.kind == "f"
            if u.dtype != v.dtype or not np.array_equal(u, v, equal_nan=nan):
                bad.append(f"{part}.{k}")
    return bad


def _build_read(path: Path, chunk: int, engine: str) -> tuple[ConnTable, dict[int, int]]:
    """As ``_build``, reading with ``add_trace`` (natively: no columns in between)."""
    b = ConnectionBuilder(engine=engine)
    with open_trace(path) as tr:
        while b.add_trace(tr, chunk):
            pass
    return b.finish(), b.pair_hist


def _assert_same_file(path: Path) -> None:
    for chunk in CHUNKS:
        with open_trace(path) as tr:
            ref, href = _build(tr.chunks(chunk), "numpy")
        with open_trace(path) as tr:
            nat, hnat = _build(tr.chunks(chunk), "native")
        bad = _differences(ref, nat) + (["pair_hist"] if href != hnat else [])
        assert not bad, f"{path.name} chunk {chunk}: native differs in {bad}"
        rd, hrd = _build_read(path, chunk, "native")
        bad = _differences(ref, rd) + (["pair_hist"] if href != hrd else [])
        assert not bad, f"{path.name} chunk {chunk}: native read path differs in {bad}"


def _captures(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".pcap", ".pcapng", ".cap"))


def test_bundled_captures() -> None:
    files = _captures(REPO / "data" / "pcap")
    assert files
    for f in files:
        _assert_same_file(f)


def test_shared_captures(shared_data: Path) -> None:
    files = _captures(shared_data / "pcap")
    assert files
    for f in files:
        _assert_same_file(f)


def _crafted(kind: str, tmp: Path) -> Path:
    if kind == "udp":
        pkts = []
        for start in (0.0, 1.0, 2.0, 200.0):
            for src, dst, sport, dport, size, dt in (
                ("10.0.0.9", "10.0.1.53", 5354, 53, 40, 0.0),
                ("10.0.1.53", "10.0.0.9", 53, 5354, 120, 0.03),
            ):
                p = Ether() / IP(src=src, dst=dst) / UDP(sport=sport, dport=dport) / (b"q" * size)
                p.time = 1_600_000_000.0 + start + dt
                pkts.append(p)
        wrpcap(str(tmp / "udp.pcap"), pkts)
        return tmp / "udp.pcap"
    cr = Crafter(v6=kind == "ipv6", sll=kind == "sll")
    scenario(cr, v6=kind == "ipv6")
    if kind == "jump":
        for p in cr.pkts[len(cr.pkts) // 2 :]:
            p.time = float(p.time) + 3 * 365 * 86400.0
    if kind == "oneway":
        cr.pkts = [p for p in cr.pkts if p[IP].src != SERVER]
    return cr.write(tmp / f"{kind}.pcap", pcapng=kind == "pcapng")


KINDS = ("ipv4", "ipv6", "sll", "pcapng", "jump", "oneway", "udp")


@pytest.mark.parametrize("kind", KINDS)
def test_crafted_traces(kind: str, tmp_path: Path) -> None:
    _assert_same_file(_crafted(kind, tmp_path))


def _random_chunk(rng: np.random.Generator, n: int) -> PacketChunk:
    """Packets among a few hosts and ports with adversarial flags, times and sequences."""
    ch = PacketChunk.empty(n)
    nh, npo = int(rng.integers(2, 5)), int(rng.integers(2, 7))
    lo = (np.uint64(0xFFFF) << np.uint64(32)) + np.arange(1, nh + 1, dtype=np.uint64)
    s = rng.integers(0, nh, n)
    d = (s + rng.integers(1, nh, n)) % nh
    ch.saddr_lo[:], ch.daddr_lo[:] = lo[s], lo[d]
    ports = np.array([80, 443, 53, 40000, 40001, 5000], dtype=np.uint16)
    ch.sport[:], ch.dport[:] = ports[rng.integers(0, npo, n)], ports[rng.integers(0, npo, n)]
    steps = [0, 1000, 100_000, 300_000, 10**9, 61 * 10**9, 700 * 10**9]
    ch.ts_ns[:] = np.cumsum(rng.choice(steps, n, p=[0.1, 0.3, 0.2, 0.2, 0.15, 0.04, 0.01]))
    ch.ts_ns[rng.random(n) < 0.02] -= 10**6
    ch.ipver[:] = rng.choice([0, 4, 6], n, p=[0.02, 0.9, 0.08])
    ch.proto[:] = rng.choice([6, 17, 1], n, p=[0.8, 0.15, 0.05])
    ch.frag[:] = rng.choice([0, 4], n, p=[0.98, 0.02])
    ch.l4_ok[:] = rng.random(n) > 0.02
    flags = [2, 18, 16, 24, 17, 4, 20, 25, 3]
    fp = [0.08, 0.06, 0.5, 0.2, 0.06, 0.03, 0.03, 0.02, 0.02]
    ch.tcp_flags[:] = rng.choice(flags, n, p=fp)
    ch.seq[:] = (rng.choice([1000, 2**32 - 3000, 50000], n) + rng.integers(0, 6000, n)) % 2**32
    ch.ack[:] = (rng.choice([1000, 2**32 - 100, 50000], n) + rng.integers(0, 6000, n)) % 2**32
    pl = rng.choice([0, 1, 100, 500, 1460], n, p=[0.4, 0.05, 0.2, 0.1, 0.25])
    ch.payload_len[:], ch.ip_len[:], ch.wirelen[:] = pl, pl + 40, pl + 54
    rep = np.flatnonzero(rng.random(n) < 0.05)
    rep = rep[rep + 1 < n]
    for name, _ in COLUMNS:  # capture duplicates: a packet repeated at once
        if name != "ts_ns":
            getattr(ch, name)[rep + 1] = getattr(ch, name)[rep]
    return ch


def _pieces(ch: PacketChunk, sizes: list[int]) -> list[PacketChunk]:
    out, i, k = [], 0, 0
    while i < len(ch):
        out.append(ch.select(slice(i, i + sizes[k % len(sizes)])))
        i += sizes[k % len(sizes)]
        k += 1
    return out


def test_random_chunks() -> None:
    for seed in range(40):
        rng = np.random.default_rng(seed)
        ch = _random_chunk(rng, int(rng.integers(1, 3000)))
        parts = _pieces(ch, [int(x) for x in rng.integers(1, 400, 5)])
        ref, href = _build(parts, "numpy")
        nat, hnat = _build(parts, "native")
        bad = _differences(ref, nat) + (["pair_hist"] if href != hnat else [])
        assert not bad, f"seed {seed}: native differs in {bad}"
        if seed == 0:  # the generator exercises what it should
            assert ref.stats["duplicates"] > 0 and ref.cols["retx_c2s"].sum() > 0
            assert ref.cols["acked_c2s"].sum() > 0 and len(ref.pairs["conn"]) > 0


def test_engine_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWELL_CONNTRACK", raising=False)
    assert ConnectionBuilder().engine == "native"
    monkeypatch.setenv("SWELL_CONNTRACK", "numpy")
    assert ConnectionBuilder().engine == "numpy"
    with pytest.raises(ValueError):
        ConnectionBuilder(engine="fast")


@pytest.mark.parametrize("kind", ["ipv4", "oneway", "udp", "tls2", "netml"])
def test_models_identical(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = {"tls2": "tls2.pcap", "netml": "netml_demo.pcap"}
    path = REPO / "data" / "pcap" / real[kind] if kind in real else _crafted(kind, tmp_path)
    models = {}
    for engine in ("numpy", "native"):
        monkeypatch.setenv("SWELL_CONNTRACK", engine)
        models[engine] = extract_model(path)
    a, b = models["numpy"], models["native"]
    a.meta.pop("created_utc", None), b.meta.pop("created_utc", None)
    assert a.meta == b.meta
    assert a.arrays.keys() == b.arrays.keys()
    for k, v in a.arrays.items():
        assert np.array_equal(v, b.arrays[k], equal_nan=v.dtype.kind == "f"), k


def test_native_errors_surface() -> None:
    class Broken:  # a chunk without columns: its columns are taken in the caller's thread
        def __len__(self) -> int:
            return 3

    b = ConnectionBuilder(engine="native")
    with pytest.raises(AttributeError):
        b.add(Broken())
    # an error of the worker thread surfaces at the next call
    t = NativeTracker(1, 1)
    with open_trace(EXAMPLE) as tr:
        chunk = next(tr.chunks(100))
    cols, cc = _columns(chunk)
    t._lib.swell_ct_prepare(t._preps[0], cc, len(chunk))
    t._pending = t._pool.submit(t._add_prepared, cols, cc, t._preps[0], len(chunk) - 1)
    with pytest.raises(RuntimeError, match="not this chunk"):
        t.sizes()
    with pytest.raises(ValueError):
        t.pairs(np.zeros(5, dtype=np.int64), 0)  # no connections, five directions
