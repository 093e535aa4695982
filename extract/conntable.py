"""The end of connection reconstruction: builder state -> :class:`ConnTable`.

:func:`finish_table` is what :meth:`ConnectionBuilder.finish` returns. It orients
every connection (client = SYN sender, else SYN/ACK receiver, else the port rule of
:func:`client_dir`), turns the per-direction counters into client->server and
server->client columns, and cuts the request/response runs into pairs. The numpy
tracker goes through :func:`client_dir` and :func:`_table` here; the native tracker
writes the same columns itself in one pass over its state
(``NativeTracker.table``, ``conntrack_table.rs``: the same arithmetic, checked
column by column against this code by ``tests/unit/test_conntrack.py``), which
saves an export of the raw state (~75 MB of fresh columns for 360,000 connections)
and numpy's passes over it.

Speed: with the native tracker the pairs are computed in Rust, with the GIL
released, in a worker thread while this thread builds the host address texts and the
packet-pair histogram, so the two overlap on two cores. The columns do not depend on
the pairs except ``num_pairs``. :func:`finish_table` does not wait for them: it
returns a :class:`~swell.extract.conntypes.PendingTable`, a :class:`ConnTable` whose
``pairs`` and ``cols`` attributes wait for the native pairs (and add ``num_pairs``)
when first read, so every caller sees a complete table. Code that knows this (the
model fit, see ``sessions.ready_cols``) reads the other columns through
:meth:`PendingTable.ready_cols` first and works on them while the pairs are being
computed. Results are the same either way.

Imports go one way: this module uses the leaf :mod:`swell.extract.conntypes` (the
table types, ``KNOWN_PORTS``, the histogram binning), :mod:`swell.extract.sessions`
(the pairs) and :mod:`swell.extract.conntrack`; :mod:`swell.extract.connections`
imports this module for ``ConnectionBuilder.finish`` and is named here only for
type checking.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

import numpy as np

from swell.extract.conntrack import pair_histogram
from swell.extract.conntypes import (
    CAP_BINS_PER_DECADE,
    CAP_LOG_MIN,
    CAP_NBINS,
    KNOWN_PORTS,
    TCP,
    UDP,
    ConnTable,
    PendingTable,
    addr_text,
)
from swell.extract.sessions import pairs_from_runs

if TYPE_CHECKING:  # typing only: connections imports this module at run time
    from swell.extract.connections import ConnectionBuilder


_KNOWN_FLAT = KNOWN_PORTS.ravel()  # [proto * 65536 + port]
# decimal digits of 0..255, left-aligned in 3 bytes (NUL-padded), and their number
_DIGITS = np.array([list(str(v).encode().ljust(3, b"\0")) for v in range(256)], dtype=np.uint8)
_NDIGITS = np.array([len(str(v)) for v in range(256)], dtype=np.intp)


def host_texts(addr: list[tuple[int, int]]) -> list[str]:
    """``[addr_text(hi, lo) for hi, lo in addr]``, IPv4 addresses formatted by numpy
    (a Python f-string per host took ~75 ms for 143,000 hosts, holding the GIL): each
    address is written as ``a.b.c.d\n`` into a 16-byte row (the digits of each octet,
    from a table, NUL past them), the NULs dropped, and the text split at the newlines.
    IPv6 addresses go through :func:`addr_text`."""
    n = len(addr)
    if n == 0:
        return []
    a = np.fromiter(itertools.chain.from_iterable(addr), dtype=np.uint64, count=2 * n)
    hi, lo = a[0::2], a[1::2]
    flat = np.zeros(16 * n, dtype=np.uint8)
    pos = np.arange(0, 16 * n, 16)
    for j, shift in enumerate((24, 16, 8, 0)):
        octet = ((lo >> np.uint64(shift)) & np.uint64(255)).astype(np.intp)
        digits = _DIGITS[octet]
        for k in range(3):  # NULs past the digits: overwritten next, or dropped
            flat[pos + k] = digits[:, k]
        pos += _NDIGITS[octet]
        flat[pos] = ord("." if j < 3 else "\n")
        pos += 1
    texts = flat[flat != 0].tobytes().decode("ascii").split("\n")[:-1]
    v6 = np.flatnonzero((hi != 0) | ((lo >> np.uint64(32)) != 0xFFFF))
    for i in v6.tolist():
        texts[i] = addr_text(*addr[i])
    return texts


def client_dir(b: ConnectionBuilder) -> tuple[np.ndarray, np.ndarray]:
    """Canonical direction of the client per connection, and whether it was inferred.

    On the critical path (the native pairs wait for it), so computed in the state's
    small dtypes, with one flat lookup per endpoint in the known-port table."""
    c = b.conn
    syn_dir, sa_dir, proto = c.view("syn_dir"), c.view("synack_dir"), c.view("proto")
    row = proto.astype(np.intp) << 16  # = proto * 65536: the table's row
    p_lo, p_hi = c.view("ep_lo") & 0xFFFF, c.view("ep_hi") & 0xFFFF
    k_lo, k_hi = _KNOWN_FLAT[row | p_lo], _KNOWN_FLAT[row | p_hi]
    # the side on a well-known port is the server; else the higher port is the client
    by_port = np.where(k_lo != k_hi, k_lo, p_lo < p_hi)
    udp_guess = np.where(k_lo != k_hi, by_port, c.view("first_dir"))
    guess = np.where(proto == UDP, udp_guess, by_port)
    cdir = np.where(syn_dir >= 0, syn_dir, np.where(sa_dir >= 0, 1 - sa_dir, guess))
    inferred = (syn_dir < 0) & (sa_dir < 0)
    return cdir.astype(np.int64), inferred


def _pieces(b: ConnectionBuilder, pre: str, done: list[dict[str, np.ndarray]]) -> list[dict]:
    """Finished runs of one stream (per-chunk pieces) plus its still-open runs."""
    c = b.conn
    op = np.flatnonzero(c.view(f"{pre}_open"))
    last = {"cid": op, "dir": c[f"{pre}_dir"][op].astype(np.int64)}
    for k in ("bytes", "pkts", "t0", "t1", "seq"):
        last[k] = c[f"{pre}_{k}"][op]
    return [*done, last]


def _all_runs(b: ConnectionBuilder, one_way: np.ndarray) -> dict[str, np.ndarray]:
    """Real-data runs, except acknowledgement-inferred ones for one-directional connections.

    Built one column at a time, releasing the per-chunk pieces as it goes, so the peak
    is about one extra copy of the runs.
    """
    streams = [(_pieces(b, "run", b.runs), False), (_pieces(b, "vrun", b.vruns), True)]
    b.runs, b.vruns = [], []
    masks = [one_way[np.concatenate([r["cid"] for r in p])] == want for p, want in streams]

    def column(k: str) -> np.ndarray:
        parts = [
            np.concatenate([r.pop(k) for r in p])[m]
            for (p, _), m in zip(streams, masks, strict=True)
        ]
        return np.concatenate(parts)

    cid, seq = column("cid"), column("seq")
    o = np.lexsort((seq, cid))
    runs = {"cid": cid[o], "seq": seq[o]}
    del cid, seq
    for k in ("dir", "bytes", "pkts", "t0", "t1"):
        runs[k] = column(k)[o]
    return runs


def finish_table(b: ConnectionBuilder) -> ConnTable:
    """The connection table of a builder whose chunks are all in (see module docstring)."""
    if b._native is not None:
        return _finish_native(b)
    t0 = b.t0_ns if b.t0_ns is not None else 0
    cdir, inferred = client_dir(b)
    return _table(b, cdir, inferred, t0)


def _finish_native(b: ConnectionBuilder) -> ConnTable:
    """The native tracker writes the table's columns (``NativeTracker.table``); its
    pairs (GIL released) then overlap with the host texts and histogram built here,
    and with whatever the caller does until it reads the pairs."""
    tracker, b._native = b._native, None
    tracker.wait()
    st = tracker.table(_KNOWN_FLAT)
    t0 = st["t0_ns"] if st["t0_ns"] is not None else 0
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swell-pairs")
    fut = pool.submit(tracker.pairs, st["cdir"], t0)
    pool.shutdown(wait=False)  # the thread ends with its one task (and frees the tracker)
    del tracker
    try:
        b.host_addr, b.t0_ns = st["hosts"], st["t0_ns"]
        b.packets, b.duplicates, b.skipped = st["packets"], st["duplicates"], st["skipped"]
        b.pair_hist = pair_histogram(
            st["hist"], st["ambiguous"], CAP_NBINS, CAP_LOG_MIN, CAP_BINS_PER_DECADE
        )
        cols = st["cols"]
        hosts = host_texts(b.host_addr)
        stats = _stats(b, cols["proto"])
    except BaseException:
        wait([fut])  # the tracker's last step ends before the error leaves
        raise
    return PendingTable(t0, hosts, cols, stats, fut)


def _stats(b: ConnectionBuilder, proto: np.ndarray) -> dict[str, Any]:
    return {
        "packets": b.packets,
        "duplicates": b.duplicates,
        "skipped": dict(b.skipped),
        "connections": len(proto),
        "tcp": int((proto == TCP).sum()),
        "udp": int((proto == UDP).sum()),
    }


def _table(b: ConnectionBuilder, cdir: np.ndarray, inferred: np.ndarray, t0: int) -> ConnTable:
    """The numpy tracker's table, its pairs from the numpy runs (``conntrack_table.rs``
    is the native tracker's copy of this arithmetic)."""
    c, gd = b.conn, b.gdir
    n = c.n
    ar = np.arange(n, dtype=np.int64)
    gc, gs = 2 * ar + cdir, 2 * ar + 1 - cdir
    ep_lo, ep_hi = c.view("ep_lo"), c.view("ep_hi")
    ep_c = np.where(cdir == 0, ep_lo, ep_hi)
    ep_s = np.where(cdir == 0, ep_hi, ep_lo)
    sec = 1e-9

    def tsec(x: np.ndarray) -> np.ndarray:
        return np.where(x >= 0, (x - t0) * sec, np.nan)

    syn, sa, ack = c.view("syn_ns"), c.view("synack_ns"), c.view("ack_ns")
    server_leg = np.where((syn >= 0) & (sa >= syn), (sa - syn) * sec, np.nan)
    client_leg = np.where((sa >= 0) & (ack >= sa), (ack - sa) * sec, np.nan)
    one_sided = np.where((sa < 0) & (syn >= 0) & (ack >= syn), (ack - syn) * sec, np.nan)
    proto = c.view("proto").astype(np.int64)
    fin_c, fin_s = gd["fin"][gc], gd["fin"][gs]
    closed = c.view("rst") | (fin_c & fin_s)
    is_tcp = proto == TCP
    # fmt: off
    cols = {
        "proto": proto, "client": ep_c >> 16, "server": ep_s >> 16, "cport": ep_c & 0xFFFF,
        "sport": ep_s & 0xFFFF, "start": tsec(c.view("first_ns")), "end": tsec(c.view("last_ns")),
        "client_inferred": inferred, "open_at_start": is_tcp & (syn < 0),
        "open_at_end": is_tcp & ~closed, "rst": c.view("rst").copy(), "fin_c2s": fin_c,
        "fin_s2c": fin_s, "server_leg": server_leg, "client_leg": client_leg,
        "one_sided_rtt": one_sided,
    }
    # fmt: on
    for name in ("pkts", "wire", "data_pkts", "retx", "new_bytes"):
        cols[f"{name}_c2s"] = gd[name][gc]
        cols[f"{name}_s2c"] = gd[name][gs]
    one_way = (cols["pkts_c2s"] == 0) | (cols["pkts_s2c"] == 0)
    cols["one_way"] = one_way
    # the unseen direction of a one-directional TCP connection: bytes it acknowledged
    cols["acked_c2s"] = np.where(one_way & is_tcp, gd["ack_adv"][gs], 0)
    cols["acked_s2c"] = np.where(one_way & is_tcp, gd["ack_adv"][gc], 0)
    cols["lower_bound"] = (cols["open_at_start"] | cols["open_at_end"]) & is_tcp
    pairs = pairs_from_runs(_all_runs(b, one_way & is_tcp), cdir, t0)
    cols["num_pairs"] = np.bincount(pairs["conn"], minlength=n).astype(np.int64)
    hosts = host_texts(b.host_addr)
    return ConnTable(t0_ns=t0, hosts=hosts, cols=cols, pairs=pairs, stats=_stats(b, proto))
