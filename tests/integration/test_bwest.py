"""swell's own estimators (slops, chirp) end to end, as root, under flock.

* Idle serialising link (swell-link) of 20, 50 and 100 Mbit/s: every estimate of
  both estimators within 10% of the capacity (run through ``swell run``; the
  truth comes from the bottleneck capture);
* CBR UDP background at half the capacity: within 10% of the truth;
* a link shaped by an htb token bucket of the same rate (a dumbbell built here
  with ``tc``): the chirp estimator reads higher than on swell-link, because
  the bucket lets the chirp's first fast packets pass at line rate, where a
  serialiser spaces them by size/rate;
* a search that cannot converge in its time is a timeout in the results.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main as swell_main
from swell.generators.bwest import ChirpLoop, ChirpSpec, ProbeGenerator, SlopsLoop, SlopsSpec
from swell.placement import Endpoint, Netns

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
              pytest.mark.slow]

EXP = """
name: it-bwest
duration_s: {dur}
warmup_s: 1
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: {cap}, delay_ms: 5, queue_bytes: 300000}}
background: {bg}
sweep:
  foreground:
    - {{kind: slops, max_mbps: {hi}, streams: 8, label: slops}}
    - {{kind: chirp, max_mbps: {hi}, smooth: 8, chirps_per_s: 8, label: chirp}}
"""


def _study(tmp_path: Path, cap: float, bg: str, dur: int = 8) -> dict[str, dict]:
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(cap=cap, bg=bg, hi=1.5 * cap, dur=dur))
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    runs = json.loads((study / "results.json").read_text())["runs"]
    return {r["label"]: r["foreground"] for r in runs}


def _ok(fg: dict) -> list[dict]:
    return [e for e in fg["estimates"] if not e["timeout"]]


@pytest.mark.parametrize("cap", [20, 50, 100])
def test_idle_link_reads_its_capacity(tmp_path: Path, monkeypatch, cap: int) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    fgs = _study(tmp_path, cap, "{kind: none}")
    for label, fg in fgs.items():
        ok = _ok(fg)
        assert ok, (label, fg.get("problems"))
        assert fg["truth_mbps"] and min(fg["truth_mbps"]) == pytest.approx(cap)
        for e in ok:
            assert abs(e["estimate_mbps"] - cap) <= 0.10 * cap, (label, e)
            assert e["probe_bytes"] > 0
        assert fg["time_to_first_s"] > 0


def test_cbr_at_half_capacity_within_ten_percent_of_truth(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    fgs = _study(tmp_path, 50, "{kind: cbr, proto: udp, rate_mbps: 25}", dur=10)
    for label, fg in fgs.items():
        ok = _ok(fg)
        assert ok, (label, fg.get("problems"))
        truth = np.array(fg["estimate_truth_mbps"])
        assert np.all(np.abs(truth - 25) < 3), truth  # the CBR background did run
        for e in ok:
            assert abs(e["error_pct"]) <= 10, (label, e)


def _dumbbell(netns) -> tuple[str, str, str]:
    """s -- r -- c, routed through r (no shaping yet)."""
    s, r, c = netns.add("s"), netns.add("r", sysctls=["net.ipv4.ip_forward=1"]), netns.add("c")
    netns.veth(s, "sr", r, "rs")
    netns.veth(r, "rc", c, "cr")
    netns.add_addresses(s, "sr", ["10.84.1.1/24"])
    netns.add_addresses(r, "rs", ["10.84.1.2/24"])
    netns.add_addresses(r, "rc", ["10.84.2.2/24"])
    netns.add_addresses(c, "cr", ["10.84.2.1/24"])
    netns.add_route(s, "10.84.2.0/24", "10.84.1.2")
    netns.add_route(c, "10.84.1.0/24", "10.84.2.2")
    return s, r, c


def _probe(ends: tuple[str, str], loop: SlopsLoop | ChirpLoop, seconds: float) -> list[dict]:
    gen = ProbeGenerator("probe", loop,
                         Endpoint("10.84.1.1", Netns(ends[0]), "s"),
                         Endpoint("10.84.2.1", Netns(ends[1]), "c"),
                         9876, 0.3, Path("/nonexistent/foreground"))
    gen.check()
    try:
        gen.start_server()
        gen.wait_ready(5)
        gen.start_client()
        threading.Event().wait(seconds)  # the probing time itself
    finally:
        gen.stop()
    return gen.collect().summary["estimates"]


def _chirp_on(nss, ends: tuple[str, str], router: str, cap: float, htb: bool,
              seconds: float = 4.0) -> float:
    """Mean chirp estimate from s to c through the router r (htb, or a plain route)."""
    if htb:
        nss.run(router, "tc", "qdisc", "add", "dev", "rc", "root", "handle", "1:", "htb",
                "default", "1")
        nss.run(router, "tc", "class", "add", "dev", "rc", "parent", "1:", "classid", "1:1",
                "htb", "rate", f"{cap:g}mbit")
    spec = ChirpSpec(kind="chirp", smooth=4, chirps_per_s=10)
    loop = ChirpLoop(spec, 0.1 * cap * 1e6, 1.5 * cap * 1e6, 1)
    values = [e["estimate_mbps"] for e in _probe(ends, loop, seconds) if not e["timeout"]]
    assert values
    return float(np.mean(values))


def test_chirp_reads_higher_on_htb_than_on_swell_link(tmp_path: Path, monkeypatch, netns
                                                      ) -> None:
    """A token bucket passes a burst at line rate; the engine serialises every packet."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    cap = 50
    s, r, c = _dumbbell(netns)
    on_htb = _chirp_on(netns, (s, c), r, cap, htb=True)
    fg = _study(tmp_path, cap, "{kind: none}", dur=5)["chirp"]
    on_link = float(np.mean([e["estimate_mbps"] for e in _ok(fg)]))
    print(f"chirp at {cap} Mbit/s: htb {on_htb:.1f}, swell-link {on_link:.1f}")
    assert on_htb > on_link * 1.1


def test_a_search_that_cannot_converge_is_a_timeout(netns) -> None:
    """A resolution no search reaches in its time: timeouts with their range, no crash."""
    s, r, c = _dumbbell(netns)
    netns.run(r, "tc", "qdisc", "add", "dev", "rc", "root", "handle", "1:", "htb", "default",
              "1")
    netns.run(r, "tc", "class", "add", "dev", "rc", "parent", "1:", "classid", "1:1", "htb",
              "rate", "20mbit")
    spec = SlopsSpec(kind="slops", timeout_s=0.5, resolution_mbps=0.001, streams=3,
                     packets=16)
    found = _probe((s, c), SlopsLoop(spec, 1e6, 40e6), 2.5)
    assert found and all(e["timeout"] for e in found)
    assert all(1 <= e["low_mbps"] <= e["high_mbps"] <= 40 for e in found)
