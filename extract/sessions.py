"""Applications, RREs and sessions: the application and user layers of the Swing model.

Applications: a connection's application is its transport plus server port,
named from the ``WELL_KNOWN`` table (``http-tcp``, ``dns-udp``, ...) or
``other-tcp`` / ``other-udp``.

Input is a finished :class:`~swell.extract.connections.ConnTable`. Per client
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

Defaults: ``rre_gap_s = 1.0`` (connections of one page or one exchange open
within about a second of each other) and ``session_timeout_s = 60.0`` (a user
silent for a minute is treated as a new user). Both are swell's choices;
:func:`sensitivity` shows how the main distributions move when they change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # connections imports this module (for the port table)
    from swell.extract.connections import ConnTable

TCP, UDP = 6, 17

# fmt: off
WELL_KNOWN: dict[tuple[int, int], str] = {
    (TCP, 20): "ftp-data", (TCP, 21): "ftp", (TCP, 22): "ssh", (TCP, 23): "telnet",
    (TCP, 25): "smtp", (TCP, 53): "dns", (UDP, 53): "dns", (UDP, 67): "dhcp", (UDP, 68): "dhcp",
    (TCP, 80): "http", (TCP, 110): "pop3", (UDP, 123): "ntp", (UDP, 137): "netbios",
    (UDP, 138): "netbios", (TCP, 139): "netbios", (TCP, 143): "imap", (UDP, 161): "snmp",
    (TCP, 179): "bgp", (TCP, 389): "ldap", (TCP, 443): "https", (UDP, 443): "quic",
    (TCP, 445): "smb", (TCP, 465): "smtps", (UDP, 500): "ike", (UDP, 514): "syslog",
    (TCP, 554): "rtsp", (TCP, 587): "smtp", (TCP, 631): "ipp", (TCP, 853): "dot",
    (TCP, 993): "imaps", (TCP, 995): "pop3s", (TCP, 1194): "openvpn", (UDP, 1194): "openvpn",
    (TCP, 1433): "mssql", (UDP, 1900): "ssdp", (TCP, 1935): "rtmp", (TCP, 3306): "mysql",
    (TCP, 3389): "rdp", (UDP, 3478): "stun", (UDP, 4500): "ike", (TCP, 5222): "xmpp",
    (TCP, 5228): "gcm", (UDP, 5353): "mdns", (TCP, 5432): "postgres", (UDP, 5355): "llmnr",
    (TCP, 5900): "vnc", (TCP, 6379): "redis", (TCP, 8000): "http-alt", (TCP, 8080): "http-alt",
    (TCP, 8443): "https-alt", (TCP, 9000): "http-alt",
}
# fmt: on
KNOWN_PORTS = np.zeros((256, 65536), dtype=bool)
for _p, _port in WELL_KNOWN:
    KNOWN_PORTS[_p, _port] = True


def app_name(proto: int, server_port: int) -> str:
    """Application label: ``<service>-<transport>`` or ``other-<transport>``."""
    transport = "tcp" if proto == TCP else "udp"
    return f"{WELL_KNOWN.get((proto, server_port), 'other')}-{transport}"


def app_labels(table: ConnTable) -> np.ndarray:
    """Application label per connection (see :func:`app_name`)."""
    names, code = app_codes(table)
    return np.array(names, dtype=object)[code] if len(code) else np.array([], dtype=object)


def app_codes(table: ConnTable) -> tuple[list[str], np.ndarray]:
    """The sorted application labels and each connection's index into them: what
    ``np.unique(app_labels(table), return_inverse=True)`` gives, without sorting
    strings per connection (only the distinct (transport, server port) pairs)."""
    proto, sport = table.cols["proto"], table.cols["sport"]
    uc, inv = np.unique(proto.astype(np.int64) * 65536 + sport, return_inverse=True)
    per_uc = [app_name(int(k) // 65536, int(k) % 65536) for k in uc]
    names = sorted(set(per_uc))
    rank = {name: i for i, name in enumerate(names)}
    to_code = np.array([rank[x] for x in per_uc], dtype=np.int64)
    return names, to_code[inv.ravel()] if len(uc) else np.zeros(0, dtype=np.int64)


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


def group(table: ConnTable, app_code: np.ndarray, th: Thresholds) -> Grouping:
    """Assign each connection to an RRE and a session (see module docstring);
    ``app_code``: the application index per connection (:func:`app_codes`)."""
    c = table.cols
    start = c["start"]
    end = np.maximum(c["end"], start)
    key = np.asarray(app_code, dtype=np.int64) * (1 << 40) + c["client"]
    order = np.lexsort((start, key))  # = lexsort((start, client, app_code)): same ties
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
        order=order, rre=np.cumsum(new_rre) - 1, session=np.cumsum(new_sess) - 1, think=think
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
    """Samples of every per-application parameter, and a per-application summary."""
    c, p = table.cols, table.pairs
    names, code = app_codes(table)
    gr = group(table, code, th)
    start = c["start"]
    duration = max(float(np.nanmax(c["end"]) - np.nanmin(start)), 1e-9) if len(start) else 0.0
    out: dict[str, dict[str, np.ndarray]] = {}
    summary: dict[str, dict[str, Any]] = {}
    # connections are sorted by application first: each application is a slice
    bounds = np.searchsorted(code[gr.order], np.arange(len(names) + 1))
    # pairs grouped by application, in their order within it (stable counting sort)
    pair_code = code[p["conn"]]
    small = pair_code.astype(np.uint16) if len(names) < 1 << 16 else pair_code
    porder = np.argsort(small, kind="stable")  # radix sort on 16-bit codes
    pbounds = np.searchsorted(pair_code[porder], np.arange(len(names) + 1))
    for ai, app in enumerate(names):
        m = slice(bounds[ai], bounds[ai + 1])
        rows = gr.order[m]
        rre, sess, think = gr.rre[m], gr.session[m], gr.think[m]
        s = start[rows]
        rre_first = np.ones(len(rre), dtype=bool)
        rre_first[1:] = rre[1:] != rre[:-1]
        sess_first = np.ones(len(sess), dtype=bool)
        sess_first[1:] = sess[1:] != sess[:-1]
        inter_conn = np.diff(s)[~rre_first[1:]]
        rre_sess = sess[rre_first]
        sess_starts = np.sort(s[sess_first])
        pm = porder[pbounds[ai] : pbounds[ai + 1]]
        req, rsp, pthink = p["req_size"][pm], p["rsp_size"][pm], p["think_before"][pm]
        out[app] = {
            "numConn": _counts(rre),
            "interConn": inter_conn,
            "numRRE": _counts(rre_sess),
            "interRRE": think[~np.isnan(think)],
            "numPairs": c["num_pairs"][rows],
            "reqSize": req,
            "rspSize": rsp,
            "reqThink": np.maximum(pthink[~np.isnan(pthink)], 0.0),
            "sessionStart": sess_starts,
            "interSession": np.diff(sess_starts),
            "rreServer": c["server"][rows][rre_first],
        }
        summary[app] = _summary(c, rows, app, int(sess_first.sum()), int(rre_first.sum()), duration)
    return out, summary


def _summary(
    c: dict[str, np.ndarray], rows: np.ndarray, app: str, sessions: int, rres: int, duration: float
) -> dict[str, Any]:
    ports, counts = np.unique(c["sport"][rows], return_counts=True)
    return {
        "transport": app.rsplit("-", 1)[-1],
        "server_port": int(ports[np.argmax(counts)]),
        "connections": int(len(rows)),
        "lower_bound_connections": int(c["lower_bound"][rows].sum()),
        "client_inferred_connections": int(c["client_inferred"][rows].sum()),
        "one_way_connections": int(c["one_way"][rows].sum()),
        "bytes_c2s": int(c["new_bytes_c2s"][rows].sum() + c["acked_c2s"][rows].sum()),
        "bytes_s2c": int(c["new_bytes_s2c"][rows].sum() + c["acked_s2c"][rows].sum()),
        "wire_bytes_c2s": int(c["wire_c2s"][rows].sum()),
        "wire_bytes_s2c": int(c["wire_s2c"][rows].sum()),
        "clients": int(len(np.unique(c["client"][rows]))),
        "servers": int(len(np.unique(c["server"][rows]))),
        "sessions": sessions,
        "rres": rres,
        "sessions_per_s": sessions / duration if duration > 0 else 0.0,
    }


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
