"""The model directory: round trip, validation, version check, CLI, odd inputs."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main
from swell.errors import SwellError
from swell.extract.cli import format_summary
from swell.extract.model import FORMAT_VERSION, HASH_ALGORITHM, load_model, save_model
from swell.extract.network import NET_PARAMS, SIDES
from swell.extract.pipeline import extract_model
from swell.extract.reader import open_trace
from swell.extract.sessions import APP_PARAMS, Thresholds
from tests.conftest import DATA

EXAMPLE = DATA / "pcap" / "example.pcap"


class _Xxh128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def xxh3_128_reference(data: bytes) -> str:
    """XXH3-128 of ``data`` (canonical hex) by the system's libxxhash, independent of
    the reader's Rust implementation; skips the test when the library is absent."""
    try:
        lib = ctypes.CDLL("libxxhash.so.0")
    except OSError:
        pytest.skip("libxxhash.so.0 (Debian libxxhash0) not installed: no reference XXH3")
    fn = lib.XXH3_128bits
    fn.argtypes, fn.restype = [ctypes.c_char_p, ctypes.c_size_t], _Xxh128
    h = fn(data, len(data))
    return f"{h.high64:016x}{h.low64:016x}"


@pytest.fixture(scope="module")
def example_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "m"
    save_model(extract_model(EXAMPLE, with_sensitivity=True), out)
    return out


def test_round_trip_and_contents(example_model: Path) -> None:
    m = load_model(example_model)
    meta = json.loads((example_model / "model.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["provenance"]["hash_algorithm"] == HASH_ALGORITHM == "xxh3-128"
    assert meta["provenance"]["content_hash"] == xxh3_128_reference(EXAMPLE.read_bytes())
    assert meta["provenance"]["size_bytes"] == EXAMPLE.stat().st_size
    assert meta["provenance"]["thresholds"] == Thresholds().as_dict()
    assert "http-tcp" in m.apps and "dns-udp" in m.apps
    for app in m.apps:
        for p in APP_PARAMS:
            assert f"app/{app}/{p}" in m.arrays
    for side in SIDES:
        n = len(m.hosts(side))
        for p in NET_PARAMS:
            assert len(m.net(side, p)) == n
    http = m.app_info("http-tcp")
    assert http["connections"] == 63 and http["bytes_s2c"] > http["bytes_c2s"] > 0
    assert m.session_rate() > 0 and m.mean_rate_bps() > 0
    # DNS over UDP: one request and one response per flow
    assert np.median(m.samples("dns-udp", "numPairs")) == 1
    assert (m.samples("dns-udp", "reqSize") > 0).all()
    rows = m.meta["sensitivity"]
    assert len(rows) == 9
    # a larger RRE gap can only merge RREs
    by_gap = [r["rres"] for r in rows if r["varied"] == "rre_gap"]
    assert by_gap == sorted(by_gap, reverse=True) and by_gap[0] > by_gap[-1]
    assert "http-tcp" in format_summary(m)


@pytest.mark.parametrize("chunks_read", [0, 1, 3, None])
def test_content_hash_covers_the_whole_file(tmp_path: Path, chunks_read: int | None) -> None:
    """The reader's hash is of the whole file, however much of it was read, and also
    with a truncated last record the reader does not return."""
    data = EXAMPLE.read_bytes()
    for name, content in (("whole.pcap", data), ("cut.pcap", data[:-7])):
        f = tmp_path / name
        f.write_bytes(content)
        with open_trace(f) as tr:
            it = tr.chunks(500)
            for _ in range(chunks_read if chunks_read is not None else 10**9):
                if next(it, None) is None:
                    break
            assert tr.digest() == (xxh3_128_reference(content), len(content))


def test_version_and_validation(example_model: Path, tmp_path: Path) -> None:
    m = load_model(example_model)
    bad = tmp_path / "bad"
    save_model(m, bad)
    meta = json.loads((bad / "model.json").read_text())
    meta["format_version"] = 99
    (bad / "model.json").write_text(json.dumps(meta))
    with pytest.raises(SwellError, match="version 99"):
        load_model(bad)
    m2 = m.copy()
    del m2.arrays["app/http-tcp/rspSize"]
    with pytest.raises(SwellError, match="rspSize"):
        save_model(m2, tmp_path / "bad2")
    assert not (tmp_path / "bad2").exists()
    with pytest.raises(SwellError, match="not a swell model"):
        load_model(tmp_path)


def test_cli_extract_show_variant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    assert main(["extract", str(EXAMPLE), "-o", str(out), "--rre-gap", "2"]) == 0
    assert load_model(out).meta["provenance"]["thresholds"]["rre_gap_s"] == 2.0
    assert main(["model", "show", str(out), "--plots", str(tmp_path / "plots")]) == 0
    text = capsys.readouterr().out
    assert "reqSize" in text and "server delay_s" in text
    pngs = list((tmp_path / "plots").glob("*.png"))
    assert len(pngs) >= 10 and len(list((tmp_path / "plots").glob("*.svg"))) == len(pngs)
    assert main(["model", "variant", str(out), "--rsp", "2", "-o", str(tmp_path / "v")]) == 0
    v = load_model(tmp_path / "v")
    assert v.meta["variants"][0]["name"] == "scale_responses"
    assert main(["model", "variant", str(out), "-o", str(tmp_path / "v2")]) == 2


@pytest.mark.parametrize(
    "name",
    [
        "tls2.pcap",
        "netml_demo.pcap",
        "http-packets.pcap",
        "4KHttpRequests.pcap",
        "650HttpResponses.pcap",
        "sll.pcap",
        "example2.pcap",
    ],
)
def test_odd_bundled_inputs(name: str) -> None:
    m = extract_model(DATA / "pcap" / name)
    assert m.apps
    if name == "tls2.pcap":
        assert any("no complete handshake" in x for x in m.not_estimated)
        assert m.app_info("https-tcp")["lower_bound_connections"] == 334
    if name == "netml_demo.pcap":
        assert any("only one direction" in x for x in m.not_estimated)


def test_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture at all" * 10)
    assert main(["extract", str(junk), "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("swell: ")
    assert main(["extract", str(tmp_path / "missing.pcap"), "-o", str(tmp_path / "m")]) == 2
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "rel",
    [
        "ndpi/pinterest.pcap",
        "ndpi/instagram.pcap",
        "ndpi/sites.pcapng",
        "ndpi/alexa-app.pcapng",
        "misc/netml_srcIP_10.42.0.119_anomaly.pcap",
    ],
)
def test_shared_captures(rel: str, shared_data: Path) -> None:
    path = shared_data / "pcap" / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    m = extract_model(path)
    assert m.apps and m.meta["trace"]["connections"] > 0


def test_one_directional_says_so_on_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m"
    assert main(["extract", str(DATA / "pcap" / "netml_demo.pcap"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not estimated: packets of the second direction" in text
    assert "acknowledgement numbers" in text and "fallback (drawn from other hosts)" in text
    m = load_model(out)
    assert m.app_info("https-tcp")["bytes_s2c"] > 0  # from the client's ACKs
    assert m.meta["fallback_counts"]["server/capacity_bps"] == len(m.hosts("server"))
