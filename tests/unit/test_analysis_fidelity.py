"""Fidelity on synthetic traffic (pure) and the ``swell energy``/``swell fidelity`` commands."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from swell.analysis.fidelity import (
    FidelityConfig,
    add_ks,
    comparable_distributions,
    fidelity,
    format_table,
)
from swell.analysis.timeseries import Packets, make_packets
from swell.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "pcap" / "example.pcap"
CLIENT, SERVER = 0x0A000001, 0x0A000002


def _traffic(rate_pps: float, seconds: float, rng: np.random.Generator,
             on_off_s: float | None = None) -> Packets:
    """One connection: SYN from the client, then 1500 B s2c segments and 60 B c2s ACKs.

    Arrivals are Poisson; with ``on_off_s`` the rate doubles in "on" periods of
    that length and drops to zero in "off" ones (same mean, burstier).
    """
    n = rng.poisson(rate_pps * seconds)
    t = np.sort(rng.uniform(0, seconds, n))
    if on_off_s:
        t = np.sort(np.concatenate([t, t]))
        t = t[(t // on_off_s) % 2 == 0]
    ack = rng.random(t.size) < 0.3
    ts = np.concatenate([[0.0], t]) * 1e9 + 1e15
    size = np.concatenate([[60], np.where(ack, 60, 1500)])
    from_client = np.concatenate([[True], ack])
    src = np.where(from_client, CLIENT, SERVER)
    dst = np.where(from_client, SERVER, CLIENT)
    sport = np.where(from_client, 40000, 80)
    dport = np.where(from_client, 80, 40000)
    flags = np.concatenate([[0x02], np.full(t.size, 0x10)])
    return make_packets(ts.astype(np.int64), size, src, dst, sport, dport, np.full(ts.size, 6),
                        flags)


def test_same_process_passes_and_a_burstier_one_fails() -> None:
    rng = np.random.default_rng(9)
    orig = _traffic(2000, 64, rng)
    same = _traffic(2000, 64, rng)
    bursty = _traffic(2000, 64, rng, on_off_s=0.5)
    cfg = FidelityConfig(bin_s=0.001)
    good = fidelity(orig, same, cfg)
    assert [d.direction for d in good.directions] == ["c2s", "s2c"]
    for d in good.directions:
        assert abs(d.throughput.diff_pct) < 3, d.throughput
        assert d.throughput.passed()
        assert d.octaves_judged >= 10
        assert d.octaves_passed >= 0.9 * d.octaves_judged
    bad = fidelity(orig, bursty, cfg)
    s2c = bad.directions[1]
    assert abs(s2c.throughput.diff_pct) < 5  # same mean rate ...
    c = s2c.comparison
    # ... but the on/off period of 1 s shows up around octave 9 (0.5-1 s) and fails there.
    assert not c.passed[(c.octaves >= 7) & (c.octaves <= 10)].any()
    assert c.diff[c.octaves == 9][0] > 3
    text = format_table(add_ks(bad, None, None, "KS distances not computed: test"))
    assert "FAIL" in text and "KS distances not computed" in text
    d = bad.to_dict()
    json.dumps(d)
    assert d["directions"][1]["throughput"]["pass"] is True


def test_ks_table_in_the_result() -> None:
    rng = np.random.default_rng(1)
    p = _traffic(500, 8, rng)
    res = fidelity(p, p, FidelityConfig())
    a = {"app/http-tcp/rspSize": rng.exponential(1e4, 500), "app/http-tcp/sessionStart": [1.0]}
    b = {"app/http-tcp/rspSize": rng.exponential(1e4, 400), "net/server/hosts": ["x"]}
    add_ks(res, comparable_distributions(a), comparable_distributions(b), "synthetic")
    assert [k.name for k in res.ks] == ["app/http-tcp/rspSize"]
    assert res.ks[0].distance < 0.15
    assert "rspSize" in format_table(res)


def test_energy_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["energy", str(EXAMPLE), "-o", str(tmp_path), "--hurst", "3:9"]) == 0
    out = capsys.readouterr().out
    assert "Hurst over octaves 3..9" in out
    data = json.loads((tmp_path / "energy.json").read_text())
    assert set(data["series"]) == {"c2s", "s2c"}
    s2c = data["series"]["s2c"]
    assert s2c["bins"] == 15645
    # Whole 1 ms bins only: the last 0.76 ms of the capture is left out of the mean.
    assert s2c["mean_bps"] == pytest.approx(8 * 3403932 / 15.645, rel=2e-4)
    assert s2c["mean_bps"] < 8 * 3403932 / 15.645
    assert s2c["energy"]["time_scale_s"][0] == pytest.approx(0.002)
    assert 0.5 < s2c["hurst"]["hurst"] < 1.2
    for ext in ("png", "svg"):
        assert (tmp_path / f"energy.{ext}").stat().st_size > 10_000
    assert main(["energy", str(EXAMPLE), "--bin-ms", "10", "--unit", "packets",
                 "--direction", "src=10.0.0.6", "-N", "2", "--start", "3", "--duration", "8"]) == 0
    out = capsys.readouterr().out
    assert "out: " in out and "mean over 800 bins of 10 ms" in out


def _thinned_copy(src: Path, dest: Path) -> int:
    """Copy of ``src`` without every other data segment from 212.199.202.9; bytes dropped."""
    import dpkt

    dropped, i = 0, 0
    with src.open("rb") as f, dest.open("wb") as g:
        w = dpkt.pcap.Writer(g)
        for t, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if (isinstance(ip, dpkt.ip.IP) and ip.src == bytes([212, 199, 202, 9])
                    and isinstance(ip.data, dpkt.tcp.TCP) and ip.data.data):
                i += 1
                if i % 2:
                    dropped += len(buf)
                    continue
            w.writepkt(buf, t)
    return dropped


def test_fidelity_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = tmp_path / "thin.pcap"
    dropped = _thinned_copy(EXAMPLE, gen)
    out = tmp_path / "fid"
    assert main(["fidelity", str(EXAMPLE), str(gen), "-o", str(out), "--no-ks"]) == 0
    text = capsys.readouterr().out
    assert "KS distances skipped" in text
    res = json.loads((out / "fidelity.json").read_text())
    rows = {d["direction"]: d for d in res["directions"]}
    assert rows["c2s"]["throughput"]["diff_pct"] == pytest.approx(0.0, abs=0.5)
    assert rows["c2s"]["throughput"]["pass"]
    # s2c lost `dropped` bytes of 3,403,932 (the generated capture may end a little earlier).
    expect = -100 * dropped / 3403932
    assert rows["s2c"]["throughput"]["diff_pct"] == pytest.approx(expect, abs=3)
    assert not rows["s2c"]["throughput"]["pass"]
    assert all(o["pass"] for o in rows["c2s"]["octaves"] if math.isfinite(o["floor"]))
    for name in ("energy_s2c", "energy_diff_s2c", "throughput_c2s"):
        assert (out / f"{name}.png").is_file() and (out / f"{name}.svg").is_file()


def test_fidelity_against_itself_with_ks(tmp_path: Path) -> None:
    pytest.importorskip("swell.extract.pipeline")
    assert main(["fidelity", str(EXAMPLE), str(EXAMPLE), "-o", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "fidelity.json").read_text())
    if res["ks"] is None:
        pytest.skip(res["ks_note"])
    assert res["ks"] and all(k["distance"] == 0.0 for k in res["ks"])
    for d in res["directions"]:
        assert d["throughput"]["diff_pct"] == 0.0
        assert d["octaves_passed"] == d["octaves_judged"] > 0


def test_bad_input_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["energy", str(tmp_path / "missing.pcap")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["energy", str(EXAMPLE), "--bin-ms", "0.05"]) == 2
    assert main(["energy", str(EXAMPLE), "--direction", "nonsense"]) == 2
    assert main(["energy", str(EXAMPLE), "--hurst", "3"]) == 2
    capsys.readouterr()
    # example2.pcap merges captures years apart: refused with advice, fine with a window.
    jumpy = REPO / "data" / "pcap" / "example2.pcap"
    assert main(["energy", str(jumpy)]) == 2
    assert "timestamps jump?" in capsys.readouterr().err
    assert main(["energy", str(jumpy), "--duration", "30", "-o", str(tmp_path / "w")]) == 0
    assert json.loads((tmp_path / "w" / "energy.json").read_text())["duration_s"] == 30
    assert main(["energy", str(EXAMPLE), "--start", "100"]) == 2
    capsys.readouterr()
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    assert main(["fidelity", str(junk), str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "junk.pcap" in err
