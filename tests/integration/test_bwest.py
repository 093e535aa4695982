"""swell's own estimators (slops, chirp) end to end, as root, under flock.

* Idle serialising link (swell-link) of 20, 50 and 100 Mbit/s: every estimate of
  both estimators within 10% of the capacity (run through ``swell run``; the
  truth comes from the bottleneck capture);
* CBR UDP background at half the capacity: SLoPS within 10% of the truth on
  every range; the chirp's smoothed estimates within 10% of the truth on
  average, up to 2 standard errors of that mean, none 25% off (with pathChirp's
  decrease factor 1.5 it read +39-48%, as through an ideal FIFO:
  swell.analysis.bwest_model, docs/bwest.md; the default is F = 4);
* a link shaped by an htb token bucket of the same rate (a dumbbell built here
  with ``tc``): the chirp estimator reads higher than on swell-link, because
  the bucket lets the chirp's first fast packets pass at line rate, where a
  serialiser spaces them by size/rate;
* a search that cannot converge in its time is a timeout in the results;
* the adapters for the real tools (pathload, pathChirp): run through ``swell run``
  on an idle link when their binaries are on PATH (they are not packaged; see
  docs/bwest.md), skipped with the missing program named otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main as swell_main
from swell.generators import bwest_tools as tools
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
{fgs}
"""
FOREGROUNDS = {
    "slops": "    - {{kind: slops, max_mbps: {hi}, streams: 8, label: slops}}",
    "chirp": "    - {{kind: chirp, max_mbps: {hi}, smooth: 8, chirps_per_s: 8, label: chirp}}",
}


def _study_runs(tmp_path: Path, cap: float, bg: str, dur: int = 8,
                kinds: tuple[str, ...] = ("slops", "chirp")) -> dict[str, dict]:
    exp = tmp_path / "exp.yaml"
    fgs = "\n".join(FOREGROUNDS[k].format(hi=1.5 * cap) for k in kinds)
    exp.write_text(EXP.format(cap=cap, bg=bg, dur=dur, fgs=fgs))
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    runs = json.loads((study / "results.json").read_text())["runs"]
    return {r["label"]: r for r in runs}


def _study(tmp_path: Path, cap: float, bg: str, dur: int = 8,
           kinds: tuple[str, ...] = ("slops", "chirp")) -> dict[str, dict]:
    return {label: r["foreground"]
            for label, r in _study_runs(tmp_path, cap, bg, dur, kinds).items()}


def _ok(fg: dict) -> list[dict]:
    return [e for e in fg["estimates"] if not e["timeout"]]


@pytest.mark.parametrize("cap", [20, 50, 100])
def test_idle_link_reads_its_capacity(tmp_path: Path, monkeypatch, cap: int) -> None:
    """Each estimator's reading (the run's mean) within 10% of the capacity, every
    estimate within 20%, and at most one estimate outside 10%.

    A miss in a run whose link engine said it was held up (experiments/emulation.py:
    over 1% of its frames 50 us or more late; the receivers' stamps then carry the
    host's disturbance as queueing) is an expected failure with that reason, not a
    pass, but only when the estimator's sender was not real-time: a SCHED_FIFO sender
    competes with the engine itself (SLoPS's gave 0.9% at rest when it was the
    default), so its own lateness must not excuse it. The estimators' default
    senders alone stay well under 1% (docs/bwest.md, "Accuracy tests")."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    runs = _study_runs(tmp_path, cap, "{kind: none}")
    excused = []
    for label, run in runs.items():
        fg = run["foreground"]
        ok = _ok(fg)
        assert ok, (label, fg.get("problems"))
        assert fg["truth_mbps"] and min(fg["truth_mbps"]) == pytest.approx(cap)
        est = np.array([e["estimate_mbps"] for e in ok])
        late = run["engine_lateness"]  # None with the netem engine (no such counter)
        print(f"{label} on idle {cap}: {np.round(est, 1).tolist()}; engine late >= 50 us: "
              + (f"{late['share_over_50us']:.2%} of {late['frames']} frames" if late
                 else "not counted")
              + (f"; {fg['chirps_steal']} chirps discarded for {fg['steal_ms']} ms of "
                 "hypervisor steal" if "chirps_steal" in fg else ""))
        assert all(e["probe_bytes"] > 0 for e in ok)
        assert fg["time_to_first_s"] > 0
        off = np.abs(est - cap)
        missed = (abs(est.mean() - cap) > 0.10 * cap or bool(np.any(off > 0.20 * cap))
                  or int(np.sum(off > 0.10 * cap)) > 1)
        held = [w for w in run["warnings"] if w.startswith("the link engine sent")
                and not run["spec"]["foreground"]["realtime"]]
        # every chirp's own reading (s into the window, Mbit/s; None: discarded) in the
        # message, so that a failure in CI shows where the low ones fell
        assert not missed or held, (label, est.round(1).tolist(), late, fg.get("chirps"))
        if missed:
            excused.append(f"{label} read {np.round(est, 1).tolist()} in a run whose engine "
                           f"was held up: {held[0]}")
    if excused:
        pytest.xfail(f"on idle {cap}: " + "; ".join(excused))


@pytest.fixture
def cbr_half(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """One study: both estimators under CBR UDP at 25 Mbit/s on a 50 Mbit/s link.

    One per test, not per module: a re-run after a failure keeps a module's fixture
    (pytest-rerunfailures clears only failed ones), so it judged the same study again
    and failed again (CI, 2026-12-02: one chirp estimate of eight at +29.2%, twice)."""
    tmp = tmp_path_factory.mktemp("cbr")
    os.environ["SWELL_QUIET"] = "1"
    try:
        fgs = _study(tmp, 50, "{kind: cbr, proto: udp, rate_mbps: 25}", dur=10)
    finally:
        os.environ.pop("SWELL_QUIET", None)
    for label, fg in fgs.items():
        assert _ok(fg), (label, fg.get("problems"))
        truth = np.array(fg["estimate_truth_mbps"])
        assert np.all(np.abs(truth - 25) < 3), truth  # the CBR background did run
    return tmp, fgs


def test_chirp_under_cbr_within_ten_percent_of_truth(cbr_half) -> None:
    """The issue's criterion for the chirp estimator under CBR at half the capacity,
    judged on what the estimator reports: its smoothed estimates (each the mean of 8
    usable chirps), each against the truth over its own span. One run is a sample, so
    the run's reading (the mean of its estimates' errors) may sit outside 10% by at
    most 2 standard errors of that mean (their sd over sqrt(n)): a one-sided test at
    about 2%, not a wider band. The allowance must stay under 20% (a run with too few
    or too scattered estimates to tell fails), and no single estimate may be 25% off.

    It fails pathChirp's decrease factor F = 1.5, which reads +39-48% here as through
    an ideal FIFO (swell.analysis.bwest_model), and a run whose chirps were read while
    the host held their sender up again and again (CI, 2026-11-28: chirps held 4-11
    times each read +91% on average; such chirps are now discarded, ``max_breaks``).
    Measured: docs/bwest.md, "Accuracy tests"."""
    _, fgs = cbr_half
    fg = fgs["chirp"]
    ok = _ok(fg)
    err = np.array([e["error_pct"] for e in ok], float)
    usable = sum(c[1] is not None for c in fg["chirps"])
    print(f"chirp under CBR: {err.size} estimates, errors {np.round(err, 1).tolist()} "
          f"(mean {err.mean():+.1f}%); {usable} usable chirps of {len(fg['chirps'])}, "
          f"{fg.get('chirps_held_out')} held up too often; estimates:",
          [(round(e["estimate_mbps"], 1), e["truth_mbps"]) for e in ok])
    assert err.size >= 3, ("too few estimates to judge", fg.get("problems"))
    se = float(np.std(err, ddof=1) / np.sqrt(err.size))
    allowance = 10 + 2 * se
    assert allowance < 20, ("too scattered to judge", err.round(1).tolist())
    assert abs(err.mean()) <= allowance, (err.mean(), allowance, err.round(1).tolist())
    assert np.all(np.abs(err) <= 25), err.round(1).tolist()


def test_slops_under_cbr_within_ten_percent_of_truth(cbr_half) -> None:
    """Every range's midpoint within 10% of the truth over its span (the issue's
    criterion); the fleets' logs show the trends each rate read."""
    _, fgs = cbr_half
    ok = _ok(fgs["slops"])
    print("slops under CBR:", [(e["low_mbps"], e["high_mbps"], e["error_pct"]) for e in ok])
    for e in ok:
        print("  fleets:", e["fleets"])
    assert len(ok) >= 3
    assert all(abs(e["error_pct"]) <= 10 for e in ok), [e["error_pct"] for e in ok]


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


def _probe(ends: tuple[str, str], loop: SlopsLoop | ChirpLoop, seconds: float, out: Path
           ) -> list[dict]:
    gen = ProbeGenerator("probe", loop,
                         Endpoint("10.84.1.1", Netns(ends[0]), "s"),
                         Endpoint("10.84.2.1", Netns(ends[1]), "c"),
                         9876, 0.3, out / "foreground")
    gen.check()
    try:
        gen.start_server()
        gen.wait_ready(5)
        gen.start_client()
        threading.Event().wait(seconds)  # the probing time itself
    finally:
        gen.stop()
    return gen.collect().summary["estimates"]


def _chirp_on(nss, ends: tuple[str, str], router: str, cap: float, htb: bool, out: Path,
              seconds: float = 4.0) -> float:
    """Mean chirp estimate from s to c through the router r (htb, or a plain route)."""
    if htb:
        nss.run(router, "tc", "qdisc", "add", "dev", "rc", "root", "handle", "1:", "htb",
                "default", "1")
        nss.run(router, "tc", "class", "add", "dev", "rc", "parent", "1:", "classid", "1:1",
                "htb", "rate", f"{cap:g}mbit")
    spec = ChirpSpec(kind="chirp", smooth=4, chirps_per_s=10)
    loop = ChirpLoop(spec, 0.1 * cap * 1e6, 1.5 * cap * 1e6, 1)
    _probe(ends, loop, seconds, out)
    return _usable_chirps([c["estimate_mbps"] for c in loop.chirps], len(loop.chirps),
                          sum(c["steal_ms"] > 0 for c in loop.chirps), "htb")


USABLE_CHIRPS = 3  # htb reads about 40% above swell-link: a few chirps tell them apart


def _usable_chirps(values: list[float | None], n: int, stolen: int, where: str) -> float:
    """The mean of the usable chirps' readings (an estimate is the mean of ``smooth`` of
    them): chirps, not estimates, so that a host whose hypervisor steals time (chirps
    during steal are discarded, as designed) still leaves enough to compare. CI on
    2026-12-02 discarded 24 of a 5 s run's 40 chirps for steal (3 and 4 usable: 48.4
    and 47.1 Mbit/s against htb's 71) and finished no smoothed estimate; the run is 8 s."""
    ok = [v for v in values if v is not None and np.isfinite(v)]
    assert len(ok) >= USABLE_CHIRPS, (
        f"{where}: {len(ok)} usable chirps of {n} ({stolen} discarded for hypervisor steal)")
    return float(np.mean(ok))


def test_chirp_reads_higher_on_htb_than_on_swell_link(tmp_path: Path, monkeypatch, netns
                                                      ) -> None:
    """A token bucket passes a burst at line rate; the engine serialises every packet."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    cap = 50
    s, r, c = _dumbbell(netns)
    on_htb = _chirp_on(netns, (s, c), r, cap, htb=True, out=tmp_path / "htb")
    fg = _study(tmp_path, cap, "{kind: none}", dur=8, kinds=("chirp",))["chirp"]
    on_link = _usable_chirps([v for _, v in fg["chirps"]], len(fg["chirps"]),
                             fg["chirps_steal"], "swell-link")
    print(f"chirp at {cap} Mbit/s (mean of usable chirps): htb {on_htb:.1f}, "
          f"swell-link {on_link:.1f}")
    assert on_htb > on_link * 1.1


def test_a_search_that_cannot_converge_is_a_timeout(tmp_path: Path, netns) -> None:
    """A search not done in its time is a timeout with its range so far, no crash.

    The time limit (10 ms) is shorter than one fleet (3 streams, each followed by 10 ms
    of idle time), and no single fleet can end a search at a resolution of 1 kbit/s, so
    every search stops after its first fleet. (A long limit with a fine resolution is
    not enough: pathload's search also ends when the grey region spans the range, as CI
    once saw at 27.2-27.8 Mbit/s on this htb link; that is a result, not a timeout.)"""
    s, r, c = _dumbbell(netns)
    netns.run(r, "tc", "qdisc", "add", "dev", "rc", "root", "handle", "1:", "htb", "default",
              "1")
    netns.run(r, "tc", "class", "add", "dev", "rc", "parent", "1:", "classid", "1:1", "htb",
              "rate", "20mbit")
    spec = SlopsSpec(kind="slops", timeout_s=0.01, resolution_mbps=0.001, streams=3,
                     packets=16)
    found = _probe((s, c), SlopsLoop(spec, 1e6, 40e6), 1.5, tmp_path)
    assert found and all(e["timeout"] for e in found), found
    assert all(len(e["fleets"]) == 1 for e in found), found
    assert all(1 <= e["low_mbps"] <= e["high_mbps"] <= 40 for e in found)
    # one fleet narrowed each range: at its rate (above, below) or around it (grey)
    assert all(e["high_mbps"] - e["low_mbps"] < 39 or e["fleets"][0][2] == "grey"
               for e in found), found


def _tool(*programs: str):
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not on PATH "
                              "(not packaged; build by hand, see docs/bwest.md)")


def _tool_study(tmp_path: Path, fg: str, cap: float, dur: int) -> tuple[dict, Path]:
    """The run's foreground results and its foreground directory (the tools' outputs)."""
    exp = tmp_path / "exp.yaml"
    exp.write_text(f"""
name: it-bwest-tool
duration_s: {dur}
warmup_s: 1
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: {cap}, delay_ms: 5, queue_bytes: 300000}}
background: {{kind: none}}
foreground: {fg}
""")
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    (out,) = study.glob("runs/*/rep0/foreground")
    return json.loads((study / "results.json").read_text())["runs"][0]["foreground"], out


def _within_window(fg: dict, dur: float) -> list[dict]:
    """The finished estimates; those that ended inside the window have a truth."""
    ok = _ok(fg)
    assert ok, fg.get("problems")
    assert fg["truth_mbps"]
    for e in ok:
        assert e["t_start"] <= e["t_end"]
        assert -2 <= e["t_s"] <= dur + 2, e
        if e["t_s"] <= dur:
            assert e["truth_mbps"] is not None and e["error_pct"] is not None, e
    return ok


@_tool("pathload_snd", "pathload_rcv")
def test_pathload_adapter_on_an_idle_link(tmp_path: Path, monkeypatch) -> None:
    """The real pathload: at least one measurement finishes, is parsed from the output
    the adapter kept, and its range holds the truth (widened by 10%); one still running
    at ``timeout_s`` is killed and recorded as a timeout.

    On an idle 20 Mbit/s link pathload gave 19.83-20.04 Mbit/s after 9.6 s
    (tests/data/bwest_tools/) and, in this test under flock on 2026-11-25, ranges after
    8.7, 9.6, 9.7 and 14.2 s, but in 3 of 7 runs none within 22 s: its first fleet, at
    the capacity, read grey, and so did later ones at 10 and 5 Mbit/s (noise on 200-byte
    packets), so its search went on down to 2.5 Mbit/s (its log, pathload_rcv-001.log).
    A measurement killed at its timeout also leaves pathload_snd refusing the next
    ones. With 40 s each, 4 runs of 44 s all had ranges: the first after 9.6, 15.8,
    21.0 and 34.1 s (3.13-20.04), then 0 to 3 more. So a measurement gets 48 s."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    fg, out = _tool_study(tmp_path, "{kind: pathload, timeout_s: 48}", 20, 50)
    print("pathload:", [(e["low_mbps"], e["high_mbps"], e["timeout"], e["t_s"])
                        for e in fg["estimates"]], fg.get("problems"))
    finished = [e for e in fg["estimates"] if not e["timeout"]]
    assert finished, ("no pathload range in 48 s", fg["estimates"], fg.get("problems"))
    # each range as pathload_rcv printed it (its outputs kept in order; one that ended
    # as the run stopped may have a range the run did not take)
    ranges = [r for f in sorted(out.glob("pathload_rcv-*.txt"))
              if (r := tools.parse_pathload(f.read_text()))[0] is not None]
    assert [(e["low_mbps"], e["high_mbps"]) for e in finished] == ranges[:len(finished)]
    assert "Receiving Fleet 0" in (out / "pathload_rcv-001.log").read_text()  # its own log
    for e in fg["estimates"]:
        assert -2 <= e["t_s"] <= 52, e
        if e["timeout"]:
            assert e["low_mbps"] is None and e["estimate_mbps"] is None, e
            assert any("timed out" in p for p in fg["problems"]), fg["problems"]
            continue
        assert e["low_mbps"] <= 1.1 * e["truth_mbps"], e
        assert e["high_mbps"] is None or e["low_mbps"] <= e["high_mbps"], e
        assert e["high_mbps"] is None or e["high_mbps"] >= 0.9 * e["truth_mbps"], e
    assert fg["probe_bytes"] > 0  # counted in the capture


@_tool("pathchirp_snd", "pathchirp_rcv")
def test_pathchirp_adapter_on_an_idle_link(tmp_path: Path, monkeypatch) -> None:
    """The real pathChirp: its .instbw estimates parsed and judged against the truth."""
    monkeypatch.setenv("SWELL_QUIET", "1")
    fg, _ = _tool_study(tmp_path, "{kind: pathchirp}", 50, 8)
    values = [e["estimate_mbps"] for e in _within_window(fg, 8)]
    assert 0.5 * 50 <= float(np.median(values)) <= 1.5 * 50, values
    assert fg["probe_bytes"] > 0
