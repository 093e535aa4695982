"""The end of connection reconstruction: builder state -> :class:`ConnTable`.

:func:`finish_table` is what :meth:`ConnectionBuilder.finish` returns (both
engines: the native tracker first copies its state out into the builder's
columns, see :func:`swell.extract.conntrack.load_state`). It orients every
connection (client = SYN sender, else SYN/ACK receiver, else the port rule of
:func:`client_dir`), turns the per-direction counters into client->server and
server->client columns, and cuts the request/response runs into pairs.

Speed: with the native tracker the pairs are computed in Rust, with the GIL
released, in a worker thread while this thread builds the table's columns and the
host address texts, so the two overlap on two cores. The columns do not depend on
the pairs except ``num_pairs``, filled last. Results are the same either way.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from swell.extract.connections import TCP, UDP, ConnTable, addr_text
from swell.extract.sessions import KNOWN_PORTS as _KNOWN_PORTS
from swell.extract.sessions import pairs_from_runs

if TYPE_CHECKING:
    from swell.extract.connections import ConnectionBuilder


def client_dir(b: ConnectionBuilder) -> tuple[np.ndarray, np.ndarray]:
    """Canonical direction of the client per connection, and whether it was inferred."""
    c = b.conn
    syn_dir, sa_dir = c.view("syn_dir").astype(np.int64), c.view("synack_dir").astype(np.int64)
    proto = c.view("proto").astype(np.int64)
    p_lo, p_hi = c.view("ep_lo") & 0xFFFF, c.view("ep_hi") & 0xFFFF
    k_lo, k_hi = _KNOWN_PORTS[proto, p_lo], _KNOWN_PORTS[proto, p_hi]
    by_port = np.where(k_lo & ~k_hi, 1, np.where(k_hi & ~k_lo, 0, (p_lo < p_hi).astype(np.int64)))
    udp_guess = np.where(k_lo != k_hi, by_port, c.view("first_dir").astype(np.int64))
    guess = np.where(proto == UDP, udp_guess, by_port)
    cdir = np.where(syn_dir >= 0, syn_dir, np.where(sa_dir >= 0, 1 - sa_dir, guess))
    inferred = (syn_dir < 0) & (sa_dir < 0)
    return cdir, inferred


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
    t0 = b.t0_ns if b.t0_ns is not None else 0
    n = b.conn.n
    cdir, inferred = client_dir(b)
    if b.native_pairs is None:
        return _table(b, cdir, inferred, t0, native=False)
    # native pairs (GIL released) overlap with the columns and host texts built here
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="swell-pairs") as pool:
        fut = pool.submit(b.native_pairs, cdir, t0)
        try:
            table = _table(b, cdir, inferred, t0, native=True)
            if b.native_hist is not None:
                b.pair_hist, b.native_hist = b.native_hist(), None
        finally:
            pairs = fut.result()
    table.pairs = pairs
    table.cols["num_pairs"] = np.bincount(pairs["conn"], minlength=n).astype(np.int64)
    return table


def _table(
    b: ConnectionBuilder,
    cdir: np.ndarray,
    inferred: np.ndarray,
    t0: int,
    native: bool,
) -> ConnTable:
    """The table; its pairs from the numpy runs, or (``native``) none: the caller then
    sets ``pairs`` and the last column, ``num_pairs``, from the native tracker."""
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
    pairs: dict[str, np.ndarray] = {}
    if not native:
        pairs = pairs_from_runs(_all_runs(b, one_way & is_tcp), cdir, t0)
        cols["num_pairs"] = np.bincount(pairs["conn"], minlength=n).astype(np.int64)
    hosts = [addr_text(hi, lo) for hi, lo in b.host_addr]
    stats = {
        "packets": b.packets,
        "duplicates": b.duplicates,
        "skipped": dict(b.skipped),
        "connections": n,
        "tcp": int(is_tcp.sum()),
        "udp": int((proto == UDP).sum()),
    }
    return ConnTable(t0_ns=t0, hosts=hosts, cols=cols, pairs=pairs, stats=stats)
