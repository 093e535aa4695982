"""The video kind without root: frame rebuilding, playout, jitter, loss, options, bad input."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from swell.analysis import video as V
from swell.errors import EnvironmentProblem, SwellError
from swell.experiments.schema import load_experiment
from swell.generators import video_client as VC
from swell.generators.video import BUFFER_LADDER, VideoKind, VideoSpec
from swell.placement import PathFacts

FPS = 30.0
TOPO = "name: bad\ntopology:\n  bottleneck: {rate_mbps: 4}\n"
TICK = 3000  # 90 kHz / 30 frame/s


def _rtp_stream(frames: int, per_frame: int = 3, delay: float = 0.01, seq0: int = 65530,
                ts0: int = 2**32 - 7000):
    """Packets of a perfectly paced stream (seq and timestamp wrap inside it)."""
    t, seq, ts, mk = [], [], [], []
    for f in range(frames):
        for k in range(per_frame):
            t.append(f / FPS + delay + k * 1e-4)
            seq.append((seq0 + f * per_frame + k) % 65536)
            ts.append((ts0 + f * TICK) % 2**32)
            mk.append(k == per_frame - 1)
    n = len(t)
    return (np.array(t), np.array(seq), np.array(ts), np.array(mk), np.full(n, 1000.0))


def test_clean_rtp_stream_has_every_frame_on_time_and_no_jitter():
    t, seq, ts, mk, size = _rtp_stream(90)
    fr = V.rtp_frames(t, seq, ts, mk, size, 90_000, FPS)
    assert fr.count == 90 and np.isfinite(fr.complete_s).all()
    gaps = V.frame_interarrival(fr)
    assert abs(np.median(gaps) - 1 / FPS) < 1e-6
    for d in (0.0, 2.0):
        p = V.playout(fr, d, FPS)
        assert p.late.sum() == 0 and p.stalls == 0 and p.stall_s == 0.0
    j = V.rfc3550_jitter(t, ts, 90_000)
    assert j.max() < 2e-4  # only the 0.1 ms spacing of a frame's packets (same timestamp)
    one = V.rfc3550_jitter(t[2::3], ts[2::3], 90_000)  # one packet per frame: none at all
    assert one.max() < 1e-9
    assert V.rtp_loss(seq) == (270, 0)


def test_lost_packet_makes_its_frame_late_and_counts_as_loss():
    t, seq, ts, mk, size = _rtp_stream(30)
    drop = np.ones(t.size, bool)
    drop[[10 * 3 + 1, 20 * 3 + 2]] = False  # middle of frame 10, marker of frame 20
    drop[[5 * 3]] = False  # first packet of frame 5
    fr = V.rtp_frames(t[drop], seq[drop], ts[drop], mk[drop], size[drop], 90_000, FPS)
    # frame 21 is whole: the one packet missing before it was frame 20's marker
    assert np.flatnonzero(~np.isfinite(fr.complete_s)).tolist() == [5, 10, 20]
    assert V.rtp_loss(seq[drop]) == (90, 3)
    p = V.playout(fr, 10.0, FPS)
    assert p.late.sum() == 3 and p.stalls == 3 and p.stall_s == pytest.approx(3 / FPS)


def test_whole_frames_missing_still_get_rows():
    t, seq, ts, mk, size = _rtp_stream(30)
    keep = (np.arange(t.size) // 3) != 12
    fr = V.rtp_frames(t[keep], seq[keep], ts[keep], mk[keep], size[keep], 90_000, FPS)
    assert fr.count == 30 and not np.isfinite(fr.complete_s[12])


def test_jitter_follows_rfc3550_by_hand():
    arrival = np.array([0.0, 0.040, 0.060, 0.100])
    ts = np.array([0, 3000, 6000, 9000])  # nominal 33.3 ms apart
    j = V.rfc3550_jitter(arrival, ts, 90_000)
    d = np.abs(np.diff(arrival - ts / 90_000))
    ref = [0.0]
    for x in d:
        ref.append(ref[-1] + (x - ref[-1]) / 16)
    assert np.allclose(j, ref)


def test_link_below_stream_rate_stall_time_falls_with_the_buffer():
    """Frames arrive at 2/3 of real time: late frames and stall time can only fall as D grows."""
    n = 300
    media = np.arange(n) / FPS
    fr = V.Frames(media, media * 1.5 + 0.02, np.full(n, 1800.0))
    stall = [V.playout(fr, d, FPS).stall_s for d in (0.0, 2.0, 10.0)]
    assert stall[0] > stall[1] > stall[2] >= 0.0
    assert V.playout(fr, 0.0, FPS).stalls >= 1
    assert V.playout(fr, 10.0, FPS).late.sum() == 0  # 10 s of media falls 5 s behind


def test_inorder_frontier_with_a_retransmission():
    # segments: [0,1460) at 0.1, [2920,4100) at 0.2 (out of order), [1460,2920) resent at 0.5
    t = np.array([0.1, 0.2, 0.5])
    off = np.array([0, 2920, 1460])
    ln = np.array([1460, 1180, 1460])
    times, front = V.inorder_frontier(t, off, ln)
    assert front.tolist() == [1460, 4100] and times.tolist() == [0.1, 0.5]


def test_rate_series_and_run_lengths():
    t = np.arange(0, 3, 0.5)
    r = V.rate_series(t, np.full(t.size, 1000.0), 0.0)
    assert r.tolist() == [16.0, 16.0, 16.0]
    assert V.run_lengths(np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], bool)) == [2, 1, 3]
    assert len(V.quantiles(np.arange(10.0))) == V.QUANTILES.size


def _pcap(path: Path, packets: list[tuple[float, bytes]], snap: int = 65535) -> None:
    """A nanosecond pcap with Linux SLL2 framing (what tcpdump -i any writes)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, snap, 276)]
    for t, ip in packets:
        frame = bytes(20) + ip
        sec = int(t)
        out.append(struct.pack("<IIII", sec, int(round((t - sec) * 1e9)), min(len(frame), snap),
                               len(frame)) + frame[:snap])
    path.write_bytes(b"".join(out))


def _udp(src: str, dst: str, dport: int, payload: bytes) -> bytes:
    ip = bytes([0x45, 0]) + struct.pack("!H", 28 + len(payload)) + bytes(5) + bytes([17]) \
        + bytes(2) + bytes(int(x) for x in src.split(".")) \
        + bytes(int(x) for x in dst.split("."))
    return ip + struct.pack("!HHHH", 5004, dport, 8 + len(payload), 0) + payload


def test_read_udp_parses_rtp_headers(tmp_path: Path):
    pk = []
    for i in range(5):
        rtp = struct.pack("!BBHII", 0x80, (0x80 if i % 2 else 0) | 96, 100 + i, 9000 * i,
                          0xDEADBEEF) + bytes(50)
        pk.append((1.5 + i * 0.01, _udp("10.0.0.1", "10.0.0.2", 5004, rtp)))
    pk.append((2.0, _udp("10.0.0.1", "10.0.0.3", 5004, bytes(80))))  # another host
    _pcap(tmp_path / "c.pcap", pk, snap=20 + 28 + 12 + 10)  # headers, as the capture keeps
    got = VC.read_udp(tmp_path / "c.pcap", "10.0.0.2", 5004)
    assert got.seq.tolist() == [100, 101, 102, 103, 104]
    assert got.marker.tolist() == [False, True, False, True, False]
    assert got.rtp_ts.tolist() == [0, 9000, 18000, 27000, 36000]
    assert got.payload.tolist() == [50] * 5 and got.ssrc == 0xDEADBEEF
    assert got.arrival_s[0] == pytest.approx(1.5)


def _ip4(src: str, dst: str, proto: int, body: bytes) -> bytes:
    return bytes([0x45, 0]) + struct.pack("!H", 20 + len(body)) + bytes(5) + bytes([proto]) \
        + bytes(2) + bytes(int(x) for x in src.split(".")) \
        + bytes(int(x) for x in dst.split(".")) + body


def _tcp(src: str, dst: str, dport: int, seq: int, payload: bytes = b"",
         flags: int = 0x10) -> bytes:
    return _ip4(src, dst, 6, struct.pack("!HHIIBBHHH", 40000, dport, seq, 0, 5 << 4, flags,
                                         65535, 0, 0) + payload)


def _rtsp_bytes(frames: int, per_frame: int = 2) -> tuple[bytes, list[int]]:
    """What ffmpeg's RTSP sender writes: requests, then ``$`` frames (RTCP on channel 3)."""
    sdp = b"v=0\r\nm=video 0 RTP/AVP 96\r\n"
    out = [b"OPTIONS rtsp://10.0.0.2:5004/live RTSP/1.0\r\nCSeq: 1\r\n\r\n",
           b"ANNOUNCE rtsp://10.0.0.2:5004/live RTSP/1.0\r\nContent-Type: application/sdp\r\n"
           b"CSeq: 2\r\nContent-Length: %d\r\n\r\n" % len(sdp) + sdp,
           b"SETUP rtsp://10.0.0.2:5004/live/streamid=0 RTSP/1.0\r\nTransport: "
           b"RTP/AVP/TCP;unicast;interleaved=2-3;mode=record\r\nCSeq: 3\r\n\r\n",
           b"RECORD rtsp://10.0.0.2:5004/live RTSP/1.0\r\nCSeq: 4\r\n\r\n"]
    ends = []  # stream offset of each RTP packet's last byte + 1
    seq = 0
    for f in range(frames):
        if f == 1:
            rtcp = bytes([0x80, 200]) + bytes(26)
            out.append(b"$\x03" + struct.pack("!H", len(rtcp)) + rtcp)
        for k in range(per_frame):
            rtp = struct.pack("!BBHII", 0x80, (0x80 if k == per_frame - 1 else 0) | 96, seq,
                              f * TICK, 0xABCD) + bytes(700)
            out.append(b"$\x02" + struct.pack("!H", len(rtp)) + rtp)
            ends.append(sum(map(len, out)))
            seq += 1
    out.append(b"TEARDOWN rtsp://10.0.0.2:5004/live RTSP/1.0\r\nCSeq: 5\r\n\r\n")
    return b"".join(out), ends


def test_rtsp_interleaved_stream_is_reassembled_into_rtp_packets(tmp_path: Path):
    data, ends = _rtsp_bytes(6)
    mss, isn = 1000, 5000
    chunks = [(o, data[o:o + mss]) for o in range(0, len(data), mss)]
    pk = [(1.0, _tcp("10.0.1.2", "10.0.0.2", 5004, isn, flags=0x02))]
    arrive = {}
    for i, (o, c) in enumerate(chunks):  # segment 3 lost once, resent after segment 5
        if i == 3:
            continue
        arrive[o] = 1.1 + 0.01 * len(pk)
        pk.append((arrive[o], _tcp("10.0.1.2", "10.0.0.2", 5004, isn + 1 + o, c)))
        if i == 5:
            o3, c3 = chunks[3]
            arrive[o3] = 1.1 + 0.01 * len(pk)
            pk.append((arrive[o3], _tcp("10.0.1.2", "10.0.0.2", 5004, isn + 1 + o3, c3)))
    pk.append((3.0, _tcp("10.0.0.2", "10.0.1.2", 40000, 77, b"RTSP/1.0 200 OK\r\n\r\n")))
    _pcap(tmp_path / "t.pcap", pk)
    stream = VC.read_tcp_stream(tmp_path / "t.pcap", "10.0.1.2", "10.0.0.2", 5004)
    assert stream.data == data and stream.retransmitted == 1  # segment 3, below the highest
    got, messages = VC.interleaved_rtp(stream)
    assert messages == 5 and got.ssrc == 0xABCD  # the RTCP packet (channel 3) left out
    assert got.seq.tolist() == list(range(12)) and got.marker.tolist() == [False, True] * 6
    assert got.payload.tolist() == [700] * 12
    # each packet arrives when its last byte is in order: packets ending in segments 3-5
    # all arrive with segment 3's retransmission
    for end, t in zip(ends, got.arrival_s, strict=True):
        assert t == pytest.approx(max(arrive[o] for o in arrive if o < end)), end
    assert (np.abs(got.arrival_s - arrive[3 * mss]) < 1e-6).sum() >= 3
    fr = V.rtp_frames(got.arrival_s, got.seq, got.rtp_ts, got.marker, got.payload, 90_000, FPS)
    assert np.isfinite(fr.complete_s).all() and fr.count == 6


def test_a_stream_without_its_handshake_or_cut_short_is_an_error(tmp_path: Path):
    _pcap(tmp_path / "none.pcap", [(1.0, _tcp("10.0.1.2", "10.0.0.2", 5004, 9, b"x" * 10))])
    with pytest.raises(SwellError, match="no TCP connection"):
        VC.read_tcp_stream(tmp_path / "none.pcap", "10.0.1.2", "10.0.0.2", 5004)
    seg = _tcp("10.0.1.2", "10.0.0.2", 5004, 10, b"y" * 100)
    _pcap(tmp_path / "cut.pcap", [(1.0, _tcp("10.0.1.2", "10.0.0.2", 5004, 9, flags=0x02)),
                                  (1.1, seg[:-30])])  # the capture kept 70 payload bytes
    with pytest.raises(SwellError, match="snap length"):
        VC.read_tcp_stream(tmp_path / "cut.pcap", "10.0.1.2", "10.0.0.2", 5004)


def test_both_sides_bind_their_addresses():
    rtp_tx = VC.rtp_sender_argv(Path("/c.mp4"), FPS, "10.0.1.2", "10.0.0.2", 5004)
    assert "bind-address=10.0.1.2" in rtp_tx and "host=10.0.0.2" in rtp_tx
    assert "address=10.0.0.2" in VC.rtp_receiver_argv("10.0.0.2", 5004, Path("/r"))
    rx = VC.rtsp_receiver_argv("10.0.0.2", 5004, Path("/r"))
    assert "rtsp://10.0.0.2:5004/live" in rx and rx[rx.index("-rtsp_flags") + 1] == "listen"
    tx = VC.rtsp_sender_argv(Path("/f"), FPS, "10.0.0.2", 5004)
    assert tx[-1] == "rtsp://10.0.0.2:5004/live" and tx[tx.index("-rtsp_transport") + 1] == "tcp"
    assert "-re" not in tx  # paced by GStreamer, not ffmpeg's 10 ms polling


def test_spec_defaults_and_rate_warning():
    spec = VideoSpec()
    assert (spec.rate_kbps, spec.fps, spec.duration_s, spec.buffer_s, spec.transport) == \
        (450.0, 30.0, 62.0, 10.0, "rtp")
    kind = VideoKind(VideoSpec(rate_kbps=450))
    assert kind.check_path(PathFacts(forward_mbps=0.3, reverse_mbps=0.3))
    assert "above the bottleneck" in kind.check_path(PathFacts(reverse_mbps=0.3))[0]
    assert kind.check_path(PathFacts(reverse_mbps=4.0)) == []


def test_negative_buffer_is_a_schema_error_with_file_and_line(tmp_path: Path):
    exp = tmp_path / "bad.yaml"
    exp.write_text(TOPO + "foreground:\n  kind: video\n  buffer_s: -1\n")
    with pytest.raises(SwellError) as err:
        load_experiment(exp)
    msg = str(err.value)
    assert "bad.yaml:6" in msg and "buffer_s" in msg


def test_unknown_transport_is_a_schema_error(tmp_path: Path):
    exp = tmp_path / "bad.yaml"
    exp.write_text(TOPO + "foreground: {kind: video, transport: quic}\n")
    with pytest.raises(SwellError, match="transport"):
        load_experiment(exp)


def test_missing_encoder_is_exit_3_naming_the_package(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda p, *a, **k: None if p == "ffmpeg" else
                        real(p, *a, **k))
    with pytest.raises(EnvironmentProblem) as err:
        VideoKind(VideoSpec()).check()
    assert err.value.exit_code == 3 and "apt-get install ffmpeg" in str(err.value)


@pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("gst-launch-1.0") is None,
                    reason="ffmpeg or GStreamer not installed")
def test_clip_is_constant_rate_and_indexed(tmp_path: Path):
    clip = VC.make_clip(tmp_path, 450, FPS, 4)
    assert clip.frames == 120 and clip.path.suffix == ".mp4"
    assert clip.bytes == clip.stream.stat().st_size
    per_s = np.add.reduceat(clip.size, np.arange(0, 120, 30)) * 8e-3
    assert np.all(np.abs(per_s[1:] / 450 - 1) < 0.05), per_s  # second 0 has the headers
    again = VC.make_clip(tmp_path, 450, FPS, 4)  # cached
    assert again.stream.stat().st_mtime == clip.stream.stat().st_mtime


def test_swell_run_without_ffmpeg_is_exit_3_before_anything_is_written(tmp_path: Path,
                                                                        monkeypatch, capsys):
    from swell.cli import main as swell_main

    exp = tmp_path / "v.yaml"
    exp.write_text(TOPO + "duration_s: 12\nforeground: {kind: video, duration_s: 8, "
                          "transport: tcp}\n")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no ffmpeg, nor anything else
    assert swell_main(["run", str(exp), "-o", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err
    assert "ffmpeg" in err and "apt-get install ffmpeg" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_report_stall_table_is_the_runs_means_per_configuration():
    """The report's stall table, from the stored Figure 11 study (both transports, D = 0
    and 10 s): a row per configuration with its transport, buffer, the repetitions' mean
    late frames and stall time, and a stall-time column per buffer of the ladder."""
    from swell.experiments.results import group_runs, load_results
    from swell.generators.video_report import _table

    stored = Path(__file__).resolve().parents[2] / "docs/paper/fig11_video_buffering"
    groups = group_runs(load_results(stored / "results.json"))
    page = _table(groups)
    head = re.findall(r"<th>([^<]*)</th>", page)
    rows = {r[0]: dict(zip(head, r, strict=True)) for r in
            (re.findall(r"<td>([^<]*)</td>", tr) for tr in re.findall(r"<tr><td>.*?</tr>", page))}
    assert sorted(rows) == sorted(groups) and len(rows) == 8
    for label, runs in groups.items():
        row, fgs = rows[label], [r["foreground"] for r in runs]
        assert row["transport"] == fgs[0]["transport"] == label.rsplit(" / ", 1)[1]
        assert float(row["buffer (s)"]) == fgs[0]["buffer_s"] == float(label.split(" / ")[0])
        assert float(row["late frames"]) == pytest.approx(
            np.mean([f["late_frames"] for f in fgs]), abs=0.05)
        assert float(row["stall time (s)"]) == pytest.approx(
            np.mean([f["stall_s"] for f in fgs]), abs=0.005)
        assert row["runs"] == str(len(runs)) == "3"
        ladder = [float(row[f"stall s @ {d:g} s"]) for d in BUFFER_LADDER]
        assert ladder == sorted(ladder, reverse=True), (label, ladder)
