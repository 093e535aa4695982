"""``swell gen packets`` / ``swell gen rps``: argument errors (one line, exit 2, nothing
started or written), the configuration they build, and the per-flow table."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import numpy as np
import pytest

from swell.cli import build_parser
from swell.cli import main as swell_main
from swell.extract.mmpp import MMPPModel, Scale, save_mmpp_model
from swell.fsutil import GEN_MARKER
from swell.generators.packets_cli import flow_table, packets_config, rps_generator, session_table

ENDS = ["--client", "10.1.0.1", "--server", "10.1.0.2"]


def mmpp_dir(tmp: Path) -> Path:
    scales = [Scale(math.exp(-1 / 20.0), 0.25 * 16, 0.5, 8.0)]
    return save_mmpp_model(MMPPModel(10.0, scales, np.array([3.0]), np.array([1.0])),
                           tmp / "mm", {"source": "test"})


@pytest.mark.parametrize("argv, message", [
    (["packets", "--preset", "VoIP:G.999", *ENDS], "unknown codec .G.999."),
    (["packets", "--preset", "VoIP:G.711.1", "--proto", "tcp", *ENDS], "runs over udp, not tcp"),
    (["packets", "--preset", "DNS", "--flows", "0", *ENDS], "--flows: Input should be greater"),
    (["packets", "--preset", "DNS", "--client", "10.1.0.1", "--server", "host"],
     "'host' is not an IP address"),
    (["packets", "--model", "MISSING", *ENDS], "not a swell model directory"),
    (["packets", "--model", "MMPP", *ENDS], "a mmpp model .*not a packet model"),
    (["rps", "--model", "MMPP", "--server", "10.1.0.2", "--clients", ","],
     "give at least one client address"),
    (["rps", "--model", "MMPP", "--server", "10.1.0.2", "--clients", "10.1.0.1,nope"],
     "'nope' is not an IP address"),
    (["rps", "--model", "MMPP", "--server", "10.1.0.2", "--clients", "10.1.0.1", "--scale", "0"],
     "--scale: Input should be greater than 0"),
    (["rps", "--model", "MISSING", "--server", "10.1.0.2", "--clients", "10.1.0.1"],
     "not a swell model directory"),
])
def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           argv: list[str], message: str) -> None:
    mm = mmpp_dir(tmp_path)
    argv = [str(mm) if a == "MMPP" else str(tmp_path / "nothing") if a == "MISSING" else a
            for a in argv]
    out = tmp_path / "out"
    assert swell_main(["gen", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("swell: ") and "\n" not in err
    assert re.search(message, err), err
    assert not out.exists()  # nothing started, nothing written


@pytest.mark.parametrize("argv", [
    ["packets", *ENDS],  # neither --preset nor --model
    ["packets", "--preset", "DNS", "--model", "m", *ENDS],
    ["packets", "--preset", "DNS", "--client", "10.1.0.1"],
    ["packets", "--preset", "DNS", *ENDS, "--duration", "0"],
    ["rps", "--model", "m", "--server", "10.1.0.2"],
])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        swell_main(["gen", *argv])
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def _args(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["gen", *argv])


def test_packets_config_from_a_preset(tmp_path: Path) -> None:
    cfg = packets_config(_args(["packets", "--preset", "VoIP:G.729.3:CRTP:VAD", "--flows", "3",
                                *ENDS, "--duration", "2", "--out", str(tmp_path / "o"),
                                "--src-ns", "a", "--dst-ns", "b"]))
    (leg,) = cfg.legs
    assert (leg.direction, leg.proto, len(leg.flows)) == ("s2c", "udp", 3)
    dst, rplace, src, splace = cfg.ends["s2c"]
    # s2c: the server (in --dst-ns) sends to the client (in --src-ns)
    assert (dst, src) == ("10.1.0.1", "10.1.0.2")
    assert (getattr(rplace, "name", None), getattr(splace, "name", None)) == ("a", "b")
    # --out was checked (swell.fsutil.gen_output_dir) and marked as swell gen's
    assert cfg.duration_s == 2.0 and (tmp_path / "o" / GEN_MARKER).is_file()


def test_rps_generator_from_a_model(tmp_path: Path) -> None:
    mm = mmpp_dir(tmp_path)
    gen = rps_generator(_args(["rps", "--model", str(mm), "--server", "10.1.0.2",
                               "--clients", "10.1.0.3,10.1.0.4 10.1.0.5", "--interval-s", "1",
                               "--object-bytes", "1000,5000", "--out", str(tmp_path / "o")]))
    assert [c.ip for c in gen.clients] == ["10.1.0.3", "10.1.0.4", "10.1.0.5"]
    assert gen.server.ip == "10.1.0.2" and gen.spec.object_bytes == [1000, 5000]
    assert gen.spec.clients == 3 and gen.spec.interval_s == 1.0


def test_tables_show_the_ditgdec_set() -> None:
    flow = {"flow": 0, "class": "VoIP:G.711.1:RTP", "sent": 300, "received": 297, "lost": 3,
            "loss": 0.01, "throughput_bps": 73_000.0, "pps": 99.99, "asked_pps": 100.0,
            "idt_std_us": 4.2, "delay_ms": 5.25, "jitter_ms": 0.031, "delay_kind": "one-way"}
    summ = {"flows": [flow, {"flow": 1, "class": "x", "sent": 2, "received": 0, "lost": 2,
                             "loss": 1.0}],
            "n_flows": 2, "engine": "swell", "sent": 302, "received": 297, "lost": 5,
            "loss": 5 / 302, "throughput_bps": 73_000.0, "delay_ms": 5.25, "jitter_ms": 0.031,
            "problems": []}
    text = flow_table(summ)
    assert "99.990 (100.000)" in text and "5.250" in text and "0.031" in text
    assert "73.00" in text and "1.000" in text  # throughput kbit/s, loss %
    assert "(one-way)" in text.splitlines()[-1]
    s = {"sessions_planned": 5, "sessions_due": 4, "sessions_started": 4, "sources_used": 3,
         "requests": 9, "requests_ok": 8, "errors": 0, "requests_cut": 1,
         "response_s_mean": 0.012, "response_s_p95": 0.03, "interval_s": 1.0}
    text = session_table(s, [1.0, 0.0, 3.0])
    assert "4 started" in text and "8 answered" in text and "1 0 3" in text
