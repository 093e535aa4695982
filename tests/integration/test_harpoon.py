"""Harpoon through `swell run` and `swell gen harpoon` (root; Harpoon's own validation).

Compressed day (the issue's volume check: each interval's bytes within 10% of
the model's target): the alexa-app capture's flows (file sizes,
inter-connection times, 11 servers' weights; its one client address, which
needs the host namespaces' TIME_WAIT reuse, see ``_day_model``) with the byte targets of one
real day (WorldCup98's per-minute log, 1 May 1998) in six 4-hour intervals,
run by the default ``sessions: model`` (Harpoon's procedure: per interval the
model's Figure 4 count of persistent sessions) at time_scale 1800 (8 s per
interval, 48 s for the day) and 40 Mbit/s on average. TCP bytes are counted at
the bottleneck (server -> client payload, by the interval the packet crossed
in). Why these settings: one interval's bytes vary with the heavy-tailed
draws as one over the square root of its connections (sd 13% of the target
at 2 s and 6 Mbit/s, about 340 connections; 3.0% at 8 s and 30 Mbit/s, 6,700
connections, where 2 of 200 seeds had an interval off by more than 10%); 8 s
of 40 Mbit/s hold about 9,000. docs/harpoon.md gives the schedule's spread
over seeds (``bench/harpoon_spread.py``) and how often this test passed over
seeds. The bottleneck must show each interval within 10% of the schedule's
offer (delivery) and of the target.

Both check that the servers' connection counts in the capture rank like the
pool's weights (Spearman > 0.9). A crafted flow table (``tests/harpoon_flows``)
with 8 clients, 6 servers and one UDP source of each type checks the client
pool's ranks in the capture and the UDP bytes at the bottleneck, in a short
run; ``swell gen harpoon`` runs it by hand between two namespaces
(``--sessions construct``: each short interval's target met by construction).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import dpkt
import numpy as np
import pytest
from scipy.stats import spearmanr

from swell.cli import main as swell_main
from swell.extract import harpoon as H
from swell.extract import harpoon_model as HM
from swell.extract.flows import read_flows
from tests import harpoon_flows as crafted

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
ALEXA = DATA / "pcap" / "ndpi" / "alexa-app.pcapng"
WC98 = DATA / "weblogs" / "wc98_per_minute_merged.csv"
ENV = {"SWELL_QUIET": "1", "PATH": "/usr/sbin:/usr/bin:/bin"}

EXP = """
name: it-harpoon
seed: {seed}
duration_s: {duration}
warmup_s: 0
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: 100, delay_ms: 2, queue_bytes: 500000}}
foreground: {{kind: none}}
background: {{kind: harpoon, model: model, time_scale: {ts}, target_mbps: {mbps}}}
"""
DAY_INTERVAL_S = 4 * 3600  # six intervals: 8 s each at time_scale 1800
DAY_MBPS = 40  # about 9,000 connections per interval
# the run's seed (more to measure how often the day passes: docs/harpoon.md)
DAY_SEEDS = [int(x) for x in os.environ.get("SWELL_HARPOON_DAY_SEEDS", "1").split(",")]

pytestmark = pytest.mark.slow
needs_day = pytest.mark.skipif(not (ALEXA.exists() and WC98.exists()),
                               reason="needs ../shared/data (alexa-app, wc98)")


def _packets(path: Path) -> list[tuple[float, str, str, int, int, bool, int]]:
    """(time, src, dst, proto, payload or IP bytes, is a SYN, source port) of every IPv4
    TCP or UDP packet: TCP payload for TCP, IP length for UDP."""
    out = []
    with open(path, "rb") as fh:
        for t, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            if not isinstance(ip, dpkt.ip.IP):
                continue
            src, dst = (".".join(str(b) for b in a) for a in (ip.src, ip.dst))
            if isinstance(ip.data, dpkt.tcp.TCP):
                tcp = ip.data
                syn = bool(tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK)
                out.append((t, src, dst, 6, ip.len - 4 * ip.hl - 4 * tcp.off, syn, tcp.sport))
            elif isinstance(ip.data, dpkt.udp.UDP):
                out.append((t, src, dst, 17, ip.len, False, ip.data.sport))
    return out


def _run(tmp: Path, model: HM.HarpoonModel, **fmt: Any) -> tuple[Path, dict[str, Any]]:
    """``swell run`` of EXP with ``model``: (run directory, schedule meta)."""
    HM.save(model, tmp / "model")
    (tmp / "exp.yaml").write_text(EXP.format(**fmt))
    study = tmp / "study"
    assert swell_main(["run", str(tmp / "exp.yaml"), "-o", str(study)]) == 0
    run = json.loads((study / "results.json").read_text())["runs"][0]
    assert run["load"]["connections"]["failed"] == 0, run["load"]["connections"]
    rdir = next(study.glob("runs/*/rep0"))
    lines = (rdir / "background" / "schedule.jsonl").read_text().splitlines()
    meta = json.loads(lines[0])["meta"]
    # cut by the stop: at most 1% of TCP; UDP sources of the last interval (each sends
    # up to the interval's end, its pairs a round trip late each) may be
    start = {s["id"]: s["t"] for s in map(json.loads, lines[1:])}
    recs = [json.loads(ln) for ln in (rdir / "background" / "records.jsonl").open()]
    tcp = [r for r in recs if r["proto"] == "tcp"]
    assert sum(r["error"] == "cut" for r in tcp) <= 0.01 * len(tcp)
    last = (len(meta["intervals"]) - 1) * meta["interval_s"]
    assert all(start[r["session"]] >= last for r in recs
               if r["proto"] == "udp" and r["error"] == "cut")
    return rdir, meta


def _capture(rdir: Path) -> tuple[list, list, float]:
    """Forward and reverse bottleneck packets, and the run clock's offset in them: the
    median over the first 100 TCP records of (its SYN in the capture, found by the
    client's address and port) - (its start). Readiness probes open connections just
    before the run, so the capture's first SYN is not the run's first."""
    fwd = _packets(rdir / "capture" / "bottleneck-forward.pcap")
    rev = _packets(rdir / "capture" / "bottleneck-reverse.pcap")
    syn: dict[tuple[str, int], float] = {}
    for p in fwd:  # the first SYN from an address and port: ports are reused later
        if p[5]:
            syn.setdefault((p[1], p[6]), p[0])
    records = [json.loads(ln) for ln in (rdir / "background" / "records.jsonl").open()]
    offsets = []
    for r in sorted((r for r in records if r["proto"] == "tcp"), key=lambda r: r["start"]):
        addr, port = r["client"].rsplit(":", 1)
        if (addr, int(port)) in syn:
            offsets.append(syn[addr, int(port)] - r["start"])
        if len(offsets) == 100:
            break
    assert len(offsets) >= 10, "the run's connections are not in the capture"
    return fwd, rev, float(np.median(offsets))


def _tcp_per_interval(rev: list, base: float, meta: dict[str, Any]) -> np.ndarray:
    n, length = len(meta["intervals"]), meta["interval_s"]
    t = np.array([p[0] for p in rev if p[3] == 6]) - base
    b = np.array([p[4] for p in rev if p[3] == 6], dtype=float)
    return np.histogram(t, bins=np.arange(n + 1) * length, weights=b)[0]


def _syn_ranks(fwd: list, meta: dict[str, Any], side: str) -> tuple[float, list[int]]:
    """Spearman of the SYNs per address of ``side`` in the capture with the pool's weights."""
    col = 1 if side == "client" else 2
    counts = [sum(1 for p in fwd if p[5] and p[col] == a) for a in meta[f"{side}s"]]
    return float(spearmanr(counts, meta[f"{side}_weights"]).statistic), counts


def _day_model() -> HM.HarpoonModel:
    """The day's model as extracted: the capture (a phone's) has one client address, so
    its 40,000 connections in 48 s, half of them to one server, come from one address.
    They need the host namespaces' TIME_WAIT port reuse (topologies/layout.py): with the
    kernel's default, connect() stalled after 37 s (14% of the connections cut)."""
    p = H.HarpoonParams(interval_s=DAY_INTERVAL_S)
    fit = H.reshape(H.fit(read_flows([ALEXA]), p), p,
                    H.read_profile(str(WC98), DAY_INTERVAL_S), WC98.name)
    return HM.build(fit, p, {"inputs": [str(ALEXA)]})


@needs_day
@pytest.mark.parametrize("seed", DAY_SEEDS)
def test_compressed_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int):
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump missing (apt-get install tcpdump)")
    monkeypatch.setenv("SWELL_QUIET", "1")
    model = _day_model()
    assert len(model.arrays["pool/client_addr"]) == 1
    rdir, meta = _run(tmp_path, model, seed=seed, duration=48, ts=1800, mbps=DAY_MBPS)
    fwd, rev, base = _capture(rdir)
    got = _tcp_per_interval(rev, base, meta)
    ivs = meta["intervals"]
    targets = np.array([iv["target_bytes"] for iv in ivs])
    offered = np.array([iv["offered_bytes"] for iv in ivs])
    print(f"\nreceived/target per interval {np.round(got / targets, 3).tolist()}, "
          f"received/offered {np.round(got / offered, 3).tolist()}")
    # the model's sessions: Figure 4's count, plus k - 1 targets at one session's mean
    a, k = model.arrays, meta["rate_factor"]
    want = a["interval/sessions"] + (k - 1) * a["interval/tcp_bytes"] / model.session_mean
    assert meta["sessions_mode"] == "model" and len(ivs) == model.intervals == 6
    assert all(abs(iv["tcp_sessions"] - w) < 1 for iv, w in zip(ivs, want, strict=True))
    # delivery: what the schedule offered crossed the bottleneck, interval by interval;
    # the volume check: each interval within 10% of the model's target
    assert np.all(np.abs(got / offered - 1) < 0.10), np.round(got / offered, 3).tolist()
    assert np.all(np.abs(got / targets - 1) < 0.10), np.round(got / targets, 3).tolist()
    assert got.max() > 1.5 * got.min()  # the day's shape: 4-hour targets span x1.9
    rho, counts = _syn_ranks(fwd, meta, "server")
    assert rho > 0.9, (counts, meta["server_weights"])


def _crafted_model() -> HM.HarpoonModel:
    p = H.HarpoonParams(interval_s=60)
    return HM.build(H.fit(crafted.crafted_table(), p), p, {"inputs": ["crafted"]})


def test_client_pool_and_udp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """8 clients and 6 servers with distinct weights, UDP of all three types: both pools'
    ranks in the capture and the UDP bytes at the bottleneck (both directions, IP bytes)
    next to the schedule's offer and the model's UDP target."""
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump missing (apt-get install tcpdump)")
    monkeypatch.setenv("SWELL_QUIET", "1")
    rdir, meta = _run(tmp_path, _crafted_model(), seed=1, duration=20, ts=6, mbps=8)
    fwd, rev, _ = _capture(rdir)
    for side in ("client", "server"):
        rho, counts = _syn_ranks(fwd, meta, side)
        print(f"\n{side} SYNs {counts} weights {meta[f'{side}_weights']}")
        assert len(counts) == len(crafted.CLIENT_FILES if side == "client"
                                  else crafted.SERVER_FILES)
        assert rho > 0.9, (side, counts)
    udp = sum(p[4] for p in fwd + rev if p[3] == 17)
    offered = sum(iv["udp_offered_bytes"] for iv in meta["intervals"])
    target = sum(iv["udp_target_bytes"] for iv in meta["intervals"])
    print(f"UDP bytes at the bottleneck {udp}, offered {offered:.0f}, target {target:.0f}")
    assert {iv["udp_sources"] > 0 for iv in meta["intervals"]} == {True}
    assert abs(udp / offered - 1) < 0.10 and abs(udp / target - 1) < 0.10, (udp, offered, target)


def test_gen_harpoon_by_hand(netns, tmp_path: Path):
    """``swell gen harpoon`` between a client and a server namespace, 8 client and 6
    server addresses: the JSON line's per-interval bytes received next to the targets."""
    cli, srv = netns.add("c"), netns.add("s")
    netns.veth(cli, "va", srv, "vb")
    clients = [f"10.9.0.{11 + i}" for i in range(len(crafted.CLIENT_FILES))]
    servers = [f"10.9.0.{31 + i}" for i in range(len(crafted.SERVER_FILES))]
    netns.add_addresses(cli, "va", [f"{a}/24" for a in clients])
    netns.add_addresses(srv, "vb", [f"{a}/24" for a in servers])
    HM.save(_crafted_model(), tmp_path / "model")
    res = subprocess.run([str(REPO / ".venv/bin/swell"), "gen", "harpoon", "--model",
                          str(tmp_path / "model"), "--clients", ",".join(clients),
                          "--servers", ",".join(servers), "--duration", "6",
                          "--time-scale", "30", "--target-mbps", "4", "--sessions",
                          "construct", "--src-ns", cli,
                          "--dst-ns", srv, "--out", str(tmp_path / "o")],
                         capture_output=True, text=True, timeout=120, env=ENV)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    ivs = s["intervals"]
    print(f"\n{ivs}")
    assert len(ivs) == 3 and all(iv["sessions"] > 0 for iv in ivs)
    got = sum(iv["received"] for iv in ivs)
    want = sum(iv["target"] for iv in ivs)
    # construct offers each target within a few percent; the rest is delivery
    assert abs(got / want - 1) < 0.10, (got, want)
    assert s["client"]["conns_ok"] > 0 and sum(iv["udp_received"] for iv in ivs) > 0
