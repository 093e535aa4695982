"""Drawing the session schedule: everything a Swing run will do, as data, from one seed.

The schedule's types and file are :mod:`swell.generators.schedule_file`
(re-exported here): sessions in start order, each with a client and RREs of
connections carrying request/response pairs, their think times, the servers'
waits (the model's ``rspWait``, drawn with a generator of its own so the rest
of the draw is as without it) and the optional request anchors. A whole session
(below) anchors the requests that followed a pause of :data:`ANCHOR_THINK_S` or
more at their times in the trace (the model's ``pairAt``): the pause is the
user's, and replayed after each connection's own response, with its own transfer
times, a page's requests drift apart by hundreds of milliseconds where the
trace's came together (docs/fidelity.md).

:func:`build_schedule` draws a schedule from per-application empirical
samples (:class:`AppSamples`, read from a Swing model directory by
:func:`load_app_samples`) with ONE ``numpy.random.Generator`` seeded by
``seed``, so the same inputs and seed give the same file byte for byte
(times are rounded to the nanosecond when drawn, so the file holds exactly
what is in memory).
By default (``rre_draw="independent"``) an RRE's ``numConn``, ``interConn``
and ``numPairs`` are drawn one by one, as Swing does. With ``rre_draw="joint"``
(opt-in) its connections are drawn whole: one of the trace's RREs of the
application, picked uniformly, gives the number of connections, their offsets
and each one's pair count together (the model's joint RRE sample,
:data:`swell.extract.sessions.JOINT_PARAMS`), so the trace's pages of several
long persistent connections come back as pages (docs/scale.md, section 7.2:
closer energy, but whole RREs outlast short runs' windows, so not the
default). Request and response sizes and think times are drawn per pair
either way; a model written before the joint sample draws one by one.
With ``rre_draw="session"`` (opt-in, tmix-like) a whole session of the trace is
taken: one of the application's trace sessions, picked uniformly, gives its RREs,
the gaps between them, each RRE's connections and offsets, and every pair's
request and response sizes and think time (the model's
:data:`swell.extract.sessions.SESSION_PARAMS`), each RRE's own server (its
``rreServer``; a joint draw's RRE keeps its own server too), each pair's own
server wait where the trace measured one (``pairWait``; the others drawn) and
the session's own client (``sessClient``, matched by link). A whole session's
UDP request leaves as the trace's did (``pairReqPkts``, ``pairReqSpan``): as
many datagrams, spread evenly over its span (the connection's ``pace``), where
one write would put datagrams of up to 1,472 bytes on the wire at once (campus's
game clients sent streams of small datagrams over tens of milliseconds;
docs/fidelity.md, "Paced requests"). TCP requests stay one write: a TCP
request's span in the trace is mostly its transport's (windows, round trips),
which the emulated path makes again. With ``early`` asked (the Swing spec's
``early_requests``), a whole session's TCP request whose trace response was not a
reply (the model's ``pairEarly``: it left the server before the request could have
arrived, both sides streaming at once) leaves at its trace time without waiting for
the responses outstanding (the connection's ``early``), so its response follows the
previous one instead of a round trip behind it; with ``early_requests: connections``
every request of a connection that had one such pair does, on the trace's clock
(docs/fidelity.md, "Responses that were not replies"), and with ``all`` every request
of every connection (each at its trace time: a client that sent on its own clock). A
model without the sessions falls back to the joint draw (one by one without the joint
sample either); ``meta["rre_draw"]`` says which draw each application got.
Requests are at least the wire header (8 bytes TCP, 24 bytes UDP): smaller
requests are raised to that size and counted in ``meta["raised_requests"]``.
The drawn sessions name observed hosts; :mod:`swell.generators.sessionmap` puts
them on the emulated ones (a whole session keeps its observed client for that).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from swell.analysis.swing_window import PathEstimate, conn_spans, path_estimate, share_in
from swell.errors import SwellError
from swell.generators import steady_start
from swell.generators.arrivals import STATIONARY, ArrivalProcess, choose, trace_rate
from swell.generators.samples import (  # noqa: F401  (re-exported: the schedule's inputs)
    ANCHOR_THINK_S,
    MODEL_PARAMS,
    RRE_DRAWS,
    AppSamples,
    app_samples,
    apps_for_draw,
    load_app_samples,
)
from swell.generators.schedule_file import (  # noqa: F401  (re-exported: the schedule)
    FORMAT,
    MAX_BYTES,
    MAX_WAIT_S,
    MIN_REQ,
    VERSION,
    WAIT_MIN_REQ,
    Conn,
    Rre,
    Schedule,
    Session,
    read_schedule,
    session_bytes,
    validate,
    write_schedule,
)
from swell.generators.sessionmap import map_hosts

WAIT_STREAM = 0x57A17  # the servers' waits' own generator: default_rng([seed, WAIT_STREAM])


def _draw(rng: np.random.Generator, samples: np.ndarray, n: int, default: float = 0.0
          ) -> np.ndarray:
    samples = np.asarray(samples, dtype=float)
    if samples.size == 0:
        return np.full(n, default)
    return samples[rng.integers(0, samples.size, n)]


def _draw_conn(app: AppSamples, server: str, offset: float, rng: np.random.Generator,
               meta: dict[str, int], npairs: int | None = None) -> Conn:
    """One connection; its pair count drawn from ``numPairs`` unless given (joint draw)."""
    if npairs is None:
        npairs = int(_draw(rng, app.num_pairs, 1)[0])
    npairs = max(1, npairs)
    req = np.clip(_draw(rng, app.req_size, npairs), 0, MAX_BYTES).astype(np.int64)
    rsp = np.clip(_draw(rng, app.rsp_size, npairs), 0, MAX_BYTES).astype(np.int64)
    think = np.clip(_draw(rng, app.req_think, npairs), 0, None)
    think[-1] = 0.0
    low = req < MIN_REQ[app.proto]
    meta["raised_requests"] += int(low.sum())
    req[low] = MIN_REQ[app.proto]
    pairs = tuple((int(q), int(a), round(float(k), 9)) for q, a, k in zip(req, rsp, think,
                                                                         strict=True))
    return Conn(server, app.proto, app.name, round(offset, 9), pairs)


def _pick_server(app: AppSamples, n_servers: int, rng: np.random.Generator) -> str:
    """An RRE's server, ``OBS:PORT``: the observed server drawn by its popularity."""
    if app.rre_server.size:
        pick = int(_draw(rng, app.rre_server, 1)[0])
    else:
        pick = int(rng.integers(n_servers))
    return f"{pick}:{app.port}"


def _own_server(app: AppSamples, r: int, n_servers: int, rng: np.random.Generator) -> str:
    """The server of the trace's RRE ``r`` (``rreServer`` lines up with the joint sample's
    RREs): a whole RRE keeps its own, so its pages go to its server's path (the
    host mapping matches delays, :mod:`.hostmap`). Drawn by popularity where the samples
    do not line up (a model edited by hand)."""
    if app.rre_server.size == app.rre_conns.size:
        return f"{int(app.rre_server[r])}:{app.port}"
    return _pick_server(app, n_servers, rng)


def _whole_session(app: AppSamples, t: float, client: str, n_servers: int,
                   rng: np.random.Generator, meta: dict[str, int]) -> Session:
    """One of the trace's sessions of ``app``, whole, each RRE with its own server. A
    connection of the trace without a pair runs one empty pair (``meta["empty_conns"]``)."""
    k = int(rng.integers(app.sess_rres.size))
    if app.sess_client.size:  # the observed client, matched to a client host later
        client = str(int(app.sess_client[k]))
    first = int(app._sess_start[k])
    rres = []
    for r in range(first, int(app._sess_start[k + 1])):
        gap = 0.0 if r == first else float(app.sess_gaps[r - k - 1])
        server = _own_server(app, r, n_servers, rng)
        conns = []
        for c in range(int(app._rre_start[r]), int(app._rre_start[r + 1])):
            a, b = int(app._pair_start[c]), int(app._pair_start[c + 1])
            req = np.clip(app.pair_req[a:b], 0, MAX_BYTES).astype(np.int64)
            low = req < MIN_REQ[app.proto]
            meta["raised_requests"] += int(low.sum())
            req[low] = MIN_REQ[app.proto]
            pairs = tuple((int(q), int(min(x, MAX_BYTES)), round(float(h), 9)) for q, x, h
                          in zip(req, app.pair_rsp[a:b], app.pair_think[a:b], strict=True))
            at: tuple[float, ...] = ()
            own: tuple[float, ...] = ()
            pace: tuple[tuple[int, float], ...] = ()
            early: tuple[bool, ...] = ()
            if not pairs:
                meta["empty_conns"] = meta.get("empty_conns", 0) + 1
                pairs = ((MIN_REQ[app.proto], 0, 0.0),)
            else:
                pairs = (*pairs[:-1], (*pairs[-1][:2], 0.0))
                at = _anchors(app, a, b)
                own = _own_waits(app, a, b)
                pace = _paces(app, a, b)
                early = _early(app, a, b)
            conns.append(Conn(server, app.proto, app.name,
                              round(float(app.rre_offsets[c]), 9), pairs, waits=own, at=at,
                              pace=pace, early=early))
        rres.append(Rre(round(gap, 9), tuple(conns)))
    return Session(0, round(t, 9), client, tuple(rres))


def _anchors(app: AppSamples, a: int, b: int) -> tuple[float, ...]:
    """The request times of pairs ``a:b`` (one connection) that follow a pause of at least
    the application's ``anchor_think`` (:data:`ANCHOR_THINK_S` unless the spec says
    otherwise), and the early ones (``_early``) whatever their pause, -1 for the others;
    empty when none (or no ``pairAt``)."""
    if not app.pair_at.size or b - a < 2:
        return ()
    after_pause = np.r_[False, app.pair_think[a:b - 1] >= app.anchor_think]
    if (e := _early_mask(app, a, b)) is not None:
        after_pause |= np.r_[False, e[1:]]
    at = np.where(after_pause & (app.pair_at[a:b] >= 0), app.pair_at[a:b], -1.0)
    return tuple(round(float(x), 9) for x in at) if (at >= 0).any() else ()


def _paces(app: AppSamples, a: int, b: int) -> tuple[tuple[int, float], ...]:
    """How the UDP requests of pairs ``a:b`` (one connection) left in the trace: per pair
    its datagrams and their span (s); empty for TCP, without ``pairReqPkts``, or when
    every request of the connection was one datagram."""
    if app.proto != "udp" or not app.pair_req_pkts.size:
        return ()
    k = app.pair_req_pkts[a:b]
    span = app.pair_req_span[a:b]
    if not ((k > 1) & (span > 0)).any():
        return ()
    return tuple((int(max(n, 1)), round(float(t), 6) if n > 1 else 0.0)
                 for n, t in zip(k, span, strict=True))


def _early_mask(app: AppSamples, a: int, b: int) -> np.ndarray | None:
    """Per pair of ``a:b`` (one connection), whether its request leaves without waiting
    for the responses outstanding: the application's ``early`` "pairs", those whose trace
    responses were not replies (``pairEarly``); "connections", all of a connection with
    one such pair; "all", every pair (the client on the trace's clock: each request at
    its ``pairAt``). None for "none", UDP, one pair, a model without ``pairEarly`` (for
    "all": without ``pairAt``, which would send the requests back to back)."""
    if app.early == "none" or app.proto != "tcp" or b - a < 2:
        return None
    if app.early == "all":
        return np.ones(b - a, dtype=bool) if app.pair_at.size else None
    if not app.pair_early.size:
        return None
    e = app.pair_early[a:b] > 0
    return np.full(b - a, bool(e.any())) if app.early == "connections" else e


def _early(app: AppSamples, a: int, b: int) -> tuple[bool, ...]:
    """The connection's ``early`` (:func:`_early_mask`); empty when none but the first
    request is early (it waits for nothing)."""
    e = _early_mask(app, a, b)
    return tuple(bool(x) for x in e) if e is not None and e[1:].any() else ()


def _own_waits(app: AppSamples, a: int, b: int) -> tuple[float, ...]:
    """The trace's own server waits of pairs ``a:b`` (one connection), -1 where a pair has
    none (:func:`_with_waits` draws those); empty without ``pairWait`` or when the
    application draws no waits."""
    if not app.pair_wait.size or not _draws_waits(app):
        return ()
    return tuple(round(float(w), 6) if w >= 0 else -1.0 for w in app.pair_wait[a:b])


def _draws_waits(app: AppSamples) -> bool:
    return app.proto == "tcp" and app.rsp_wait.size > 0 and app.wait_rng is not None


def _draw_session(app: AppSamples, t: float, client: str, n_servers: int,
                  rng: np.random.Generator, meta: dict[str, int]) -> Session:
    """One session; each connection's server is ``OBS:PORT``, OBS the observed server
    (the model's ``rreServer`` sample: its popularity), mapped onto hosts later."""
    if app.whole:
        return _with_waits(_whole_session(app, t, client, n_servers, rng, meta), app)
    rres = []
    for i in range(max(1, int(_draw(rng, app.num_rre, 1)[0]))):
        gap = 0.0 if i == 0 else max(0.0, float(_draw(rng, app.inter_rre, 1)[0]))
        if app.joint:  # one of the trace's RREs, whole, with its own server
            k = int(rng.integers(app.rre_conns.size))
            server = _own_server(app, k, n_servers, rng)
            offsets, npairs = app.rre_shape(k)
            conns = tuple(_draw_conn(app, server, float(o), rng, meta, int(n))
                          for o, n in zip(offsets, npairs, strict=True))
            rres.append(Rre(round(gap, 9), conns))
            continue
        server = _pick_server(app, n_servers, rng)
        nconn = max(1, int(_draw(rng, app.num_conn, 1)[0]))
        gaps = np.clip(_draw(rng, app.inter_conn, nconn), 0, None)
        offsets = np.concatenate([[0.0], np.cumsum(gaps[1:])])
        conns = tuple(_draw_conn(app, server, float(o), rng, meta) for o in offsets)
        rres.append(Rre(round(gap, 9), conns))
    return _with_waits(Session(0, round(t, 9), client, tuple(rres)), app)


def _with_waits(sess: Session, app: AppSamples) -> Session:
    """``sess`` with each TCP pair's server wait drawn from the application's ``rspWait``
    (its own generator: the rest of the draw does not change), or a whole session's pair
    its own (``pairWait``, set by :func:`_whole_session`; the draw is made for it all the
    same, so the other pairs' waits are those of a draw without them). A request shorter
    than :data:`WAIT_MIN_REQ` bytes (one the server answers at once in the trace's terms:
    an empty request raised to the header) gets none, so no request changes size."""
    if not _draws_waits(app):
        return sess
    assert app.wait_rng is not None
    rres = []
    for r in sess.rres:
        conns = []
        for c in r.conns:
            w = np.clip(_draw(app.wait_rng, app.rsp_wait, len(c.pairs)), 0.0, MAX_WAIT_S)
            if c.waits:  # a whole session's own, -1 where the trace measured none
                w = np.where(np.array(c.waits) >= 0, np.clip(c.waits, 0.0, MAX_WAIT_S), w)
            waits = tuple(round(float(x), 6) if q >= WAIT_MIN_REQ else 0.0
                          for (q, _, _), x in zip(c.pairs, w, strict=True))
            conns.append(replace(c, waits=waits))
        rres.append(replace(r, conns=tuple(conns)))
    return replace(sess, rres=tuple(rres))


def _unusable(apps: list[AppSamples]) -> dict[str, str]:
    """Applications that cannot be generated, with the reason; an error when none can.

    A real capture can hold an application whose connections never carried a
    byte (SYN-only or one-way attempts): it has sessions but no request/response
    samples. It is left out (and listed in the schedule's ``meta.skipped_apps``)
    instead of refusing the whole model.
    """
    skipped = {}
    for app in apps:
        try:
            app.check()
        except SwellError as exc:
            skipped[app.name] = exc.message
    if len(skipped) == len(apps):
        raise SwellError("model", "no application can be generated: " + "; ".join(
            f"{k}: {v}" for k, v in skipped.items()))
    return skipped



def _conn_bytes(s: Session, t: float, weights: tuple[float, float] = (1.0, 1.0)
                ) -> list[tuple[float, float]]:
    """(scheduled start, bytes both ways) of a session's connections if it starts at ``t``
    (RREs follow each other by their gaps: a lower bound, transfer times are unknown);
    ``weights``: what a request's and a response's byte count for."""
    out = []
    wq, wr = weights
    for rre in s.rres:
        t += rre.gap
        out += [(t + c.offset, wq * c.req_bytes + wr * c.rsp_bytes) for c in rre.conns]
    return out


def _draw_sessions(apps: list[AppSamples], process: ArrivalProcess, duration_s: float,
                   scale: float, target_mbps: float | None, n_servers: int,
                   rng: np.random.Generator, counts: dict[str, Any],
                   cuts: tuple[float, ...] = (),
                   size_weights: tuple[float, float] = (1.0, 1.0),
                   steady: PathEstimate | None = None) -> list[Session]:
    """Sessions (unmapped: no client, ``OBS:PORT`` servers) with their start times.

    Without a target, each application draws a Poisson count with the process's
    mean. With one, the count is chosen by construction, segment by segment of
    the run (``cuts``: e.g. the end of the warm-up, so the measured window gets its
    share): sessions are drawn one by one (application by its share of the
    expected sessions) and placed by the process inside the segment, until the
    bytes of the connections scheduled to start in the segment (those of earlier
    segments' sessions included) are closest to ``target_mbps`` over it. Contents
    never depend on the times: the sessions are i.i.d. draws of the model.
    ``size_weights`` count request and response bytes towards the target (a variant that
    scales sizes after the target counts them at their size before it, so the same
    seed draws the same sessions whatever the factor).
    That is the construction of ``start: empty``. With ``steady`` (the path the
    transfer-time estimate assumes) the run starts in its steady state instead and a
    target counts the window's bytes as they are estimated to move (:func:`_draw_steady`;
    ``counts["steady_start"]`` says how it went).
    """
    edges = [0.0, *sorted(c for c in cuts if 0 < c < duration_s), duration_s]
    if steady is not None:
        return _draw_steady(apps, process, duration_s, scale, target_mbps, n_servers, rng,
                            counts, edges[-2], size_weights, steady)
    expected = np.array([process.expected(a, duration_s, scale) for a in apps])
    drawn: list[Session] = []
    for start, end in zip(edges[:-1], edges[1:], strict=True):
        if target_mbps is None:
            share = (end - start) / duration_s
            for k, app in enumerate(apps):
                n = int(rng.poisson(expected[k] * share))
                sessions = [_draw_session(app, 0.0, "", n_servers, rng, counts)
                            for _ in range(n)]
                times = process.place(app, n, start, end, rng)
                drawn += [replace(s, t=round(float(t), 9))
                          for t, s in zip(times, sessions, strict=True)]
            continue
        if expected.sum() <= 0:
            continue
        budget = target_mbps * 1e6 / 8 * (end - start)
        total = float(sum(b for s in drawn for t, b in _conn_bytes(s, s.t, size_weights)
                          if start <= t < end))
        weights = expected / expected.sum()
        while total < budget:
            k = int(rng.choice(len(apps), p=weights))
            sess = _draw_session(apps[k], 0.0, "", n_servers, rng, counts)
            t0 = float(process.place(apps[k], 1, start, end, rng)[0])
            inside = sum(b for t, b in _conn_bytes(sess, t0, size_weights) if start <= t < end)
            if total + inside - budget > budget - total and total > 0:
                break  # this one would overshoot more than stopping short
            drawn.append(replace(sess, t=round(t0, 9)))
            total += inside
    drawn.sort(key=lambda s: s.t)
    return drawn


def _draw_steady(apps: list[AppSamples], process: ArrivalProcess, duration_s: float,
                 scale: float, target_mbps: float | None, n_servers: int,
                 rng: np.random.Generator, counts: dict[str, Any], window_s: float,
                 size_weights: tuple[float, float], path: PathEstimate) -> list[Session]:
    """:func:`_draw_sessions` for a steady start (:mod:`.steady_start`): sessions placed
    over the lead-in and the run alike, then cut at 0.

    A process with no beginning places them over the whole span; one that begins at 0
    (the trace's profile) is preceded by its mean rate (stationary) over the lead-in.
    Without a target, each application draws a Poisson count with the mean over that
    span. With one, sessions are drawn one by one (application by its share of the
    expected sessions in the run) and placed over the span until the bytes the
    transfer-time estimate moves in the measured window ``[window_s, duration_s)``
    (:mod:`swell.analysis.swing_window`, over ``path``) are closest to the target: the
    window's bytes as they are estimated to move, with the warm-up and the lead-in at
    the window's session rate (a count by each connection's earliest start offered 1-2x
    the target in short windows and moved less: docs/scale.md, sections 8 and 9).
    With ``size_weights`` the estimate times each request at its weighted size too
    (:attr:`PathEstimate.req_weight`), so a request factor changes no session's
    placement, count or cut: only the bytes its requests carry.
    """
    expected = np.array([process.expected(a, duration_s, scale) for a in apps])
    drawn: list[Session] = []
    if expected.sum() <= 0:
        return drawn
    weights = expected / expected.sum()

    def one(r: np.random.Generator) -> Session:
        k = int(r.choice(len(apps), p=weights))
        return _draw_session(apps[k], 0.0, "", n_servers, r, {"raised_requests": 0})

    if size_weights[0] != 1.0:  # time requests at their size before a variant's factor
        path = replace(path, req_weight=size_weights[0])
    lead = steady_start.lead_in_s(one, rng, path)
    before = np.array([trace_rate(a) * scale * lead for a in apps])  # mean starts in the lead-in
    own = getattr(process, "steady", False)  # the process itself runs before 0

    def place(k: int, n: int) -> np.ndarray:
        if own or lead <= 0:
            return process.place(apps[k], n, -lead, duration_s, rng)
        n_lead = int(rng.binomial(n, before[k] / (before[k] + expected[k])))
        return np.sort(np.concatenate([STATIONARY.place(apps[k], n_lead, -lead, 0.0, rng),
                                       process.place(apps[k], n - n_lead, 0.0, duration_s,
                                                     rng)]))

    if target_mbps is None:
        for k, app in enumerate(apps):
            n = int(rng.poisson(expected[k] + before[k]))
            sessions = [_draw_session(app, 0.0, "", n_servers, rng, counts) for _ in range(n)]
            drawn += [replace(s, t=round(float(t), 9))
                      for t, s in zip(place(k, n), sessions, strict=True)]
    else:
        budget = target_mbps * 1e6 / 8 * (duration_s - window_s)
        wq, wr = size_weights
        total = 0.0
        while total < budget:
            k = int(rng.choice(len(apps), p=weights))
            sess = _draw_session(apps[k], 0.0, "", n_servers, rng, counts)
            t0 = float(place(k, 1)[0])
            inside = sum((wq * c.req_bytes + wr * c.rsp_bytes) * share_in(a, b, window_s,
                                                                          duration_s)
                         for a, b, c in conn_spans(sess, t0, path))
            if total + inside - budget > budget - total and total > 0:
                break  # this one would overshoot more than stopping short
            drawn.append(replace(sess, t=round(t0, 9)))
            total += inside
    early = [s for s in drawn if s.t < 0]
    carried = [r for s in early if (r := steady_start.remaining(
        s, path, MIN_REQ, wait_req=WAIT_MIN_REQ)) is not None]
    drawn = [s for s in drawn if s.t >= 0] + carried
    counts["steady_start"] = {"lead_in_s": round(lead, 3), "lead_in_sessions": len(early),
                              "sessions_under_way": len(carried),
                              "path": path.to_meta()}
    drawn.sort(key=lambda s: s.t)
    return drawn



def median_rate(rates: list[float | None] | None) -> float | None:
    """The median of the known rates (None: none known; the upper one of an even count)."""
    known = sorted(r for r in rates or [] if r is not None)
    return known[len(known) // 2] if known else None


def build_schedule(apps: list[AppSamples], clients: list[str], servers: list[str],
                   duration_s: float, seed: int, scale: float = 1.0,
                   meta: dict[str, Any] | None = None, *, arrivals: str = "auto",
                   target_mbps: float | None = None,
                   client_rates: list[float | None] | None = None,
                   server_rates: list[float | None] | None = None,
                   cuts: tuple[float, ...] = (), rre_draw: str = "independent",
                   target_weights: tuple[float, float] = (1.0, 1.0), start: str = "steady",
                   path: PathEstimate | None = None, observed_delays: np.ndarray | None = None,
                   server_delays: list[float | None] | None = None,
                   observed_clients: np.ndarray | None = None,
                   client_delays: list[float | None] | None = None) -> Schedule:
    """Draw a schedule: each app's sessions over ``duration_s`` at ``scale`` x its trace rate.

    Session starts come from the arrival process ``arrivals``
    (:mod:`swell.generators.arrivals`); with ``target_mbps`` (payload, both
    directions) the session count is chosen so the schedule offers that load, in
    each segment of the run between ``cuts`` (e.g. the warm-up and the window),
    counting request and response bytes by ``target_weights``.
    Sessions are mapped onto the emulated hosts by :mod:`swell.generators.sessionmap`
    (``*_rates``: each host's access link rate in Mbit/s, None for unlimited):
    the observed servers' popularity kept, no host asked for more than its link
    carries while there are hosts enough (``meta["hosts"]`` says how it went).
    With ``observed_delays`` (the model's one-way delay of each observed server, s) and
    ``server_delays`` (each emulated server's access link, ms), an observed server's
    RREs go to the hosts nearest its own delay (``meta["hosts"]["server_match"]``).
    With ``observed_clients`` (the model's capacity, bit/s, and one-way delay, s, of each
    observed client) and ``client_delays`` (ms), a whole session goes to a client host
    whose link is nearest its own client's (``meta["hosts"]["client_match"]``).
    ``rre_draw``: ``independent`` draws numConn, interConn and numPairs one by
    one (Swing's draw); ``joint`` draws each application's RREs whole where its
    samples have the joint RRE sample (one by one where they do not);
    ``session`` takes the trace's sessions whole where the samples have them
    (else as ``joint``).
    ``start``: ``steady`` (a process with no beginning starts in its steady state, the
    sessions under way at 0 included: :mod:`.steady_start`, estimating over ``path``,
    by default the median access rates with no delay) or ``empty`` (every session
    arrives in the run).
    One generator seeded by ``seed`` draws everything; the servers' waits (a model's
    ``rspWait``) come from a second one seeded by ``seed`` too, so the rest is drawn
    as it would be without them.
    """
    if start not in steady_start.STARTS:
        raise SwellError("schedule", f"start must be one of {', '.join(steady_start.STARTS)}, "
                                     f"not {start!r}")
    if not apps:
        raise SwellError("model", "no applications to generate")
    if not clients or not servers:
        raise SwellError("schedule", "need at least one client and one server address")
    apps = apps_for_draw(apps, rre_draw)
    rng = np.random.default_rng(seed)
    wait_rng = np.random.default_rng([seed, WAIT_STREAM])
    apps = [replace(a, wait_rng=wait_rng) for a in apps]
    counts: dict[str, Any] = {"raised_requests": 0}
    skipped = _unusable(apps)
    usable = [a for a in apps if a.name not in skipped]
    process = choose(arrivals, duration_s, max(a.trace_duration_s for a in usable))
    steady = None
    if start == "steady":
        steady = path or path_estimate([], [], [median_rate(client_rates),
                                                median_rate(server_rates)])
    drawn = _draw_sessions(usable, process, duration_s, scale, target_mbps, len(servers),
                           rng, counts, cuts, target_weights, steady)
    if not drawn:
        raise SwellError("model", f"zero sessions drawn in {duration_s} s at scale {scale}")
    sessions, hosts = map_hosts(drawn, clients, servers, client_rates, server_rates,
                                duration_s, rng, observed_delays, server_delays,
                                observed_clients, client_delays)
    req, rsp = (sum(x) for x in zip(*map(session_bytes, sessions), strict=True))
    info = {"scale": scale, "apps": [a.name for a in usable], **counts,
            "arrivals": process.name, "target_mbps": target_mbps,
            "offered_mbps": {"forward": 8 * req / duration_s / 1e6,
                             "reverse": 8 * rsp / duration_s / 1e6},
            "hosts": hosts,
            "rre_draw": {a.name: "session" if a.whole else "joint" if a.joint
                         else "independent" for a in usable},
            **({"skipped_apps": skipped} if skipped else {}), **(meta or {})}
    return Schedule(seed, duration_s, sessions, info)
