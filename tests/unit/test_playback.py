"""Unit tests for the playback schedule (UPB/TPB) and the tcpreplay preparation."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from swell.errors import SwellError
from swell.extract.reader import PacketChunk, addr_to_str, read_all
from swell.generators.base import Local, Netns
from swell.generators.playback import (
    PacketSchedule,
    PlaybackConfig,
    PlaybackGenerator,
    leg_summary,
    server_side,
    trace_schedule,
    write_ditg_files,
)
from swell.generators.replay import Inject, pnat_arg, rewrite_argv, round_robin
from swell.generators.replay_split import split_trace

DATA = Path(__file__).resolve().parents[2] / "data" / "pcap"
EXAMPLE = DATA / "example.pcap"


def v4(text: str) -> tuple[int, int]:
    a, b, c, d = (int(x) for x in text.split("."))
    return 0, (0xFFFF << 32) | (a << 24) | (b << 16) | (c << 8) | d


def crafted(rows: list[tuple[str, int, str, int, int, int]]) -> PacketChunk:
    """Packets (src, sport, dst, dport, proto, tcp_flags), 1 ms apart, 100-byte payloads."""
    pk = PacketChunk.empty(len(rows))
    for i, (s, sp, d, dp, proto, flags) in enumerate(rows):
        pk.saddr_hi[i], pk.saddr_lo[i] = v4(s)
        pk.daddr_hi[i], pk.daddr_lo[i] = v4(d)
        pk.sport[i], pk.dport[i], pk.proto[i], pk.tcp_flags[i] = sp, dp, proto, flags
        pk.ts_ns[i] = 1_000_000_000 + i * 1_000_000
        pk.ipver[i], pk.payload_len[i], pk.ip_len[i] = 4, 100, 140
    return pk


def test_orientation_syn_beats_ports() -> None:
    # the client uses port 80 as its source port; the SYN says who the server is
    pk = crafted([("10.0.0.1", 80, "10.0.0.2", 5000, 6, 0x02),
                  ("10.0.0.2", 5000, "10.0.0.1", 80, 6, 0x12),
                  ("10.0.0.2", 5000, "10.0.0.1", 80, 6, 0x18),
                  # no handshake seen: the well-known port is the server
                  ("10.0.0.3", 40000, "10.0.0.4", 443, 6, 0x18),
                  ("10.0.0.4", 443, "10.0.0.3", 40000, 6, 0x18),
                  # only a SYN/ACK seen: its sender is the server
                  ("10.0.0.5", 6000, "10.0.0.6", 7000, 6, 0x12),
                  # UDP, both ports high: the lower one is the server
                  ("10.0.0.7", 50000, "10.0.0.8", 9999, 17, 0),
                  ("10.0.0.8", 9999, "10.0.0.7", 50000, 17, 0)])
    assert server_side(pk).tolist() == [False, True, True, False, True, True, False, True]


def test_orientation_on_a_real_trace() -> None:
    pk = read_all(EXAMPLE)
    srv = server_side(pk)
    l4 = np.isin(pk.proto, (6, 17))
    assert srv[l4 & (pk.sport == 80)].all()
    assert not srv[l4 & (pk.dport == 80)].any()


def test_schedule_directions_and_sizes() -> None:
    s = trace_schedule(EXAMPLE, "server")
    c = trace_schedule(EXAMPLE, "client")
    both = trace_schedule(EXAMPLE, "both")
    assert len(s) + len(c) == len(both)
    assert len(trace_schedule(EXAMPLE, "server", with_empty=True)) > len(s)
    for sched in (s, c, both):
        assert sched.t_s[0] == 0.0 and np.all(np.diff(sched.t_s) >= 0)
        assert (sched.payload_len > 0).all()
    assert 15.0 < s.duration_s < 15.7
    assert np.array_equal(s.sizes("ip", "udp"), np.clip(s.ip_len - 28, 1, None))
    assert np.array_equal(s.sizes("payload", "tcp"), s.payload_len)
    with pytest.raises(SwellError):
        s.sizes("frames")
    with pytest.raises(SwellError):
        trace_schedule(EXAMPLE, "sideways")


def test_gaps_keep_the_absolute_schedule() -> None:
    t = np.array([0.0, 0.0, 0.0, 0.004, 0.004, 1.5])
    sched = PacketSchedule(t, np.full(6, 100), np.full(6, 72), 0.0)
    gaps = sched.gaps_ms(lead_s=0.001)
    assert (gaps > 0).all()
    when = np.cumsum(gaps) / 1e3 - 0.001
    assert np.abs(when - t).max() < 3e-6  # equal times spread by 1 us, no drift
    real = trace_schedule(EXAMPLE, "server")
    when = np.cumsum(real.gaps_ms()) / 1e3 - 0.001
    assert np.abs(when - real.t_s).max() < 1e-5


def test_window_rebases() -> None:
    s = trace_schedule(EXAMPLE, "server")
    w = s.window(2.0, 3.0)
    assert w.t_s[0] == 0.0 and w.duration_s < 3.0
    assert len(w) == int(((s.t_s >= 2.0) & (s.t_s < 5.0)).sum())
    with pytest.raises(SwellError):
        s.window(100.0, 1.0)


def test_ditg_files(tmp_path: Path) -> None:
    sched = PacketSchedule(np.array([0.0, 0.0025, 0.0125]), np.array([100, 1500, 60]),
                           np.array([48, 1448, 8]), 0.0)
    write_ditg_files(sched, sched.sizes("ip", "udp"), tmp_path / "i", tmp_path / "s")
    assert [float(x) for x in (tmp_path / "i").read_text().split()] == [1.0, 2.5, 10.0]
    assert (tmp_path / "s").read_text() == "72\n1472\n32\n"


def test_sender_command_and_config(tmp_path: Path) -> None:
    cfg = PlaybackConfig(trace=EXAMPLE, out_dir=tmp_path, dst="10.1.0.2", proto="tcp",
                         sender=Netns("x"), receiver=Local(), duration_s=2.0)
    gen = PlaybackGenerator(cfg)
    argv = gen.sender_argv(gen.legs[0])
    assert argv[:3] == ["chrt", "-f", "10"] and "-poll" in argv and "-D" in argv
    assert argv[argv.index("-T") + 1] == "TCP" and cfg.sizes == "payload"
    assert int(argv[argv.index("-z") + 1]) == len(gen.legs[0].sched)
    both = PlaybackGenerator(PlaybackConfig(trace=EXAMPLE, out_dir=tmp_path, dst="10.1.0.2",
                                            src="10.2.0.2", direction="both"))
    assert [leg.label for leg in both.legs] == ["server", "client"]
    assert both.legs[1].dst == "10.2.0.2" and both.legs[1].port != both.legs[0].port
    for bad in ({"proto": "sctp"}, {"direction": "up"}, {"sizes": "frames"}):
        with pytest.raises(SwellError):
            PlaybackConfig(trace=EXAMPLE, out_dir=tmp_path, dst="x", **bad)  # type: ignore[arg-type]
    with pytest.raises(SwellError):
        PlaybackGenerator(PlaybackConfig(trace=EXAMPLE, out_dir=tmp_path, dst="x",
                                         direction="both"))


def test_leg_summary_measures_errors() -> None:
    t = np.arange(100) * 0.01
    sched = PacketSchedule(t, np.full(100, 128), np.full(100, 100), 0.0)
    sizes = np.full(100, 10)
    late = np.where(np.arange(100) == 50, 0.003, 0.0)
    rx = {"seq": np.arange(1, 101), "tx_s": 5.0 + t + late, "rx_s": 5.001 + t,
          "size": np.full(100, 20)}
    out = leg_summary(sched, sizes, rx, "udp")
    assert out["padded"] == 100 and out["expected_bytes"] == out["received_bytes"] == 2000
    assert out["idt_error_p99_ms"] == pytest.approx(3.0, abs=0.1)
    assert out["arrival_offset_p99_ms"] < 1e-6
    assert out["lag_ms"] == pytest.approx(0.0, abs=1e-6)  # one late send, caught up


def test_leg_summary_lag_of_a_sender_that_never_catches_up() -> None:
    """A 4 ms hold at packet 30 shifts every later send; then 10 us late on every gap."""
    t = np.arange(200) * 0.005
    sched = PacketSchedule(t, np.full(200, 128), np.full(200, 100), 0.0)
    held = np.where(np.arange(200) >= 30, 0.004, 0.0)
    rx = {"seq": np.arange(1, 201), "tx_s": 2.0 + t + held, "rx_s": 2.0 + t + held,
          "size": np.full(200, 100)}
    out = leg_summary(sched, np.full(200, 100), rx, "udp")
    assert out["lag_ms"] == pytest.approx(4.0, abs=0.01)
    assert out["offset_p99_ms"] == pytest.approx(4.0, abs=0.01)
    steady = {**rx, "tx_s": 2.0 + t + np.arange(200) * 10e-6}
    assert leg_summary(sched, np.full(200, 100), steady, "udp")["lag_ms"] == \
        pytest.approx(1.99, abs=0.01)


def test_split_trace(tmp_path: Path) -> None:
    res = split_trace(EXAMPLE, tmp_path)
    pk = read_all(EXAMPLE)
    usable = int(((pk.ipver == 4) & np.isin(pk.proto, (6, 17))).sum())
    assert res.counts["c2s"] + res.counts["s2c"] == usable
    assert res.counts["dropped"] == len(pk) - usable
    c2s, s2c = read_all(res.c2s), read_all(res.s2c)
    assert len(c2s) == res.counts["c2s"] and len(s2c) == res.counts["s2c"]
    assert (s2c.sport == 80).sum() > 1000 and not (c2s.sport == 80).any()
    assert {"10.0.0.4", "10.0.0.6"} <= set(res.clients)
    assert not set(res.clients) & set(res.servers) - {"10.0.0.255"}
    short = split_trace(EXAMPLE, tmp_path / "w", 1.0, 4.0)
    assert 0 < short.counts["c2s"] + short.counts["s2c"] < usable


@pytest.mark.parametrize("name", ["sll.pcap", "netml_demo.pcap"])
def test_split_other_formats(tmp_path: Path, name: str) -> None:
    res = split_trace(DATA / name, tmp_path)
    assert res.counts["c2s"] + res.counts["s2c"] > 0
    assert len(read_all(res.c2s)) == res.counts["c2s"]


def test_mapping_and_rewrite_command() -> None:
    m = round_robin(["1.1.1.1", "2.2.2.2", "3.3.3.3"], ["10.0.0.1", "10.0.0.2"])
    assert m == {"1.1.1.1": "10.0.0.1", "2.2.2.2": "10.0.0.2", "3.3.3.3": "10.0.0.1"}
    assert pnat_arg({"1.1.1.1": "10.0.0.1"}) == "1.1.1.1/32:10.0.0.1/32"
    with pytest.raises(SwellError):
        round_robin(["1.1.1.1"], [])
    argv = rewrite_argv(Path("a"), Path("b"), m, Inject(Local(), "eth0", "02:00:00:00:00:01",
                                                         "02:00:00:00:00:02"))
    assert "--fixcsum" in argv and "--mtu-trunc" in argv
    assert "--enet-dmac=02:00:00:00:00:02" in argv


@pytest.mark.skipif(shutil.which("tcprewrite") is None, reason="tcprewrite not installed")
@pytest.mark.parametrize("name", ["example.pcap", "sll.pcap"])
def test_tcprewrite_maps_every_address(tmp_path: Path, name: str) -> None:
    res = split_trace(DATA / name, tmp_path)
    mapping = {**round_robin(res.clients, ["10.1.0.1", "10.1.0.2"]),
               **round_robin(res.servers, ["10.2.0.1"])}
    inj = Inject(Local(), "unused", "02:00:00:00:00:01", "02:00:00:00:00:02")
    src = res.s2c if res.counts["s2c"] else res.c2s
    out = tmp_path / "out.pcap"
    subprocess.run(rewrite_argv(src, out, mapping, inj), check=True, capture_output=True)
    pk = read_all(out)
    assert len(pk) == len(read_all(src))
    addrs = {addr_to_str(int(h), int(lo)) for h, lo in zip(pk.saddr_hi, pk.saddr_lo,
                                                         strict=True)}
    addrs |= {addr_to_str(int(h), int(lo)) for h, lo in zip(pk.daddr_hi, pk.daddr_lo,
                                                          strict=True)}
    assert addrs <= {"10.1.0.1", "10.1.0.2", "10.2.0.1"}
    assert set(pk.linktype.tolist()) == {1}


def test_cli_parsers() -> None:
    import argparse

    from swell.generators import playback, replay

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    playback.add_parsers(sub)
    replay.add_parsers(sub)
    a = parser.parse_args(["tpb", str(EXAMPLE), "--dst", "10.0.0.2", "--direction", "both",
                           "--duration", "2"])
    assert a.direction == "both" and a.duration == 2.0 and callable(a.func)
    a = parser.parse_args(["replay", str(EXAMPLE), "--client-ns", "x", "--client-if", "a",
                           "--server-ns", "y", "--server-if", "b", "--clients", "1.1.1.1",
                           "--servers", "2.2.2.2"])
    assert a.func is replay.cmd_replay and a.multiplier == 1.0


def test_missing_tools_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from swell.errors import EnvironmentProblem
    from swell.generators import base, replay

    monkeypatch.setattr(base.shutil, "which", lambda name: None)
    monkeypatch.setattr(base, "native_artifact", lambda name: Path("/bin/true"))
    gen = PlaybackGenerator(PlaybackConfig(trace=EXAMPLE, out_dir=tmp_path, dst="10.0.0.2"))
    with pytest.raises(EnvironmentProblem, match="ITGSend"):
        gen.check()
    inj = Inject(Local(), "x", "02:00:00:00:00:01", "02:00:00:00:00:02")
    rep = replay.ReplayGenerator(replay.ReplayConfig(trace=EXAMPLE, out_dir=tmp_path,
                                                     client_inject=inj, server_inject=inj,
                                                     clients=["10.0.0.1"], servers=["10.0.0.2"]))
    with pytest.raises(EnvironmentProblem, match="tcpreplay"):
        rep.check()
