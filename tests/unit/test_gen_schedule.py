"""Session schedules: one seed, same schedule; strict file format; model builder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main as swell_main
from swell.errors import SwellError
from swell.generators.schedule import (
    MIN_REQ,
    AppSamples,
    build_schedule,
    load_app_samples,
    read_schedule,
    write_schedule,
)

REPO = Path(__file__).resolve().parents[2]


def app(name: str = "web-tcp", proto: str = "tcp", rate: float = 5.0) -> AppSamples:
    rng = np.random.default_rng(0)
    span = 100.0
    return AppSamples(
        name, proto, 8080, np.sort(rng.uniform(0, span, int(rate * span))), span,
        num_rre=np.array([1, 2, 3]), inter_rre=rng.exponential(1.0, 50),
        num_conn=np.array([1, 1, 4]), inter_conn=rng.exponential(0.05, 50),
        num_pairs=np.array([1, 2, 5]), req_size=np.array([0, 3, 300, 1200]),
        rsp_size=rng.pareto(1.2, 200) * 1000, req_think=rng.exponential(0.1, 50))


CLIENTS = [f"10.0.1.{i}" for i in range(1, 6)]
SERVERS = ["10.0.2.1", "10.0.2.2"]


def test_same_seed_same_file_other_seed_other_file(tmp_path: Path) -> None:
    files = []
    for i, seed in enumerate((7, 7, 8)):
        sched = build_schedule([app(), app("dns-udp", "udp")], CLIENTS, SERVERS, 20.0, seed)
        files.append(write_schedule(tmp_path / f"{i}.jsonl", sched).read_bytes())
    assert files[0] == files[1]
    assert files[0] != files[2]


def test_structure_and_rates(tmp_path: Path) -> None:
    sched = build_schedule([app(rate=5.0)], CLIENTS, SERVERS, 40.0, seed=1, scale=2.0)
    n = len(sched.sessions)
    assert abs(n - 400) < 4 * np.sqrt(400)  # 5/s x 2 x 40 s, Poisson
    assert [s.t for s in sched.sessions] == sorted(s.t for s in sched.sessions)
    assert all(0 <= s.t < 40.0 and s.client in CLIENTS for s in sched.sessions)
    for _, _, _, conn in sched.conns():
        assert conn.server.rsplit(":", 1) [0] in SERVERS and conn.server.endswith(":8080")
        assert all(q >= MIN_REQ["tcp"] for q, _, _ in conn.pairs)
        assert conn.pairs[-1][2] == 0.0
    assert sched.meta["raised_requests"] > 0  # the 0- and 3-byte requests
    for s in sched.sessions:
        assert s.rres[0].gap == 0.0 and s.rres[0].conns[0].offset == 0.0
    back = read_schedule(write_schedule(tmp_path / "s.jsonl", sched))
    assert back.sessions == sched.sessions and back.seed == 1


def header(n: int) -> str:
    return json.dumps({"format": "swell-schedule", "version": 1, "seed": 1, "sessions": n,
                       "duration_s": 1.0})


SESSION = {"id": 0, "t": 0.0, "client": "10.0.0.1", "rres": [{"gap": 0.0, "conns": [
    {"server": "10.0.0.2:80", "proto": "tcp", "app": "x", "offset": 0.0,
     "pairs": [[100, 100, 0.0]]}]}]}


@pytest.mark.parametrize("lines, message", [
    ([header(0)], "zero sessions"),
    ([header(1), json.dumps({**SESSION, "colour": 1})], "unknown field"),
    ([header(2), json.dumps(SESSION)], "header says 2"),
    ([header(1).replace('"version": 1', '"version": 9'), json.dumps(SESSION)], "v1"),
    ([header(1), json.dumps(SESSION).replace("[100, 100", "[3, 100")], "out of range"),
    ([header(1), json.dumps(SESSION).replace('"tcp"', '"sctp"')], "unknown proto"),
    ([header(1), "{not json"], "malformed"),
])
def test_bad_files_are_clear_errors(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SwellError, match=message):
        read_schedule(path)


def test_no_addresses_or_no_sessions_are_errors() -> None:
    with pytest.raises(SwellError, match="client"):
        build_schedule([app()], [], SERVERS, 10.0, 1)
    with pytest.raises(SwellError, match="zero sessions"):
        build_schedule([app(rate=0.01)], CLIENTS, SERVERS, 0.001, 1)


def test_builder_from_an_extracted_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    model = tmp_path / "model"
    assert swell_main(["extract", str(REPO / "data/pcap/example.pcap"), "-o", str(model)]) == 0
    apps, rate_scale = load_app_samples(model)
    assert rate_scale == 1.0 and {a.proto for a in apps} <= {"tcp", "udp"}
    by = {a.name: a for a in apps}
    assert "dns-udp" in by and by["dns-udp"].port == 53 and by["dns-udp"].proto == "udp"
    out = tmp_path / "s.jsonl"
    assert swell_main(["gen", "schedule", str(model), "-o", str(out), "--clients",
                       ",".join(CLIENTS), "--servers", ",".join(SERVERS), "--duration", "5",
                       "--scale", "10", "--seed", "4"]) == 0
    sched = read_schedule(out)
    assert sched.seed == 4 and sched.sessions
    assert {c.app for *_, c in sched.conns()} <= set(by)
    # 5 s of a 15.6 s trace: its profile, preceded by its mean rate (a steady start)
    assert sched.meta["arrivals"] == "trace" and sched.meta["steady_start"]["lead_in_s"] > 0
    empty = tmp_path / "e.jsonl"
    assert swell_main(["gen", "schedule", str(model), "-o", str(empty), "--clients",
                       ",".join(CLIENTS), "--servers", ",".join(SERVERS), "--duration", "5",
                       "--scale", "10", "--seed", "4", "--start", "empty"]) == 0
    assert "steady_start" not in read_schedule(empty).meta
    with pytest.raises(SwellError, match="no application"):
        load_app_samples(model, apps=["nope-tcp"])
