"""The Swing generator: closed-loop sessions over real TCP/UDP stacks.

The server side is one ``swell-gen serve`` listening on every server address
of the schedule (every emulated server host: the addresses may all live in
one namespace, IP_FREEBIND lets it bind before they are configured). The
client side is one ``swell-gen run`` executing the schedule (see
:mod:`swell.generators.schedule`): each session binds its sockets to its
client host's address, so the traffic crosses that host's emulated link.

A topology may spread the emulated hosts of a side over several namespaces:
``server_groups``/``client_groups`` (:class:`PlaceHosts`) then start one
``serve`` per server namespace (listening on its hosts' addresses) and one
``run`` per client namespace, each with the sessions of its hosts (written
as a sub-schedule; session ids kept); counters are summed across runners
and records concatenated into one ``records.jsonl``.

Readiness: wait for every server's ``READY`` line, then probe every
distinct server address from the (first) client side with a real
request/response (``swell-gen probe``). Live counters (sessions active, connections/s, Mbit/s
per direction) come from ``run``'s JSON lines on stdout. Results: the counter
series, a summary, and ``records.jsonl`` (one line per connection: session,
rre, conn, app, proto, client, server, start, end, tx, rx, exp_tx, exp_rx,
pairs_done, ok, error); :func:`verify_records` checks them against the
schedule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from swell.errors import SwellError
from swell.generators.base import (
    Generator,
    GenResult,
    Local,
    Place,
    Proc,
    counter_series,
    parse_json_lines,
)
from swell.generators.kind import KindSpec, PrepareContext, RunContext, TrafficKind
from swell.generators.models import VariantSpec, apply_variant, base_model
from swell.generators.schedule import Schedule, Session, read_schedule, write_schedule
from swell.native import native_artifact
from swell.placement import Endpoint, GroupNeed, HostNeeds, by_group


@dataclass
class PlaceHosts:
    """Emulated host addresses that live in one place (one namespace of a topology)."""

    place: Place
    addresses: list[str]


def place_hosts(endpoints: list[Endpoint]) -> list[PlaceHosts]:
    """Emulated hosts grouped by the place (namespace, machine) they live in."""
    return [PlaceHosts(place, ips) for place, ips in by_group(endpoints)]


@dataclass
class SwingConfig:
    schedule: Path
    out_dir: Path
    server: Place = field(default_factory=Local)
    client: Place = field(default_factory=Local)
    # Several namespaces per side: one serve per server place (listening on its
    # hosts' ADDR:PORTs in the schedule), one run per client place (its sessions).
    server_groups: list[PlaceHosts] | None = None
    client_groups: list[PlaceHosts] | None = None
    interval_ms: int = 1000
    duration_s: float | None = None  # hard stop; default: until every session ends
    udp_timeout_ms: int = 2000


def _ip(addr_port: str) -> str:
    return addr_port.rsplit(":", 1)[0].strip("[]")


def _merge_counters(latest: list[dict[str, Any]]) -> dict[str, Any]:
    """One cumulative counter line from the latest line of every runner."""
    out: dict[str, Any] = {"t": max(r["t"] for r in latest),
                           "final": all(r.get("final", False) for r in latest)}
    for key, value in latest[0].items():
        if key not in out and isinstance(value, int | float):
            out[key] = sum(r.get(key, 0) for r in latest)
    return out


class SwingGenerator(Generator):
    """Swing sessions from a schedule file, on one or several places per side."""

    name = "swing"

    def __init__(self, cfg: SwingConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.sched: Schedule = read_schedule(cfg.schedule)
        self.out = Path(cfg.out_dir)
        self.servers: list[Proc] = []
        self.clients: list[Proc] = []
        self.lines: list[list[dict[str, Any]]] = []  # counter lines per runner
        self.records_path = self.out / "records.jsonl"
        self.server_plan = self._server_plan()
        self.client_plan = self._client_plan()

    def _server_plan(self) -> list[tuple[Place, list[str]]]:
        wanted = self.sched.servers()
        if not self.cfg.server_groups:
            return [(self.cfg.server, wanted)]
        plan = [(g.place, [a for a in wanted if _ip(a) in set(g.addresses)])
                for g in self.cfg.server_groups]
        covered = {a for _, addrs in plan for a in addrs}
        if missing := sorted(set(wanted) - covered):
            raise SwellError(self.cfg.schedule, f"servers in no server group: {missing[:5]}")
        return [(place, addrs) for place, addrs in plan if addrs]

    def _client_plan(self) -> list[tuple[Place, list[Session]]]:
        if not self.cfg.client_groups:
            return [(self.cfg.client, self.sched.sessions)]
        plan = [(g.place, [s for s in self.sched.sessions if s.client in set(g.addresses)])
                for g in self.cfg.client_groups]
        if sum(len(ss) for _, ss in plan) != len(self.sched.sessions):
            raise SwellError(self.cfg.schedule, "some session clients are in no client group "
                                                "(or in two)")
        return [(place, ss) for place, ss in plan if ss]

    def start_server(self) -> None:
        exe = str(native_artifact("swell-gen"))
        for i, (place, listen) in enumerate(self.server_plan):
            argv = [exe, "serve"] + [a for addr in listen for a in ("--listen", addr)]
            self.servers.append(self.spawn(f"swell-gen serve [{i}]", place, argv))

    def wait_ready(self, timeout: float = 10.0) -> None:
        for server in self.servers:
            server.wait_line(lambda ln: ln == "READY", timeout)
        exe = str(native_artifact("swell-gen"))
        for i, (place, sessions) in enumerate(self.client_plan):
            # up to three client addresses: a model can give one host a slow, lossy
            # access link (10 kbit/s, 20% loss) that may miss a probe; a server is
            # ready when any of them reaches it
            srcs = list(dict.fromkeys(s.client for s in sessions))[:3]
            # every server from the first client place, one from each of the others
            for addr in self.sched.servers() if i == 0 else self.sched.servers()[:1]:
                errors = []
                for src in srcs:
                    res = place.run([exe, "probe", "--addr", addr, "--src", src,
                                     "--timeout", str(timeout)], timeout=timeout + 5)
                    if res.returncode == 0:
                        break
                    errors.append(f"from {src}: {res.stderr.strip()}")
                else:
                    raise SwellError(addr, "server not reachable " + "; ".join(errors))

    def start_client(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        exe = str(native_artifact("swell-gen"))
        single = len(self.client_plan) == 1 and not self.cfg.client_groups
        for i, (place, sessions) in enumerate(self.client_plan):
            path = Path(self.cfg.schedule) if single else write_schedule(
                self.out / f"schedule-{i}.jsonl", Schedule(
                    self.sched.seed, self.sched.duration_s, sessions, self.sched.meta))
            records = self.records_path if single else self.out / f"records-{i}.jsonl"
            argv = [exe, "run", "--schedule", str(path), "--records", str(records),
                    "--interval-ms", str(self.cfg.interval_ms),
                    "--udp-timeout-ms", str(self.cfg.udp_timeout_ms)]
            if self.cfg.duration_s is not None:
                argv += ["--duration", str(self.cfg.duration_s)]
            self.clients.append(self.spawn(f"swell-gen run [{i}]", place, argv))
            self.lines.append([])

    def running(self) -> bool:
        return any(c.alive() for c in self.clients)

    def poll(self) -> list[dict[str, Any]]:
        """Merge the runners' k-th counter lines (same interval) once all have them;
        a runner that has ended keeps contributing its final line."""
        for i, client in enumerate(self.clients):
            self.lines[i] += parse_json_lines(client.drain())
        done = [not c.alive() and bool(ls) for c, ls in zip(self.clients, self.lines,
                                                                 strict=True)]
        running = [len(ls) for ls, d in zip(self.lines, done, strict=True) if not d]
        upto = min(running) if running else max((len(ls) for ls in self.lines), default=0)
        new = []
        for k in range(len(self.counter_lines), upto):
            rows = [ls[min(k, len(ls) - 1)] for ls in self.lines if ls]
            if len(rows) == len(self.lines):
                new.append(_merge_counters(rows))
        self.counter_lines.extend(new)
        return new

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        self.poll()
        if not self.clients:
            raise SwellError("swing", "the client side never started")
        for client in self.clients:
            if client.popen.returncode not in (0, -15):
                raise SwellError(client.label, client.error_text())
        if len(self.clients) > 1 or self.cfg.client_groups:
            parts = [self.out / f"records-{i}.jsonl" for i in range(len(self.clients))]
            self.records_path.write_text("".join(p.read_text() for p in parts if p.exists()))
        server_lines = [ln for s in self.servers for ln in parse_json_lines(s.drain())]
        server_summary = _merge_counters([{"t": 0, **x} for x in server_lines]) \
            if server_lines else {}
        server_summary.pop("t", None)
        server_summary.pop("final", None)
        final = self.counter_lines[-1] if self.counter_lines else {}
        summary = {"client": final, "server": server_summary, "runners": len(self.clients),
                   "sessions_scheduled": len(self.sched.sessions), "seed": self.sched.seed}
        return GenResult(self.name, counter_series(self.counter_lines, warmup_s), summary,
                         {"records": self.records_path, "schedule": Path(self.cfg.schedule)})


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Per-connection records written by ``swell-gen run``."""
    try:
        return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise SwellError(path, f"cannot read records: {exc}") from None


def verify_records(sched: Schedule, records: list[dict[str, Any]]) -> list[str]:
    """Differences between what ran and the schedule (empty when they match exactly)."""
    want = {(s, r, c): conn for s, r, c, conn in sched.conns()}
    client_of = {s.id: s.client.strip("[]") for s in sched.sessions}
    problems = []
    seen = set()
    for rec in records:
        key = (rec["session"], rec["rre"], rec["conn"])
        seen.add(key)
        conn = want.get(key)
        if conn is None:
            problems.append(f"{key}: not in the schedule")
        elif not rec["ok"]:
            problems.append(f"{key}: failed: {rec['error']}")
        elif (rec["tx"], rec["rx"]) != (conn.req_bytes, conn.rsp_bytes):
            problems.append(f"{key}: bytes {rec['tx']}/{rec['rx']}, "
                            f"scheduled {conn.req_bytes}/{conn.rsp_bytes}")
        elif rec["client"].rsplit(":", 1)[0].strip("[]") != client_of[key[0]]:
            problems.append(f"{key}: ran from {rec['client']}")
    problems += [f"{k}: never ran" for k in sorted(set(want) - seen)]
    return problems


# --- the Swing traffic kind (experiment files: background: {kind: swing, ...}) -----------------

DEFAULT_CLIENTS = 50
DEFAULT_SERVERS = 10


class SwingSpec(KindSpec):
    """Swing background: a model directory or a trace to extract one from, and a variant."""

    kind: Literal["swing"] = "swing"
    model: str | None = Field(None, description="Swing model directory")
    trace: str | None = Field(None, description="packet trace to extract the model from")
    variant: VariantSpec | None = None

    @model_validator(mode="after")
    def _needs_input(self) -> SwingSpec:
        if not (self.model or self.trace):
            raise ValueError("swing needs a model (or a trace to extract one from)")
        return self


def offered_mbps(sched: Schedule, start_s: float = 0.0, end_s: float | None = None) -> float:
    """Payload both ways of the connections scheduled to start in ``[start_s, end_s)``.

    A connection's scheduled start is its session's arrival plus the think times of the
    RREs before it plus its offset in the RRE (transfer times are not known in advance,
    so this is a lower bound of when it really starts).
    """
    end = sched.duration_s if end_s is None else end_s
    total = 0
    for sess in sched.sessions:
        t = sess.t
        for rre in sess.rres:
            t += rre.gap
            for c in rre.conns:
                if start_s <= t + c.offset < end:
                    total += sum(q + a for q, a, _ in c.pairs)
    return 8.0 * total / max(end - start_s, 1e-9) / 1e6


def calibrated_schedule(apps: list[Any], clients: list[str], servers: list[str],
                        duration_s: float, seed: int, scale: float, target_mbps: float | None,
                        tolerance: float = 0.10, tries: int = 50, window_start_s: float = 0.0
                        ) -> Schedule:
    """A schedule whose offered load is close to the target (rejection sampling on the seed).

    Swing's per-session sizes are heavy-tailed, so a short run's offered load can be far
    from the model's mean. When the experiment asks for a target rate, schedules are drawn
    with candidate seeds derived from (seed, k) and the first one within ``tolerance`` of
    the target is used (else the closest of ``tries``): deterministic for a seed, and
    recorded in the schedule's metadata. The load is measured over the measurement window
    (connections scheduled to start after ``window_start_s``). Without a target the first
    draw is used as it is.
    """
    import numpy as np

    from swell.generators.schedule import build_schedule

    best, best_err = None, float("inf")
    for k in range(tries if target_mbps else 1):
        cand = seed if k == 0 else int(np.random.SeedSequence([seed, k]).generate_state(1)[0])
        sched = build_schedule(apps, clients, servers, duration_s, cand, scale=scale)
        if not target_mbps:
            return sched
        err = abs(offered_mbps(sched, window_start_s) / target_mbps - 1.0)
        if err < best_err:
            best, best_err = sched, err
        if err <= tolerance:
            break
    assert best is not None
    best.meta.update({"target_mbps": target_mbps,
                      "offered_mbps": offered_mbps(best, window_start_s),
                      "calibration_seed": best.seed, "calibration_base_seed": seed})
    return best


class SwingKind(TrafficKind):
    """Closed-loop Swing sessions between model-drawn background hosts."""

    name = "swing"
    role = "background"
    Spec = SwingSpec
    cli = "swell.generators.swing_cli"
    native = ("swell-gen",)

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model: Path | None = None

    @property
    def s(self) -> SwingSpec:
        assert isinstance(self.spec, SwingSpec)
        return self.spec

    def prepare(self, ctx: PrepareContext) -> None:
        base = base_model(self.s.model, self.s.trace, ctx.cache_dir, ctx.base_dir)
        assert base is not None
        self.model = apply_variant(base, self.s.variant, ctx.cache_dir)

    def needs(self) -> HostNeeds:
        return HostNeeds(clients=GroupNeed(default_count=DEFAULT_CLIENTS, model=self.model,
                                           side="client"),
                         servers=GroupNeed(default_count=DEFAULT_SERVERS, model=self.model,
                                           side="server"))

    def model_dir(self) -> Path | None:
        return self.model

    def build(self, ctx: RunContext) -> Generator:
        from swell.generators.schedule import load_app_samples

        if self.model is None:
            raise SwellError("swing", "prepare() was not run")
        pl = ctx.placement
        if not pl.bg_clients or not pl.bg_servers:
            raise SwellError("swing", "needs background clients and servers in the topology")
        apps, scale = load_app_samples(self.model)
        target = self.s.variant.target_mbps if self.s.variant is not None else None
        sched = calibrated_schedule(apps, [e.ip for e in pl.bg_clients],
                                    [e.ip for e in pl.bg_servers], ctx.duration_s, ctx.seed,
                                    scale, target, window_start_s=ctx.warmup_s)
        path = write_schedule(ctx.out_dir / "schedule.jsonl", sched)
        # One swell-gen per place: emulated hosts are multiplexed onto a few namespaces,
        # and a socket can only bind an address of its own namespace.
        return SwingGenerator(SwingConfig(
            schedule=path, out_dir=ctx.out_dir,
            server=pl.bg_servers[0].place, client=pl.bg_clients[0].place,
            server_groups=place_hosts(list(pl.bg_servers)),
            client_groups=place_hosts(list(pl.bg_clients)),
            duration_s=ctx.duration_s,
        ))
