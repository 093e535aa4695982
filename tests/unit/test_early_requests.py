"""Early requests (issue 19, docs/fidelity.md "Responses that were not replies"):
``pairEarly``.

* the extractor flags a pair whose response left its server before its request could
  have arrived (by hand, and on the bundled trace, where the model keeps the flags);
* a whole session's TCP connection carries them (``early``) only when the spec asks,
  each such request anchored at its trace time; with ``early_requests: connections``
  every request of a connection that has one; the schedule file keeps them; bad ones
  are errors, in the file and in the model;
* swell-gen sends an early request without waiting for the responses outstanding and
  reads the responses that follow each other in one stream (loopback, no root): four
  pairs whose server waits 0.2 s each take 0.8 s one after the other, 0.2 s early.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.model import FORMAT, FORMAT_VERSION, load_model
from swell.extract.sessions import not_replies
from swell.generators.schedule import (
    Conn,
    Rre,
    Schedule,
    Session,
    build_schedule,
    read_schedule,
    write_schedule,
)
from swell.native import native_artifact
from tests.unit import test_joint_rre
from tests.unit.test_joint_rre import CLIENTS, SERVERS

example_model = test_joint_rre.example_model  # the bundled capture's model (a fixture)


def test_not_replies_by_hand() -> None:
    nan = np.nan
    p = {"conn": np.array([0, 0, 1, 1, 2, 0]),
         "req_size": np.array([300, 300, 100, 200, 100, 0]),
         "rsp_size": np.array([5000, 900, 900, 0, 100, 10]),
         "req_t1": np.array([1.00, 2.00, 3.0, 5.00, 7.0, nan]),
         "rsp_t0": np.array([1.08, 2.005, 3.02, nan, 6.9, 8.0])}
    leg = np.array([0.02, 0.04, nan])  # connection 2: no handshake seen
    e = not_replies(p, leg)
    # 60 ms after a 20 ms round trip: a reply; 5 ms after: it left the server 15 ms
    # before the request arrived (-0.75 round trips); 20 ms of 40: -0.5, on the cut
    assert e.tolist() == [False, True, False, False, False, False]
    assert not not_replies({"conn": p["conn"], "req_size": p["req_size"],
                            "rsp_size": p["rsp_size"]}, leg).any()  # no times: none


def test_the_model_keeps_the_flags(example_model: Path, tmp_path: Path) -> None:
    m = load_model(example_model)
    flags = {app: m.samples(app, "pairEarly") for app in m.apps
             if f"app/{app}/pairEarly" in m.arrays}
    assert flags and all(set(np.unique(f)) <= {0, 1} for f in flags.values())
    assert all(len(f) == len(m.samples(a, "pairReq")) for a, f in flags.items())
    assert sum(int(f.sum()) for f in flags.values()) >= 3  # bench/pair_gating.py: 7 pairs
    meta, arrays = modeldir.load(example_model, FORMAT, FORMAT_VERSION, "swing")
    key = next(k for k in arrays if k.endswith("/pairEarly"))
    arrays[key] = arrays[key].copy()
    arrays[key][0] = 2
    modeldir.save(tmp_path / "bad", meta, arrays, default=str)
    with pytest.raises(SwellError, match="pairEarly must hold"):
        load_model(tmp_path / "bad")


def test_whole_sessions_carry_them_only_when_asked(example_model: Path) -> None:
    from swell.generators.swing import SwingSpec, spec_samples

    m, src = load_model(example_model), str(example_model)
    base, scale = spec_samples(SwingSpec(model=src, rre_draw="session"), m, src)
    asked, _ = spec_samples(SwingSpec(model=src, rre_draw="session", early_requests=True),
                            m, src)
    assert {a.early for a in base} == {"none"} and {a.early for a in asked} == {"pairs"}
    assert any(a.pair_early.sum() for a in asked)
    kw = {"scale": scale, "rre_draw": "session", "start": "empty"}
    plain = build_schedule(base, CLIENTS, SERVERS, 120.0, 3, **kw)
    early = build_schedule(asked, CLIENTS, SERVERS, 120.0, 3, **kw)
    assert not any(c.early for *_, c in plain.conns())
    n = 0
    for (*_, c), (*_, d) in zip(plain.conns(), early.conns(), strict=True):
        # the same sessions; only the flags and the anchors of the early requests added
        assert dataclasses.replace(c, at=()) == dataclasses.replace(d, at=(), early=())
        if not d.early:
            assert d.at == c.at
            continue
        assert d.proto == "tcp" and len(d.early) == len(d.pairs) and any(d.early[1:])
        for i, flag in enumerate(d.early[1:], 1):
            n += flag
            if flag and d.at:
                assert d.at[i] >= 0 or c.at == ()  # anchored where the trace has a time
    assert n >= 1


def test_connections_make_every_request_of_theirs_early(example_model: Path) -> None:
    from swell.generators.swing import SwingSpec, spec_samples

    m, src = load_model(example_model), str(example_model)
    kw = {"rre_draw": "session", "start": "empty"}
    scheds = {}
    for mode in ("pairs", "connections"):
        apps, scale = spec_samples(SwingSpec(model=src, early_requests=mode, **kw), m, src)
        assert {a.early for a in apps} == {mode}
        scheds[mode] = build_schedule(apps, CLIENTS, SERVERS, 120.0, 3, scale=scale, **kw)
    n = 0
    for (*_, c), (*_, d) in zip(scheds["pairs"].conns(), scheds["connections"].conns(),
                                strict=True):
        # the same sessions; a connection with an early pair has them all early, and
        # every request but its first anchored where the trace has a time
        assert dataclasses.replace(c, at=(), early=()) == dataclasses.replace(d, at=(),
                                                                              early=())
        assert bool(c.early) == bool(d.early)
        if not d.early:
            assert d.at == c.at
            continue
        n += 1
        assert all(d.early) and len(d.early) == len(d.pairs)
        assert len(d.at) == len(d.pairs) and min(d.at[1:]) >= 0  # the bundled trace: all
        assert set(d.at[1:]) >= {x for x in c.at[1:] if x >= 0}
    assert n >= 1
    assert sum(sum(d.early) for *_, d in scheds["connections"].conns()) > sum(
        sum(c.early) for *_, c in scheds["pairs"].conns())


def test_all_puts_every_request_of_the_named_application_on_the_trace_clock(
        example_model: Path, tmp_path: Path) -> None:
    """``early_requests: all``, here for one application (``per_app``): every TCP
    connection of it with two pairs or more has every pair early and every request but
    its first anchored at its trace time; the other applications as without it."""
    from swell.generators.swing import SwingSpec, spec_samples

    m, src = load_model(example_model), str(example_model)
    kw = {"rre_draw": "session", "start": "empty"}
    base, scale = spec_samples(SwingSpec(model=src, **kw), m, src)
    tcp = sorted({a.name for a in base if a.proto == "tcp" and a.pair_at.size})
    one = tcp[0]
    apps, _ = spec_samples(SwingSpec(model=src, per_app={one: {"early_requests": "all"}},
                                     **kw), m, src)
    assert {a.name: a.early for a in apps} == {a.name: "all" if a.name == one else "none"
                                               for a in apps}
    plain = build_schedule(base, CLIENTS, SERVERS, 120.0, 3, scale=scale, **kw)
    clock = build_schedule(apps, CLIENTS, SERVERS, 120.0, 3, scale=scale, **kw)
    n = 0
    for (*_, c), (*_, d) in zip(plain.conns(), clock.conns(), strict=True):
        assert dataclasses.replace(c, at=()) == dataclasses.replace(d, at=(), early=())
        if d.app != one or len(d.pairs) < 2:
            assert d.early == () and d.at == c.at, d.app
            continue
        n += 1
        assert d.early == (True,) * len(d.pairs)
        assert len(d.at) == len(d.pairs) and min(d.at[1:]) >= 0  # the bundled trace: all
        assert list(d.at[1:]) == sorted(d.at[1:])  # the trace's order
    assert n >= 3
    # the file keeps it as drawn
    path = write_schedule(tmp_path / "clock.jsonl", clock)
    assert read_schedule(path).conns() == clock.conns()


def test_the_file_keeps_them_and_refuses_bad_ones(tmp_path: Path) -> None:
    c = Conn("10.0.2.1:80", "tcp", "web", 0.0, ((100, 1000, 0.0), (100, 900, 0.0)),
             early=(False, True))
    sched = Schedule(1, 5.0, [Session(0, 0.0, "10.0.1.1", (Rre(0.0, (c,)),))])
    path = write_schedule(tmp_path / "s.jsonl", sched)
    assert json.loads(path.read_text().splitlines()[1])["rres"][0]["conns"][0]["early"] == [
        False, True]
    assert read_schedule(path).sessions[0].rres[0].conns[0] == c
    udp = dataclasses.replace(c, proto="udp", pairs=((100, 10, 0.0), (100, 10, 0.0)))
    for bad in (dataclasses.replace(c, early=(True,)), udp):
        with pytest.raises(SwellError, match="early needs one boolean per pair, TCP only"):
            write_schedule(tmp_path / "bad.jsonl",
                           Schedule(1, 5.0, [Session(0, 0.0, "10.0.1.1", (Rre(0.0, (bad,)),))]))
    (tmp_path / "num.jsonl").write_text(path.read_text().replace("[false,true]", "[0,1]"))
    with pytest.raises(SwellError, match="not a list of booleans"):
        read_schedule(tmp_path / "num.jsonl")
    # swell-gen's own check, past the Python one
    text = path.read_text().replace('"early":[false,true]', '"early":[true]')
    (tmp_path / "gen.jsonl").write_text(text)
    res = subprocess.run([str(native_artifact("swell-gen")), "run", "--schedule",
                          str(tmp_path / "gen.jsonl"), "--records", str(tmp_path / "r.jsonl")],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "early needs one boolean per pair" in res.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path: Path, name: str, conn: Conn, port: int) -> dict:
    sched = Schedule(1, 10.0, [Session(0, 0.0, "127.0.0.1", (Rre(0.0, (conn,)),))])
    path = write_schedule(tmp_path / f"{name}.jsonl", sched)
    rec = tmp_path / f"{name}-records.jsonl"
    res = subprocess.run([str(native_artifact("swell-gen")), "run", "--schedule", str(path),
                          "--records", str(rec)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (line,) = rec.read_text().splitlines()
    return json.loads(line)


def test_swell_gen_sends_early_requests_without_waiting(tmp_path: Path) -> None:
    port = _free_port()
    server = subprocess.Popen([str(native_artifact("swell-gen")), "serve", "--listen",
                               f"127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "READY"
        # four pairs, 0.2 s of server wait each; 50-90 kB responses, so one read of the
        # client (64 kB) ends one response and begins the next
        pairs = tuple((100, 50_000 + 10_000 * i, 0.0) for i in range(4))
        gated = Conn(f"127.0.0.1:{port}", "tcp", "web", 0.0, pairs, waits=(0.2,) * 4)
        early = dataclasses.replace(gated, early=(False, True, True, True))
        t0 = time.monotonic()
        r_gated = _run(tmp_path, "gated", gated, port)
        r_early = _run(tmp_path, "early", early, port)
        assert time.monotonic() - t0 < 20
    finally:
        server.terminate()
        server.wait(10)
    for r in (r_gated, r_early):
        assert r["ok"] and r["pairs_done"] == 4, r
        assert r["tx"] == r["exp_tx"] == 400 and r["rx"] == r["exp_rx"] == 260_000, r
    took = {k: r["end"] - r["start"] for k, r in (("gated", r_gated), ("early", r_early))}
    assert took["gated"] >= 0.8, took  # each request after the previous response
    assert took["early"] < 0.5, took  # all four out at once; the waits overlap


def test_the_estimate_knows_early_requests() -> None:
    from swell.analysis.swing_window import PathEstimate, pair_times

    path = PathEstimate(0.1, 8e6)  # 100 ms, 1 MB/s
    pairs = ((100, 100_000, 0.5), (100, 100_000, 0.5), (100, 100_000, 0.0))
    c = Conn("1:80", "tcp", "web", 0.0, pairs, waits=(0.2, 0.2, 0.2))
    gated, g_end = pair_times(c, 0.0, path)
    early, e_end = pair_times(dataclasses.replace(c, early=(False, True, True)), 0.0, path)
    assert gated[1].start == pytest.approx(gated[0].rsp_end + 0.5)  # after response, think
    assert early[1].start == pytest.approx(early[0].req_end)  # once the request is out
    # the server answers in order: each response after the previous one
    assert early[1].rsp_start == pytest.approx(max(early[1].req_end + 0.2, early[0].rsp_end))
    assert early[2].rsp_start >= early[1].rsp_end
    assert e_end == pytest.approx(early[2].rsp_end + 0.05) and e_end < g_end - 1.0
