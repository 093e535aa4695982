"""The Swing model directory: format, fitting, saving and loading.

A model is a directory (format documented in ``docs/model-format.md``)::

    MODEL/model.json   format + version, provenance (source file, XXH3-128 hash,
                       thresholds, swell version), trace summary, per-application
                       summary, network summary, what could not be estimated and
                       what was assumed, sensitivity table, applied variants
    MODEL/arrays.npz   every distribution as empirical samples:
                       app/<app>/<param>   (see swell.extract.sessions.APP_PARAMS;
                       optional: JOINT_PARAMS, the trace's RREs whole;
                       SESSION_PARAMS, its sessions whole)
                       net/<side>/<param>  (side client|server; hosts, delay_s,
                       capacity_bps, loss and their *_measured masks)

It is written with :func:`swell.fsutil.atomic_dir` (all or nothing).
:func:`load_model` checks the format name and version and validates the
arrays against the metadata; code elsewhere (the Swing generator, the topology
that draws access links) uses the typed :class:`SwingModel` accessors only.
"""

from __future__ import annotations

import copy
import datetime as _dt
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swell import __version__
from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.conntypes import ConnTable
from swell.extract.network import NET_PARAMS, SIDES, Evidence, describe, estimate_network
from swell.extract.sessions import (
    ANCHOR_PARAMS,
    APP_PARAMS,
    CLIENT_PARAMS,
    EARLY_PARAMS,
    JOINT_PARAMS,
    PACE_PARAMS,
    PAIR_WAIT_PARAMS,
    SESSION_PARAMS,
    WAIT_PARAMS,
    Thresholds,
    app_parameters,
)

FORMAT = "swell-swing-model"
FORMAT_VERSION = 1
# provenance.content_hash: the trace file's hash, computed by the reader (extract/native/digest.rs)
HASH_ALGORITHM = "xxh3-128"
INT_PARAMS = (
    "numConn",
    "numRRE",
    "numPairs",
    "reqSize",
    "rspSize",
    "rreServer",
    "rreConns",
    "rrePairs",
    "sessRres",
    "pairReq",
    "pairRsp",
    "sessClient",
    "pairReqPkts",
    "pairEarly",
)
RRE_DRAW_TEXT = {  # what SwingModel.rre_draw() means, for `swell model show`
    "joint": (
        "the trace's RREs are in the model: with rre_draw=joint (bench/fidelity.py "
        "--rre-draw joint) each RRE's connections, offsets and pair counts are drawn "
        "together; by default one by one; with rre_draw=session the trace's sessions "
        "whole where the model has them (docs/scale.md 7.3)"
    ),
    "independent": (
        "numConn, interConn and numPairs drawn one by one: no joint RRE "
        "sample (a model written before it; re-extract to get it)"
    ),
    "mixed": "rre_draw=joint draws whole RREs for the applications with a joint RRE sample, "
    "one by one for the others",
}
PARAM_UNITS = {
    "numConn": "connections per RRE",
    "interConn": "s between connection starts in an RRE",
    "numRRE": "RREs per session",
    "interRRE": "s of user think time between RREs",
    "numPairs": "request/response pairs per connection",
    "reqSize": "bytes per request",
    "rspSize": "bytes per response",
    "reqThink": "s from a response's end to the next request",
    "sessionStart": "s since trace start",
    "interSession": "s between session starts",
    "rreServer": "server host index (into net/server/hosts order) per RRE",
    "rreConns": "connections per RRE, the joint sample's RREs in order",
    "rreOffsets": "s from the RRE's first connection start, per connection of rreConns",
    "rrePairs": "request/response pairs per connection of rreConns",
    "sessRres": "RREs per session, the trace's sessions in order (RREs as in rreConns)",
    "sessGaps": "s of idle gap before each RRE of sessRres but a session's first",
    "pairReq": "bytes per request, per pair of the connections of rreConns in order",
    "pairRsp": "bytes per response, per pair as pairReq",
    "pairThink": "s from a pair's response end to its connection's next request (0 last)",
    "rspWait": "s a server waited between a request's end and its response (its latency)",
    "pairAt": "s from the connection's first packet to the pair's request, per pair as "
              "pairReq (-1: no request seen)",
    "pairWait": "s the pair's server waited (its rspWait), per pair as pairReq (-1: none "
                "measured)",
    "pairReqPkts": "packets of the pair's request (its bytes over its connection's mean "
                   "client->server payload, >= 1; 0: no request), per pair as pairReq",
    "pairReqSpan": "s from the pair's request's first packet to its last, per pair as pairReq",
    "pairEarly": "1 where the pair's response left its server before its request could have "
                 "arrived (not a reply: the request does not wait for it), per pair as pairReq",
    "sessClient": "client host index (into net/client/hosts order) per session of sessRres",
    "delay_s": "one-way access delay, s",
    "capacity_bps": "access capacity, bit/s",
    "loss": "loss rate (retransmitted / data segments)",
}


@dataclass
class SwingModel:
    """A loaded (or freshly fitted) model: metadata plus named sample arrays."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    # -- accessors used by generators and topologies ------------------------------------------
    @property
    def apps(self) -> list[str]:
        return sorted(self.meta["apps"])

    def app_info(self, app: str) -> dict[str, Any]:
        return self.meta["apps"][app]

    def samples(self, app: str, param: str) -> np.ndarray:
        """Empirical samples of an application parameter (``APP_PARAMS``)."""
        key = f"app/{app}/{param}"
        if key not in self.arrays:
            raise KeyError(key)
        return self.arrays[key]

    def rre_draw(self, app: str | None = None) -> str:
        """Which RRE draws the model allows: ``joint`` (it has the trace's RREs whole,
        ``JOINT_PARAMS``: the schedule's opt-in ``rre_draw="joint"`` draws them; by
        default numConn, interConn and numPairs are drawn one by one),
        ``independent`` (one by one only: a model written before the joint sample)
        or ``mixed``."""
        apps = [app] if app else self.apps
        have = {all(f"app/{a}/{p}" in self.arrays for p in JOINT_PARAMS) for a in apps}
        return "mixed" if len(have) > 1 else "joint" if have == {True} else "independent"

    def has_sessions(self, app: str) -> bool:
        """Whether the model has ``app``'s sessions whole (``SESSION_PARAMS`` and the
        joint RRE sample: what ``rre_draw="session"`` draws)."""
        return all(f"app/{app}/{p}" in self.arrays for p in JOINT_PARAMS + SESSION_PARAMS)

    def net(self, side: str, param: str, measured_only: bool = False) -> np.ndarray:
        """Per-host values of a network parameter on ``side`` (client|server)."""
        v = self.arrays[f"net/{side}/{param}"]
        return v[self.arrays[f"net/{side}/{param}_measured"]] if measured_only else v

    def hosts(self, side: str) -> list[str]:
        return [str(h) for h in self.arrays[f"net/{side}/hosts"]]

    @property
    def duration_s(self) -> float:
        return float(self.meta["trace"]["duration_s"])

    def session_rate(self, app: str | None = None) -> float:
        """Sessions per second of one application, or of all together."""
        apps = [app] if app else self.apps
        return float(sum(self.meta["apps"][a]["sessions_per_s"] for a in apps))

    def mean_rate_bps(self) -> float:
        """Mean payload rate of the modelled traffic, both directions, bit/s."""
        scale = float(self.meta.get("rate_scale", 1.0))
        total = sum(a["bytes_c2s"] + a["bytes_s2c"] for a in self.meta["apps"].values())
        return 8.0 * total * scale / max(self.duration_s, 1e-9)

    @property
    def not_estimated(self) -> list[str]:
        return list(self.meta.get("not_estimated", []))

    @property
    def assumed(self) -> list[str]:
        return list(self.meta.get("assumed", []))

    def copy(self) -> SwingModel:
        return SwingModel(copy.deepcopy(self.meta), {k: v.copy() for k, v in self.arrays.items()})


def _trace_notes(table: ConnTable) -> tuple[list[str], list[str]]:
    """What one-directional, mid-stream or header-only input prevents, and what is assumed."""
    c = table.cols
    n = len(table)
    missing, assumed = [], []
    if n == 0:
        return ["everything: no TCP or UDP traffic in the trace"], []
    one_way = int(c["one_way"].sum())
    how = (
        "TCP: the unseen direction's sizes inferred from the seen direction's "
        "acknowledgement numbers, timed at the acknowledging packet; UDP: 0 bytes"
    )
    if one_way == n:
        missing.append(
            "packets of the second direction: only one direction of every connection was captured"
        )
        assumed.append(how)
    elif one_way:
        assumed.append(f"{one_way} of {n} connections one-directional; {how}")
    tcp = c["proto"] == 6
    if tcp.any() and np.isnan(c["server_leg"][tcp]).all():
        missing.append("handshake RTT legs from SYN -> SYN/ACK: no complete handshake seen")
    inferred = int((c["client_inferred"] & tcp).sum())
    if inferred:
        assumed.append(
            f"{inferred} of {int(tcp.sum())} TCP connections without SYN or SYN/ACK: "
            "client/server roles inferred from well-known ports (else the higher "
            "port is the client)"
        )
    if (~tcp).any():
        assumed.append(
            "UDP flows: the server is the well-known port's side, else the first "
            "sender is the client; flows end after 60 s idle"
        )
    dups = int(table.stats.get("duplicates", 0))
    if dups:
        assumed.append(
            f"{dups} packets recorded twice (same direction, seq, ack, length and "
            "flags within 200 us) counted once for data, loss and capacity"
        )
    lb = int(c["lower_bound"].sum())
    if lb:
        assumed.append(
            f"{lb} TCP connections open at the trace start or end: their sizes and "
            "durations are lower bounds"
        )
    return missing, assumed


def fit_model(
    table: ConnTable,
    pair_hist: dict[int, int],
    th: Thresholds,
    provenance: dict[str, Any],
    ev: Evidence | None = None,
    sensitivity_rows: list[dict[str, float]] | None = None,
) -> SwingModel:
    """Build a :class:`SwingModel` from a connection table."""
    ev = ev or Evidence()
    # independent; numpy releases the GIL in its sorts and large loops: use both cores.
    # Neither needs the pairs first: with a PendingTable (native tracker) both start
    # while the pairs are still being computed, app_parameters waits for them last.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="swell-net") as pool:
        fut = pool.submit(estimate_network, table, pair_hist, ev)
        params, summary = app_parameters(table, th)
        net = fut.result()
    arrays: dict[str, np.ndarray] = {}
    server_ids = net.sides["server"]["hosts"]
    for app, vals in params.items():
        for name in (APP_PARAMS + JOINT_PARAMS + SESSION_PARAMS + WAIT_PARAMS + ANCHOR_PARAMS
                     + PAIR_WAIT_PARAMS + CLIENT_PARAMS + PACE_PARAMS + EARLY_PARAMS):
            if name not in vals:
                continue
            v = vals[name]
            if name == "rreServer":
                v = np.searchsorted(server_ids, v)
            elif name == "sessClient":
                v = np.searchsorted(net.sides["client"]["hosts"], v)
            arrays[f"app/{app}/{name}"] = np.asarray(
                v, dtype=np.int64 if name in INT_PARAMS else np.float64
            )
    texts = np.array(table.hosts, dtype=str)  # the longest text's width: no fresh U45 copy
    for side, vals in net.sides.items():
        arrays[f"net/{side}/hosts"] = texts[vals["hosts"]].astype("U45")
        for p in NET_PARAMS:
            arrays[f"net/{side}/{p}"] = vals[p].astype(np.float64)
            arrays[f"net/{side}/{p}_measured"] = vals[f"{p}_measured"].astype(bool)
    c = table.cols
    missing, assumed = _trace_notes(table)
    duration = float(np.nanmax(c["end"]) - np.nanmin(c["start"])) if len(table) else 0.0
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "swell_version": __version__,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "provenance": {
            **provenance,
            "thresholds": th.as_dict(),
            "evidence": {
                "min_pairs": ev.min_pairs,
                "min_segments": ev.min_segments,
                "fallback_seed": ev.seed,
            },
        },
        "trace": {**table.stats, "duration_s": duration, "t0_ns": table.t0_ns},
        "apps": summary,
        "network": describe(net),
        "not_estimated": missing + net.not_estimated,
        "assumed": assumed + net.assumed,
        "fallback_counts": net.fallback_counts,
        "sensitivity": sensitivity_rows or [],
        "variants": [],
        "rate_scale": 1.0,
        "param_units": PARAM_UNITS,
    }
    return SwingModel(meta, arrays)


def save_model(model: SwingModel, dest: str | os.PathLike[str]) -> Path:
    """Write the model directory atomically (validated first)."""
    validate(model, str(dest))
    return modeldir.save(dest, model.meta, model.arrays, default=str)


def load_model(src: str | os.PathLike[str]) -> SwingModel:
    """Read and validate a model directory; a :class:`SwellError` says what is wrong."""
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, "swing")
    model = SwingModel(meta, arrays)
    validate(model, str(src))
    return model


def validate(model: SwingModel, where: str) -> None:
    """Check that metadata and arrays agree; raise :class:`SwellError` otherwise."""
    meta, arrays = model.meta, model.arrays
    for key in ("provenance", "trace", "apps", "not_estimated", "assumed"):
        if key not in meta:
            raise SwellError(where, f"model.json lacks {key!r}")
    for app in meta["apps"]:
        for p in APP_PARAMS:
            k = f"app/{app}/{p}"
            if k not in arrays:
                raise SwellError(where, f"arrays.npz lacks {k}")
            if arrays[k].dtype.kind == "f" and not np.isfinite(arrays[k]).all():
                raise SwellError(where, f"{k} holds NaN or infinite samples")
            if (
                p not in ("interConn", "interRRE", "reqThink", "sessionStart", "interSession")
                and len(arrays[k])
                and arrays[k].min() < 0
            ):
                raise SwellError(where, f"{k} holds negative values")
        _validate_joint(arrays, app, where)
        _validate_sessions(arrays, app, where)
        _validate_waits(arrays, app, where)
    for side in SIDES:
        n = len(arrays.get(f"net/{side}/hosts", []))
        for p in NET_PARAMS:
            for k in (f"net/{side}/{p}", f"net/{side}/{p}_measured"):
                if k not in arrays or len(arrays[k]) != n:
                    raise SwellError(where, f"{k} missing or not one value per {side} host")
    for k in arrays:
        head = k.split("/")
        if len(head) != 3 or head[0] not in ("app", "net"):
            raise SwellError(where, f"unexpected array key {k!r}")
        if head[0] == "app" and head[1] not in meta["apps"]:
            raise SwellError(where, f"array {k!r} for an application not in model.json")


def _validate_joint(arrays: dict[str, np.ndarray], app: str, where: str) -> None:
    """The optional joint RRE sample of ``app``: all three arrays or none, consistent."""
    keys = [f"app/{app}/{p}" for p in JOINT_PARAMS]
    present = [k in arrays for k in keys]
    if not any(present):
        return  # a model written before the joint sample: the independent draw
    if not all(present):
        raise SwellError(
            where, f"arrays.npz has only part of {app}'s joint RRE sample (needs {', '.join(keys)})"
        )
    conns, offsets, pairs = (np.asarray(arrays[k]) for k in keys)
    if conns.ndim != 1 or offsets.ndim != 1 or pairs.ndim != 1:
        raise SwellError(where, f"{app}'s joint RRE sample is not one-dimensional")
    if len(conns) and (conns.dtype.kind not in "iu" or conns.min() < 1):
        raise SwellError(where, f"{keys[0]} must hold integers >= 1")
    if pairs.dtype.kind not in "iu" or (len(pairs) and pairs.min() < 0):
        raise SwellError(where, f"{keys[2]} must hold integers >= 0")
    n = int(conns.sum())
    if len(offsets) != n or len(pairs) != n:
        raise SwellError(
            where,
            f"{app}'s joint RRE sample: {keys[0]} sums to {n} connections "
            f"but {keys[1]} has {len(offsets)} and {keys[2]} {len(pairs)}",
        )
    if not np.isfinite(offsets).all() or (n and offsets.min() < 0):
        raise SwellError(where, f"{keys[1]} holds negative, NaN or infinite offsets")
    if n and (offsets[np.r_[0, np.cumsum(conns)[:-1]]] != 0).any():
        raise SwellError(where, f"{keys[1]}: an RRE's first connection must have offset 0")


def _validate_waits(arrays: dict[str, np.ndarray], app: str, where: str) -> None:
    """The optional server waits of ``app`` (``WAIT_PARAMS``): times >= 0 (a model
    written before them has none: its schedules have no waits)."""
    for p in WAIT_PARAMS:
        k = f"app/{app}/{p}"
        if k not in arrays:
            continue
        a = np.asarray(arrays[k])
        if a.ndim != 1 or a.dtype.kind != "f" or not np.isfinite(a).all() or (
            len(a) and a.min() < 0
        ):
            raise SwellError(where, f"{k} must hold times >= 0 (s)")


def _validate_sessions(arrays: dict[str, np.ndarray], app: str, where: str) -> None:
    """The optional whole sessions of ``app``: all five arrays or none, on top of the
    joint RRE sample, their counts agreeing with it."""
    keys = [f"app/{app}/{p}" for p in SESSION_PARAMS]
    present = [k in arrays for k in keys]
    if not any(present):
        for p in ANCHOR_PARAMS + PAIR_WAIT_PARAMS + CLIENT_PARAMS + PACE_PARAMS + EARLY_PARAMS:
            if f"app/{app}/{p}" in arrays:
                raise SwellError(where, f"app/{app}/{p} without {app}'s sessions")
        return  # a model written before them: rre_draw="session" falls back
    if not all(present) or f"app/{app}/rreConns" not in arrays:
        raise SwellError(
            where, f"arrays.npz has only part of {app}'s sessions (needs {', '.join(keys)} "
            "and the joint RRE sample)"
        )
    rres, gaps, req, rsp, think = (np.asarray(arrays[k]) for k in keys)
    conns, pairs = arrays[f"app/{app}/rreConns"], arrays[f"app/{app}/rrePairs"]
    if any(a.ndim != 1 for a in (rres, gaps, req, rsp, think)):
        raise SwellError(where, f"{app}'s sessions are not one-dimensional")
    if rres.dtype.kind not in "iu" or (len(rres) and rres.min() < 1):
        raise SwellError(where, f"{keys[0]} must hold integers >= 1")
    if int(rres.sum()) != len(conns) or len(gaps) != len(conns) - len(rres):
        raise SwellError(
            where, f"{app}'s sessions: {keys[0]} sums to {int(rres.sum())} RREs and "
            f"{keys[1]} has {len(gaps)} gaps, the joint sample has {len(conns)} RREs"
        )
    n = int(np.asarray(pairs).sum())
    if len(req) != n or len(rsp) != n or len(think) != n:
        raise SwellError(
            where, f"{app}'s sessions: rrePairs sums to {n} pairs but {keys[2]}, {keys[3]} "
            f"and {keys[4]} have {len(req)}, {len(rsp)} and {len(think)}"
        )
    if req.dtype.kind not in "iu" or rsp.dtype.kind not in "iu" or (
        n and min(req.min(), rsp.min()) < 0
    ):
        raise SwellError(where, f"{keys[2]} and {keys[3]} must hold integers >= 0")
    for k, a in ((keys[1], gaps), (keys[4], think)):
        if not np.isfinite(a).all() or (len(a) and a.min() < 0):
            raise SwellError(where, f"{k} holds negative, NaN or infinite times")
    for key in (f"app/{app}/{ANCHOR_PARAMS[0]}", f"app/{app}/{PAIR_WAIT_PARAMS[0]}"):
        if key in arrays:  # optional: models written before them have none
            at = np.asarray(arrays[key])
            if at.ndim != 1 or len(at) != n or not np.isfinite(at).all() \
                    or at.dtype.kind != "f" or (n and at.min() < -1.0):
                raise SwellError(where, f"{key} must hold {n} times (s; -1: none), one per pair")
    _validate_pace(arrays, app, n, where)
    early_key = f"app/{app}/{EARLY_PARAMS[0]}"
    if early_key in arrays:  # optional: models written before it have none
        e = np.asarray(arrays[early_key])
        if e.ndim != 1 or len(e) != n or e.dtype.kind not in "iu" or not np.isin(e, (0, 1)).all():
            raise SwellError(where, f"{early_key} must hold {n} flags (0 or 1), one per pair")
    cl_key = f"app/{app}/{CLIENT_PARAMS[0]}"
    if cl_key in arrays:  # optional: models written before it have none
        cl = np.asarray(arrays[cl_key])
        n_clients = len(arrays.get("net/client/hosts", ()))
        if cl.ndim != 1 or len(cl) != len(rres) or cl.dtype.kind not in "iu" or (
                len(cl) and (cl.min() < 0 or cl.max() >= n_clients)):
            raise SwellError(where, f"{cl_key} must hold {len(rres)} client indices (into "
                             f"net/client/hosts, {n_clients} hosts), one per session")


def _validate_pace(arrays: dict[str, np.ndarray], app: str, n: int, where: str) -> None:
    """The optional requests' packets and spans of ``app``'s ``n`` whole-session pairs:
    both or neither (models written before them have none)."""
    keys = [f"app/{app}/{p}" for p in PACE_PARAMS]
    present = [k in arrays for k in keys]
    if not any(present):
        return
    if not all(present):
        raise SwellError(where, f"arrays.npz has {keys[present.index(True)]} without "
                         f"{keys[present.index(False)]}")
    pkts, span = (np.asarray(arrays[k]) for k in keys)
    if pkts.ndim != 1 or len(pkts) != n or pkts.dtype.kind not in "iu" or (n and pkts.min() < 0):
        raise SwellError(where, f"{keys[0]} must hold {n} packet counts >= 0, one per pair")
    if span.ndim != 1 or len(span) != n or span.dtype.kind != "f" \
            or not np.isfinite(span).all() or (n and span.min() < 0):
        raise SwellError(where, f"{keys[1]} must hold {n} times >= 0 (s), one per pair")
