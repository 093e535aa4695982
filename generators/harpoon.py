"""The Harpoon generator: per interval, that many sessions of file transfers (open loop).

A Harpoon model (:mod:`swell.extract.harpoon_model`) gives per interval a byte
target and a number of active sessions, the file size and inter-connection
time distributions, and weighted client and server address pools. A run is
drawn into a session schedule (:mod:`swell.generators.schedule`) and executed
by swell's native engine through :class:`~swell.generators.swing.SwingGenerator`
(``swell-gen serve`` on the server namespaces, ``swell-gen run`` on the client
namespaces): a Harpoon session in an interval is one schedule session of one
RRE whose connections start at offsets spaced by drawn inter-connection times
(start to start, independent of the transfers, as in Harpoon); each
connection sends an 8-byte request and receives one file. Nothing new in the
engine was needed.

Time: ``time_scale`` model seconds per run second. A run interval lasts
``interval_s / time_scale``; sessions keep the data's inter-connection times
and file sizes (a session behaves as in the data, in real seconds), and an
interval's byte target is the model's bytes over the shorter interval times
``rate_scale`` (default 1: the original bit rate, the paper's "match the
bitrate" setting) or the factor that makes the mean ``target_mbps``. The run
walks the model's intervals from ``start_interval`` (wrapping around), so a
day's diurnal profile takes ``86400 / time_scale`` seconds. Short run
intervals are the paper's pitfall (too few connections per session to sample
the distributions): the session counts are found for the run's interval, not
taken from the model's.

Sessions per interval (``sessions``):

* ``construct`` (default): the paper's Figure 4 procedure run once on the
  run's own draws: sessions are drawn until the interval's target is met (the
  last one kept only if it overshoots less than stopping short would miss), so
  each interval offers its target by construction; the count then varies
  around the model's mean count.
* ``model``: the model's mean count (scaled, stochastically rounded); the
  offered volume varies as the draws do.

Addresses: each session draws its client and server from the pools with the
model's weights; the i-th most frequent observed address is the i-th emulated
host of that side (the kind asks the topology for as many hosts as the pools
have, up to ``POOL_MAX``, packed onto a few namespaces by the topology).
UDP: per interval, the model's sources of each type (scaled the same way):
CBR as a stream of datagrams at the source's rate (a request of 24 bytes and
a response datagram every ``size * 8 / rate`` seconds), periodic ping-pong
(request and response of the source's size every period, NTP-like) and
exponential ping-pong (exponential gaps, DNS-like).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from swell.errors import SwellError
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
UDP_MIN = 24
MAX_PAIRS = 20000  # datagrams of one UDP source in one interval
MODEL_TRIALS = 20  # Figure 4 repetitions for the run's interval (sessions: model)


class HarpoonSpec(KindSpec):
    """Harpoon background from a Harpoon model (``swell harpoon extract``)."""

    kind: Literal["harpoon"] = "harpoon"
    model: str = Field(..., description="Harpoon model directory")
    time_scale: float = Field(1.0, gt=0, description="model seconds per run second")
    rate_scale: float | None = Field(None, gt=0, description="bit rate x k (default 1)")
    target_mbps: float | None = Field(None, gt=0, description="scale to this mean TCP rate")
    sessions: Literal["construct", "model"] = "construct"
    start_interval: int = Field(0, ge=0, description="model interval the run starts at")
    port: int = Field(5000, gt=0, lt=65536)
    udp: bool = True

    @model_validator(mode="after")
    def _one_scale(self) -> HarpoonSpec:
        if self.rate_scale is not None and self.target_mbps is not None:
            raise ValueError("give either rate_scale or target_mbps, not both")
        return self


def _round(x: float, rng: np.random.Generator) -> int:
    """Stochastic rounding: the expectation is ``x``."""
    base = int(np.floor(x))
    return base + int(rng.random() < x - base)


class Drawer:
    """Draws the sessions of a run from one model and one seed (see the module docstring)."""

    def __init__(self, model: Any, clients: list[str], servers: list[str], spec: HarpoonSpec,
                 rng: np.random.Generator) -> None:
        self.m, self.spec, self.rng = model, spec, rng
        self.ts = spec.time_scale
        self.files = model.files.astype(float)
        self.icts = model.icts  # real seconds: a session behaves as in the data
        self.length = model.interval_s / self.ts
        if spec.target_mbps is not None:
            self.factor = spec.target_mbps * 1e6 / max(model.mean_rate_bps(), 1e-9)
        else:
            self.factor = spec.rate_scale if spec.rate_scale is not None else 1.0
        self.clients, self.cw = self._pool("client", clients)
        self.servers, self.sw = self._pool("server", servers)
        self.model_counts = np.zeros(model.intervals)
        if spec.sessions == "model":  # Figure 4 for the run's (shorter) interval
            from swell.extract.harpoon import sessions_for

            self.model_counts = sessions_for(self.targets(), self.files, self.icts,
                                             self.length, MODEL_TRIALS, rng)[0]

    def targets(self) -> np.ndarray:
        """Bytes per run interval of every model interval: the same bit rate x factor."""
        return self.m.arrays["interval/tcp_bytes"] * self.factor / self.ts

    def _pool(self, side: str, hosts: list[str]) -> tuple[list[str], np.ndarray]:
        _, w = self.m.pool(side)
        k = min(len(w), len(hosts))
        return hosts[:k], w[:k] / w[:k].sum()

    def _ends(self) -> tuple[str, str]:
        c = self.clients[int(self.rng.choice(len(self.clients), p=self.cw))]
        s = self.servers[int(self.rng.choice(len(self.servers), p=self.sw))]
        return c, s

    def tcp_session(self, t0: float) -> tuple[Session | None, float]:
        """One session of an interval starting at ``t0`` and its bytes; None when its
        first connection falls after the interval (active, but idle all along)."""
        from swell.extract.harpoon import connection_times

        times = connection_times(self.icts, self.length, 1, self.rng)[0]
        if times.size == 0:
            return None, 0.0
        sizes = np.clip(self.files[self.rng.integers(0, self.files.size, times.size)], 0,
                        MAX_BYTES).astype(np.int64)
        cli, srv = self._ends()
        first = float(times[0])
        conns = tuple(Conn(hostport(srv, self.spec.port), "tcp", "harpoon-tcp",
                           round(float(t) - first, 9), ((REQ_BYTES, int(b), 0.0),))
                      for t, b in zip(times, sizes, strict=True))
        inside = float(sizes[times < self.length].sum())
        return Session(0, round(t0 + first, 9), cli, (Rre(0.0, conns),)), inside

    def interval(self, j: int, t0: float) -> tuple[list[Session], dict[str, Any]]:
        idx = (self.spec.start_interval + j) % self.m.intervals
        a = self.m.arrays
        target = float(a["interval/tcp_bytes"][idx]) * self.factor / self.ts
        out: list[Session] = []
        offered, active = 0.0, 0
        if self.spec.sessions == "construct":
            while offered < target:
                sess, vol = self.tcp_session(t0)
                if offered > 0 and offered + vol - target > target - offered:
                    break
                active += 1
                offered += vol
                out += [sess] if sess is not None else []
        else:
            active = _round(float(self.model_counts[idx]), self.rng)
            for _ in range(active):
                sess, vol = self.tcp_session(t0)
                offered += vol
                out += [sess] if sess is not None else []
        udp = self.udp_sessions(idx, t0) if self.spec.udp else []
        info = {"t": t0, "model_interval": idx, "target_bytes": target, "tcp_sessions": active,
                "tcp_sessions_with_transfers": len(out), "offered_bytes": offered,
                "udp_sources": len(udp)}
        return out + udp, info

    def udp_sessions(self, idx: int, t0: float) -> list[Session]:
        a, rng, out = self.m.arrays, self.rng, []
        for kind in ("cbr", "periodic", "exp"):
            params, sizes = a[f"udp/{kind}_param"], a[f"udp/{kind}_size"]
            if not params.size:
                continue
            n = _round(float(a[f"interval/udp_{kind}"][idx]) * self.factor, rng)
            for _ in range(n):
                i = int(rng.integers(params.size))
                size = int(min(max(sizes[i], UDP_MIN), 65000))
                if kind == "cbr":
                    gap = size * 8 / max(params[i], 1.0)
                    req = UDP_MIN
                else:
                    gap = params[i]
                    req = size
                k = int(min(MAX_PAIRS, max(1, np.ceil(self.length / max(gap, 1e-6)))))
                thinks = rng.exponential(gap, k) if kind == "exp" else np.full(k, gap)
                thinks = thinks[np.cumsum(thinks) - thinks < self.length]
                thinks[-1] = 0.0
                cli, srv = self._ends()
                phase = float(rng.random() * min(gap, self.length))
                conn = Conn(hostport(srv, self.spec.port), "udp", f"harpoon-udp-{kind}", 0.0,
                            tuple((req, size, round(float(x), 9)) for x in thinks))
                out.append(Session(0, round(t0 + phase, 9), cli, (Rre(0.0, (conn,)),)))
        return out


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
        path = ctx.base_dir / self.s.model
        if not (path / "model.json").is_file():
            raise SwellError(path, "no such Harpoon model (swell harpoon extract writes one)")
        self.model_path = path
        self._model()  # validated before any topology exists

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: the model is a readable Harpoon model (nothing written)."""
        from swell.extract import harpoon_model

        harpoon_model.load(ctx.base_dir / self.s.model)

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
        got = interval_bytes(recs, meta["interval_s"], len(meta["intervals"]))
        res.metrics["intervals"] = [{**iv, "received_bytes": float(g)}
                                    for iv, g in zip(meta["intervals"], got, strict=True)]
        res.series["harpoon_target_bytes"] = [iv["target_bytes"] for iv in meta["intervals"]]
        res.series["harpoon_received_bytes"] = got.tolist()
        return res
