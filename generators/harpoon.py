"""The Harpoon generator: per interval, that many sessions of file transfers (open loop).

A Harpoon model (:mod:`swell.extract.harpoon_model`) gives per interval a byte
target and a number of active sessions, the file size and inter-connection
time distributions, and weighted client and server address pools; ``flows:``
fits one from a flow input once (cached). A run is drawn into a session
schedule (:mod:`swell.generators.schedule`) and executed by swell's native
engine through :class:`~swell.generators.swing.SwingGenerator` (``swell-gen
serve`` on the server namespaces, ``swell-gen run`` on the client
namespaces): what a Harpoon session does in an interval is one schedule
session of one RRE whose connections start at offsets spaced by drawn
inter-connection times (start to start, independent of the transfers: "an
active session may be multiplexing multiple concurrent connections"); each
connection sends an 8-byte request and receives one file.

Time: ``time_scale`` model seconds per run second. A run interval lasts
``interval_s / time_scale``; sessions keep the data's inter-connection times
and file sizes (in real seconds), and an interval's byte target is the
model's bytes over the shorter interval times ``rate_scale`` (default 1: the
paper's "match the bitrate") or the factor that makes the mean
``target_mbps``. The run walks the model's intervals from ``start_interval``
(wrapping around), so a day takes ``86400 / time_scale`` seconds.

Sessions per interval (``sessions``):

* ``model`` (default): Harpoon's procedure. Per interval, the model's number
  of active sessions (``interval/sessions``: the paper's Figure 4, found at
  fitting by imitating these very sessions,
  :func:`swell.extract.harpoon.session_bytes`). Sessions persist: one keeps
  its next connection time across the interval boundary (when the count
  drops, a random subset stops; when it rises, new ones start as if they had
  been running: a stationary phase), and draws its client and server anew
  each interval. Scaling: ``time_scale`` leaves the count as it is (sessions
  keep their real inter-connection times, so a run interval ``time_scale``
  times shorter carries ``time_scale`` times fewer bytes: the paper's "match
  the bitrate"); a rate factor ``k`` adds the sessions ``k - 1`` more targets
  need at the mean bytes of one session (``m``: mean file x interval / mean
  inter-connection time, exact for a session caught running): ``n + (k - 1)
  x target / m``, what Figure 4 finds for ``k`` times the target (its
  last-session overshoot, already in ``n``, counted once, not ``k`` times).
  Each interval then offers its target on average; one interval's bytes vary
  with the heavy-tailed draws, as one over the square root of the
  connections in it (docs/harpoon.md measures it).
* ``construct``: swell's own, *not* Harpoon's procedure, for intervals too
  short for ``model``'s spread: sessions that live one interval (first
  connection at a uniform phase of a drawn inter-connection time), drawn
  until the interval's target is met (the last one kept only if it
  overshoots less than stopping short would miss): each interval offers its
  target within a few percent by construction, at any interval length; the
  model's session counts are not used.

Addresses: each session draws its client and server from the pools with the
model's weights; the i-th most frequent observed address is the i-th emulated
host of that side (the kind asks the topology for as many hosts as the pools
have, up to ``POOL_MAX``, packed onto a few namespaces by the topology).
UDP (either mode): per interval the model's sources of each type times the
rate factor, persistent like ``model`` sessions: CBR as response datagrams
paced by 24-byte requests, both together at the source's rate; periodic
ping-pong (request and response of the source's size every period,
NTP-like); exponential ping-pong (exponential gaps, DNS-like). Model sizes
are IP bytes; datagrams carry them less 28 bytes of IPv4 and UDP headers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from swell.errors import SwellError
from swell.extract.harpoon import stationary_first
from swell.generators.base import Generator, GenResult
from swell.generators.kind import (
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    TrafficKind,
    Window,
)
from swell.generators.schedule import MAX_BYTES, Conn, Rre, Schedule, Session, write_schedule
from swell.generators.swing import (
    SwingConfig,
    SwingGenerator,
    place_hosts,
    probe_paths,
)
from swell.inet import hostport
from swell.placement import GroupNeed, HostNeeds, PathFacts

POOL_MAX = 254  # addresses per pool at most (Harpoon maps the top 254 onto a /24)
REQ_BYTES = 8  # swell-gen's TCP request header: the file request
UDP_MIN = 24  # swell-gen's UDP header: the smallest datagram payload
UDP_IP = 28  # IPv4 + UDP headers: the model's datagram sizes are IP bytes
MAX_PAIRS = 20000  # datagrams of one UDP source in one interval
MAX_CONNS = 100000  # connections of one session in one interval (a guard)
UDP_KINDS = ("cbr", "periodic", "exp")


class HarpoonSpec(KindSpec):
    """Harpoon background from a Harpoon model (``swell harpoon extract``) or flows."""

    kind: Literal["harpoon"] = "harpoon"
    model: str | None = Field(None, description="Harpoon model directory")
    flows: str | None = Field(None, description="flow input to fit a model from once (pcap, "
                              "nfcapd file, NetFlow/IPFIX capture or datagram folder)")
    flow_interval_s: float = Field(300.0, gt=0, description="interval of the model fitted "
                                   "from flows, s")
    time_scale: float = Field(1.0, gt=0, description="model seconds per run second")
    rate_scale: float | None = Field(None, gt=0, description="bit rate x k (default 1)")
    target_mbps: float | None = Field(None, gt=0, description="scale to this mean TCP rate")
    sessions: Literal["model", "construct"] = Field(
        "model", description="model: the model's active sessions (Harpoon); construct: "
        "one-interval sessions until each target is met (not Harpoon's procedure)")
    start_interval: int = Field(0, ge=0, description="model interval the run starts at")
    port: int = Field(5000, gt=0, lt=65536)
    udp: bool = True

    @model_validator(mode="after")
    def _one_scale(self) -> HarpoonSpec:
        if self.rate_scale is not None and self.target_mbps is not None:
            raise ValueError("give either rate_scale or target_mbps, not both")
        if (self.model is None) == (self.flows is None):
            raise ValueError("harpoon needs one of model (a directory) or flows (to fit one)")
        return self


def _round(x: float, rng: np.random.Generator) -> int:
    """Stochastic rounding: the expectation is ``x``."""
    base = int(np.floor(x))
    return base + int(rng.random() < x - base)


class _Samples:
    """Draws from an empirical sample, a block of indices at a time (fast one by one)."""

    def __init__(self, values: np.ndarray, rng: np.random.Generator, block: int = 4096) -> None:
        self.v, self.rng, self.block = np.asarray(values, dtype=float), rng, block
        self.buf, self.i = np.zeros(0), 0

    def __call__(self) -> float:
        if self.i >= self.buf.size:
            self.buf = self.v[self.rng.integers(0, self.v.size, self.block)]
            self.i = 0
        self.i += 1
        return float(self.buf[self.i - 1])


class _Slots:
    """Sessions (or UDP sources) that persist from interval to interval.

    Each slot keeps the run time of its next event and a tag (the UDP source it
    plays). :meth:`resize` keeps a random subset when fewer are wanted and adds
    new slots, at the phases given, when more are.
    """

    def __init__(self) -> None:
        self.next_t: list[float] = []
        self.tag: list[int] = []

    def resize(self, n: int, rng: np.random.Generator, new: Callable[[], tuple[float, int]]
               ) -> None:
        if len(self.next_t) > n:
            keep = np.sort(rng.choice(len(self.next_t), n, replace=False))
            self.next_t = [self.next_t[i] for i in keep]
            self.tag = [self.tag[i] for i in keep]
        for _ in range(n - len(self.next_t)):
            t, tag = new()
            self.next_t.append(t)
            self.tag.append(tag)


class Drawer:
    """Draws the sessions of a run from one model and one seed (see the module docstring)."""

    def __init__(self, model: Any, clients: list[str], servers: list[str], spec: HarpoonSpec,
                 rng: np.random.Generator) -> None:
        self.m, self.spec, self.rng = model, spec, rng
        self.ts = spec.time_scale
        self.files = model.files.astype(float)
        self.icts = model.icts  # real seconds: a session behaves as in the data
        self.has_icts = bool(self.icts.size and float(self.icts.max()) > 0)
        self.ict = _Samples(self.icts if self.has_icts else np.ones(1), rng)
        self.ict_cum = np.cumsum(self.icts) if self.has_icts else np.ones(1)
        self.length = model.interval_s / self.ts
        if spec.target_mbps is not None:
            self.factor = spec.target_mbps * 1e6 / max(model.mean_rate_bps(), 1e-9)
        else:
            self.factor = spec.rate_scale if spec.rate_scale is not None else 1.0
        self.clients, self.cw = self._pool("client", clients)
        self.servers, self.sw = self._pool("server", servers)
        self.tcp_slots = _Slots()
        self.udp_slots = {k: _Slots() for k in UDP_KINDS}
        self.model_counts = np.zeros(model.intervals)
        if spec.sessions == "model":
            self.model_counts = self._model_counts()

    def _model_counts(self) -> np.ndarray:
        """Active sessions per model interval at the run's rate: the model's Figure 4
        count ``n`` plus, for a rate factor ``k``, the sessions ``k - 1`` more targets
        need at one session's mean bytes (see the module docstring); ``time_scale``
        changes nothing (the counts are per interval, whatever its length)."""
        a = self.m.arrays
        extra = (self.factor - 1) * a["interval/tcp_bytes"] / max(self.m.session_mean, 1e-9)
        return np.maximum(a["interval/sessions"] + extra, 0.0)

    def _pool(self, side: str, hosts: list[str]) -> tuple[list[str], np.ndarray]:
        _, w = self.m.pool(side)
        k = min(len(w), len(hosts))
        return hosts[:k], w[:k] / w[:k].sum()

    def _ends(self) -> tuple[str, str]:
        c = self.clients[int(self.rng.choice(len(self.clients), p=self.cw))]
        s = self.servers[int(self.rng.choice(len(self.servers), p=self.sw))]
        return c, s

    def _tcp(self, times: np.ndarray, sizes: np.ndarray) -> Session:
        """One session: connections at ``times`` (run seconds), files of ``sizes``."""
        cli, srv = self._ends()
        first = float(times[0])
        conns = tuple(Conn(hostport(srv, self.spec.port), "tcp", "harpoon-tcp",
                           round(float(t) - first, 9), ((REQ_BYTES, int(b), 0.0),))
                      for t, b in zip(times, sizes, strict=True))
        return Session(0, round(first, 9), cli, (Rre(0.0, conns),))

    def _sizes(self, n: int) -> np.ndarray:
        return np.clip(self.files[self.rng.integers(0, self.files.size, n)], 0,
                       MAX_BYTES).astype(np.int64)

    def tcp_session(self, t0: float) -> tuple[Session | None, float]:
        """``construct``: one session living through the interval from ``t0`` and its
        bytes; None when its first connection falls after the interval (active, idle)."""
        times = connection_times(self.icts, self.length, self.rng)
        if times.size == 0:
            return None, 0.0
        sizes = self._sizes(times.size)
        inside = float(sizes[times < self.length].sum())
        return self._tcp(t0 + times, sizes), inside

    def _construct(self, target: float, t0: float) -> tuple[list[Session], float, int]:
        out: list[Session] = []
        offered, active = 0.0, 0
        while offered < target:
            sess, vol = self.tcp_session(t0)
            if offered > 0 and offered + vol - target > target - offered:
                break
            active += 1
            offered += vol
            out += [sess] if sess is not None else []
        return out, offered, active

    def _residual(self) -> float:
        """Time to a new session's first connection as if it had always been running
        (:func:`~swell.extract.harpoon.stationary_first`, as the fit imitates it). A
        uniform phase of a plainly drawn gap starts sessions inside the short gaps of a
        bursty session: on the alexa day model the first 2 s interval then carried 4.6
        times its target."""
        if not self.has_icts:
            return 0.0
        return float(stationary_first(self.icts, 1, self.rng, self.ict_cum)[0])

    def _persistent(self, n: int, t0: float) -> tuple[list[Session], float]:
        """``model``: ``n`` sessions active in [t0, t0 + length); each goes on from where
        it was (its next connection start, inter-connection times start to start), new
        ones start stationary (:meth:`_residual`), and each draws its client and server
        anew for the interval (Harpoon picks them per session of an interval)."""
        t1 = t0 + self.length
        slots = self.tcp_slots
        slots.resize(n, self.rng, lambda: (t0 + self._residual(), 0))
        out: list[Session] = []
        offered = 0.0
        for k in range(len(slots.next_t)):
            t, times = slots.next_t[k], []
            if not self.has_icts:  # the model's note: one connection per session and interval
                times, t = [t0 + float(self.rng.random()) * self.length], t1
            while t < t1 and len(times) < MAX_CONNS:
                times.append(t)
                t += self.ict()
            slots.next_t[k] = t
            if times:
                sizes = self._sizes(len(times))
                offered += float(sizes.sum())
                out.append(self._tcp(np.array(times), sizes))
        return out, offered

    def interval(self, j: int, t0: float) -> tuple[list[Session], dict[str, Any]]:
        idx = (self.spec.start_interval + j) % self.m.intervals
        a = self.m.arrays
        target = float(a["interval/tcp_bytes"][idx]) * self.factor / self.ts
        if self.spec.sessions == "construct":
            out, offered, active = self._construct(target, t0)
        else:
            active = _round(float(self.model_counts[idx]), self.rng)
            out, offered = self._persistent(active, t0)
        info = {"t": t0, "model_interval": idx, "target_bytes": target, "tcp_sessions": active,
                "tcp_sessions_with_transfers": len(out), "offered_bytes": offered}
        if self.spec.sessions == "model":
            info["model_sessions"] = float(self.model_counts[idx])
        if self.spec.udp:
            udp, udp_offered, sources = self.udp_sessions(idx, t0)
            out += udp
            info |= {"udp_sources": sources, "udp_sessions_with_datagrams": len(udp),
                     "udp_offered_bytes": udp_offered,
                     "udp_target_bytes": float(a["interval/udp_bytes"][idx]) * self.factor
                     / self.ts}
        return out, info

    def _udp_source(self, kind: str, i: int) -> tuple[int, int, float]:
        """(request, response payload bytes, mean gap s) of source ``i`` of ``kind``.

        Sizes in the model are IP bytes; a datagram carries them less the IPv4 and UDP
        headers. CBR: the engine's UDP is request/response, so a small request paces each
        response and the gap is set so that both together carry the source's rate (the
        model's rate counts both directions). Ping-pong: request and response of the
        source's size every period (mean gap)."""
        a = self.m.arrays
        size = int(min(max(float(a[f"udp/{kind}_size"][i]) - UDP_IP, UDP_MIN), 65000))
        param = float(a[f"udp/{kind}_param"][i])
        if kind == "cbr":
            return UDP_MIN, size, (UDP_MIN + size + 2 * UDP_IP) * 8 / max(param, 1.0)
        return size, size, max(param, 1e-3)

    def udp_sessions(self, idx: int, t0: float) -> tuple[list[Session], float, int]:
        """The UDP sources active in [t0, t0 + length): per type, the model's count times
        the rate factor. A source persists across intervals with its parameters and its
        next datagram time; a new one starts at a stationary phase (uniform over a period,
        exponential for exponential gaps), so a source with a gap longer than the
        interval is active but sends in only some intervals.
        Returns (sessions, offered IP bytes, sources)."""
        a, rng = self.m.arrays, self.rng
        t1 = t0 + self.length
        out: list[Session] = []
        offered, sources = 0.0, 0
        for kind in UDP_KINDS:
            n_src = a[f"udp/{kind}_param"].size
            if not n_src:
                continue
            slots = self.udp_slots[kind]

            def new(kind: str = kind, n_src: int = n_src) -> tuple[float, int]:
                i = int(rng.integers(n_src))
                gap = self._udp_source(kind, i)[2]
                phase = rng.exponential(gap) if kind == "exp" else rng.random() * gap
                return t0 + float(phase), i

            slots.resize(_round(float(a[f"interval/udp_{kind}"][idx]) * self.factor, rng), rng,
                         new)
            sources += len(slots.next_t)
            for k, i in enumerate(slots.tag):
                req, rsp, gap = self._udp_source(kind, i)
                t, times = slots.next_t[k], []
                while t < t1 and len(times) < MAX_PAIRS:
                    times.append(t)
                    t += float(rng.exponential(gap)) if kind == "exp" else gap
                slots.next_t[k] = t
                if not times:
                    continue
                thinks = np.diff(np.r_[times, times[-1]])
                cli, srv = self._ends()
                conn = Conn(hostport(srv, self.spec.port), "udp", f"harpoon-udp-{kind}", 0.0,
                            tuple((req, rsp, round(float(x), 9)) for x in thinks))
                out.append(Session(0, round(times[0], 9), cli, (Rre(0.0, (conn,)),)))
                offered += len(times) * (req + rsp + 2 * UDP_IP)
        return out, offered, sources


def connection_times(icts: np.ndarray, length: float, rng: np.random.Generator
                     ) -> np.ndarray:
    """``construct``: start times in [0, length) of a session living one interval: the
    first at a uniform phase of a drawn inter-connection time, then one per drawn
    inter-connection time; one at 0 without inter-connection times."""
    if icts.size == 0 or float(icts.max()) <= 0:
        return np.zeros(1)
    t = float(rng.random() * icts[rng.integers(0, icts.size)])
    mean = max(float(icts.mean()), 1e-9)
    parts = []
    while t < length:
        k = int(min(max(16, 1.3 * (length - t) / mean + 8), MAX_CONNS))
        times = t + np.concatenate([[0.0], np.cumsum(icts[rng.integers(0, icts.size, k - 1)])])
        inside = times[times < length]
        parts.append(inside)
        if len(inside) < k:
            break
        t = float(times[-1]) + float(icts[rng.integers(0, icts.size)])
    return np.concatenate(parts) if parts else np.zeros(0)


def harpoon_schedule(model: Any, clients: list[str], servers: list[str], duration_s: float,
                     seed: int, spec: HarpoonSpec) -> Schedule:
    """The schedule of one run: every run interval's sessions, drawn from one seed."""
    if not clients or not servers:
        raise SwellError("harpoon", "needs at least one client and one server address")
    rng = np.random.default_rng(seed)
    d = Drawer(model, clients, servers, spec, rng)
    sessions: list[Session] = []
    intervals = []
    for j in range(max(1, int(np.ceil(duration_s / d.length - 1e-9)))):
        ss, info = d.interval(j, j * d.length)
        sessions += ss
        intervals.append(info)
    sessions = [s for s in sessions if s.t < duration_s]
    if not sessions:
        raise SwellError("harpoon", f"zero sessions drawn in {duration_s} s (targets too small "
                                    f"for rate factor {d.factor:.3g})")
    sessions.sort(key=lambda s: s.t)
    sessions = [Session(i, s.t, s.client, s.rres) for i, s in enumerate(sessions)]
    meta = {"generator": "harpoon", "time_scale": spec.time_scale, "rate_factor": d.factor,
            "interval_s": d.length, "sessions_mode": spec.sessions, "intervals": intervals,
            "clients": d.clients, "client_weights": d.cw.tolist(), "servers": d.servers,
            "server_weights": d.sw.tolist()}
    return Schedule(seed, duration_s, sessions, meta)


def fit_flows(src: Path, interval_s: float, cache: Path) -> Path:
    """The Harpoon model of a flow input, fitted once (``swell harpoon extract`` with its
    defaults and ``interval_s``) into the study's cache, keyed by the input's content."""
    from swell.extract import harpoon as fitting
    from swell.extract import harpoon_model
    from swell.extract.flows import read_flows
    from swell.generators.models import _hash_file

    if not src.exists():
        raise SwellError(src, "no such flow input")
    files = sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src]
    key = hashlib.sha1(f"{[_hash_file(p) for p in files]}{interval_s!r}"
                       f"{harpoon_model.FORMAT_VERSION}".encode())  # a new format: refitted
    dest = cache / f"harpoon-{key.hexdigest()[:12]}"
    if not (dest / "model.json").is_file():
        params = fitting.HarpoonParams(interval_s=interval_s)
        fit = fitting.fit(read_flows([src]), params)
        harpoon_model.save(harpoon_model.build(fit, params, {"inputs": [str(src)]}), dest)
    return dest


def interval_bytes(records: list[dict[str, Any]], length: float, n: int,
                   proto: str = "tcp") -> np.ndarray:
    """Bytes received per run interval, by connection start (what the targets count)."""
    out = np.zeros(n)
    for r in records:
        if r["proto"] == proto:
            j = int(r["start"] // length)
            if 0 <= j < n:
                out[j] += r["rx"]
    return out


class HarpoonKind(TrafficKind):
    """Harpoon sessions between weighted address pools, interval by interval."""

    name = "harpoon"
    role = "background"
    Spec = HarpoonSpec
    cli = "swell.generators.harpoon_cli"
    native = ("swell-gen",)

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model_path: Path | None = None
        self.sched: Schedule | None = None

    @property
    def s(self) -> HarpoonSpec:
        assert isinstance(self.spec, HarpoonSpec)
        return self.spec

    def _model(self) -> Any:
        from swell.extract import harpoon_model

        if self.model_path is None:
            raise SwellError("harpoon", "prepare() was not run")
        return harpoon_model.load(self.model_path)

    def prepare(self, ctx: PrepareContext) -> None:
        if self.s.flows is not None:
            self.model_path = fit_flows(ctx.base_dir / self.s.flows, self.s.flow_interval_s,
                                        ctx.cache_dir)
        else:
            path = ctx.base_dir / str(self.s.model)
            if not (path / "model.json").is_file():
                raise SwellError(path, "no such Harpoon model (swell harpoon extract writes one)")
            self.model_path = path
        self._model()  # validated before any topology exists

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: the model is a readable Harpoon model, or the flow input is
        one swell reads (its format recognised; nothing written)."""
        from swell.extract import harpoon_model
        from swell.extract.flows import detect_format

        if self.s.flows is not None:
            detect_format(ctx.base_dir / self.s.flows)
        else:
            harpoon_model.load(ctx.base_dir / str(self.s.model))

    def needs(self) -> HostNeeds:
        if self.model_path is None:
            return HostNeeds(clients=GroupNeed(default_count=1), servers=GroupNeed(
                default_count=1))
        m = self._model()
        return HostNeeds(clients=GroupNeed(default_count=min(POOL_MAX, len(m.pool("client")[0]))),
                         servers=GroupNeed(default_count=min(POOL_MAX, len(m.pool("server")[0]))))

    def model_dir(self) -> Path | None:
        return self.model_path

    def asked_mbps(self) -> dict[str, float] | None:
        if self.model_path is None:
            return None
        m = self._model()
        factor = (self.s.target_mbps * 1e6 / max(m.mean_rate_bps(), 1e-9)
                  if self.s.target_mbps is not None else (self.s.rate_scale or 1.0))
        return {"forward": 0.0, "reverse": m.mean_rate_bps() * factor / 1e6}

    def check_path(self, path: PathFacts) -> list[str]:
        asked = (self.asked_mbps() or {}).get("reverse", 0.0)
        if path.reverse_mbps and asked >= path.reverse_mbps:
            return [f"harpoon asks {asked:.3g} Mbit/s on average, at or above the "
                    f"{path.reverse_mbps:g} Mbit/s bottleneck: transfers will pile up"]
        return []

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        if not pl.bg_clients or not pl.bg_servers:
            raise SwellError("harpoon", "needs background clients and servers in the topology")
        sched = harpoon_schedule(self._model(), [e.ip for e in pl.bg_clients],
                                 [e.ip for e in pl.bg_servers], ctx.duration_s, ctx.seed, self.s)
        self.sched = sched
        path = write_schedule(ctx.out_dir / "schedule.jsonl", sched)
        return SwingGenerator(SwingConfig(
            schedule=path, out_dir=ctx.out_dir, server=pl.bg_servers[0].place,
            client=pl.bg_clients[0].place, server_groups=place_hosts(list(pl.bg_servers)),
            client_groups=place_hosts(list(pl.bg_clients)), duration_s=ctx.duration_s,
            probe=probe_paths(pl)))

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        from swell.generators.swing_accounting import load_records, run_accounting

        res = super().result(gen, window)
        if gen is None or self.sched is None:
            return res
        res.metrics.update(run_accounting(self.sched, gen, window))
        meta = self.sched.meta
        recs = load_records(gen.files["records"]) if gen.files["records"].exists() else []
        n = len(meta["intervals"])
        got = interval_bytes(recs, meta["interval_s"], n)
        udp = interval_bytes(recs, meta["interval_s"], n, "udp")
        res.metrics["intervals"] = [{**iv, "received_bytes": float(g),
                                     "udp_received_bytes": float(u)}
                                    for iv, g, u in zip(meta["intervals"], got, udp, strict=True)]
        res.series["harpoon_target_bytes"] = [iv["target_bytes"] for iv in meta["intervals"]]
        res.series["harpoon_received_bytes"] = got.tolist()
        return res
