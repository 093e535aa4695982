"""CBR and Poisson baselines: rate, timing next to D-ITG, Poisson-ness, bad input.

Each test runs in a namespace of its own (ports and ITGRecv's signalling
port are private). Timing numbers are printed (pytest -s) for the docs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from swell.errors import EnvironmentProblem
from swell.generators.base import Netns, run_generator
from swell.generators.cbr import CbrConfig, CbrGenerator
from swell.steal import steal_ns
from tests.conftest import have_tool

REPO = Path(__file__).resolve().parents[2]


def run_flow(ns: str, tmp: Path, label: str, **kw: object) -> dict[str, float]:
    cfg = CbrConfig(dst="127.0.0.1", out_dir=tmp / label, server=Netns(ns), client=Netns(ns),
                    **kw)  # type: ignore[arg-type]
    res = run_generator(CbrGenerator(cfg))
    return res.summary


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_cbr_rate_within_two_percent(netns, tmp_path: Path, proto: str) -> None:
    ns = netns.add("cbr")
    s = run_flow(ns, tmp_path, proto, rate_bps=20e6, proto=proto, duration_s=2.0, size=1000)
    assert s["lost"] == 0
    assert abs(s["pps"] / s["target_pps"] - 1) < 0.02
    assert abs(s["payload_bps"] / s["target_payload_bps"] - 1) < 0.02


@pytest.mark.skipif(not have_tool("ITGSend"), reason="D-ITG (d-itg) not installed")
def test_cbr_timing_next_to_ditg(netns, tmp_path: Path) -> None:
    ns = netns.add("cbr")
    rate = 10_000 * 8 * (512 + 28)  # 10k packets/s
    ours, ditg = [], []
    # Pairs, interleaved, so both see the same machine load; both SCHED_FIFO.
    # D-ITG busy-polls, so the kernel's real-time throttling stops it 50 ms every
    # second in most runs (std about 400 us); when it is not stopped its spread is
    # 3-20 us. swell sleeps before each departure: its spread was 1-38 us in 15
    # runs on 2026-11-29 (08:07 UTC). Before its pacer kept the sleep to at least half
    # of each wait, a host with late wake-ups made it spin through every gap and be
    # throttled too: 3 of 5 runs at about 400 us, and this test failed in CI.
    # A pair is judged only when the hypervisor left the machine alone during both
    # runs: CI on 2026-12-02 stole 110-660 ms in each 1.5 s run and swell's sleeping
    # sender, woken late, spread 41-125 us while D-ITG's spinning one held its vCPU
    # (19-29 us). A host that busy is said, not judged (a skip with the steal read).
    pairs = 0
    while pairs < MAX_PAIRS and len(quiet(ours, ditg)) < QUIET_PAIRS:
        i = pairs
        for runs, name, extra in ((ours, "s", {}),
                                  (ditg, "d", {"engine": "ditg", "signal_port": 9000 + i})):
            s0 = steal_ns()
            runs.append(run_flow(ns, tmp_path, f"{name}{i}", rate_bps=rate, duration_s=1.5,
                                 realtime=True, **extra))
            runs[-1]["steal_ms"] = (steal_ns() - s0) / 1e6
        pairs += 1
    for name, runs in (("swell", ours), ("ditg", ditg)):
        print(f"\n{name}: idt p99 |dev| (std) us " + ", ".join(
            f"{r['idt_p99_abs_dev_us']:.1f} ({r['idt_std_us']:.0f}; steal {r['steal_ms']:.0f} ms)"
            for r in runs))
    assert all(abs(r["pps"] / r["target_pps"] - 1) < 0.02 for r in ours)
    judged = quiet(ours, ditg)
    if len(judged) < MIN_QUIET_PAIRS:
        pytest.skip(f"timing not judged: the hypervisor stole over {QUIET_STEAL_MS:.0f} ms "
                    f"during {pairs - len(judged)} of {pairs} pairs of 1.5 s runs (steal ms: "
                    + ", ".join(f"{a['steal_ms']:.0f}/{b['steal_ms']:.0f}"
                                for a, b in zip(ours, ditg, strict=True)) + ")")
    med = {name: statistics.median(pair[k]["idt_std_us"] for pair in judged)
           for k, name in enumerate(("swell", "ditg"))}
    rates = {name: statistics.median(pair[k]["pps"] for pair in judged)
             for k, name in enumerate(("swell", "ditg"))}
    print(f"10k pps, {len(judged)} quiet pairs of {pairs}: median idt std us {med}, "
          f"pps {rates}")
    # At most D-ITG's spread (slack: D-ITG's timestamps are whole microseconds), or
    # under half of the 100 us gap when D-ITG ran unthrottled (a throttled swell: 400)
    assert med["swell"] <= max(med["ditg"] + 1.0, 50.0), med


QUIET_STEAL_MS = 100.0  # steal (both vCPUs) in one run that still counts as quiet
QUIET_PAIRS, MIN_QUIET_PAIRS, MAX_PAIRS = 5, 3, 10


def quiet(ours: list[dict], ditg: list[dict]) -> list[tuple[dict, dict]]:
    """The pairs during both of whose runs the hypervisor took at most
    ``QUIET_STEAL_MS``."""
    return [(a, b) for a, b in zip(ours, ditg, strict=True)
            if max(a["steal_ms"], b["steal_ms"]) <= QUIET_STEAL_MS]


def poisson_ks(ns: str, out: Path, pps: float) -> tuple[float, float, int]:
    cfg = CbrConfig(dst="127.0.0.1", out_dir=out, server=Netns(ns), client=Netns(ns),
                    rate_bps=pps * 8 * (512 + 28), dist="poisson", duration_s=3.0, seed=3,
                    realtime=True)
    run_generator(CbrGenerator(cfg))
    raw = np.fromfile(out / "recv.bin", dtype="<u8").reshape(-1, 4)
    idt = np.diff(np.sort(raw[:, 1])) / 1e9
    ks = stats.kstest(idt, "expon", args=(0, 1 / pps))
    print(f"\nPoisson {pps:.0f}/s: n={idt.size} KS D={ks.statistic:.4f} p={ks.pvalue:.3f}")
    return float(ks.statistic), float(ks.pvalue), len(raw)


def test_poisson_inter_departures_are_exponential(netns, tmp_path: Path) -> None:
    ns = netns.add("cbr")
    pps = 1000.0
    d, p, n = poisson_ks(ns, tmp_path / "p1", pps)
    if p <= 0.001:  # one retry: a VM stall makes a catch-up burst of short gaps
        d, p, n = poisson_ks(ns, tmp_path / "p2", pps)
    assert abs(n / (3.0 * pps) - 1) < 0.06
    assert p > 0.001


def test_missing_ditg_is_a_clear_error_and_starts_nothing(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    gen = CbrGenerator(CbrConfig(dst="127.0.0.1", rate_bps=1e6, out_dir=tmp_path,
                                 engine="ditg"))
    with pytest.raises(EnvironmentProblem, match="ITGSend"):
        run_generator(gen)
    assert gen.procs == []
    assert os.environ["PATH"] == str(empty)


def test_cli_poisson_over_tcp_between_namespaces(netns, tmp_path: Path) -> None:
    src, dst = netns.add("a"), netns.add("b")
    netns.veth(src, "va", dst, "vb")
    netns.run(src, "ip", "addr", "add", "10.9.0.1/24", "dev", "va")
    netns.run(dst, "ip", "addr", "add", "10.9.0.2/24", "dev", "vb")
    res = subprocess.run([str(REPO / ".venv/bin/swell"), "gen", "poisson", "--rate", "4M",
                          "--proto", "tcp", "--dst", "10.9.0.2", "--src", "10.9.0.1",
                          "--src-ns", src, "--dst-ns", dst, "--duration", "1.5",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True,
                         timeout=60, env={"SWELL_QUIET": "1", "PATH": "/usr/sbin:/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    assert s["lost"] == 0 and abs(s["messages"] / (1.5 * s["target_pps"]) - 1) < 0.15
    bad = subprocess.run([str(REPO / ".venv/bin/swell"), "gen", "cbr", "--rate", "fast",
                          "--dst", "10.9.0.2"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "cannot read 'fast'" in bad.stderr
