"""The foreground video stream: jitter, late frames and stalls under background traffic.

As in the study's section 4.3 (seed 004): one client-server pair streams a
constant-rate video (450 kbit/s, 30 frame/s, 62 s by default) across the
shared link, and the client plays it out with a buffer of ``buffer_s``
seconds (10 s, RealPlayer's default, and 0 s in the paper). The experiment
file says::

    foreground: {kind: video, rate_kbps: 450, fps: 30, duration_s: 62,
                 buffer_s: 10, transport: rtp}   # or tcp

The clip, the sender and the receiver are real tools
(:mod:`swell.generators.video_client`: ffmpeg/libx264 for the clip, GStreamer
pacing it). ``rtp``: RTP over UDP, GStreamer at both ends, no retransmission.
``tcp``: RTSP-interleaved RTP over TCP, ffmpeg recording (ANNOUNCE, SETUP,
RECORD) to an ffmpeg RTSP receiver listening at the client; TCP retransmits.
Every process is started through its endpoint's
:class:`~swell.placement.Place`; the receivers and the RTP sender bind their
host's address, the RTSP sender (ffmpeg has no local-address option for
RTSP) gets it from its place's routing, and the metrics read only packets
from the server's address, so a stream from any other address counts as none.
The metrics come from the client's own capture (tcpdump, kernel stamps),
reduced by :mod:`swell.analysis.video`: for TCP the capture's byte stream is
reassembled and its interleaved RTP packets read out, each arriving when its
last byte is in order; then both transports share the RTP frame logic: packet
inter-arrival CDF, RFC 3550 jitter, loss, late frames, stalls and stall time
(for the configured buffer and for a ladder of buffers on the same arrivals),
received rate per second against the stream rate, startup delay.

The report adds inter-arrival CDFs per configuration, a stall table and the
received rate over time (:meth:`VideoKind.report`).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from swell.analysis import video as V
from swell.errors import EnvironmentProblem, SwellError
from swell.generators import video_client as VC
from swell.generators.base import Generator, GenResult, Proc
from swell.generators.kind import (
    KindResult,
    KindSpec,
    PrepareContext,
    ReportPart,
    RunContext,
    Tool,
    TrafficKind,
    Window,
)
from swell.placement import Endpoint, PathFacts
from swell.tcpdump import Tcpdump, tcpdump_argv

BUFFER_LADDER = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0)
RATE_SHORTFALL = 0.95  # a second "below the stream rate" receives less than 95% of it
PROBE_S = 0.02


class VideoSpec(KindSpec):
    """A constant-rate video stream from the foreground server, played out at the client."""

    kind: Literal["video"] = "video"
    rate_kbps: float = Field(450.0, gt=0, le=100_000, description="encoded stream rate")
    fps: float = Field(30.0, gt=0, le=120)
    duration_s: float = Field(62.0, gt=0, le=3600, description="length of the clip")
    buffer_s: float = Field(10.0, ge=0, le=600, description="client playout buffer")
    transport: Literal["rtp", "tcp"] = "rtp"
    port: int = Field(5004, ge=1024, le=65534, description="the stream's port")
    drain_s: float = Field(3.0, ge=0, le=120, description="RTP: how long the client still "
                           "listens after the sender has sent its last packet (TCP: until "
                           "the RTSP session ends)")

    def display(self) -> str:
        return self.label or (f"video {self.transport} {self.rate_kbps:g} kbit/s "
                              f"buffer {self.buffer_s:g} s")


class VideoGenerator(Generator):
    """Sender on the foreground server, receiver and capture on the foreground client."""

    name = "video"

    def __init__(self, spec: VideoSpec, clip: VC.Clip, server: Endpoint, client: Endpoint,
                 out: Path) -> None:
        super().__init__()
        self.spec, self.clip = spec, clip
        self.server, self.client = server, client
        self.out = out
        self.pcap = out / "fg-client.pcap"
        self.received = out / "received.h264"
        self.tcpdump: Tcpdump | None = None
        self.sender: Proc | None = None
        self.pacer: Proc | None = None  # TCP: GStreamer pacing the frames into the sender
        self.receiver: Proc | None = None
        self.sender_done_at: float | None = None
        self.cut = False

    def check(self) -> None:
        pass  # the kind's check() ran before the topology existed

    def start_server(self) -> None:
        """The listening side, at the client: the RTP receiver or the RTSP receiver."""
        self.out.mkdir(parents=True, exist_ok=True)
        c, p = self.client, self.spec.port
        if self.spec.transport == "rtp":
            self.receiver = self.spawn("gst-launch-1.0 (RTP receiver)", c.place,
                                       VC.rtp_receiver_argv(c.ip, p, self.received))
        else:
            self.receiver = self.spawn("ffmpeg (RTSP receiver)", c.place,
                                       VC.rtsp_receiver_argv(c.ip, p, self.received))

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Probe the receiver's socket (ss in its place), then start the client's capture."""
        proto = "udp" if self.spec.transport == "rtp" else "tcp"
        assert self.receiver is not None
        c = self.client
        argv = VC.listening_argv(proto, c.ip, self.spec.port)
        deadline = time.monotonic() + timeout
        while True:
            if not self.receiver.alive():
                raise SwellError(self.receiver.label, self.receiver.error_text())
            res = c.place.run(argv, timeout=timeout)
            if res.returncode == 0 and res.stdout.strip():
                break
            if time.monotonic() > deadline:
                raise SwellError(self.receiver.label, f"not listening on {c.ip}:"
                                 f"{self.spec.port} after {timeout:.0f} s")
            time.sleep(PROBE_S)  # probe cadence
        # RTP: headers are enough; RTSP: the whole byte stream is reassembled
        self.tcpdump = Tcpdump(c.place, tcpdump_argv(
            "any", self.pcap, 128 if proto == "udp" else 0,
            bpf=f"host {self.server.ip} and {proto} port {self.spec.port}"),
            f"tcpdump at {c.ip}")
        self.tcpdump.start()

    def start_client(self) -> None:
        """The sender, at the server: GStreamer's RTP sender, or the pacer and ffmpeg."""
        s, c, p = self.server, self.client, self.spec.port
        if self.spec.transport == "rtp":
            self.sender = self.spawn("GStreamer (RTP sender)", s.place, VC.rtp_sender_argv(
                self.clip.path, self.clip.fps, s.ip, c.ip, p))
            return
        fifo = self.out / "frames.fifo"
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
        self.sender = self.spawn("ffmpeg (RTSP sender)", s.place,
                                 VC.rtsp_sender_argv(fifo, self.clip.fps, c.ip, p))
        self.pacer = self.spawn("GStreamer (pacer)", s.place, VC.pacer_argv(self.clip.path, fifo))

    def running(self) -> bool:
        """RTP: the sender, then a drain; TCP: until the receiver has the whole session
        (it ends on the sender's TEARDOWN, after every byte queued before it arrived)."""
        if self.sender is None:
            return False
        if self.sender.alive():
            return True
        if self.spec.transport == "tcp":
            return self.sender.popen.returncode == 0 and self.receiver is not None \
                and self.receiver.alive()
        if self.sender_done_at is None:
            self.sender_done_at = time.monotonic()
        return time.monotonic() - self.sender_done_at < self.spec.drain_s

    def stop(self) -> None:
        """Senders, receiver, then the capture (flushed); a sender that failed is an error."""
        senders = [x for x in (self.pacer, self.sender) if x is not None]
        try:
            self.cut = any(x.alive() for x in senders) or (
                self.spec.transport == "tcp" and self.receiver is not None
                and self.receiver.alive())
            status = [(x, x.stop()) for x in senders]
            super().stop()
        finally:
            if self.tcpdump is not None and self.tcpdump.proc is not None:
                counts = self.tcpdump.stop()
                if counts.dropped:
                    raise SwellError(self.pcap, f"capture dropped {counts.dropped} packets")
        failed = [x for x, rc in status if rc]
        if failed and not self.cut:
            raise SwellError(failed[0].label, failed[0].error_text())

    def collect(self, warmup_s: float = 0.0) -> GenResult:
        summary = {"server_ip": self.server.ip, "client_ip": self.client.ip,
                   "port": self.spec.port, "transport": self.spec.transport,
                   "cut": self.cut, "clip": str(self.clip.path)}
        return GenResult(self.name, {}, summary, {"client_pcap": self.pcap,
                                                 "received": self.received})


def video_metrics(spec: VideoSpec, clip: VC.Clip, pcap: Path, server_ip: str,
                  client_ip: str) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Every metric of one stream from the client's capture (see the module docstring)."""
    fps = clip.fps
    m: dict[str, Any] = {"transport": spec.transport, "buffer_s": spec.buffer_s,
                         "stream_kbps": round(clip.rate_kbps, 3), "frames": clip.frames}
    if spec.transport == "rtp":
        pk = VC.read_udp(pcap, client_ip, spec.port)
    else:
        stream = VC.read_tcp_stream(pcap, server_ip, client_ip, spec.port)
        pk, messages = VC.interleaved_rtp(stream)
        m.update(retransmitted=stream.retransmitted, tcp_segments=int(stream.offset.size),
                 tcp_bytes=len(stream.data), rtsp_messages=messages)
    order = np.argsort(pk.arrival_s, kind="stable")
    arrival, nbytes = pk.arrival_s[order], pk.payload[order]
    frames = V.rtp_frames(arrival, pk.seq[order], pk.rtp_ts[order], pk.marker[order],
                          nbytes, VC.RTP_CLOCK_HZ, fps)
    jitter = V.rfc3550_jitter(arrival, pk.rtp_ts[order], VC.RTP_CLOCK_HZ)
    expected, lost = V.rtp_loss(pk.seq)
    m.update(packets=int(arrival.size), expected=expected, lost=lost,
             loss=round(lost / expected, 6) if expected else 0.0, ssrc=pk.ssrc)
    if frames.count < clip.frames:  # frames after the last one that arrived at all
        pad = clip.frames - frames.count
        frames = V.Frames(np.r_[frames.media_s, (frames.count + np.arange(pad)) / fps],
                          np.r_[frames.complete_s, np.full(pad, np.nan)],
                          np.r_[frames.nbytes, np.zeros(pad)])
    play = V.playout(frames, spec.buffer_s, fps)
    t0 = float(arrival[0]) if arrival.size else 0.0
    # rate bins start half a frame before the first arrival, so a bin holds whole frames
    # (frames arrive on a grid of 1/fps: bins starting at the first one would split them)
    rate_t0 = t0 - 0.5 / fps
    gaps_ms = np.diff(arrival) * 1e3
    frame_gaps_ms = V.frame_interarrival(frames) * 1e3
    rate = V.rate_series(arrival, nbytes, rate_t0)
    full = rate[:-1] if rate.size > 1 else rate  # the last second is partial
    below = int((full < RATE_SHORTFALL * clip.rate_kbps).sum())
    ladder = sorted({*BUFFER_LADDER, spec.buffer_s})
    m.update(
        frames_complete=int(np.isfinite(frames.complete_s).sum()),
        late_frames=int(play.late.sum()), stalls=play.stalls,
        stall_s=round(play.stall_s, 4), longest_stall_s=round(play.longest_stall_s, 4),
        startup_delay_s=round(play.start_s - t0, 4) if np.isfinite(play.start_s) else None,
        jitter_ms={k: round(v * 1e3, 4) for k, v in V.percentiles(jitter).items()},
        interarrival_ms={k: round(v, 4) for k, v in V.percentiles(gaps_ms).items()},
        frame_interarrival_ms={k: round(v, 4) for k, v in V.percentiles(frame_gaps_ms).items()},
        rate_kbps_mean=round(float(full.mean()), 3) if full.size else 0.0,
        seconds=int(full.size), seconds_below_rate=below,
        frac_below_rate=round(below / full.size, 4) if full.size else 0.0,
        by_buffer=[V.playout(frames, d, fps).to_json() for d in ladder],
    )
    if jitter.size:
        m["jitter_ms"]["final"] = round(float(jitter[-1]) * 1e3, 4)
    series = {"rate_kbps": [round(x, 3) for x in rate.tolist()],
              "interarrival_ms_q": [round(x, 4) for x in V.quantiles(gaps_ms)],
              "frame_interarrival_ms_q": [round(x, 4) for x in V.quantiles(frame_gaps_ms)]}
    return m, series


class VideoKind(TrafficKind):
    """A constant-rate video stream (RTP or TCP) with a client playout buffer."""

    name = "video"
    role = "foreground"
    Spec = VideoSpec
    tools = (Tool("ffmpeg", "ffmpeg"), Tool("ffprobe", "ffmpeg"),
             Tool("gst-launch-1.0", "gstreamer1.0-tools"),
             Tool("gst-inspect-1.0", "gstreamer1.0-tools"), Tool("tcpdump", "tcpdump"),
             Tool("ss", "iproute2"))
    ELEMENTS = {"h264parse": "gstreamer1.0-plugins-bad",
                **dict.fromkeys(("qtdemux", "udpsrc", "udpsink", "rtph264pay", "rtph264depay"),
                                "gstreamer1.0-plugins-good")}

    def __init__(self, spec: KindSpec) -> None:
        super().__init__(spec)
        self.clip: VC.Clip | None = None

    @property
    def vspec(self) -> VideoSpec:
        assert isinstance(self.spec, VideoSpec)
        return self.spec

    def check(self) -> None:
        """Programs, GStreamer elements and the x264 encoder (exit 3 naming the package)."""
        super().check()
        wanted = ["qtdemux", "h264parse"] + (["udpsrc", "udpsink", "rtph264pay", "rtph264depay"]
                                             if self.vspec.transport == "rtp" else [])
        for element in wanted:
            res = subprocess.run(["gst-inspect-1.0", "--exists", element], capture_output=True)
            if res.returncode != 0:
                raise EnvironmentProblem(f"GStreamer element {element}", "not installed "
                                         f"(apt-get install {self.ELEMENTS[element]})")
        encoders = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True,
                                  text=True).stdout
        if " libx264 " not in encoders:
            raise EnvironmentProblem("ffmpeg libx264", "encoder missing (apt-get install "
                                                       "ffmpeg, Debian's build has it)")
        if self.vspec.transport == "tcp":
            formats = subprocess.run(["ffmpeg", "-hide_banner", "-formats"],
                                     capture_output=True, text=True).stdout
            if not re.search(r"^ DE rtsp ", formats, re.MULTILINE):
                raise EnvironmentProblem("ffmpeg RTSP", "muxer or demuxer missing (apt-get "
                                                        "install ffmpeg, Debian's build has both)")

    def prepare(self, ctx: PrepareContext) -> None:
        s = self.vspec
        self.clip = VC.make_clip(ctx.cache_dir / "video", s.rate_kbps, s.fps, s.duration_s)

    def check_path(self, path: PathFacts) -> list[str]:
        s = self.vspec
        cap = path.reverse_mbps
        if cap is not None and s.rate_kbps > cap * 1e3:
            return [f"video: the stream's {s.rate_kbps:g} kbit/s is above the bottleneck's "
                    f"{cap:g} Mbit/s (server to client): frames will be late"
                    + (" and lost" if s.transport == "rtp" else "")]
        return []

    def build(self, ctx: RunContext) -> Generator:
        s = self.vspec
        pl = ctx.placement
        if not pl.fg_servers or not pl.fg_clients:
            raise SwellError("video", "needs a foreground client and server in the topology")
        if ctx.duration_s < s.duration_s:
            raise SwellError("video", f"the run's duration ({ctx.duration_s:g} s) is shorter "
                                      f"than the stream ({s.duration_s:g} s)")
        if self.clip is None:
            raise SwellError("video", "the clip was not prepared")
        return VideoGenerator(s, self.clip, pl.fg_servers[0], pl.fg_clients[0], ctx.out_dir)

    def result(self, gen: GenResult | None, window: Window) -> KindResult:
        if gen is None or self.clip is None:
            return KindResult(self.name)
        pcap = gen.files["client_pcap"]
        if not pcap.is_file():
            return KindResult(self.name, problems=["video: no client capture"])
        metrics, series = video_metrics(self.vspec, self.clip, pcap, gen.summary["server_ip"],
                                        gen.summary["client_ip"])
        problems = []
        if gen.summary.get("cut"):
            problems.append("video: the run ended before the stream did (raise duration_s)")
        if metrics["packets"] == 0:
            problems.append("video: no packet of the stream reached the client")
        return KindResult(self.name, metrics, series, problems)

    @classmethod
    def report(cls, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
        from swell.generators.video_report import video_report

        return video_report(groups, out)
