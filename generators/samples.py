"""Per-application empirical samples of a Swing model, as a schedule draws them.

:class:`AppSamples` holds one application's samples (seconds, bytes): the pooled
per-parameter samples Swing draws one by one, and the optional joint RRE sample,
whole sessions and servers' waits that the other draws use. :func:`app_samples`
and :func:`load_app_samples` read them from a model (through
``swell.extract.model.load_model``: format version and validation);
:func:`apps_for_draw` leaves out what a draw (``independent``, ``joint``,
``session``) does not use. Drawing itself is :mod:`swell.generators.schedule`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from swell.errors import SwellError

# a whole session's request after a pause this long leaves at its time in the trace
# (from its connection's start; the model's pairAt), not after its own response: the pause
# is the user's, and the trace's requests after it on a page's connections came together
# (AppSamples.anchor_think's default; the Swing spec's anchor_think_s sets another)
ANCHOR_THINK_S = 0.5

if TYPE_CHECKING:
    from swell.extract.model import SwingModel

RRE_DRAWS = ("independent", "joint", "session")


@dataclass
class AppSamples:
    """Empirical samples of one application's Swing parameters (seconds, bytes)."""

    name: str
    proto: str  # "tcp" | "udp"
    port: int
    session_starts: np.ndarray  # session start times in the trace, seconds from its start
    trace_duration_s: float
    num_rre: np.ndarray
    inter_rre: np.ndarray
    num_conn: np.ndarray
    inter_conn: np.ndarray
    num_pairs: np.ndarray
    req_size: np.ndarray
    rsp_size: np.ndarray
    req_think: np.ndarray
    rre_server: np.ndarray = field(default_factory=lambda: np.zeros(0))  # server index per RRE
    # the joint RRE sample (empty: a model without it, the independent draw): connections
    # per RRE, and per connection in RRE order its offset (s) and its pair count
    rre_conns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rre_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rre_pairs: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # the trace's sessions whole (empty: a model without them): RREs per session (those of
    # the joint sample, in order), the gap before each RRE but a session's first, and per
    # pair of the joint sample's connections in order its request, response and think time
    sess_rres: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sess_gaps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pair_req: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pair_rsp: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pair_think: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # per pair as pair_req, when its request left in the trace, from its connection's
    # first packet (-1: none; empty: a model without them): the anchors of long pauses
    pair_at: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # a whole session's request after a pause at least this long (s) is anchored at its
    # pair_at (the spec's anchor_think_s; 0 anchors every request but the first)
    anchor_think: float = ANCHOR_THINK_S
    # per pair as pair_req, its own server wait in the trace (-1: none measured; empty: a
    # model without them, or a spec that draws every wait): the whole sessions' waits
    pair_wait: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # per pair as pair_req, its request's packets and their span in the trace (s; empty:
    # a model without them): a whole session's UDP requests leave paced (schedule.py)
    pair_req_pkts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    pair_req_span: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # per pair as pair_req, 1 where its trace response was not a reply (pairEarly; empty:
    # a model without them); with ``early`` "pairs" (the spec's early_requests) such a
    # whole-session request leaves without waiting for the responses outstanding, with
    # "connections" every request of a connection that has one, with "all" every request
    pair_early: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    early: str = "none"
    # per whole session, its observed client (sessClient: an index into the model's
    # net/client/hosts; empty: a model without them): the client match
    sess_client: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # the servers' waits before a response (rspWait; empty: a model without them, none),
    # drawn per TCP pair with their own generator (wait_rng, set by build_schedule), so
    # the rest of a schedule is drawn as without them
    rsp_wait: np.ndarray = field(default_factory=lambda: np.zeros(0))
    wait_rng: np.random.Generator | None = field(default=None, repr=False, compare=False)

    _rre_start: np.ndarray = field(init=False, repr=False, compare=False)
    _sess_start: np.ndarray = field(init=False, repr=False, compare=False)
    _pair_start: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._rre_start = np.r_[0, np.cumsum(np.asarray(self.rre_conns, dtype=np.int64))]
        if self.joint and (self._rre_start[-1] != len(self.rre_offsets)
                           or len(self.rre_offsets) != len(self.rre_pairs)):
            raise SwellError(self.name, "the joint RRE sample's arrays do not agree")
        self._sess_start = np.r_[0, np.cumsum(np.asarray(self.sess_rres, dtype=np.int64))]
        self._pair_start = np.r_[0, np.cumsum(np.asarray(self.rre_pairs, dtype=np.int64))]
        if self.whole and (not self.joint or self._sess_start[-1] != self.rre_conns.size
                           or len(self.sess_gaps) != self.rre_conns.size - self.sess_rres.size
                           or not len(self.pair_req) == len(self.pair_rsp)
                           == len(self.pair_think) == self._pair_start[-1]):
            raise SwellError(self.name, "the whole sessions' arrays do not agree")
        if self.whole and self.pair_at.size and self.pair_at.size != self.pair_req.size:
            raise SwellError(self.name, "the whole sessions' request times do not agree")
        if self.whole and self.pair_wait.size and self.pair_wait.size != self.pair_req.size:
            raise SwellError(self.name, "the whole sessions' server waits do not agree")
        if self.whole and self.pair_req_pkts.size and not (
                self.pair_req_pkts.size == self.pair_req_span.size == self.pair_req.size):
            raise SwellError(self.name, "the whole sessions' request packets do not agree")
        if self.whole and self.pair_early.size and self.pair_early.size != self.pair_req.size:
            raise SwellError(self.name, "the whole sessions' early flags do not agree")
        if self.whole and self.sess_client.size and self.sess_client.size != self.sess_rres.size:
            raise SwellError(self.name, "the whole sessions' clients do not agree")

    @property
    def whole(self) -> bool:
        """Whether sessions are drawn whole (the model has the trace's sessions)."""
        return self.sess_rres.size > 0

    @property
    def joint(self) -> bool:
        """Whether RREs are drawn whole (the model has the joint RRE sample)."""
        return self.rre_conns.size > 0

    def rre_shape(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k``-th RRE of the joint sample: its connections' offsets and pair counts."""
        a, b = int(self._rre_start[k]), int(self._rre_start[k + 1])
        return self.rre_offsets[a:b], self.rre_pairs[a:b]

    def check(self) -> None:
        for name in ("num_rre", "num_conn", "num_pairs", "req_size", "rsp_size"):
            if np.asarray(getattr(self, name)).size == 0:
                raise SwellError(self.name, f"no samples of {name}")
        if self.session_starts.size == 0:
            raise SwellError(self.name, "no sessions in the model")


MODEL_PARAMS = {  # AppSamples field -> Swing model parameter (swell.extract.sessions.APP_PARAMS)
    "num_rre": "numRRE", "inter_rre": "interRRE", "num_conn": "numConn",
    "inter_conn": "interConn", "num_pairs": "numPairs", "req_size": "reqSize",
    "rsp_size": "rspSize", "req_think": "reqThink", "rre_server": "rreServer",
}
JOINT_FIELDS = {"rre_conns": "rreConns", "rre_offsets": "rreOffsets", "rre_pairs": "rrePairs"}
SESSION_FIELDS = {"sess_rres": "sessRres", "sess_gaps": "sessGaps", "pair_req": "pairReq",
                  "pair_rsp": "pairRsp", "pair_think": "pairThink"}


def _session_fields(model: Any, name: str) -> dict[str, np.ndarray]:
    """An application's whole sessions (the size and think-time variants are already
    in them: :mod:`swell.extract.variants` applies them where it applies them to the
    pooled samples)."""
    out = {k: np.asarray(model.samples(name, p), dtype=np.int64 if k in (
        "sess_rres", "pair_req", "pair_rsp") else float) for k, p in SESSION_FIELDS.items()}
    if f"app/{name}/pairAt" in model.arrays:  # else: written before them, no anchors
        out["pair_at"] = np.asarray(model.samples(name, "pairAt"), dtype=float)
    if f"app/{name}/pairWait" in model.arrays:  # else: every wait drawn
        out["pair_wait"] = np.asarray(model.samples(name, "pairWait"), dtype=float)
    if f"app/{name}/pairReqPkts" in model.arrays:  # else: requests sent whole
        out["pair_req_pkts"] = np.asarray(model.samples(name, "pairReqPkts"), dtype=np.int64)
        out["pair_req_span"] = np.asarray(model.samples(name, "pairReqSpan"), dtype=float)
    if f"app/{name}/pairEarly" in model.arrays:  # else: every request waits
        out["pair_early"] = np.asarray(model.samples(name, "pairEarly"), dtype=np.int64)
    if f"app/{name}/sessClient" in model.arrays:  # else: no client match
        out["sess_client"] = np.asarray(model.samples(name, "sessClient"), dtype=np.int64)
    return out


def apps_for_draw(apps: list[AppSamples], rre_draw: str) -> list[AppSamples]:
    """The applications' samples with what ``rre_draw`` does not use left out: the
    whole sessions unless ``session``, the joint RRE sample too when ``independent``
    (in that order: the sessions' arrays index the joint sample)."""
    if rre_draw not in RRE_DRAWS:
        raise SwellError("rre_draw", f"unknown draw {rre_draw!r} ({' or '.join(RRE_DRAWS)})")
    if rre_draw != "session":
        apps = [replace(a, sess_rres=np.zeros(0, dtype=np.int64)) for a in apps]
    if rre_draw == "independent":
        apps = [replace(a, rre_conns=np.zeros(0, dtype=np.int64)) for a in apps]
    return apps


def load_app_samples(model_dir: str | os.PathLike[str], base_port: int = 5000,
                     apps: list[str] | None = None) -> tuple[list[AppSamples], float]:
    """Per-application samples of a Swing model directory, and its rate scale.

    Reads through ``swell.extract.model.load_model`` (format version check and
    validation). An application's port is the model's ``server_port`` for it
    (else ``base_port + index``); its transport is the model's ``transport``.
    The rate scale is the model's ``rate_scale`` (set by the ``--scale``
    variant, which leaves ``sessionStart`` as in the trace).
    """
    from swell.extract.model import load_model

    return app_samples(load_model(model_dir), model_dir, base_port, apps)


def app_ports(model: SwingModel, base_port: int = 5000,
              apps: list[str] | None = None) -> dict[str, int]:
    """The emulated server port of each of ``apps`` (default: all, in the model's order):
    the model's ``server_port``, else ``base_port`` + its index among them."""
    out = {}
    for i, name in enumerate(model.apps if apps is None else apps):
        port = model.app_info(name).get("server_port")
        out[name] = int(port) if isinstance(port, int) and 0 < port < 65536 else base_port + i
    return out


def quickack_shares(model: SwingModel) -> dict[str, tuple[tuple[int, float], ...]]:
    """Per side (``client``, ``server``): (emulated port, share of the hosts that
    acknowledged every segment they received) of each TCP application the model saw
    such hosts in (its ``acks``, :mod:`swell.extract.ackmode`; none in a model written
    before them)."""
    ports = app_ports(model)
    out: dict[str, tuple[tuple[int, float], ...]] = {}
    for side in ("client", "server"):
        rows = []
        for name in model.apps:
            info = model.app_info(name)
            share = (info.get("acks") or {}).get(side, {}).get("every_segment_share")
            if info.get("transport", "tcp") == "tcp" and share:
                rows.append((ports[name], float(share)))
        out[side] = tuple(rows)
    return out


def app_samples(model: SwingModel, source: str | os.PathLike[str], base_port: int = 5000,
                apps: list[str] | None = None) -> tuple[list[AppSamples], float]:
    """:func:`load_app_samples` of a model already loaded (``source`` names it in errors)."""
    names = [a for a in model.apps if apps is None or a in apps]
    if apps is not None and (unknown := sorted(set(apps) - set(model.apps))):
        raise SwellError(source, f"no application(s) {', '.join(unknown)} in the model "
                                    f"(it has {', '.join(model.apps)})")
    out = []
    ports = app_ports(model, base_port, names)
    for name in names:
        info = model.app_info(name)
        port = ports[name]
        proto = str(info.get("transport", "udp" if name.endswith("udp") else "tcp"))
        fields = {f: np.asarray(model.samples(name, p), dtype=float)
                  for f, p in MODEL_PARAMS.items()}
        if model.rre_draw(name) == "joint":  # else: written before it, the independent draw
            fields |= {f: np.asarray(model.samples(name, p), dtype=float if f == "rre_offsets"
                                     else np.int64) for f, p in JOINT_FIELDS.items()}
        if model.has_sessions(name):  # else: written before them, rre_draw=session falls back
            fields |= _session_fields(model, name)
        if f"app/{name}/rspWait" in model.arrays:  # else: written before them, no waits
            fields["rsp_wait"] = np.asarray(model.samples(name, "rspWait"), dtype=float)
        out.append(AppSamples(name, proto, port, np.sort(model.samples(name, "sessionStart")),
                              max(model.duration_s, 1e-3), **fields))
    if not out:
        raise SwellError(source, "the model has no applications")
    return out, float(model.meta.get("rate_scale", 1.0))
