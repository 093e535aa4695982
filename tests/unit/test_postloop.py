"""The end of extraction (after the read loop): faster steps, the same results.

``finish`` returns a :class:`~swell.extract.conntypes.PendingTable` with the native
tracker (its pairs still being computed) and the model fit starts on the other
columns meanwhile; host texts are formatted by numpy; RRE grouping sorts with one
integer sort; the network estimates and the application summaries avoid sorts. Each
is checked here against the straightforward computation it replaces (kept below as
the reference), on random inputs with ties and on bundled captures; the models must
not change (``test_conntrack.py`` compares both engines' tables and models).
"""

from __future__ import annotations

import pickle
import random
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from swell.extract import network
from swell.extract.connections import UDP, ConnectionBuilder, ConnTable, GrowArrays
from swell.extract.conntable import client_dir, host_texts
from swell.extract.conntypes import KNOWN_PORTS, PendingTable, addr_text
from swell.extract.model import fit_model
from swell.extract.reader import open_trace
from swell.extract.sessions import (
    Thresholds,
    _app_index,
    _sort_order,
    app_codes,
    app_parameters,
    group,
    ready_cols,
)

REPO = Path(__file__).resolve().parents[2]
CAPTURES = sorted((REPO / "data" / "pcap").glob("*.pcap*"))


def _table(path: Path, engine: str = "native") -> tuple[ConnTable, dict[int, int]]:
    b = ConnectionBuilder(engine=engine)
    with open_trace(path) as tr:
        while b.add_trace(tr, 1000):
            pass
    return b.finish(), b.pair_hist


# -- references: the code these steps replaced ------------------------------------------------
def _ref_client_dir(c: GrowArrays) -> tuple[np.ndarray, np.ndarray]:
    syn_dir, sa_dir = c.view("syn_dir").astype(np.int64), c.view("synack_dir").astype(np.int64)
    proto = c.view("proto").astype(np.int64)
    p_lo, p_hi = c.view("ep_lo") & 0xFFFF, c.view("ep_hi") & 0xFFFF
    k_lo, k_hi = KNOWN_PORTS[proto, p_lo], KNOWN_PORTS[proto, p_hi]
    by_port = np.where(k_lo & ~k_hi, 1, np.where(k_hi & ~k_lo, 0, (p_lo < p_hi).astype(np.int64)))
    udp_guess = np.where(k_lo != k_hi, by_port, c.view("first_dir").astype(np.int64))
    guess = np.where(proto == UDP, udp_guess, by_port)
    cdir = np.where(syn_dir >= 0, syn_dir, np.where(sa_dir >= 0, 1 - sa_dir, guess))
    return cdir, (syn_dir < 0) & (sa_dir < 0)


def _ref_median_by(ids: np.ndarray, vals: np.ndarray, hosts: np.ndarray) -> np.ndarray:
    ok = ~np.isnan(vals)
    ids, vals = ids[ok], vals[ok]
    out = np.full(len(hosts), np.nan)
    if len(ids) == 0:
        return out
    o = np.lexsort((vals, ids))
    ids, vals = ids[o], vals[o]
    u, first, cnt = np.unique(ids, return_index=True, return_counts=True)
    out[np.searchsorted(hosts, u)] = (vals[first + (cnt - 1) // 2] + vals[first + cnt // 2]) / 2
    return out


def _ref_loss_by(ids: Any, retx: Any, data: Any, hosts: Any, min_segments: int) -> np.ndarray:
    pos = np.searchsorted(hosts, ids)
    r = np.bincount(pos, weights=retx, minlength=len(hosts))
    d = np.bincount(pos, weights=data, minlength=len(hosts))
    return np.where(d >= max(min_segments, 1), r / np.maximum(d, 1), np.nan)


def _ref_host_modes(pair_hist: dict[int, int]) -> tuple[np.ndarray, ...]:
    codes = np.array(list(pair_hist.keys()), dtype=np.int64)
    counts = np.array(list(pair_hist.values()), dtype=np.int64)
    host, b = codes // network.CAP_NBINS, codes % network.CAP_NBINS
    o = np.lexsort((-counts, host))
    host, b, counts = host[o], b[o], counts[o]
    first = np.ones(len(host), dtype=bool)
    first[1:] = host[1:] != host[:-1]
    total = np.add.reduceat(counts, np.flatnonzero(first))
    cap = 10 ** (network.CAP_LOG_MIN + (b[first] + 0.5) / network.CAP_BINS_PER_DECADE)
    return host[first], cap, total


def _ref_summary(c: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, int]:
    ports, counts = np.unique(c["sport"][rows], return_counts=True)
    return {
        "server_port": int(ports[np.argmax(counts)]),
        "connections": len(rows),
        "lower_bound_connections": int(c["lower_bound"][rows].sum()),
        "client_inferred_connections": int(c["client_inferred"][rows].sum()),
        "one_way_connections": int(c["one_way"][rows].sum()),
        "bytes_c2s": int(c["new_bytes_c2s"][rows].sum() + c["acked_c2s"][rows].sum()),
        "bytes_s2c": int(c["new_bytes_s2c"][rows].sum() + c["acked_s2c"][rows].sum()),
        "wire_bytes_c2s": int(c["wire_c2s"][rows].sum()),
        "wire_bytes_s2c": int(c["wire_s2c"][rows].sum()),
        "clients": len(np.unique(c["client"][rows])),
        "servers": len(np.unique(c["server"][rows])),
    }


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


# -- the pending table -------------------------------------------------------------------------
def test_pending_table_waits_only_for_pair_columns() -> None:
    t, _ = _table(CAPTURES[0])
    ref, _ = _table(CAPTURES[0], engine="numpy")
    assert isinstance(t, PendingTable) and not isinstance(ref, PendingTable)
    early = ready_cols(t)
    assert "num_pairs" not in early and len(t) == len(ref)  # nothing read the pairs yet
    assert _same(early["proto"], ref.cols["proto"])
    assert set(t.cols) == set(ref.cols) and "num_pairs" in early  # now complete
    for part in ("cols", "pairs"):
        x, y = getattr(t, part), getattr(ref, part)
        assert all(_same(x[k], y[k]) for k in y), part
    plain = pickle.loads(pickle.dumps(t))
    assert type(plain) is ConnTable and _same(plain.pairs["conn"], ref.pairs["conn"])


def test_pending_table_reraises_the_workers_error() -> None:
    fut: Future[dict[str, np.ndarray]] = Future()
    fut.set_exception(RuntimeError("native pairs failed"))
    t = PendingTable(0, [], {"proto": np.zeros(3, dtype=np.int64)}, {}, fut)
    assert len(t) == 3 and set(t.ready_cols()) == {"proto"}
    for _ in range(2):
        with pytest.raises(RuntimeError, match="native pairs failed"):
            t.pairs  # noqa: B018
    with pytest.raises(RuntimeError):
        t.cols  # noqa: B018


@pytest.mark.parametrize("path", CAPTURES[:4], ids=lambda p: p.name)
def test_fit_on_pending_table_equals_fit_on_plain_table(path: Path) -> None:
    t, hist = _table(path)
    plain = pickle.loads(pickle.dumps(t))  # waits, then a complete ConnTable
    t2, _ = _table(path)  # fresh: pairs possibly still pending while the fit starts
    a = fit_model(t2, hist, Thresholds(), {})
    b = fit_model(plain, hist, Thresholds(), {})
    for m in (a, b):
        m.meta.pop("created_utc")
    assert a.meta == b.meta and a.arrays.keys() == b.arrays.keys()
    assert all(_same(a.arrays[k], b.arrays[k]) for k in a.arrays)


# -- client direction, host texts, sorting, application index ---------------------------------
def test_client_dir_matches_reference() -> None:
    rng = np.random.default_rng(9)
    n = 5000
    ports = np.array([20, 22, 53, 80, 123, 443, 1024, 5353, 40000, 65535])
    conn = GrowArrays(
        {"syn_dir": np.int8, "synack_dir": np.int8, "first_dir": np.int8, "proto": np.uint8,
         "ep_lo": np.int64, "ep_hi": np.int64}
    )  # fmt: skip
    conn.extend(n)
    for k in ("syn_dir", "synack_dir"):
        conn[k][:n] = rng.integers(-1, 2, n)
    conn["first_dir"][:n] = rng.integers(0, 2, n)
    conn["proto"][:n] = rng.choice([6, 17], n)
    for k in ("ep_lo", "ep_hi"):
        conn[k][:n] = rng.integers(0, 1 << 20, n) << 16 | rng.choice(ports, n)
    b: Any = type("B", (), {"conn": conn})()
    (cdir, inferred), (rd, ri) = client_dir(b), _ref_client_dir(conn)
    assert _same(cdir, rd) and _same(inferred, ri)


def test_host_texts_match_addr_text() -> None:
    rnd = random.Random(7)
    v4 = [0, 255, 0xFFFFFFFF, 0x0A000001, 0x01020304, 0x64000A09]
    addr = [(0, (0xFFFF << 32) | rnd.choice(v4 + [rnd.getrandbits(32)])) for _ in range(3000)]
    addr += [(rnd.getrandbits(64), rnd.getrandbits(64)) for _ in range(40)]
    addr += [(0, 0), (0, 1), (0, 0xFFFF << 32), (1, (0xFFFF << 32) | 5), (0, 0xFFFE << 32)]
    rnd.shuffle(addr)
    assert host_texts(addr) == [addr_text(hi, lo) for hi, lo in addr]
    assert host_texts([]) == []


def test_sort_order_is_lexsort() -> None:
    rng = np.random.default_rng(11)
    for trial in range(600):
        n = int(rng.integers(0, 80))
        key = rng.integers(0, 6, n) * 9 + rng.integers(0, 9, n)
        x = rng.integers(-4, 5, n) * 0.25  # many ties
        if trial % 3 == 0:
            x[rng.random(n) < 0.3] = -0.0
        if trial % 7 == 0:
            x[rng.random(n) < 0.2] = np.nan
        assert np.array_equal(_sort_order(key, x), np.lexsort((x, key)))


def test_app_index_is_unique_of_transport_and_port() -> None:
    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(0, 60))
        protos = [6, 17] if trial % 4 else [6, 17, 1]
        c = {
            "proto": rng.choice(protos, n).astype(np.int64),
            "sport": rng.choice([0, 53, 80, 443, 5353, 40000, 65535], n).astype(np.int64),
        }
        _, code, (uc, _, count) = _app_index(c)
        u, inv = np.unique(c["proto"] * 65536 + c["sport"], return_inverse=True)
        assert np.array_equal(uc, u) and np.array_equal(count, np.bincount(inv, minlength=len(u)))
        assert code.dtype == np.int64 and len(code) == n


# -- network estimates -------------------------------------------------------------------------
def test_network_helpers_match_references() -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        hosts = np.unique(rng.integers(0, 300, int(rng.integers(1, 40))))
        m = int(rng.integers(0, 200))
        ids = rng.choice(hosts, m)
        vals = rng.integers(0, 6, m) * 0.5
        vals[rng.random(m) < 0.3] = np.nan
        assert _same(network._median_by(ids, vals, hosts), _ref_median_by(ids, vals, hosts))
        retx, data = rng.integers(0, 4, m), rng.integers(0, 40, m)
        assert _same(
            network._loss_by(ids, retx, data, hosts, 20), _ref_loss_by(ids, retx, data, hosts, 20)
        )
        keys = rng.choice(6 * network.CAP_NBINS, int(rng.integers(1, 80)), replace=False)
        hist = {int(k): int(rng.integers(1, 4)) for k in keys}  # equal counts: ties
        for h in (hist, dict(sorted(hist.items()))):  # numpy engine's order, conntrack's
            got, ref = network._host_modes(h), _ref_host_modes(h)
            assert all(_same(x, y) for x, y in zip(got, ref, strict=True))


# -- application parameters --------------------------------------------------------------------
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_summaries_match_per_application_reference(path: Path) -> None:
    t, _ = _table(path)
    names, code = app_codes(t)
    gr = group(t, code, Thresholds())
    _, summary = app_parameters(t, Thresholds())
    ordered = code[gr.order]
    for ai, app in enumerate(names):
        rows = gr.order[ordered == ai]
        ref = _ref_summary(t.cols, rows)
        assert {k: summary[app][k] for k in ref} == ref, app
