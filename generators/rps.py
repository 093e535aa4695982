"""RPS-style web sessions: HTTP sessions whose arrivals follow a fitted MMPP,
each from one of many emulated source addresses, fetching pages from Apache.

``background: {kind: rps, model: MMPP_DIR, clients: 50, interval_s: 1, scale: 1}``

Arrivals: one path of the MMPP (``swell fit mmpp``; :func:`swell.extract.mmpp.simulate`)
over the run, its interval mapped to ``interval_s`` seconds of the run (a
per-minute model compressed into a short run keeps its shape across
intervals), ``scale`` times as many sessions (independent paths superposed,
then thinned). Each session: a source address drawn among the background
clients (``clients`` emulated hosts), a number of requests (geometric, mean
``requests``), pages drawn from ``object_bytes``, exponential think times
(mean ``think_s``) between them; every request on a new connection.
Apache (:class:`swell.generators.web.ApacheServer`) serves on the first
background server.

Runner: :mod:`swell.generators.rps_client`, one process per host group (the
emulated hosts that share a namespace), which starts every session at its
time from its address. httperf's ``--wsesslog`` has sessions and think times
but starts sessions at a fixed or Poisson rate and cannot bind connections
to many source addresses; swell-gen's schedule runner speaks swell's own
protocol, not HTTP to Apache. So a small Python runner (threads; session
rates here are tens per second, not thousands).

Results: sessions and requests scheduled and completed, errors, response
times, and the session starts per interval as the runner saw them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from swell.errors import SwellError
from swell.extract.mmpp_model import load_mmpp_model, simulate
from swell.generators.base import Generator, GenResult, Proc, parse_json_lines
from swell.generators.kind import (
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    TrafficKind,
    Window,
)
from swell.generators.web import APACHE, ApacheServer, object_name
from swell.placement import Endpoint, GroupNeed, HostNeeds


class RpsSpec(KindSpec):
    kind: Literal["rps"] = "rps"
    model: str = Field(description="MMPP model directory (swell fit mmpp)")
    clients: int = Field(20, ge=1, le=5000, description="emulated source hosts")
    interval_s: float | None = Field(None, gt=0, description="run seconds per model interval")
    scale: float = Field(1.0, gt=0, le=100, description="sessions x this")
    requests: float = Field(3.0, ge=1, description="mean requests per session (geometric)")
    think_s: float = Field(1.0, ge=0, description="mean think time between requests")
    object_bytes: list[int] = Field([2000, 10000, 50000], min_length=1)
    port: int = 80

    def display(self) -> str:
        return self.label or f"rps {Path(self.model).name} x{self.scale:g}"


def session_plan(spec: RpsSpec, model: Any, duration_s: float, sources: list[str],
                 seed: int) -> list[dict[str, Any]]:
    """Sessions: start, source, requests (path, think) from the MMPP and the options."""
    rng = np.random.default_rng(seed)
    width = spec.interval_s or model.interval_s
    n_int = max(1, int(np.ceil(duration_s / width)))
    copies = int(np.ceil(spec.scale))
    starts = np.concatenate([simulate(model, n_int, seed=int(rng.integers(2**31))).times
                             for _ in range(copies)]) * (width / model.interval_s)
    starts = starts[rng.random(starts.size) < spec.scale / copies]
    starts = np.sort(starts[starts < duration_s])
    out = []
    for t in starts:
        n = int(rng.geometric(1.0 / spec.requests))
        sizes = rng.choice(spec.object_bytes, size=n)
        thinks = rng.exponential(spec.think_s, size=n) if spec.think_s > 0 else np.zeros(n)
        out.append({"t": float(t), "src": sources[int(rng.integers(len(sources)))],
                    "reqs": [[object_name(int(s)), float(k)] for s, k in zip(sizes, thinks,
                                                                             strict=True)]})
    return out


class RpsGenerator(Generator):
    name = "rps"
    tools = (APACHE,)
    native = ()

    def __init__(self, spec: RpsSpec, model: Any, server: Endpoint, clients: list[Endpoint],
                 out: Path, duration_s: float, seed: int) -> None:
        super().__init__()
        self.spec, self.model = spec, model
        self.server, self.clients = server, clients
        self.out, self.duration_s, self.seed = out, duration_s, seed
        self.apache = ApacheServer(out / "apache", server.ip, spec.port)
        self.runners: list[tuple[Proc, Path]] = []
        self.sessions: list[dict[str, Any]] = []

    def start_server(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.apache.start(self.server.place, list(self.spec.object_bytes), self.seed)

    def wait_ready(self, timeout: float = 10.0) -> None:
        self.apache.wait_ready(self.clients[0].place, timeout)

    def start_client(self) -> None:
        self.sessions = session_plan(self.spec, self.model, self.duration_s,
                                     [c.ip for c in self.clients], self.seed)
        groups: dict[str, list[Endpoint]] = {}
        for c in self.clients:
            groups.setdefault(c.group, []).append(c)
        for g, members in groups.items():
            ips = {m.ip for m in members}
            mine = [s for s in self.sessions if s["src"] in ips]
            sched = self.out / f"sessions-{g}.json"
            sched.write_text(json.dumps({"host": self.server.ip, "port": self.spec.port,
                                         "sessions": mine}))
            rec = self.out / f"requests-{g}.jsonl"
            argv = [sys.executable, "-m", "swell.generators.rps_client", str(sched), str(rec)]
            self.runners.append((self.spawn(f"rps runner {g}", members[0].place, argv), rec))

    def running(self) -> bool:
        return any(p.alive() for p, _ in self.runners)

    def stop(self) -> None:
        try:
            for p, _ in self.runners:
                p.stop(grace=15)
        finally:
            self.apache.stop()

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        rows: list[dict[str, Any]] = []
        t0s, due, started, missed, by_group = [], 0, 0, [], {}
        for p, rec in self.runners:
            if p.popen.returncode not in (0, -15):
                raise SwellError(p.label, p.error_text())
            ends = [r for r in parse_json_lines(p.drain()) if "t0" in r]
            t0s += [r["t0"] for r in ends]
            by_group.update({rec.stem.removeprefix("requests-"): r["t0"] for r in ends})
            due += sum(int(r["due"]) for r in ends)
            started += sum(int(r["started"]) for r in ends)
            missed += [float(x) for r in ends for x in r["missed_s"]]
            if rec.exists():
                rows += [json.loads(ln) for ln in rec.read_text().splitlines() if ln]
        done = [r for r in rows if "end" in r]  # the others were cut by the stop
        ok = [r for r in done if "error" not in r and 200 <= r.get("status", 0) < 300]
        rt = np.array([r["end"] - r["start"] for r in ok])
        width = self.spec.interval_s or self.model.interval_s
        t0 = min(t0s) if t0s else 0.0
        firsts = np.array([r["start"] - t0 for r in rows if r["req"] == 0])
        counts = np.bincount((firsts // width).astype(np.int64)) if firsts.size else np.zeros(0)
        summary = {
            "sessions_planned": len(self.sessions),
            "requests_planned": sum(len(s["reqs"]) for s in self.sessions),
            # sessions whose start time came before the runners were stopped
            "sessions_due": due,
            # sessions the runners set off at their times (each records its first
            # request unless the stop came within microseconds of it)
            "sessions_started": started,
            # due but not set off: how long before the stop each one's time came
            "sessions_missed_s": sorted(missed), "requests": len(rows),
            "requests_ok": len(ok), "errors": len(done) - len(ok),
            "requests_cut": len(rows) - len(done),
            "response_s_mean": float(rt.mean()) if rt.size else None,
            "response_s_p95": float(np.percentile(rt, 95)) if rt.size else None,
            "sources_used": len({r["src"] for r in rows}), "interval_s": width,
            # each runner's time zero (CLOCK_MONOTONIC s), by host group: its sessions'
            # planned times (sessions-<group>.json) count from it
            "runner_t0": by_group,
        }
        return GenResult(self.name, {"session_starts": counts.astype(float)}, summary,
                         {"out": self.out})


class RpsKind(TrafficKind):
    """RPS-style HTTP sessions with MMPP arrivals from many emulated sources."""

    name = "rps"
    role = "background"
    Spec = RpsSpec
    cli = "swell.generators.packets_cli"
    tools = (APACHE,)  # checked before the topology is up

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model_path: Path | None = None
        self.model: Any = None

    @property
    def s(self) -> RpsSpec:
        assert isinstance(self.spec, RpsSpec)
        return self.spec

    def prepare(self, ctx: PrepareContext) -> None:
        self.model_path = ctx.base_dir / self.s.model
        self.model, _ = load_mmpp_model(self.model_path)

    def validate(self, ctx: PrepareContext) -> None:
        self.prepare(ctx)  # an MMPP model, not the default Swing-model check

    def model_dir(self) -> Path | None:
        return self.model_path

    def needs(self) -> HostNeeds:
        return HostNeeds(clients=GroupNeed(count=self.s.clients), servers=GroupNeed(count=1))

    def build(self, ctx: RunContext) -> Generator:
        pl = ctx.placement
        if not pl.bg_servers or not pl.bg_clients:
            raise SwellError(self.name, "needs background clients and a server")
        if self.model is None:
            raise SwellError(self.name, "model not prepared")
        return RpsGenerator(self.s, self.model, pl.bg_servers[0], list(pl.bg_clients),
                            ctx.out_dir, ctx.duration_s, ctx.seed)

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        if gen is None:
            return KindResult(self.name)
        problems = []
        s = gen.summary
        if s["errors"]:
            problems.append(f"{s['errors']} of {s['requests']} requests failed")
        return KindResult(self.name, {"generator": gen.name, "summary": s},
                          {k: list(map(float, v)) for k, v in gen.series.items()}, problems)
