"""Generator plumbing: processes, counters, rates, timing statistics, swell-gen errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from swell.errors import EnvironmentProblem, SwellError
from swell.generators import registry
from swell.generators.base import (
    DITG,
    Local,
    Netns,
    Proc,
    Tool,
    counter_series,
    live_status,
    require,
)
from swell.generators.bulk import BulkGenerator, BulkSpec
from swell.generators.cbr import CbrConfig, parse_rate, timing_stats
from swell.native import native_artifact
from swell.placement import Endpoint


def test_registry_is_explicit() -> None:
    bg, fg = registry.kinds("background"), registry.kinds("foreground")
    assert {"none", "swing", "cbr", "poisson", "upb", "tpb", "tcpreplay", "fixed_loss"} <= set(bg)
    assert {"none", "httperf", "bulk"} <= set(fg)
    for role, table in (("background", bg), ("foreground", fg)):
        for name, cls in table.items():
            assert cls.name == name and cls.role == role
            assert cls.Spec.model_fields["kind"].default == name  # the tag is the name
    with pytest.raises(SwellError, match="not a background kind"):
        registry.kind_class("background", "httperf")


def test_one_way_to_say_a_tool_is_missing(tmp_path: Path, monkeypatch) -> None:
    """A kind (before the topology) and its generator (in the session) refuse a missing
    program alike: exit 3, the program and the Debian package to install."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    here = Endpoint("127.0.0.1", Local(), "local")
    with pytest.raises(EnvironmentProblem) as by_kind:
        registry.make("foreground", BulkSpec()).check()
    with pytest.raises(EnvironmentProblem) as by_gen:
        BulkGenerator(here, here, 1.0).check()
    assert str(by_kind.value) == str(by_gen.value) == \
        "iperf3: not installed (apt-get install iperf3)"
    assert by_kind.value.exit_code == 3
    with pytest.raises(EnvironmentProblem, match=r"^ITGSend: not installed \(apt-get install "
                                                 r"d-itg\); or use engine: swell$"):
        require(DITG, "or use engine: swell")
    assert str(Tool("x_snd", None, "build it, see docs/x.md").problem()) == \
        "x_snd: not on PATH (not packaged in Debian: build it, see docs/x.md)"
    assert Tool(sys.executable, "python3").problem() is None  # a path works as well
    for role in ("background", "foreground"):  # every kind declares its tools this way
        for cls in registry.kinds(role).values():
            assert all(isinstance(t, Tool) and (t.package or t.source) for t in cls.tools), cls


def test_places() -> None:
    assert Local().argv(["a"]) == ["a"]
    assert Netns("x").argv(["a", "b"]) == ["ip", "netns", "exec", "x", "a", "b"]


def test_proc_ready_line_and_stop() -> None:
    code = "import sys, time; print('noise'); print('READY', flush=True); time.sleep(60)"
    proc = Proc("py", Local(), [sys.executable, "-c", code])
    assert proc.wait_line(lambda ln: ln == "READY", timeout=10) == "READY"
    assert proc.alive()
    assert proc.stop(grace=5) == -15
    assert not proc.alive()


def test_proc_death_is_reported_with_its_stderr() -> None:
    code = "import sys; sys.stderr.write('bad things\\n'); sys.exit(3)"
    proc = Proc("py", Local(), [sys.executable, "-c", code])
    with pytest.raises(SwellError, match="status 3: bad things"):
        proc.wait_line(lambda ln: ln == "READY", timeout=10)


def test_counter_series_rates_and_warmup() -> None:
    rows = [{"t": t, "sessions_active": 3, "conns_started": 10 * t, "tx_bytes": 125_000 * t,
             "rx_bytes": 250_000 * t} for t in (1.0, 2.0, 3.0)]
    s = counter_series(rows, warmup_s=1.5)
    assert list(s["t"]) == [2.0, 3.0]
    assert np.allclose(s["conns_per_s"], 10) and np.allclose(s["tx_mbps"], 1.0)
    assert np.allclose(s["rx_mbps"], 2.0)
    assert "10 conn/s up 1.00 Mbit/s down 2.00 Mbit/s" in live_status(rows)


@pytest.mark.parametrize("text, bps", [("10M", 10e6), ("500k", 5e5), ("1.5G", 1.5e9),
                                       ("2e6", 2e6), (3000, 3000.0)])
def test_parse_rate(text: str | float, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["fast", "-1M", "0"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(SwellError):
        parse_rate(text)


def test_cbr_config() -> None:
    cfg = CbrConfig(dst="10.0.0.1", rate_bps=8 * 540 * 1000, out_dir=Path("/tmp"))
    assert cfg.pps == pytest.approx(1000)
    with pytest.raises(SwellError, match="udp or tcp"):
        CbrConfig(dst="x", rate_bps=1, out_dir=Path("/tmp"), proto="sctp")


def test_timing_stats_on_a_known_log() -> None:
    n = 1001
    tx = np.arange(n) * 1e-3 + np.tile([0.0, 2e-6], (n + 1) // 2)[:n]
    log = {"seq": np.arange(n), "tx_s": tx, "rx_s": tx + 1e-4, "size": np.full(n, 500)}
    log = {k: np.delete(v, 10) for k, v in log.items()}  # one loss
    s = timing_stats(log)
    assert s["lost"] == 1 and s["messages"] == n - 1
    assert s["pps"] == pytest.approx(999, rel=1e-3)
    assert s["idt_std_us"] == pytest.approx(2.0, rel=0.2)


def _gen(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(native_artifact("swell-gen")), *argv], capture_output=True,
                          text=True, timeout=30)


def test_swell_gen_bad_input(tmp_path: Path) -> None:
    res = _gen("run", "--schedule", str(tmp_path / "missing"), "--records", "x")
    assert res.returncode == 2 and "missing" in res.stderr
    res = _gen("send", "--dst", "127.0.0.1:1", "--pps", "0", "--duration", "1")
    assert res.returncode == 2 and "positive" in res.stderr
    res = _gen("serve", "--listen", "127.0.0.1:1", "--colour", "red")
    assert res.returncode == 2 and "unknown option --colour" in res.stderr
    res = _gen("dance")
    assert res.returncode == 2 and "unknown role" in res.stderr
