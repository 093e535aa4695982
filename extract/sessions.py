"""Applications, RREs and sessions: the application and user layers of the Swing model.

Applications: a connection's application is its transport plus server port,
named from the ``WELL_KNOWN`` table of :mod:`swell.extract.conntypes` (``http-tcp``,
``dns-udp``, ...) or ``other-tcp`` / ``other-udp``.

Input is a finished :class:`~swell.extract.conntypes.ConnTable`. Per client
host and application, connections are sorted by start time and grouped:

* **RRE** (request-response exchange): a connection joins the current RRE when
  it starts before the latest end seen so far (it overlaps) or less than
  ``rre_gap_s`` after it; otherwise it opens a new RRE.
* **Session**: a new RRE opens a new session when the idle gap since the latest
  end seen so far exceeds ``session_timeout_s``.

Because connections are sorted by start, "the latest end seen so far" in the
(client, application) group is the running maximum of the end times, which is
exactly the current RRE's end whenever a new RRE starts; so both groupings are
a handful of vectorised operations (no Python loop over connections).

Parameters (per application; empirical samples): ``numConn`` (connections per
RRE), ``interConn`` (gap between connection starts within an RRE), ``numRRE``
(RREs per session), ``interRRE`` (user think time: RRE start minus previous
RRE end within a session), ``numPairs`` (request/response pairs per
connection), ``reqSize``/``rspSize`` (bytes per pair), ``reqThink`` (gap from a
response's end to the next request in the same connection), ``sessionStart``
(session start times, seconds since the trace start), ``interSession`` (gaps
between session starts) and ``rreServer`` (server host id of each RRE's first
connection: server choice by popularity).

The joint RRE shape (``JOINT_PARAMS``, issue 19): the parameters above are
drawn one by one, so an RRE of six long persistent connections (a browser's
page) is seldom drawn again (docs/scale.md, section 7.1). Per application the
extractor also records every RRE whole: ``rreConns`` (its number of
connections, one value per RRE), and per connection in RRE order
``rreOffsets`` (start minus its RRE's first start, seconds) and ``rrePairs``
(its request/response pairs). The schedule resamples whole RREs from them.

The whole sessions (``SESSION_PARAMS``, issue 19, optional like the joint
sample): the energy of the trace's responses at 0.5-8 s lives inside its
sessions (``bench/session_structure.py``: the trace's sessions moved whole to
uniform start times keep it, the per-pair draws do not), so per application the
extractor also records every session in order: ``sessRres`` (its RREs; the RREs
are those of the joint sample, in the same order), ``sessGaps`` (per RRE after a
session's first, the idle gap before it) and per pair, in connection order
(connections as in ``rreOffsets``), ``pairReq``, ``pairRsp`` and ``pairThink``
(the gap after that pair's response before the connection's next request, 0
after its last). The schedule's opt-in ``rre_draw="session"`` takes one of them
whole (tmix's connection vectors, Weigle et al. 2006, kept per session).

Defaults: ``rre_gap_s = 1.0`` (connections of one page or one exchange open
within about a second of each other) and ``session_timeout_s = 60.0`` (a user
silent for a minute is treated as a new user). Both are swell's choices;
:func:`sensitivity` shows how the main distributions move when they change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from swell.extract.ackmode import ack_shares
from swell.extract.conntypes import TCP, UDP, WELL_KNOWN, ConnTable, PendingTable


def app_name(proto: int, server_port: int) -> str:
    """Application label: ``<service>-<transport>`` or ``other-<transport>``."""
    transport = "tcp" if proto == TCP else "udp"
    return f"{WELL_KNOWN.get((proto, server_port), 'other')}-{transport}"


def app_labels(table: ConnTable) -> np.ndarray:
    """Application label per connection (see :func:`app_name`)."""
    names, code = app_codes(table)
    return np.array(names, dtype=object)[code] if len(code) else np.array([], dtype=object)


def ready_cols(table: ConnTable) -> dict[str, np.ndarray]:
    """The table's columns available now: while the native pairs of a
    :class:`~swell.extract.conntypes.PendingTable` are still being computed, every
    column but ``num_pairs`` (reading ``table.cols`` would wait for them)."""
    return table.ready_cols() if isinstance(table, PendingTable) else table.cols


def app_codes(table: ConnTable) -> tuple[list[str], np.ndarray]:
    """The sorted application labels and each connection's index into them: what
    ``np.unique(app_labels(table), return_inverse=True)`` gives, without sorting
    strings per connection (only the distinct (transport, server port) pairs)."""
    names, code, _ = _app_index(ready_cols(table))
    return names, code


def _app_index(
    c: dict[str, np.ndarray],
) -> tuple[list[str], np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`app_codes` of the columns ``c``, plus per distinct (transport, server
    port), in increasing order: that pair (proto * 65536 + port), its application and
    its number of connections."""
    proto, sport = c["proto"], c["sport"]
    tcp = proto == TCP
    if np.all(tcp | (proto == UDP)):
        # np.unique(proto * 65536 + sport, return_inverse=True) without a sort:
        # a count per (transport, port) and a lookup table
        key = np.where(tcp, 0, 65536) + sport
        seen = np.bincount(key, minlength=2 * 65536)
        used = np.flatnonzero(seen)
        lut = np.zeros(len(seen), dtype=np.int64)
        lut[used] = np.arange(len(used))
        uc, inv = np.where(used < 65536, TCP * 65536, UDP * 65536 - 65536) + used, lut[key]
    else:
        uc, inv = np.unique(proto.astype(np.int64) * 65536 + sport, return_inverse=True)
    per_uc = [app_name(int(k) // 65536, int(k) % 65536) for k in uc]
    names = sorted(set(per_uc))
    rank = {name: i for i, name in enumerate(names)}
    to_code = np.array([rank[x] for x in per_uc], dtype=np.int64)
    inv = inv.ravel()
    code = to_code[inv] if len(uc) else np.zeros(0, dtype=np.int64)
    return names, code, (uc, to_code, np.bincount(inv, minlength=len(uc)))


def pairs_from_runs(
    runs: dict[str, np.ndarray], cdir: np.ndarray, t0: int
) -> dict[str, np.ndarray]:
    """Request/response pairs (Tmix's a-b-t view) from a connection builder's runs.

    ``runs`` are sorted by connection, in order; ``cdir`` is the client's canonical
    direction per connection. A client run opens a pair and the server run after it
    closes it; a server run first in its connection makes a pair with an empty request.
    ``think_before`` is the gap from the previous pair's response end to this request.
    """
    n = len(runs["cid"])
    cid = runs["cid"]
    is_req = runs["dir"] == cdir[cid]
    first = np.ones(n, dtype=bool)
    first[1:] = cid[1:] != cid[:-1]
    new_pair = is_req | first
    pid = np.cumsum(new_pair) - 1
    npairs = int(pid[-1]) + 1 if n else 0
    req = np.bincount(pid, weights=np.where(is_req, runs["bytes"], 0), minlength=npairs)
    rsp = np.bincount(pid, weights=np.where(is_req, 0, runs["bytes"]), minlength=npairs)
    nan = np.full(npairs, np.nan)
    req_t0, req_t1, rsp_t0, rsp_t1 = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    sec = 1e-9
    req_t0[pid[is_req]] = (runs["t0"][is_req] - t0) * sec
    req_t1[pid[is_req]] = (runs["t1"][is_req] - t0) * sec
    rsp_t0[pid[~is_req]] = (runs["t0"][~is_req] - t0) * sec
    rsp_t1[pid[~is_req]] = (runs["t1"][~is_req] - t0) * sec
    pconn = np.zeros(npairs, dtype=np.int64)
    pconn[pid] = cid
    pfirst = np.ones(npairs, dtype=bool)
    pfirst[1:] = pconn[1:] != pconn[:-1]
    think = np.full(npairs, np.nan)
    think[1:] = req_t0[1:] - rsp_t1[:-1]
    think[pfirst] = np.nan
    return {
        "conn": pconn,
        "req_size": req.astype(np.int64),
        "rsp_size": rsp.astype(np.int64),
        "req_t0": req_t0,
        "req_t1": req_t1,
        "rsp_t0": rsp_t0,
        "rsp_t1": rsp_t1,
        "think_before": think,
    }


DEFAULT_RRE_GAP_S = 1.0
DEFAULT_SESSION_TIMEOUT_S = 60.0
APP_PARAMS = (
    "numConn",
    "interConn",
    "numRRE",
    "interRRE",
    "numPairs",
    "reqSize",
    "rspSize",
    "reqThink",
    "sessionStart",
    "interSession",
    "rreServer",
)
JOINT_PARAMS = ("rreConns", "rreOffsets", "rrePairs")
SESSION_PARAMS = ("sessRres", "sessGaps", "pairReq", "pairRsp", "pairThink")
# The servers' own latency per pair, pooled per application (optional: models written
# before it have none, and their schedules no waits): :func:`server_waits`.
WAIT_PARAMS = ("rspWait",)
# When each pair's request left in the trace, from its connection's first packet (optional
# beside the whole sessions; -1: no request seen): a whole session replays a request that
# followed a long pause at that time (``generators/schedule.py``, anchors).
ANCHOR_PARAMS = ("pairAt",)
# Each pair's own server wait (``rspWait``'s value for that pair, -1 where it has none),
# per pair as pairReq (optional beside the whole sessions): a whole session's responses
# leave their servers after the trace's own latencies, not after fresh draws.
PAIR_WAIT_PARAMS = ("pairWait",)
# The observed client of each whole session, in sessRres' order (optional beside them):
# a whole session goes to an emulated client whose access link is nearest its own
# (``generators/sessionmap.py``, the client match).
CLIENT_PARAMS = ("sessClient",)
# How each pair's request left the client, per pair as pairReq (optional beside the whole
# sessions): its packets (the request's bytes over its connection's mean client->server
# data payload, at least 1; 0 without a request) and its span from the first packet to
# the last, s. A whole session's UDP requests leave as that many datagrams spread over
# that span (``generators/schedule.py``, paced requests), as the trace's clients sent them.
PACE_PARAMS = ("pairReqPkts", "pairReqSpan")
# Whether each pair's response was a reply, per pair as pairReq (optional beside the whole
# sessions): 1 where the response's first packet left its server before the request could
# have arrived (:func:`not_replies`: the two sides streamed at once, a tunnel, pushed TLS
# records), 0 otherwise. Such a pair's request leaves without waiting for the responses
# still outstanding (``generators/schedule.py``, early requests), so its response follows
# the previous one instead of waiting a round trip behind it.
EARLY_PARAMS = ("pairEarly",)
# a response earlier than this many of its connection's round trips is not a reply
EARLY_CUT = 0.5


@dataclass(frozen=True)
class Thresholds:
    """Idle thresholds of the RRE and session grouping (seconds)."""

    rre_gap_s: float = DEFAULT_RRE_GAP_S
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S

    def as_dict(self) -> dict[str, float]:
        return {"rre_gap_s": self.rre_gap_s, "session_timeout_s": self.session_timeout_s}


@dataclass
class Grouping:
    """Per-connection RRE and session ids (global, in sorted order) for one table."""

    order: np.ndarray  # connection rows sorted by (app, client, start)
    rre: np.ndarray  # RRE id per sorted connection
    session: np.ndarray  # session id per sorted connection
    think: np.ndarray  # idle gap before each RRE start (NaN at session start)
    new_client: np.ndarray  # first connection of its (app, client) group, per sorted one


def _sort_order(key: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.lexsort((x, key))`` (by ``key`` >= 0, then ``x``, then row) as one integer sort:
    of (key * ranks + x's dense rank) * n + row, where it fits in int64 and ``x`` has
    no NaN (else by lexsort itself). Several times faster than lexsort's two stable
    sorts, one of them on floats."""
    n = len(key)
    if n < 2 or np.isnan(x).any():
        return np.lexsort((x, key))
    by_x = np.argsort(x)  # any order of equal values: the row breaks the ties below
    xs = x[by_x]
    step = np.empty(n, dtype=np.int64)
    step[0] = 0
    np.not_equal(xs[1:], xs[:-1], out=step[1:])
    xrank = np.empty(n, dtype=np.int64)
    xrank[by_x] = np.cumsum(step)
    ranks = int(xrank.max()) + 1
    if (int(key.max()) + 1) * ranks * n >= 1 << 63:
        return np.lexsort((x, key))
    combined = (key * ranks + xrank) * n + np.arange(n)
    combined.sort()
    return combined % n


def group(table: ConnTable, app_code: np.ndarray, th: Thresholds) -> Grouping:
    """Assign each connection to an RRE and a session (see module docstring);
    ``app_code``: the application index per connection (:func:`app_codes`)."""
    c = ready_cols(table)
    start = c["start"]
    end = np.maximum(c["end"], start)
    client = c["client"]
    # (app, client) as one key (host ids are small non-negative integers)
    key = np.asarray(app_code, dtype=np.int64) * (int(client.max()) + 1 if len(client) else 1)
    key += client
    order = _sort_order(key, start)  # = lexsort((start, client, app_code)): same ties
    s, e = start[order], end[order]
    n = len(order)
    gkey = key[order]
    first = np.ones(n, dtype=bool)
    first[1:] = gkey[1:] != gkey[:-1]
    # running max of end within each (app, client) group, exclusive of the current row;
    # done exactly on integer ranks of the end times (offset per group, then mapped back)
    grank = np.cumsum(first) - 1
    uend, erank = np.unique(e, return_inverse=True)
    cm = np.maximum.accumulate(grank * (len(uend) + 1) + erank) if n else grank
    prev_end = np.full(n, np.nan)
    if n:
        idx = cm[:-1] - grank[1:] * (len(uend) + 1)  # negative at a group's first row
        prev_end[1:][idx >= 0] = uend[idx[idx >= 0]]
    prev_end[first] = np.nan
    gap = s - prev_end
    new_rre = first | (gap > th.rre_gap_s)
    new_sess = first | (gap > th.session_timeout_s)
    new_rre |= new_sess
    think = np.where(new_rre & ~new_sess, np.maximum(gap, 0.0), np.nan)
    return Grouping(
        order=order,
        rre=np.cumsum(new_rre) - 1,
        session=np.cumsum(new_sess) - 1,
        think=think,
        new_client=first,
    )


def _counts(ids: np.ndarray) -> np.ndarray:
    """How often each distinct id occurs, by increasing id (run lengths when sorted)."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    if np.all(ids[1:] >= ids[:-1]):
        edges = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        return np.diff(np.r_[0, edges, len(ids)]).astype(np.int64)
    return np.bincount(ids)[np.unique(ids)]


def app_parameters(
    table: ConnTable, th: Thresholds
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, Any]]]:
    """Samples of every per-application parameter, and a per-application summary.

    The parameters that do not depend on the request/response pairs come first, so
    that with a :class:`~swell.extract.conntypes.PendingTable` they are computed while
    the native pairs still are; ``numPairs``, ``reqSize``, ``rspSize`` and
    ``reqThink`` then wait for the pairs."""
    c = ready_cols(table)
    names, code, index = _app_index(c)
    gr = group(table, code, th)
    start = c["start"]
    duration = max(float(np.nanmax(c["end"]) - np.nanmin(start)), 1e-9) if len(start) else 0.0
    out: dict[str, dict[str, np.ndarray]] = {}
    # connections are sorted by application first: each application is a slice
    bounds = np.searchsorted(code[gr.order], np.arange(len(names) + 1))
    app_rows, sessions, rres = [], [], []
    for ai, app in enumerate(names):
        m = slice(bounds[ai], bounds[ai + 1])
        rows = gr.order[m]
        app_rows.append(rows)
        rre, sess, think = gr.rre[m], gr.session[m], gr.think[m]
        s = start[rows]
        rre_first = np.ones(len(rre), dtype=bool)
        rre_first[1:] = rre[1:] != rre[:-1]
        sess_first = np.ones(len(sess), dtype=bool)
        sess_first[1:] = sess[1:] != sess[:-1]
        sess_starts = np.sort(s[sess_first])
        out[app] = {
            "numConn": _counts(rre),
            "interConn": np.diff(s)[~rre_first[1:]],
            "numRRE": _counts(sess[rre_first]),
            "interRRE": think[~np.isnan(think)],
            "sessionStart": sess_starts,
            "interSession": np.diff(sess_starts),
            "rreServer": c["server"][rows][rre_first],
            "rreConns": _counts(rre),
            "rreOffsets": rre_offsets(s, rre),
            "sessRres": _counts(sess[rre_first]),
            "sessGaps": think[~np.isnan(think)],
            "sessClient": c["client"][rows][sess_first],
        }
        sessions.append(int(sess_first.sum()))
        rres.append(int(rre_first.sum()))
    summary = _summaries(c, names, code, index, gr, bounds, sessions, rres, duration)
    # the pair-dependent parameters (reading table.pairs waits for pending pairs)
    p, num_pairs = table.pairs, table.cols["num_pairs"]
    # pairs grouped by application, in their order within it (stable counting sort)
    pair_code = code[p["conn"]]
    small = pair_code.astype(np.uint16) if len(names) < 1 << 16 else pair_code
    porder = np.argsort(small, kind="stable")  # radix sort on 16-bit codes
    pbounds = np.searchsorted(pair_code[porder], np.arange(len(names) + 1))
    by_conn = _pairs_by_conn(p, len(num_pairs))
    # a table without round trips (built by hand) gives no waits
    leg = c.get("server_leg", np.full(len(num_pairs), np.nan))
    wait = server_waits(p, leg)
    early = not_replies(p, leg)
    seg = request_segment(c)
    for ai, app in enumerate(names):
        pm = porder[pbounds[ai] : pbounds[ai + 1]]
        pthink = p["think_before"][pm]
        pthink = pthink[~np.isnan(pthink)]
        pwait = wait[pm]
        pwait = pwait[~np.isnan(pwait)]
        pairs_here = num_pairs[app_rows[ai]]
        vals = out[app] | {
            "numPairs": pairs_here,
            "rrePairs": pairs_here,
            "reqSize": p["req_size"][pm],
            "rspSize": p["rsp_size"][pm],
            "reqThink": np.maximum(pthink, 0.0, out=pthink),
            "rspWait": pwait,
            **session_pairs(p, by_conn, app_rows[ai], start, wait, seg, early),
        }
        # no pairAt without the connections' times
        out[app] = {k: vals[k] for k in APP_PARAMS + JOINT_PARAMS + SESSION_PARAMS
                    + WAIT_PARAMS + ANCHOR_PARAMS + PAIR_WAIT_PARAMS + CLIENT_PARAMS
                    + PACE_PARAMS + EARLY_PARAMS if k in vals}
    return out, summary


def server_waits(p: dict[str, np.ndarray], server_leg: np.ndarray) -> np.ndarray:
    """Each pair's server latency: the gap from its request's last packet to its
    response's first at the monitor, less the connection's round trip from the monitor
    to the server (``server_leg``, SYN to SYN/ACK), at least 0. NaN where a pair has no
    request or no response, or its connection no measured round trip (no handshake
    seen; UDP): those pairs give no sample.

    Swing's model has no such time: its responses leave the emulated server as soon as
    a request is in, so the time a real server spent (its application, a proxy's fetch
    from the origin) came out of every connection. On the bundled capture it is 28 ms
    at the median and 91 ms at p90 per pair (docs/fidelity.md, "The servers' wait")."""
    gap, _ = reply_gaps(p, server_leg)
    return np.where(np.isfinite(gap), np.maximum(gap, 0.0), np.nan)


def reply_gaps(p: dict[str, np.ndarray], server_leg: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the gap from its request's last packet to its response's first at the
    monitor less its connection's round trip from the monitor to the server
    (``server_leg``), s, NaN where the pair has no request or no response, its
    connection no measured round trip, or the table no times (built by hand); and that
    round trip per pair (what :func:`server_waits` and :func:`not_replies` judge)."""
    leg = np.asarray(server_leg, dtype=float)[p["conn"]]
    if "rsp_t0" not in p or "req_t1" not in p:
        return np.full(len(p["conn"]), np.nan), leg
    gap = p["rsp_t0"] - p["req_t1"] - leg
    ok = (p["req_size"] > 0) & (p["rsp_size"] > 0) & np.isfinite(gap)
    return np.where(ok, gap, np.nan), leg


def not_replies(p: dict[str, np.ndarray], server_leg: np.ndarray,
                cut: float = EARLY_CUT) -> np.ndarray:
    """Per pair: its response's first packet left the server before its request could
    have arrived, i.e. the gap from the request's last packet to the response's first at
    the monitor is under ``-cut`` times the connection's round trip from the monitor to
    the server (SYN to SYN/ACK, ``server_leg``). A reply comes at 0 or later (the rest is
    the server's own time, :func:`server_waits`). False where a pair has no request or
    no response, or its connection no measured round trip (UDP, no handshake seen).

    The pairs are a connection's runs of data in one direction
    (:func:`pairs_from_runs`), so a connection whose two sides sent at once is cut into
    pairs too; on the campus composite 10.0% of the HTTPS pairs, with 36.8% of their
    response bytes, were not replies (``bench/pair_gating.py``, docs/fidelity.md)."""
    gap, leg = reply_gaps(p, server_leg)
    ok = np.isfinite(gap) & (leg > 0)
    return ok & (np.where(ok, gap, 0.0) < -cut * np.where(ok, leg, 0.0))


def request_segment(c: dict[str, np.ndarray]) -> np.ndarray | None:
    """Each connection's mean client->server data payload, bytes (NaN where it sent none;
    None for a table without the counts, built by hand). The tracker keeps each
    direction's data packets and new bytes per connection, not per run, so a request's
    packet count is its bytes over this mean: exact for a client whose packets have one
    size, about right for one that mixes sizes."""
    if "data_pkts_c2s" not in c or "new_bytes_c2s" not in c:
        return None
    n = np.asarray(c["data_pkts_c2s"], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, np.asarray(c["new_bytes_c2s"], dtype=float) / n, np.nan)


def request_pace(p: dict[str, np.ndarray], idx: np.ndarray, seg: np.ndarray
                 ) -> dict[str, np.ndarray]:
    """``pairReqPkts`` and ``pairReqSpan`` of the pairs ``idx`` (:data:`PACE_PARAMS`)."""
    req = p["req_size"][idx].astype(float)
    s = seg[p["conn"][idx]]
    # no payload counted (a NaN mean): 0 here, one packet after the clip
    k = np.round(req / np.where(np.isfinite(s) & (s > 0), s, np.inf))
    k = np.where(req > 0, np.clip(k, 1.0, np.maximum(req, 1.0)), 0.0)
    span = p["req_t1"][idx] - p["req_t0"][idx] if "req_t1" in p else np.zeros(len(idx))
    span = np.where(np.isfinite(span) & (req > 0), np.maximum(span, 0.0), 0.0)
    return {"pairReqPkts": k.astype(np.int64), "pairReqSpan": span}


def _pairs_by_conn(p: dict[str, np.ndarray], nconn: int) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """The pairs in connection order (stable), each connection's first index into that
    order and its pair count."""
    order = np.argsort(p["conn"], kind="stable")
    count = np.bincount(p["conn"], minlength=nconn)
    return order, np.r_[0, np.cumsum(count)[:-1]], count


def session_pairs(p: dict[str, np.ndarray], by_conn: tuple[np.ndarray, np.ndarray, np.ndarray],
                  rows: np.ndarray, start: np.ndarray | None = None,
                  wait: np.ndarray | None = None, seg: np.ndarray | None = None,
                  early: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``pairReq``, ``pairRsp`` and ``pairThink`` of the connections ``rows``, in that
    order, each connection's pairs in order (:data:`SESSION_PARAMS`); with the
    connections' ``start`` times also ``pairAt`` (:data:`ANCHOR_PARAMS`): each request's
    time from its connection's first packet, -1 where the pair has no request; with the
    pairs' :func:`server_waits` also ``pairWait``, -1 where a pair has none; with the
    connections' :func:`request_segment` also :func:`request_pace`; with the pairs'
    :func:`not_replies` also ``pairEarly`` (:data:`EARLY_PARAMS`)."""
    order, first, count = by_conn
    n = count[rows]
    total = int(n.sum())
    # indices of each row's pairs: its first index, then +1 within the row
    base = np.repeat(first[rows] - np.r_[0, np.cumsum(n)[:-1]], n)
    idx = order[base + np.arange(total)]
    after = np.zeros(total)
    if total:
        nxt = p["think_before"][idx[1:]]
        last = np.zeros(total, dtype=bool)
        last[np.cumsum(n)[n > 0] - 1] = True
        after[:-1] = np.where(last[:-1] | np.isnan(nxt), 0.0, np.maximum(nxt, 0.0))
    out = {"pairReq": p["req_size"][idx], "pairRsp": p["rsp_size"][idx], "pairThink": after}
    if start is not None and "req_t0" in p:
        at = p["req_t0"][idx] - start[p["conn"][idx]]
        out["pairAt"] = np.where(np.isfinite(at), np.maximum(at, 0.0), -1.0)
    if wait is not None:
        w = wait[idx]
        out["pairWait"] = np.where(np.isfinite(w), w, -1.0)
    if seg is not None:
        out |= request_pace(p, idx, seg)
    if early is not None:
        out["pairEarly"] = early[idx].astype(np.int64)
    return out


def rre_offsets(start: np.ndarray, rre: np.ndarray) -> np.ndarray:
    """Each connection's start minus its RRE's first start (``start`` sorted within
    each RRE, ``rre`` the RRE ids, equal ids adjacent)."""
    first = np.ones(len(rre), dtype=bool)
    first[1:] = rre[1:] != rre[:-1]
    head = np.maximum.accumulate(np.where(first, np.arange(len(rre)), 0)) if len(rre) else rre
    return start - start[head]


def _summaries(
    c: dict[str, np.ndarray],
    names: list[str],
    code: np.ndarray,
    index: tuple[np.ndarray, np.ndarray, np.ndarray],
    gr: Grouping,
    bounds: np.ndarray,
    sessions: list[int],
    rres: list[int],
    duration: float,
) -> dict[str, dict[str, Any]]:
    """The summary of every application (``bounds``: its slice of ``gr.order``), for
    all of them at once: counts by ``bincount``, sums over the connections put in
    application order by a stable radix sort of the codes (sequential reads, no
    gather all over the columns per application), distinct clients from the grouping,
    the server port from :func:`_app_index`'s counts."""
    napps = len(names)
    if napps == 0:
        return {}
    by_app = np.argsort(code.astype(np.uint16) if napps < 1 << 16 else code, kind="stable")
    starts = bounds[:-1]

    def total(*cols: str) -> list[int]:
        sums = [np.add.reduceat(c[k][by_app], starts).tolist() for k in cols]
        return [sum(vals) for vals in zip(*sums, strict=True)]

    def count(flag: str) -> list[int]:
        return np.bincount(code[c[flag]], minlength=napps).tolist()

    nc = np.r_[0, np.cumsum(gr.new_client)]
    clients = (nc[bounds[1:]] - nc[starts]).tolist()
    server = c["server"]
    span = int(server.max()) + 1 if len(server) else 1
    pairs = np.sort(code * span + server)  # distinct (application, server) pairs
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
    servers = np.bincount(pairs // span, minlength=napps).tolist()
    uc, uc_app, uc_count = index
    bytes_c2s, bytes_s2c = total("new_bytes_c2s", "acked_c2s"), total("new_bytes_s2c", "acked_s2c")
    wire_c2s, wire_s2c = total("wire_c2s"), total("wire_s2c")
    lower, inferred, one_way = count("lower_bound"), count("client_inferred"), count("one_way")
    acks = ack_shares(c, code, napps)
    out = {}
    for ai, app in enumerate(names):
        mine = np.flatnonzero(uc_app == ai)  # ports in increasing order: the lowest wins ties
        out[app] = {
            "transport": app.rsplit("-", 1)[-1],
            "server_port": int(uc[mine[np.argmax(uc_count[mine])]] % 65536),
            "connections": int(bounds[ai + 1] - bounds[ai]),
            "lower_bound_connections": lower[ai],
            "client_inferred_connections": inferred[ai],
            "one_way_connections": one_way[ai],
            "bytes_c2s": bytes_c2s[ai],
            "bytes_s2c": bytes_s2c[ai],
            "wire_bytes_c2s": wire_c2s[ai],
            "wire_bytes_s2c": wire_s2c[ai],
            "clients": clients[ai],
            "servers": servers[ai],
            "sessions": sessions[ai],
            "rres": rres[ai],
            "sessions_per_s": sessions[ai] / duration if duration > 0 else 0.0,
            "acks": acks[ai],
        }
    return out


SENSITIVITY_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _pooled(table: ConnTable, th: Thresholds) -> dict[str, float]:
    params, summ = app_parameters(table, th)

    def pool(name: str) -> np.ndarray:
        arrs = [v[name] for v in params.values() if len(v[name])]
        return np.concatenate(arrs).astype(float) if arrs else np.zeros(0)

    def med(name: str) -> float:
        a = pool(name)
        return float(np.median(a)) if len(a) else float("nan")

    return {
        "rre_gap_s": th.rre_gap_s,
        "session_timeout_s": th.session_timeout_s,
        "sessions": float(sum(s["sessions"] for s in summ.values())),
        "rres": float(sum(s["rres"] for s in summ.values())),
        "median_numConn": med("numConn"),
        "mean_numConn": float(np.mean(pool("numConn"))) if len(pool("numConn")) else float("nan"),
        "median_numRRE": med("numRRE"),
        "median_interRRE": med("interRRE"),
        "sessions_per_s": float(sum(s["sessions_per_s"] for s in summ.values())),
    }


def sensitivity(
    table: ConnTable, base: Thresholds, factors: tuple[float, ...] = SENSITIVITY_FACTORS
) -> list[dict[str, float]]:
    """How the main distributions move when each threshold is scaled by ``factors``."""
    rows = []
    for f in factors:
        th = Thresholds(base.rre_gap_s * f, max(base.session_timeout_s, base.rre_gap_s * f))
        rows.append({"varied": "rre_gap", "factor": f, **_pooled(table, th)})
    for f in factors:
        if f == 1.0:
            continue
        th = Thresholds(min(base.rre_gap_s, base.session_timeout_s * f), base.session_timeout_s * f)
        rows.append({"varied": "session_timeout", "factor": f, **_pooled(table, th)})
    return rows
