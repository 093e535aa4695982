"""The session schedule as data: its types, its file and the rules it keeps.

A :class:`Schedule` lists sessions in start-time order. Each session has a
client address (the emulated host it runs on) and a list of RREs; an RRE
starts ``gap`` seconds after the previous RRE of its session ended and opens
its connections at ``offset`` seconds from its own start; a connection goes
to ``server`` (``ADDR:PORT``) over ``proto`` and carries request/response
pairs ``(req_bytes, rsp_bytes, think_s)``, ``think_s`` being the pause after
that pair's response before the next request, and (TCP, optional) per pair the
server's wait between the request's end and its response (``Conn.waits``, a
pair's fourth number in the file). A connection's optional ``at`` (one number
per pair, negative for none) anchors requests: such a request leaves at that
time from the connection's start, or as soon as the previous response is in if
that is later, instead of ``think_s`` after it. A UDP connection's optional
``pace`` (per pair ``[datagrams, span_s]``) sends a request as that many
datagrams of about equal size, the first at once and the others evenly over
``span_s`` (the trace's own pacing: :mod:`swell.generators.schedule`); ``swell-gen``
keeps the count between what the request needs (datagrams of at most 1,472
bytes, 1,452 over IPv6) and what it can carry (each datagram holds the 24-byte
header), so ``[1, 0]`` or no ``pace`` is one write of the whole request. A TCP
connection's optional ``early`` (one boolean per pair) lets such a request leave
without waiting for the responses still outstanding (at its ``at``, or right
after the previous request): the server answers in order, so the responses
follow each other as the trace's did when both sides streamed at once (the
model's ``pairEarly``).

The file format (read by ``swell-gen run``) is JSON lines: one header line
``{"format": "swell-schedule", "version": 1, "seed", "sessions", "duration_s",
"meta"}`` then one line per session. Unknown fields are errors on both sides;
:func:`validate` checks early, with readable errors, the rules ``swell-gen``
enforces. How a schedule is drawn is :mod:`swell.generators.schedule`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.fsutil import atomic_path

FORMAT = "swell-schedule"
VERSION = 1
MIN_REQ = {"tcp": 8, "udp": 24}
WAIT_MIN_REQ = 12  # a TCP request carrying a server wait: swell-gen's header and the u32 wait
MAX_WAIT_S = ((1 << 32) - 1) / 1e6  # the wait travels in microseconds (u32)
MAX_BYTES = (1 << 31) - 1  # a response word keeps its top bit for the server wait flag


@dataclass(frozen=True)
class Conn:
    server: str  # "ADDR:PORT"
    proto: str  # "tcp" | "udp"
    app: str
    offset: float
    pairs: tuple[tuple[int, int, float], ...]
    # the server's wait between each pair's request and its response (empty: none); TCP
    waits: tuple[float, ...] = ()
    # per pair (empty: none): the request's earliest time from the connection's start,
    # s, negative for none (a whole session's requests after a long pause: the schedule's
    # ANCHOR_THINK_S)
    at: tuple[float, ...] = ()
    # per pair (empty: none; UDP only): (datagrams, span s) of its request
    pace: tuple[tuple[int, float], ...] = ()
    # per pair (empty: none; TCP only): its request does not wait for the responses
    # still outstanding
    early: tuple[bool, ...] = ()

    def anchor(self, i: int) -> float | None:
        """Pair ``i``'s anchor (s from the connection's start), if it has one."""
        return self.at[i] if i < len(self.at) and self.at[i] >= 0 else None

    @property
    def pair_waits(self) -> tuple[float, ...]:
        """Each pair's server wait (0 when the connection has none)."""
        return self.waits or (0.0,) * len(self.pairs)

    @property
    def req_bytes(self) -> int:
        return sum(p[0] for p in self.pairs)

    @property
    def rsp_bytes(self) -> int:
        return sum(p[1] for p in self.pairs)


@dataclass(frozen=True)
class Rre:
    gap: float
    conns: tuple[Conn, ...]


@dataclass(frozen=True)
class Session:
    id: int
    t: float
    client: str
    rres: tuple[Rre, ...]


@dataclass
class Schedule:
    seed: int
    duration_s: float
    sessions: list[Session]
    meta: dict[str, Any] = field(default_factory=dict)

    def conns(self) -> list[tuple[int, int, int, Conn]]:
        """Every connection as ``(session id, rre index, conn index, conn)``."""
        return [(s.id, r, c, conn) for s in self.sessions
                for r, rre in enumerate(s.rres) for c, conn in enumerate(rre.conns)]

    def servers(self) -> list[str]:
        """Distinct ``ADDR:PORT`` the schedule talks to (what ``serve`` must listen on)."""
        return sorted({conn.server for *_, conn in self.conns()})



def _session_obj(s: Session) -> dict[str, Any]:
    return {"id": s.id, "t": round(s.t, 9), "client": s.client, "rres": [
        {"gap": round(r.gap, 9), "conns": [
            {"server": c.server, "proto": c.proto, "app": c.app, "offset": round(c.offset, 9),
             "pairs": [[q, a, round(k, 9), *((round(w, 6),) if c.waits else ())]
                       for (q, a, k), w in zip(c.pairs, c.pair_waits, strict=True)],
             **({"at": [round(x, 9) for x in c.at]} if c.at else {}),
             **({"pace": [[n, round(t, 6)] for n, t in c.pace]} if c.pace else {}),
             **({"early": [bool(x) for x in c.early]} if c.early else {})}
            for c in r.conns]}
        for r in s.rres]}


def write_schedule(path: str | os.PathLike[str], sched: Schedule) -> Path:
    """Validate and write ``sched`` atomically as JSON lines; returns the path."""
    validate(sched, where=path)
    head = {"format": FORMAT, "version": VERSION, "seed": sched.seed,
            "sessions": len(sched.sessions), "duration_s": sched.duration_s, "meta": sched.meta}
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(json.dumps(head, sort_keys=True) + "\n")
        for s in sched.sessions:
            f.write(json.dumps(_session_obj(s), separators=(",", ":")) + "\n")
    return Path(path)


def _strict(obj: Any, keys: set[str], what: str, where: str,
            optional: frozenset[str] = frozenset({"meta"})) -> dict[str, Any]:
    """``obj`` as a dict with exactly ``keys`` (those in ``optional`` may be absent)."""
    if not isinstance(obj, dict):
        raise SwellError(where, f"{what} is not an object")
    unknown = set(obj) - keys
    missing = keys - set(obj) - optional
    if unknown:
        raise SwellError(where, f"{what}: unknown field(s) {', '.join(sorted(unknown))}")
    if missing:
        raise SwellError(where, f"{what}: missing field(s) {', '.join(sorted(missing))}")
    return obj


def _parse_session(obj: Any, where: str) -> Session:
    o = _strict(obj, {"id", "t", "client", "rres"}, "session", where)
    rres = []
    for r in o["rres"]:
        ro = _strict(r, {"gap", "conns"}, "rre", where)
        conns = []
        for c in ro["conns"]:
            co = _strict(c, {"server", "proto", "app", "offset", "pairs", "at", "pace", "early"},
                         "connection", where, optional=frozenset({"at", "pace", "early"}))
            if any(not isinstance(x, list) or len(x) not in (3, 4) for x in co["pairs"]):
                raise SwellError(where, "a pair is not [request, response, think(, wait)]")
            pairs = tuple((int(x[0]), int(x[1]), float(x[2])) for x in co["pairs"])
            waits = tuple(float(x[3]) for x in co["pairs"] if len(x) == 4)
            if waits and len(waits) != len(pairs):
                raise SwellError(where, "a connection's pairs mix [req, rsp, think] and "
                                 "[req, rsp, think, wait]")
            at = co.get("at", [])
            if not isinstance(at, list) or not all(isinstance(x, int | float) for x in at):
                raise SwellError(where, "a connection's at is not a list of times")
            pace = co.get("pace", [])
            if not isinstance(pace, list) or any(
                    not isinstance(x, list) or len(x) != 2 or not isinstance(x[0], int)
                    or not isinstance(x[1], int | float) for x in pace):
                raise SwellError(where, "a connection's pace is not a list of "
                                 "[datagrams, span]")
            early = co.get("early", [])
            if not isinstance(early, list) or not all(isinstance(x, bool) for x in early):
                raise SwellError(where, "a connection's early is not a list of booleans")
            conns.append(Conn(co["server"], co["proto"], co["app"], float(co["offset"]), pairs,
                              waits, tuple(float(x) for x in at),
                              tuple((int(n), float(t)) for n, t in pace), tuple(early)))
        rres.append(Rre(float(ro["gap"]), tuple(conns)))
    return Session(int(o["id"]), float(o["t"]), str(o["client"]), tuple(rres))


def read_schedule(path: str | os.PathLike[str]) -> Schedule:
    """Read and validate a schedule file (clear :class:`SwellError` on bad input)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise SwellError(path, f"cannot read schedule: {exc.strerror}") from None
    if not lines:
        raise SwellError(path, "empty schedule file")
    try:
        head = _strict(json.loads(lines[0]),
                       {"format", "version", "seed", "sessions", "duration_s", "meta"},
                       "header", str(path))
        if head["format"] != FORMAT or head["version"] != VERSION:
            raise SwellError(path, f"not a {FORMAT} v{VERSION} file")
        sessions = [_parse_session(json.loads(ln), f"{path}:{i + 2}")
                    for i, ln in enumerate(lines[1:]) if ln.strip()]
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise SwellError(path, f"malformed schedule: {exc}") from None
    sched = Schedule(int(head["seed"]), float(head["duration_s"]), sessions, head.get("meta", {}))
    if int(head["sessions"]) != len(sessions):
        raise SwellError(path, f"header says {head['sessions']} sessions, file has {len(sessions)}")
    validate(sched, where=path)
    return sched


def validate(sched: Schedule, where: str | os.PathLike[str] = "schedule") -> None:
    """The rules ``swell-gen run`` enforces, checked early with readable errors."""
    if not sched.sessions:
        raise SwellError(where, "the schedule has zero sessions")
    if not sched.duration_s > 0:
        raise SwellError(where, f"duration_s must be positive, not {sched.duration_s}")
    last = 0.0
    for s in sched.sessions:
        if s.t < last or not np.isfinite(s.t):
            raise SwellError(where, f"session {s.id}: start times must be finite and sorted")
        last = s.t
        if not s.rres:
            raise SwellError(where, f"session {s.id} has no RREs")
        for r in s.rres:
            if r.gap < 0 or not r.conns:
                raise SwellError(where, f"session {s.id}: an RRE has a negative gap or no conns")
            for c in r.conns:
                _check_conn(c, s.id, where)


def _check_conn(c: Conn, sid: int, where: str | os.PathLike[str]) -> None:
    if c.proto not in MIN_REQ:
        raise SwellError(where, f"session {sid}: unknown proto {c.proto!r} (tcp or udp)")
    if ":" not in c.server or c.offset < 0 or not c.pairs:
        raise SwellError(where, f"session {sid}: connection needs ADDR:PORT, offset >= 0, pairs")
    if c.waits and len(c.waits) != len(c.pairs):
        raise SwellError(where, f"session {sid}: {len(c.waits)} server waits for "
                         f"{len(c.pairs)} pairs")
    if c.at and (len(c.at) != len(c.pairs) or not np.isfinite(c.at).all()):
        raise SwellError(where, f"session {sid}: {len(c.at)} request times for "
                         f"{len(c.pairs)} pairs, or one not finite")
    if c.pace and (len(c.pace) != len(c.pairs) or c.proto != "udp"
                   or any(n < 1 or not 0 <= t < MAX_WAIT_S for n, t in c.pace)):
        raise SwellError(where, f"session {sid}: pace needs one [datagrams >= 1, span >= 0 "
                         f"s] per pair, UDP only ({len(c.pace)} for {len(c.pairs)} "
                         f"{c.proto} pairs)")
    if c.early and (len(c.early) != len(c.pairs) or c.proto != "tcp"):
        raise SwellError(where, f"session {sid}: early needs one boolean per pair, TCP only "
                         f"({len(c.early)} for {len(c.pairs)} {c.proto} pairs)")
    for (q, a, k), w in zip(c.pairs, c.pair_waits, strict=True):
        least = WAIT_MIN_REQ if w > 0 else MIN_REQ[c.proto]
        if not least <= q <= MAX_BYTES or not 0 <= a <= MAX_BYTES or k < 0:
            raise SwellError(where, f"session {sid}: pair ({q}, {a}, {k}) out of range "
                             f"(request >= {least} bytes, think >= 0)")
        if not 0 <= w <= MAX_WAIT_S or (w > 0 and c.proto != "tcp"):
            raise SwellError(where, f"session {sid}: server wait {w} s out of range "
                             f"(0..{MAX_WAIT_S:.0f} s, TCP only)")


def session_bytes(s: Session) -> tuple[int, int]:
    """(request, response) payload bytes of a session."""
    req = rsp = 0
    for rre in s.rres:
        for c in rre.conns:
            req += c.req_bytes
            rsp += c.rsp_bytes
    return req, rsp
