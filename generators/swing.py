"""The Swing generator: closed-loop sessions over real TCP/UDP stacks.

The server side is one ``swell-gen serve`` listening on every server address
of the schedule (every emulated server host: the addresses may all live in
one namespace, IP_FREEBIND lets it bind before they are configured). The
client side is one ``swell-gen run`` executing the schedule (see
:mod:`swell.generators.schedule`): each session binds its sockets to its
client host's address, so the traffic crosses that host's emulated link.

Readiness: wait for the server's ``READY`` line, then probe every distinct
server address from the client side with a real request/response
(``swell-gen probe``). Live counters (sessions active, connections/s, Mbit/s
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
from typing import Any

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
from swell.generators.schedule import Schedule, read_schedule
from swell.native import native_artifact


@dataclass
class SwingConfig:
    schedule: Path
    out_dir: Path
    server: Place = field(default_factory=Local)
    client: Place = field(default_factory=Local)
    listen: list[str] | None = None  # default: every ADDR:PORT in the schedule
    interval_ms: int = 1000
    duration_s: float | None = None  # default: the schedule's duration
    udp_timeout_ms: int = 2000


class SwingGenerator(Generator):
    """Swing sessions from a schedule file."""

    name = "swing"

    def __init__(self, cfg: SwingConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.sched: Schedule = read_schedule(cfg.schedule)
        self.server: Proc | None = None
        self.client: Proc | None = None
        self.records_path = Path(cfg.out_dir) / "records.jsonl"

    def start_server(self) -> None:
        exe = str(native_artifact("swell-gen"))
        listen = self.cfg.listen or self.sched.servers()
        argv = [exe, "serve"] + [a for addr in listen for a in ("--listen", addr)]
        self.server = self.spawn("swell-gen serve", self.cfg.server, argv)

    def wait_ready(self, timeout: float = 10.0) -> None:
        assert self.server is not None
        self.server.wait_line(lambda ln: ln == "READY", timeout)
        exe = str(native_artifact("swell-gen"))
        src = self.sched.sessions[0].client
        for addr in self.sched.servers():
            res = self.cfg.client.run([exe, "probe", "--addr", addr, "--src", src,
                                       "--timeout", str(timeout)], timeout=timeout + 5)
            if res.returncode != 0:
                raise SwellError(addr, f"server not reachable from {src}: {res.stderr.strip()}")

    def start_client(self) -> None:
        Path(self.cfg.out_dir).mkdir(parents=True, exist_ok=True)
        argv = [str(native_artifact("swell-gen")), "run", "--schedule", str(self.cfg.schedule),
                "--records", str(self.records_path), "--interval-ms", str(self.cfg.interval_ms),
                "--udp-timeout-ms", str(self.cfg.udp_timeout_ms)]
        if self.cfg.duration_s is not None:
            argv += ["--duration", str(self.cfg.duration_s)]
        self.client = self.spawn("swell-gen run", self.cfg.client, argv)

    def running(self) -> bool:
        return self.client is not None and self.client.alive()

    def poll(self) -> list[dict[str, Any]]:
        if self.client is None:
            return []
        new = parse_json_lines(self.client.drain())
        self.counter_lines.extend(new)
        return new

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        self.poll()
        if self.client is None:
            raise SwellError("swing", "the client side never started")
        status = self.client.popen.returncode
        if status not in (0, -15):
            raise SwellError("swell-gen run", self.client.error_text())
        server_summary = {}
        if self.server is not None:
            lines = parse_json_lines(self.server.drain())
            server_summary = lines[-1] if lines else {}
        final = self.counter_lines[-1] if self.counter_lines else {}
        summary = {"client": final, "server": server_summary,
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
