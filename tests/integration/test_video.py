"""The video stream end to end (root): clean link, a link below the stream rate, tshark.

Each test runs a short study through ``swell run`` (8 s streams) on an emulated
dumbbell and checks the issue's invariants:

* clean link (both transports): frame inter-arrival median within 1 ms of
  1/fps, no late frames and no stalls with a 1 s buffer, received rate within
  5% of the stream rate; over TCP the received bytes are the clip's bytes;
* a link below the stream rate (300 kbit/s for 450 kbit/s, both transports):
  stalls with buffer 0, stall time falling from 0 to 2 to 10 s of buffer (on
  the same arrivals), RTP loses packets, TCP loses none;
* the RTP run's jitter and loss agree with ``tshark -z rtp,streams`` on the
  client's capture (90 kHz clock).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from swell.cli import main as swell_main

pytestmark = [
    pytest.mark.skipif(shutil.which("ffmpeg") is None or shutil.which("gst-launch-1.0") is None
                       or shutil.which("socat") is None,
                       reason="ffmpeg, GStreamer or socat not installed"),
    pytest.mark.slow,
]

EXP = """
name: it-video-{name}
duration_s: {duration}
warmup_s: 0.5
topology:
  network: 10.83.0.0/16
  bottleneck: {{rate_mbps: {rate}, delay_ms: 10, queue_bytes: {queue}}}
foreground: {{kind: video, duration_s: 8, buffer_s: {buffer}, drain_s: 1.5}}
sweep:
  foreground.transport: [rtp, tcp]
"""


def _study(tmp_path: Path, monkeypatch, name: str, rate: float, queue: int,
           buffer: float, duration: float = 12) -> tuple[Path, dict[str, dict]]:
    monkeypatch.setenv("SWELL_QUIET", "1")
    exp = tmp_path / f"{name}.yaml"
    exp.write_text(EXP.format(name=name, rate=rate, queue=queue, buffer=buffer,
                              duration=duration))
    study = tmp_path / name
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    data = json.loads((study / "results.json").read_text())
    return study, {r["label"]: r for r in data["runs"]}


def test_clean_link_both_transports_and_tshark(tmp_path: Path, monkeypatch):
    study, runs = _study(tmp_path, monkeypatch, "clean", 10, 100000, 1.0)
    for label, run in runs.items():
        fg = run["foreground"]
        assert fg["frames_complete"] == fg["frames"] == 240, label
        assert abs(fg["frame_interarrival_ms"]["p50"] - 1000 / 30) < 1.0, label
        assert fg["late_frames"] == 0 and fg["stalls"] == 0 and fg["stall_s"] == 0, label
        assert abs(fg["rate_kbps_mean"] / fg["stream_kbps"] - 1) < 0.05, label
        assert fg["loss"] == 0 and not run["problems"], label
    tcp_dir = next((study / "runs").glob("tcp*/rep0/foreground"))
    clip = next((study / "models" / "video").glob("clip-*.h264"))
    assert (tcp_dir / "received.h264").read_bytes() == clip.read_bytes()
    # tshark on the RTP client capture: same jitter and loss (90 kHz clock for H.264)
    rtp = runs["rtp"]["foreground"]
    pcap = next((study / "runs").glob("rtp*/rep0/foreground/fg-client.pcap"))
    row = _tshark_rtp(pcap, rtp)
    assert row["lost"] == rtp["lost"] == 0
    assert row["max_jitter"] == pytest.approx(rtp["jitter_ms"]["max"], abs=0.01)
    # tshark's mean runs over its own sample of the running estimate (2% apart seen)
    assert row["mean_jitter"] == pytest.approx(rtp["jitter_ms"]["mean"], rel=0.04)
    assert row["packets"] == rtp["packets"]
    assert swell_main(["report", str(study)]) == 0
    page = (study / "report" / "index.html").read_text()
    assert "Video stream" in page and (study / "report" / "video-interarrival.png").exists()


def _tshark_rtp(pcap: Path, fg: dict) -> dict[str, float]:
    out = subprocess.run(["tshark", "-r", str(pcap), "-d", "udp.port==5004,rtp", "-d",
                          "rtp.pt==96,h264", "-q", "-z", "rtp,streams"], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if f"0x{fg['ssrc']:08X}" in line:
            f = line.split()
            m = re.search(r"(-?\d+) \(", line)
            assert m is not None
            # ... SSRC Payload Pkts Lost (pct) MinDelta MeanDelta MaxDelta MinJ MeanJ MaxJ
            return {"packets": int(f[f.index(f"0x{fg['ssrc']:08X}") + 2]), "lost": int(m.group(1)),
                    "mean_jitter": float(f[-2]), "max_jitter": float(f[-1])}
    raise AssertionError(f"tshark found no stream with SSRC {fg['ssrc']:#x}:\n{out}")


def test_link_below_stream_rate_stalls_and_buffer_invariant(tmp_path: Path, monkeypatch):
    study, runs = _study(tmp_path, monkeypatch, "slow", 0.3, 15000, 0.0, duration=18)
    for label, run in runs.items():
        fg = run["foreground"]
        assert fg["stalls"] >= 1 and fg["late_frames"] > 0, label
        assert any("above the bottleneck" in w for w in run["warnings"]), label
        stall = {b["buffer_s"]: b["stall_s"] for b in fg["by_buffer"]}
        assert stall[0.0] >= stall[2.0] >= stall[10.0], (label, stall)
        assert stall[0.0] > stall[10.0], (label, stall)
        assert fg["frac_below_rate"] > 0.5, label
    assert runs["rtp"]["foreground"]["lost"] > 0
    tcp = runs["tcp"]["foreground"]
    assert tcp["lost"] == 0 and tcp["missing_bytes"] == 0 and tcp["frames_complete"] == 240
