"""``swell gen packets`` and ``swell gen rps`` between two namespaces, without an
experiment file: the per-flow ITGDec set (packets, loss, rate, delay, jitter) of a
VoIP preset, and RPS sessions from several source addresses answered by Apache."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from swell.extract.ditg_presets import preset
from swell.extract.mmpp import MMPPModel, Scale, save_mmpp_model

REPO = Path(__file__).resolve().parents[2]
ENV = {"SWELL_QUIET": "1", "PATH": "/usr/sbin:/usr/bin:/bin"}


def pair(netns) -> tuple[str, str]:
    """Client namespace (10.9.0.1 and .11-.14) and server namespace (10.9.0.2)."""
    cli, srv = netns.add("c"), netns.add("s")
    netns.veth(cli, "va", srv, "vb")
    netns.add_addresses(cli, "va", ["10.9.0.1/24"] + [f"10.9.0.{i}/24" for i in range(11, 15)])
    netns.add_addresses(srv, "vb", ["10.9.0.2/24"])
    return cli, srv


def swell(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv/bin/swell"), "gen", *argv], capture_output=True,
                          text=True, timeout=90, env=ENV)


def test_gen_packets_voip_between_namespaces(netns, tmp_path: Path) -> None:
    cli, srv = pair(netns)
    name = "VoIP:G.711.1:RTP"
    res = swell("packets", "--preset", name, "--flows", "3", "--client", "10.9.0.1",
                "--server", "10.9.0.2", "--src-ns", cli, "--dst-ns", srv, "--duration", "2",
                "--out", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    print(f"\n{res.stderr}")
    p = preset(name)
    assert s["n_flows"] == 3 and s["lost"] == 0 and s["received"] == s["sent"]
    for f in s["flows"]:
        assert f["received"] == f["sent"] >= 2 * p.rate_pps - 2
        assert f["bytes_mean"] == p.size_bytes and abs(f["pps"] / p.rate_pps - 1) < 0.01
        assert f["delay_kind"] == "one-way" and 0 < f["delay_ms"] < 50 and f["jitter_ms"] >= 0
        # throughput: payload bits per second of the flow
        assert abs(f["throughput_bps"] / (p.size_bytes * 8 * p.rate_pps) - 1) < 0.02
    table = res.stderr.splitlines()
    assert "delay ms" in table[0] and "jitter ms" in table[0]
    assert sum(1 for ln in table if name in ln) == 3 and table[-1].startswith("total: 3 flows")


@pytest.mark.skipif(not Path("/usr/sbin/apache2").exists(), reason="apache2 not installed")
def test_gen_rps_sessions_from_many_sources(netns, tmp_path: Path) -> None:
    cli, srv = pair(netns)
    scales = [Scale(math.exp(-1 / 20.0), 0.25 * 36, 0.5, 6.0)]
    mm = save_mmpp_model(MMPPModel(10.0, scales, np.array([1.0]), np.array([1.0])),
                         tmp_path / "mm", {"source": "synthetic"})
    res = swell("rps", "--model", str(mm), "--server", "10.9.0.2",
                "--clients", ",".join(f"10.9.0.{i}" for i in range(11, 15)),
                "--src-ns", cli, "--dst-ns", srv, "--duration", "4", "--interval-s", "1",
                "--think-s", "0.2", "--object-bytes", "2000,20000", "--seed", "3",
                "--out", str(tmp_path / "o"))
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)
    print(f"\n{res.stderr}")
    assert s["sessions_planned"] >= 5
    # every due session set off, but one whose time came as the stop did (test_rps)
    assert s["sessions_due"] >= s["sessions_planned"] - 3
    assert s["sessions_started"] + len(s["sessions_missed_s"]) == s["sessions_due"]
    assert all(lag < 0.05 for lag in s["sessions_missed_s"]), s["sessions_missed_s"]
    assert s["errors"] == 0 and s["requests_ok"] + s["requests_cut"] == s["requests"]
    assert s["requests_ok"] > 0 and 1 < s["sources_used"] <= 4
    # the first requests recorded: one set off within microseconds of the stop may
    # not have recorded its attempt before the runner wrote its records
    assert s["sessions_started"] - 1 <= sum(s["session_starts"]) <= s["sessions_started"]
    assert "answered" in res.stderr and "session starts per 1 s" in res.stderr
