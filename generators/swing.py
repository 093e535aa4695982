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

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field, model_validator

from swell.errors import SwellError
from swell.generators import hostmap
from swell.generators.base import (
    Generator,
    GenResult,
    Local,
    Place,
    Proc,
    counter_series,
    parse_json_lines,
)
from swell.generators.cpushare import CpuSampler
from swell.generators.kind import (
    KindResult,
    KindSpec,
    PrepareContext,
    RunContext,
    TrafficKind,
    Window,
)
from swell.generators.models import VariantSpec, apply_variant, base_model
from swell.generators.samples import ANCHOR_THINK_S
from swell.generators.schedule import Schedule, Session, read_schedule, write_schedule
from swell.generators.swing_accounting import load_records as load_records  # re-exported
from swell.generators.swing_accounting import (
    offered_by_direction,
    run_accounting,
    scheduled_by_direction,
)
from swell.native import native_artifact
from swell.placement import Endpoint, GroupNeed, HostNeeds, PathFacts, Placement, by_group
from swell.typed import StrictModel


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
    probe: ProbePaths = field(default_factory=lambda: ProbePaths({}, 0.0, 0.0))


CPU_EVERY_S = 2.0  # CPU snapshots while the traffic runs, at most this often
PROBE_WORKERS = 16  # probes in flight at once (a long path takes seconds per probe)
SYN_RTO_S = 1.0  # Linux's initial SYN retransmission timeout


@dataclass
class ProbePaths:
    """What a readiness probe needs of the emulated paths: each host's access link
    (one-way delay, mean loss) and the shared path's round trip and loss."""

    links: dict[str, tuple[float, float]]  # address -> (one-way delay s, loss)
    path_rtt_s: float
    path_loss: float

    def rank(self, addr: str) -> tuple[float, float]:
        delay, loss = self.links.get(addr, (0.0, 0.0))
        return loss, delay

    def timing(self, src: str, dst: str, floor_s: float) -> tuple[float, float]:
        """(one attempt's timeout, the whole probe's) for a probe from ``src`` to ``dst``.

        An attempt waits for the handshake and one request/response: two round trips,
        plus the SYN's first retransmission; the whole probe lasts long enough for
        attempts to fail at the path's loss rate with odds under one in a thousand
        (a packet of each of four crossings lost), and never less than ``floor_s``.
        """
        (d1, l1), (d2, l2) = self.links.get(src, (0.0, 0.0)), self.links.get(dst, (0.0, 0.0))
        rtt = 2 * (d1 + d2) + self.path_rtt_s
        attempt = max(0.5, 2 * rtt + SYN_RTO_S)
        ok = ((1 - l1) * (1 - l2) * (1 - self.path_loss)) ** 4
        fail = min(max(1 - ok, 1e-6), 0.95)
        tries = math.ceil(math.log(1e-3) / math.log(fail))
        return attempt, max(floor_s, tries * attempt)


def probe_paths(pl: Placement) -> ProbePaths:
    links = {e.ip: (e.link.delay_ms / 1e3, e.link.loss) if e.link else (0.0, 0.0)
             for e in (*pl.bg_clients, *pl.bg_servers)}
    p = pl.path
    return ProbePaths(links, (p.forward_delay_ms + p.reverse_delay_ms) / 1e3,
                      1 - (1 - p.forward_loss) * (1 - p.reverse_loss))


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
        self.cpu = CpuSampler()  # the link engine's and the generators' CPU while it runs
        self._cpu_at = 0.0

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
        probes = []
        for i, (place, sessions) in enumerate(self.client_plan):
            # up to three client addresses, the best paths first: a model can give a
            # host a slow, lossy access link that may miss a probe; a server is ready
            # when any of them reaches it
            srcs = sorted(dict.fromkeys(s.client for s in sessions),
                          key=lambda a: self.cfg.probe.rank(a))[:3]
            # every server from the first client place, one from each of the others
            for addr in self.sched.servers() if i == 0 else self.sched.servers()[:1]:
                probes.append((place, addr, srcs))
        with ThreadPoolExecutor(max_workers=PROBE_WORKERS) as pool:
            errors = list(pool.map(lambda p: self._probe(*p, timeout), probes))
        for (_, addr, _), error in zip(probes, errors, strict=True):
            if error:
                raise SwellError(addr, "server not reachable " + error)

    def _probe(self, place: Place, addr: str, srcs: list[str], timeout: float) -> str:
        """Probe one server from the sources in turn: "" when one reached it, else why not."""
        exe = str(native_artifact("swell-gen"))
        errors = []
        for src in srcs:
            attempt, total = self.cfg.probe.timing(src, _ip(addr), timeout)
            res = place.run([exe, "probe", "--addr", addr, "--src", src,
                             "--timeout", f"{total:.3f}", "--attempt-ms",
                             str(int(attempt * 1000))], timeout=total + 10)
            if res.returncode == 0:
                return ""
            errors.append(f"from {src} (probe attempts of {attempt:.1f} s for "
                          f"{total:.0f} s): {res.stderr.strip()}")
        return "; ".join(errors)

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
        self.cpu.start()
        self._cpu_at = time.monotonic()

    def running(self) -> bool:
        return any(c.alive() for c in self.clients)

    def poll(self) -> list[dict[str, Any]]:
        """Merge the runners' k-th counter lines (same interval) once all have them;
        a runner that has ended keeps contributing its final line."""
        if time.monotonic() - self._cpu_at >= CPU_EVERY_S and self.running():
            self.cpu.sample()
            self._cpu_at = time.monotonic()
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

    def stop(self) -> None:
        if self.running():  # the CPU up to the end of the traffic
            self.cpu.sample()
        super().stop()

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
                   "sessions_scheduled": len(self.sched.sessions), "seed": self.sched.seed,
                   "cpu": self.cpu.shares()}
        return GenResult(self.name, counter_series(self.counter_lines, warmup_s), summary,
                         {"records": self.records_path, "schedule": Path(self.cfg.schedule)})


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


def _early_bool(v: Any) -> Any:
    """``early_requests``: true and false read as pairs and none."""
    return {True: "pairs", False: "none"}.get(v, v) if isinstance(v, bool) else v


EarlyRequests = Annotated[Literal["none", "pairs", "connections", "all"],
                          BeforeValidator(_early_bool)]


class AppTiming(StrictModel):
    """One application's own request timing (``per_app``), over the background's."""

    anchor_think_s: float | None = Field(None, ge=0, description="as the background's "
                                         "anchor_think_s, for this application only")
    early_requests: EarlyRequests | None = Field(None, description="as the background's "
                                                 "early_requests, for this application only")


class SwingSpec(KindSpec):
    """Swing background: a model directory or a trace to extract one from, and a variant."""

    kind: Literal["swing"] = "swing"
    model: str | None = Field(None, description="Swing model directory")
    trace: str | None = Field(None, description="packet trace to extract the model from")
    variant: VariantSpec | None = None
    arrivals: str = Field("auto", description="session arrival process: auto (the trace's "
                          "profile once when the run fits in the trace, else stationary), "
                          "stationary, trace, or a registered one")
    rre_draw: Literal["independent", "joint", "session"] = Field(
        "independent", description="how an RRE's connections are drawn: independent (numConn, "
        "interConn and numPairs one by one, as Swing does), joint (the trace's RREs whole, "
        "where the model has them; docs/scale.md 7.2) or session (the trace's sessions "
        "whole, else as joint; docs/scale.md 7.3: closest to the trace's energy at "
        "128 ms-4 s, campus 17 of 24 octaves against independent's 9; variants of sizes "
        "and think times act on it, a changed numConn or numPairs does not; "
        "docs/fidelity.md)")
    start: Literal["steady", "empty"] = Field(
        "steady", description="steady: the run starts in its steady state, with the sessions "
        "that arrived before it under way (a trace-shaped profile is preceded by its mean "
        "rate; docs/scale.md section 9); "
        "empty: every session arrives in the run (as before 2026-11-30)")
    server_wait: bool = Field(
        True, description="true: each TCP response leaves its server after the latency the "
        "trace's servers showed (the model's rspWait; docs/fidelity.md, \"The servers' "
        "wait\"); false: as soon as the request is in (as before 2026-11-30 noon)")
    pair_wait: Literal["own", "drawn"] = Field(
        "own", description="with server_wait and rre_draw: session, own: each pair of a whole "
        "session waits what its server waited in the trace, where that was measured (the "
        "model's pairWait; docs/fidelity.md, \"A pair's own wait\"); drawn: every wait drawn "
        "afresh from the application's rspWait (as before 2026-12-01)")
    anchor_think_s: float = Field(
        ANCHOR_THINK_S, ge=0, description="with rre_draw: session, a request that followed a "
        "pause of at least this many seconds in the trace leaves at its time there (from its "
        "connection's start), once its previous response is in; the others leave after "
        "their response and think time. 0 anchors every request but a connection's first "
        "(docs/fidelity.md, \"Anchored requests\")")
    early_requests: EarlyRequests = Field(
        "none", description="with rre_draw: session, pairs: a TCP request whose response in "
        "the trace was not a reply (it left the server before the request could have "
        "arrived: the model's pairEarly) leaves at its time there without waiting for the "
        "responses outstanding, so the server's responses follow each other as the trace's "
        "did; connections: every request of a connection that had such a pair does (both "
        "sides streamed on their own clocks); all: every request of every connection "
        "leaves at its trace time, none waiting (a client on its own clock, as campus's "
        "HTTPS clients behind a VPN tunnel: docs/fidelity.md, \"A client on its own "
        "clock\"); none: every request waits for the responses before it. true and false "
        "read as pairs and none "
        "(docs/fidelity.md, \"Responses that were not replies\")")

    per_app: dict[str, AppTiming] = Field(
        default_factory=dict, description="an application's own anchor_think_s and "
        "early_requests, by its name in the model (swell model show lists them), over the "
        "background's: e.g. {https-tcp: {early_requests: all}} puts the HTTPS clients' "
        "requests on the trace's clock and no other application's (docs/fidelity.md, \"A "
        "client on its own clock\"); a name the model does not have is an error")

    acks: Literal["model", "stack"] = Field(
        "model", description="model: the share of the trace's hosts that acknowledged every "
        "segment they received, per application and side (the model's acks), does so on "
        "the emulated hosts (a route with quickack; the rest keep delayed ACKs); stack: "
        "every host keeps the kernel's delayed ACKs (docs/fidelity.md, \"Who acknowledges "
        "every segment\")")
    server_match: Literal["delay", "none"] = Field(
        "delay", description="delay: an observed server's RREs go to emulated servers whose "
        "access link's one-way delay is nearest that server's own in the trace "
        "(its busy servers keep their paths; docs/fidelity.md, \"A server's own path\"); "
        "none: to hosts in any order (Swing's mapping, as before 2026-11-30 evening)")
    client_match: Literal["link", "none"] = Field(
        "link", description="link: a whole session (rre_draw: session) goes to a client host "
        "whose access link (capacity and delay, in log scale) is nearest its own client's in "
        "the trace (docs/scale.md, section 1); none: to the least loaded client host. Sessions "
        "of the other draws have no client of their own and always go to the least loaded")

    @model_validator(mode="after")
    def _needs_input(self) -> SwingSpec:
        if not (self.model or self.trace):
            raise ValueError("swing needs a model (or a trace to extract one from)")
        return self


def spec_samples(spec: SwingSpec, model: Any, source: str) -> tuple[list[Any], float]:
    """The model's samples as ``spec`` draws them: without the servers' waits when its
    ``server_wait`` is false, without the pairs' own ones when its ``pair_wait`` is
    ``drawn``, with its ``anchor_think_s`` and ``early_requests`` (``app_samples``: the
    samples and the rate scale)."""
    from swell.generators.schedule import app_samples

    apps, scale = app_samples(model, source)
    if not spec.server_wait:
        apps = [replace(a, rsp_wait=np.zeros(0)) for a in apps]
    if not spec.server_wait or spec.pair_wait == "drawn":
        apps = [replace(a, pair_wait=np.zeros(0)) for a in apps]
    check_per_app(spec, [a.name for a in apps], source)

    def timing(name: str) -> dict[str, Any]:
        own = spec.per_app.get(name, AppTiming())
        return {"anchor_think": spec.anchor_think_s if own.anchor_think_s is None
                else own.anchor_think_s,
                "early": spec.early_requests if own.early_requests is None
                else own.early_requests}

    return [replace(a, **timing(a.name)) for a in apps], scale


def check_per_app(spec: SwingSpec, names: list[str], source: str) -> None:
    """A ``per_app`` name that is not one of the model's applications is an error."""
    unknown = sorted(set(spec.per_app) - set(names))
    if unknown:
        raise SwellError(source, f"per_app names {', '.join(unknown)}: not an application "
                                 f"of this model (it has {', '.join(sorted(names))})")


def observed_server_delays(model: Any) -> np.ndarray | None:
    """The model's one-way delay (s) of each observed server, in ``rreServer``'s index
    order (``net/server/hosts``); None for a model without them."""
    d = model.arrays.get("net/server/delay_s")
    return None if d is None else np.asarray(d, dtype=float)


def observed_client_links(model: Any) -> np.ndarray | None:
    """The model's access capacity (bit/s) and one-way delay (s) of each observed client,
    one row each in ``sessClient``'s index order (``net/client/hosts``); None for a model
    without them."""
    cap, d = model.arrays.get("net/client/capacity_bps"), model.arrays.get("net/client/delay_s")
    if cap is None or d is None:
        return None
    return np.stack([np.asarray(cap, dtype=float), np.asarray(d, dtype=float)], axis=1)


def offered_mbps(sched: Schedule, start_s: float = 0.0, end_s: float | None = None) -> float:
    """Payload both ways of the connections scheduled to start in ``[start_s, end_s)``
    (:func:`~swell.generators.swing_accounting.scheduled_by_direction`)."""
    return sum(scheduled_by_direction(sched, start_s, end_s).values())


def _asked_mbps(m: Any) -> dict[str, float]:
    """A Swing model's mean payload rate per direction (its variants applied), Mbit/s."""
    k = 8.0 * float(m.meta.get("rate_scale", 1.0)) / max(m.duration_s, 1e-9) / 1e6
    apps = m.meta["apps"].values()
    return {"forward": k * sum(a["bytes_c2s"] for a in apps),
            "reverse": k * sum(a["bytes_s2c"] for a in apps)}


def swing_schedule(apps: list[Any], clients: list[Endpoint] | list[str],
                   servers: list[Endpoint] | list[str], duration_s: float, seed: int,
                   scale: float, target_mbps: float | None, arrivals: str = "auto",
                   window_start_s: float = 0.0, rre_draw: str = "independent",
                   target_weights: tuple[float, float] = (1.0, 1.0), start: str = "steady",
                   bottleneck: PathFacts | None = None,
                   observed_delays: np.ndarray | None = None,
                   observed_clients: np.ndarray | None = None) -> Schedule:
    """The schedule of one run: drawn once from ``seed``, never chosen among seeds.

    A target (payload, both directions) is met by construction: the session count is
    chosen so the drawn sessions carry it (:func:`build_schedule`); what a heavy-tailed
    model still varies (the split between directions, the bytes inside the window) is
    left as drawn, and studies report its spread over seeds. Endpoints bring their
    access link rates, so the sessions are mapped onto hosts their links can carry.
    ``target_weights``: :func:`swell.extract.variants.size_weights` of the model, with
    ``target_mbps`` the load before its size factors. ``start``: ``steady`` starts
    with the sessions under way that arrived before the run (:mod:`.steady_start`),
    estimated over the typical path: the endpoints' median access links and
    ``bottleneck``. ``observed_delays`` (the model's one-way delay per observed server,
    :func:`observed_server_delays`): each observed server's RREs go to server hosts
    whose links' delays are nearest its own (when every server endpoint has a link).
    ``observed_clients`` (:func:`observed_client_links`): a whole session goes to a
    client host whose link is nearest its own client's (when every client has a link).
    """
    from swell.analysis.swing_window import path_estimate
    from swell.generators.schedule import build_schedule, median_rate

    def split(hosts: list[Endpoint] | list[str]
              ) -> tuple[list[str], list[float | None], list[float | None]]:
        """Addresses, and each host's access link rate and one-way delay (None: no link)."""
        links = [None if isinstance(h, str) else h.link for h in hosts]
        return ([h if isinstance(h, str) else h.ip for h in hosts],
                [None if k is None else k.rate_mbps for k in links],
                [None if k is None else k.delay_ms for k in links])

    def known(values: list[float | None]) -> list[float]:
        return [v for v in values if v is not None]

    c_addrs, c_rates, c_delays = split(clients)
    s_addrs, s_rates, s_delays = split(servers)
    b = bottleneck or PathFacts()
    path = path_estimate(known(c_delays), known(s_delays),
                         [median_rate(c_rates), median_rate(s_rates), b.forward_mbps,
                          b.reverse_mbps],
                         b.forward_delay_ms + b.reverse_delay_ms)
    sched = build_schedule(apps, c_addrs, s_addrs, duration_s, seed, scale=scale,
                           arrivals=arrivals, target_mbps=target_mbps,
                           client_rates=c_rates, server_rates=s_rates,
                           cuts=(window_start_s,), rre_draw=rre_draw,
                           target_weights=target_weights, start=start, path=path,
                           observed_delays=observed_delays,
                           server_delays=s_delays, observed_clients=observed_clients,
                           client_delays=c_delays)
    sched.meta["window_start_s"] = window_start_s
    # as a target counts it (by the estimated transfers for a steady start), and by
    # each connection's earliest start beside it
    sched.meta["offered_window_mbps"] = sum(offered_by_direction(sched, window_start_s)
                                            .values())
    sched.meta["offered_window_earliest_mbps"] = offered_mbps(sched, window_start_s)
    return sched


def host_warnings(sched: Schedule) -> list[str]:
    """What the host mapping could not do, in words (empty: every host within its link)."""
    out = []
    hosts = sched.meta.get("hosts", {})
    for side in ("servers", "clients"):
        info = hosts.get(side, {})
        need = hosts.get(f"{side}_needed", 0)
        if info.get("overloaded"):
            worst = ", ".join(f"{w['host']} ({max(w['asked_up_mbps'], w['asked_down_mbps']):.1f}"
                              f" of {w['link_mbps']:.1f} Mbit/s)" for w in info["worst"][:3])
            out.append(f"{info['overloaded']} of {info['hosts']} background {side} are asked "
                       f"for more than {hostmap.OVERLOAD:.0%} of their access link over the "
                       f"run ({worst}); the load needs about {need} {side}: give the "
                       f"topology more {side} (or a smaller load)")
    return out


POOL_MAX = 1024  # hosts per side a Swing background asks for at most by default


def pool_sizes(model: Path) -> dict[str, int]:
    """Emulated hosts per side for a model's load (see docs/scale.md).

    The observed hosts times the model's rate scale (more users on the link visit
    more servers), at least what the load needs at the planned utilisation of the
    model's median access link, at least the old defaults, at most ``POOL_MAX``.
    """
    import numpy as np

    from swell.extract.model import load_model

    m = load_model(model)
    scale = float(m.meta.get("rate_scale", 1.0))
    asked = m.mean_rate_bps() / 1e6
    out = {}
    for side, default in (("client", DEFAULT_CLIENTS), ("server", DEFAULT_SERVERS)):
        hosts = m.arrays.get(f"net/{side}/hosts")
        observed = int(hosts.size) if hosts is not None else max(
            (int(a.get(f"{side}s", 1)) for a in m.meta["apps"].values()), default=1)
        caps = m.arrays.get(f"net/{side}/capacity_bps")
        caps = caps[np.isfinite(caps) & (caps > 0)] / 1e6 if caps is not None else None
        by_load = hostmap.hosts_needed(asked, caps) if caps is not None and caps.size else 1
        out[side] = int(min(POOL_MAX, max(default, int(np.ceil(observed * scale)), by_load)))
    return out


class SwingKind(TrafficKind):
    """Closed-loop Swing sessions between model-drawn background hosts."""

    name = "swing"
    role = "background"
    Spec = SwingSpec
    cli = "swell.generators.swing_cli"
    native = ("swell-gen",)
    testbed = True

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.model: Path | None = None
        self.warnings: list[str] = []
        self.sched: Schedule | None = None

    @property
    def s(self) -> SwingSpec:
        assert isinstance(self.spec, SwingSpec)
        return self.spec

    def validate(self, ctx: PrepareContext) -> None:
        """``swell check``: the default checks (a trace that opens, a model that loads),
        and for a trace to extract, what extraction refuses (no packets, no TCP or UDP
        packets to model), read once without extracting; the reader's damage is kept
        (``trace_damage``) for the check's warnings."""
        super().validate(ctx)
        if self.s.model and self.s.per_app:  # variants keep the applications
            from swell.extract.model import load_model

            model = ctx.base_dir / self.s.model
            check_per_app(self.s, list(load_model(model).meta["apps"]), str(model))
        if self.s.trace and not self.s.model:
            from swell.extract.reader import census

            trace = ctx.base_dir / self.s.trace
            packets, tracked, self.trace_damage = census(trace)
            if packets == 0:
                raise SwellError(trace, "no packets in the trace")
            if tracked == 0:
                raise SwellError(trace, f"no TCP or UDP packets among {packets:,} packets; "
                                        "nothing to model")

    def prepare(self, ctx: PrepareContext) -> None:
        base = base_model(self.s.model, self.s.trace, ctx.cache_dir, ctx.base_dir)
        assert base is not None
        self.model = apply_variant(base, self.s.variant, ctx.cache_dir)
        if self.s.per_app:  # before anything runs
            from swell.extract.model import load_model

            check_per_app(self.s, list(load_model(self.model).meta["apps"]), str(self.model))

    def needs(self) -> HostNeeds:
        # a model that is not there (yet) is refused when the topology draws its links
        have = self.model is not None and (self.model / "model.json").is_file()
        sizes = pool_sizes(self.model) if have and self.model else {
            "client": DEFAULT_CLIENTS, "server": DEFAULT_SERVERS}
        quick: dict[str, tuple[tuple[int, float], ...]] = {}
        if have and self.model and self.s.acks == "model":
            from swell.extract.model import load_model
            from swell.generators.samples import quickack_shares

            quick = quickack_shares(load_model(self.model))
        return HostNeeds(clients=GroupNeed(default_count=sizes["client"], model=self.model,
                                           side="client", quickack=quick.get("client", ())),
                         servers=GroupNeed(default_count=sizes["server"], model=self.model,
                                           side="server", quickack=quick.get("server", ())))

    def model_dir(self) -> Path | None:
        return self.model

    def asked_mbps(self) -> dict[str, float] | None:
        """The model's mean payload rate per direction (variants applied)."""
        from swell.extract.model import load_model

        return None if self.model is None else _asked_mbps(load_model(self.model))

    def build(self, ctx: RunContext) -> Generator:
        import sys

        from swell.extract.model import load_model
        from swell.extract.variants import size_weights

        if self.model is None:
            raise SwellError("swing", "prepare() was not run")
        pl = ctx.placement
        if not pl.bg_clients or not pl.bg_servers:
            raise SwellError("swing", "needs background clients and servers in the topology")
        model = load_model(self.model)
        apps, scale = spec_samples(self.s, model, self.model)
        asked = _asked_mbps(model)
        weights = size_weights(model.meta.get("variants", []))
        target = asked["forward"] * weights[0] + asked["reverse"] * weights[1] \
            if self.s.variant is not None and self.s.variant.target_mbps is not None else None
        sched = swing_schedule(apps, list(pl.bg_clients), list(pl.bg_servers), ctx.duration_s,
                               ctx.seed, scale, target, self.s.arrivals,
                               window_start_s=ctx.warmup_s, rre_draw=self.s.rre_draw,
                               target_weights=weights, start=self.s.start,
                               bottleneck=pl.path,
                               observed_delays=observed_server_delays(model)
                               if self.s.server_match == "delay" else None,
                               observed_clients=observed_client_links(model)
                               if self.s.client_match == "link" else None)
        self.sched = sched
        self.warnings = host_warnings(sched)
        for w in self.warnings:  # before any traffic: the run may fall short
            print(f"\nwarning: {w}", file=sys.stderr, flush=True)
        path = write_schedule(ctx.out_dir / "schedule.jsonl", sched)
        # One swell-gen per place: emulated hosts are multiplexed onto a few namespaces,
        # and a socket can only bind an address of its own namespace.
        return SwingGenerator(SwingConfig(
            schedule=path, out_dir=ctx.out_dir,
            server=pl.bg_servers[0].place, client=pl.bg_clients[0].place,
            server_groups=place_hosts(list(pl.bg_servers)),
            client_groups=place_hosts(list(pl.bg_clients)),
            duration_s=ctx.duration_s, probe=probe_paths(pl),
        ))

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        res = super().result(gen, window)
        if gen is None or self.sched is None:
            return res
        res.metrics.update(run_accounting(self.sched, gen, window))
        res.metrics["warnings"] = list(self.warnings)
        return res
