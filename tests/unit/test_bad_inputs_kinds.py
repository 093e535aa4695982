"""Issue 18, second round: the trace-replaying kinds, the commands the corpus had not
reached, ``-o`` of energy/fidelity and ``swell gen --out``, address ranges.

* The unreadable-trace corpus (``tests/data/bad/``) through ``fit packets``, ``fit
  mmpp``, ``flows read``, ``harpoon extract`` and ``gen upb/tpb/replay``: exit 2, one
  line naming the file, no traceback, nothing written (no output, no temporary
  directory of ``swell gen``).
* tcpreplay's split copies the packets the reader returns, located by the reader's
  offsets: a damaged trace (a corrupt length, a cut last record, a bad pcapng block)
  replays what can be read instead of failing the run at its start ("dpkt read 60
  records, the swell reader 59"), and the damage is said: ``swell check`` warns of it,
  a run's warnings and ``input_damage`` hold it, for tcpreplay, upb and tpb alike.
* ``swell check`` asks what each kind's prepare asks (a trace with nothing to play).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main
from swell.errors import SwellError
from swell.extract.reader import read_all

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
GOOD = Path(__file__).resolve().parents[2] / "data" / "pcap" / "example.pcap"
UNREADABLE_TRACES = ["empty.pcap", "short-header.pcap", "garbage.pcap", "text.pcap"]
GEN_TEMPS = ("swell-gen-upb-*", "swell-gen-tpb-*", "swell-gen-replay-*")
REPLAY_KINDS = ("tcpreplay", "upb", "tpb")


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    monkeypatch.chdir(tmp_path)


def _one_line(err: str, name: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("swell: ") and name in lines[0], err
    return lines[0]


def _argv(command: str, trace: Path, out: str) -> list[str]:
    return {
        "fit packets": ["fit", "packets", str(trace), "-o", out, "--no-plots"],
        "fit mmpp": ["fit", "mmpp", str(trace), "-o", out, "--no-plots"],
        "flows read": ["flows", "read", str(trace), "-o", f"{out}.npz"],
        "harpoon extract": ["harpoon", "extract", str(trace), "-o", out],
        "gen upb": ["gen", "upb", str(trace), "--dst", "127.0.0.1", "--out", out],
        "gen tpb": ["gen", "tpb", str(trace), "--dst", "127.0.0.1"],
        "gen replay": ["gen", "replay", str(trace), "--client-ns", "swl-none", "--client-if",
                       "x0", "--server-ns", "swl-none", "--server-if", "x1", "--clients",
                       "10.0.0.1", "--servers", "10.0.0.2"],
        # the commands without a trace reach the same guard through cli_common.out_dir
        "gen cbr": ["gen", "cbr", "--rate", "1M", "--dst", "127.0.0.1:9", "--duration", "0.1"],
        "gen poisson": ["gen", "poisson", "--rate", "1M", "--dst", "127.0.0.1:9",
                        "--duration", "0.1"],
        "gen packets": ["gen", "packets", "--preset", "voip", "--client", "127.0.0.1",
                        "--server", "127.0.0.1", "--duration", "0.1"],
    }[command]


def _gen_temps() -> set[Path]:
    tmp = Path("/tmp")
    return {p for pattern in GEN_TEMPS for p in tmp.glob(pattern)}


@pytest.mark.parametrize("name", UNREADABLE_TRACES)
@pytest.mark.parametrize("command", ["fit packets", "fit mmpp", "flows read",
                                     "harpoon extract", "gen upb", "gen tpb", "gen replay"])
def test_unreadable_trace(capsys, tmp_path: Path, name: str, command: str) -> None:
    before = _gen_temps()
    code = main(_argv(command, BAD / name, str(tmp_path / "out")))
    assert code == 2
    _one_line(capsys.readouterr().err, name)
    assert list(tmp_path.iterdir()) == []
    assert _gen_temps() == before


def _split_all(trace: Path, out: Path) -> tuple[dict[str, int], object, list[tuple]]:
    """split_trace's counts, damage and (time, IP length) of what it wrote."""
    from swell.generators.replay_split import split_trace

    res = split_trace(trace, out)
    written = []
    for p in (res.c2s, res.s2c):
        c = read_all(p)
        written += list(zip(c.ts_ns.tolist(), c.ip_len.tolist(), strict=True))
    return res.counts, res.damage, sorted(written)


def _expected(trace: Path) -> list[tuple]:
    c = read_all(trace)
    keep = (c.ipver == 4) & np.isin(c.proto, (6, 17))
    return sorted(zip(c.ts_ns[keep].tolist(), c.ip_len[keep].tolist(), strict=True))


@pytest.mark.parametrize("name", ["corrupt-length.pcap", "truncated-record.pcap"])
def test_replay_split_takes_what_the_reader_reads(tmp_path: Path, name: str) -> None:
    """Both failed with "dpkt read N records, the swell reader 59: cannot match packets"
    at the start of a run; now every packet the reader returns is written (at its time,
    with its length) and the damage is kept."""
    counts, damage, written = _split_all(BAD / name, tmp_path / "split")
    assert counts["c2s"] + counts["s2c"] + counts["dropped"] == 59
    assert written == _expected(BAD / name) and len(written) == counts["c2s"] + counts["s2c"]
    assert damage is not None and damage.skipped_packets == 1


def _pcapng(tmp_path: Path) -> tuple[Path, bytearray, list[int]]:
    """example.pcap as editcap writes it in pcapng, its bytes and its packet blocks."""
    if shutil.which("editcap") is None:
        pytest.skip("editcap not installed (Debian package wireshark-common)")
    ng = tmp_path / "ex.pcapng"
    subprocess.run(["editcap", "-F", "pcapng", str(GOOD), str(ng)], check=True)
    data = bytearray(ng.read_bytes())
    epbs, at = [], 0
    while at < len(data):
        btype, blen = struct.unpack_from("<II", data, at)
        if btype == 6:
            epbs.append(at)
        at += blen
    return ng, data, epbs


def test_replay_split_of_a_damaged_pcapng(tmp_path: Path) -> None:
    """The pcapng case of the issue (one block length 200000): 4,630 packets replayed,
    the same bytes as the undamaged file's but that one."""
    ng, data, epbs = _pcapng(tmp_path)
    off = epbs[2001]  # after 2,001 packets, as the audit's file
    struct.pack_into("<I", data, off + 4, 200_000)
    bad = tmp_path / "bad.pcapng"
    bad.write_bytes(bytes(data))
    counts, damage, written = _split_all(bad, tmp_path / "b")
    _, _, clean = _split_all(ng, tmp_path / "c")
    assert len(written) == 4630 and len(clean) == 4631 and not set(written) - set(clean)
    assert damage is not None and damage.skipped_packets == 1 and damage.first_offset == off
    assert sum(counts.values()) == 4630


def test_replay_refuses_a_time_a_pcap_cannot_hold(capsys, tmp_path: Path) -> None:
    """A damaged pcapng timestamp (year 2262) made the split's pcap writer raise
    struct.error (the x10 fuzz): now one line naming the trace, in swell check too."""
    from swell.generators.replay_split import split_trace

    _, data, epbs = _pcapng(tmp_path)
    struct.pack_into("<I", data, epbs[7] + 12, 0xFFFF_FFFF)  # timestamp, high word
    bad = tmp_path / "t.pcapng"
    bad.write_bytes(bytes(data))
    with pytest.raises(SwellError, match="packet 8: time .* outside what a pcap file holds"):
        split_trace(bad, tmp_path / "split")
    assert main(["check", str(_experiment(tmp_path, "tcpreplay", bad))]) == 2
    assert "outside what a pcap file" in _one_line(capsys.readouterr().err, "t.pcapng")


def _experiment(tmp_path: Path, kind: str, trace: Path, net: str = "10.77.0.0/16") -> Path:
    exp = tmp_path / f"{kind}.yaml"
    exp.write_text(f"name: k\nduration_s: 10\nwarmup_s: 1\ntopology: {{network: {net}, "
                   f"bottleneck: {{rate_mbps: 20}}}}\nbackground: {{kind: {kind}, trace: "
                   f"{trace}}}\n")
    return exp


@pytest.mark.parametrize("kind", REPLAY_KINDS)
def test_replay_kinds_say_damage_in_check_and_run(capsys, tmp_path: Path, kind: str) -> None:
    from swell.experiments.runner import damage_warning, input_damage, prepare_kinds
    from swell.experiments.schema import load_experiment
    from swell.generators.kind import PrepareContext

    exp = _experiment(tmp_path, kind, BAD / "corrupt-length.pcap")
    assert main(["check", str(exp)]) == 0
    line = ("corrupt-length.pcap: damaged capture: 1 packet not returned (corrupt_record 1, "
            "resync_skipped_bytes 1,430), 1,430 bytes lost, first at byte 4,009")
    assert f"warning: background: {BAD / line}" in capsys.readouterr().err
    bg, fg = prepare_kinds(load_experiment(exp), PrepareContext(tmp_path, tmp_path / "m", 1))
    found = input_damage({"background": bg, "foreground": fg})
    assert list(found) == ["background"]
    stored, said = found["background"]
    assert stored["source"] == str(BAD / "corrupt-length.pcap")
    assert stored["skipped_packets"] == 1 and said.endswith(line)
    assert damage_warning("background", bg, said).endswith("(the background replays the "
                                                           "packets read)")
    exp = _experiment(tmp_path, kind, GOOD)
    bg, fg = prepare_kinds(load_experiment(exp), PrepareContext(tmp_path, tmp_path / "m", 1))
    assert input_damage({"background": bg, "foreground": fg}) == {}


@pytest.mark.parametrize("kind", [*REPLAY_KINDS, "swing"])
def test_check_asks_what_prepare_asks(capsys, tmp_path: Path, kind: str) -> None:
    """A trace with nothing to play passed ``swell check`` and failed in prepare at the
    start of its run (a sweep's earlier runs done first)."""
    exp = _experiment(tmp_path, kind, BAD / "header-only.pcap")
    assert main(["check", str(exp)]) == 2
    line = _one_line(capsys.readouterr().err, "header-only.pcap")
    assert f"{kind}.yaml:5:" in line  # the background line


def test_energy_and_fidelity_never_overwrite_a_users_file(capsys, tmp_path: Path) -> None:
    """``energy -o DIR`` replaced a DIR/energy.json that swell had not written (exit 0)."""
    short = ["--duration", "2", "--bin-ms", "10"]
    for name, argv in (("energy.json", ["energy", str(GOOD), *short]),
                       ("fidelity.json", ["fidelity", str(GOOD), str(GOOD), "--no-ks", *short])):
        d = tmp_path / name.split(".")[0]
        d.mkdir()
        (d / name).write_text('{"mine": 1}')
        (d / "notes.txt").write_text("mine")
        assert main([*argv, "-o", str(d)]) == 2
        assert "--force" in _one_line(capsys.readouterr().err, name)
        assert (d / name).read_text() == '{"mine": 1}'
        if name == "fidelity.json":
            continue  # the same check (fidelity's figures take 2 s to draw)
        assert main([*argv, "-o", str(d), "--force"]) == 0  # replaced, notes kept
        assert main([*argv, "-o", str(d)]) == 0  # its own previous result: replaced
        capsys.readouterr()
        assert "mine" not in (d / name).read_text()
        assert (d / "notes.txt").read_text() == "mine"


def _users_file_and_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A user's file and a folder of their files: what an output option must not take."""
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    d = tmp_path / "d"
    d.mkdir()
    (d / "other.txt").write_text("mine")
    return keep, d


def test_gen_out_never_destroys(capsys, tmp_path: Path) -> None:
    """``swell gen ... --out DIR`` wrote into any directory; a file or a directory of
    other files is now refused before the trace is read or anything runs."""
    from swell.fsutil import GEN_MARKER, gen_output_dir

    keep, d = _users_file_and_folder(tmp_path)
    for target in (keep, d):
        for command in ("gen upb", "gen replay", "gen cbr", "gen poisson", "gen packets"):
            argv = _argv(command, GOOD, str(target))
            if "--out" not in argv:
                argv += ["--out", str(target)]
            assert main(argv) == 2
            assert "swell gen output" in _one_line(capsys.readouterr().err, target.name)
    assert keep.read_text() == "precious" and sorted(p.name for p in d.iterdir()) == \
        ["other.txt"]
    # missing, empty and previous outputs are taken (and marked); --force takes the rest
    assert (gen_output_dir(tmp_path / "new", "upb") / GEN_MARKER).is_file()
    assert gen_output_dir(tmp_path / "new", "tpb") == tmp_path / "new"
    assert (gen_output_dir(d, "upb", force=True) / "other.txt").is_file()


@pytest.mark.parametrize("net", ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24",
                                 "2001:db8:5e11::/48"])
def test_documentation_ranges_are_taken(capsys, tmp_path: Path, net: str) -> None:
    """The issue allows private or documentation ranges; the documentation ones (RFC
    5737, RFC 3849) were refused."""
    exp = tmp_path / "doc.yaml"
    exp.write_text(json.dumps({"name": "d", "duration_s": 10, "warmup_s": 1, "topology": {
        "network": net, "bottleneck": {"rate_mbps": 20}, "clients": {"count": 4},
        "servers": {"count": 2}}, "background": {"kind": "poisson", "rate_mbps": 1}}))
    assert main(["check", str(exp)]) == 0, capsys.readouterr().err
    exp.write_text(exp.read_text().replace(net, "192.0.3.0/24" if "." in net else
                                           "2001:db9::/48"))
    assert main(["check", str(exp)]) == 2
    assert "documentation range" in _one_line(capsys.readouterr().err, "doc.yaml")


def test_testbed_render_never_writes_into_a_users_folder(capsys, tmp_path: Path) -> None:
    """``swell testbed render -o`` wrote inventory.yml, host_vars/ and testbed.json into any
    directory; a file or a folder of other files is refused before the inputs are read."""
    keep, d = _users_file_and_folder(tmp_path)
    for target in (keep, d):
        assert main(["testbed", "render", str(tmp_path / "exp.yaml"), "--hosts",
                     str(tmp_path / "hosts.yml"), "-o", str(target)]) == 2
        assert "swell testbed render output" in _one_line(capsys.readouterr().err, target.name)
    assert keep.read_text() == "precious" and [p.name for p in d.iterdir()] == ["other.txt"]
    # a previous render's folder is taken: the inputs are read next (missing here)
    (d / "testbed.json").write_text('{"format": "swell-testbed", "version": 1}')
    assert main(["testbed", "render", str(tmp_path / "exp.yaml"), "--hosts",
                 str(tmp_path / "hosts.yml"), "-o", str(d)]) == 2
    assert "cannot read" in _one_line(capsys.readouterr().err, "hosts.yml")
