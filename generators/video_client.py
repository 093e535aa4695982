"""The video stream's tools: the clip, its frame index, the sender, the receiver, the capture.

Everything on the wire is made by real tools from Debian:

* **The clip** (:func:`make_clip`): ``ffmpeg`` encodes a test source
  (``lavfi testsrc2``) with ``libx264`` at a constant bit rate (``nal-hrd=cbr``
  with a decoder buffer of four frames: every second carries the stream rate
  within 1%), ``zerolatency`` (no B-frames: decode order is display order)
  into raw H.264, put into MP4 with a 90 kHz time scale (exact frame times),
  and once through the senders' own GStreamer parser (``qtdemux``,
  ``h264parse``) into the Annex-B bytes they emit; cached by its parameters. ``ffprobe`` gives its
  frame index (byte offset and size of every frame, :func:`frame_index`).
* **Pacing**: GStreamer (``h264parse`` stamps each frame from the stream's
  timing, the sink waits for it on the pipeline clock, ``sync=true``).
  ``ffmpeg -re`` was tried first: it polls every 10 ms, so frames left at
  30/30/40 ms gaps (median 30.5 ms at 30 frame/s, not 33.3 ms).
* **RTP over UDP**: ``rtph264pay`` (RFC 6184, 90 kHz clock, marker bit on a
  frame's last packet) into ``udpsink`` bound to the server's address and
  port; the client receives with ``udpsrc`` bound to its address
  (``rtph264depay`` into a file). No retransmission.
* **TCP**: ``socat`` accepts one connection on the server's address and only
  then starts the paced pipeline, whose bytes (``fdsink``) it writes to the
  socket; the client connects with ``socat`` bound to its own address and
  writes what it reads to a file (byte-identical to the clip: the tests check
  it). A live stream over TCP (the sender never runs ahead of real time; TCP
  retransmits what the link loses, and a sender blocked by a full window
  catches up in a burst) rather than an HTTP download from Apache, which would
  send the whole file as fast as TCP allows and turn every playout question
  into one of bulk throughput.

The client's own capture (``tcpdump`` in its place, kernel stamps) is what
the metrics come from: :func:`read_udp` parses RTP headers out of it (the
trace reader has no payload bytes), :func:`read_tcp` takes the TCP columns
from swell's trace reader.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swell.errors import EnvironmentProblem, SwellError
from swell.fsutil import atomic_path
from swell.inet import hostport, is_v6, url_host

RTP_CLOCK_HZ = 90_000
PAYLOAD_TYPE = 96
PKT_SIZE = 1200  # RTP packet size limit (bytes of UDP payload)
PARSED = "video/x-h264,stream-format=byte-stream,alignment=au"
CAPS = (f"application/x-rtp,media=video,clock-rate={RTP_CLOCK_HZ},encoding-name=H264,"
        f"payload={PAYLOAD_TYPE}")


@dataclass(frozen=True)
class Clip:
    path: Path  # MP4 (90 kHz time scale) the senders read
    stream: Path  # the Annex-B bytes they emit from it (the frame index refers to these)
    frames: int
    fps: float
    pos: np.ndarray  # byte offset of each frame in the file
    size: np.ndarray  # bytes of each frame

    @property
    def bytes(self) -> int:
        return int(self.pos[-1] + self.size[-1]) if self.frames else 0

    @property
    def rate_kbps(self) -> float:
        return self.bytes * 8e-3 / (self.frames / self.fps) if self.frames else 0.0


PACKAGES = {"ffmpeg": "ffmpeg", "ffprobe": "ffmpeg", "gst-launch-1.0": "gstreamer1.0-tools"}


def _run(argv: list[str], what: str, timeout: float = 300.0) -> str:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise EnvironmentProblem(argv[0], f"not installed (apt-get install "
                                          f"{PACKAGES.get(argv[0], argv[0])})") from None
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no message"])[-1]
        raise SwellError(what, f"{argv[0]} failed: {tail}")
    return res.stdout


def encode_argv(out: Path, rate_kbps: float, fps: float, seconds: float,
                size: str = "640x360") -> list[str]:
    """ffmpeg: a test source encoded with libx264 at a constant rate, raw Annex-B."""
    kb = f"{rate_kbps:g}k"
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-f", "lavfi", "-i", f"testsrc2=size={size}:rate={fps:g}",
            "-t", f"{seconds:g}", "-c:v", "libx264", "-preset", "veryfast",
            "-tune", "zerolatency", "-pix_fmt", "yuv420p", "-g", str(max(int(round(2 * fps)), 1)),
            "-b:v", kb, "-minrate", kb, "-maxrate", kb, "-bufsize", f"{4 * rate_kbps / fps:g}k",
            "-x264-params", "nal-hrd=cbr:force-cfr=1", "-f", "h264", str(out)]


def frame_index(path: Path, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Byte offset and size of every frame of a raw H.264 file (ffprobe)."""
    out = _run(["ffprobe", "-v", "error", "-f", "h264", "-show_packets",
                "-show_entries", "packet=pos,size", "-of", "json", str(path)], str(path))
    packets = json.loads(out).get("packets", [])
    if not packets:
        raise SwellError(path, "ffprobe found no frames")
    pos = np.array([int(p["pos"]) for p in packets], np.int64)
    size = np.array([int(p["size"]) for p in packets], np.int64)
    return pos, size


def make_clip(cache: Path, rate_kbps: float, fps: float, seconds: float) -> Clip:
    """The encoded clip for these parameters, made once and cached in ``cache``."""
    key = hashlib.sha256(json.dumps([rate_kbps, fps, seconds, encode_argv(
        Path("x"), rate_kbps, fps, seconds)]).encode()).hexdigest()[:12]
    path = cache / f"clip-{rate_kbps:g}k-{fps:g}fps-{seconds:g}s-{key}.h264"
    if any(c in str(path) for c in " \t\"'\\"):
        raise SwellError(path, "the clip's folder must not contain spaces or quotes "
                               "(the TCP sender's command line carries it)")
    media = path.with_suffix(".mp4")
    if not path.is_file() or not media.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        raw = path.with_suffix(".raw.h264")
        with atomic_path(raw, suffix=".h264") as tmp:
            _run(encode_argv(Path(tmp), rate_kbps, fps, seconds), "video clip")
        # into MP4 with a 90 kHz time scale: exact frame times for the pacing and RTP
        with atomic_path(media, suffix=".mp4") as tmp:
            _run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                  "-framerate", f"{fps:g}", "-f", "h264", "-i", str(raw), "-c", "copy",
                  "-video_track_timescale", str(RTP_CLOCK_HZ), "-f", "mp4", str(tmp)],
                 "video clip")
        raw.unlink()
        # the bytes the senders' parser emits (Annex-B with access unit delimiters):
        # what goes into a TCP stream, so byte offsets match the frame index exactly
        with atomic_path(path, suffix=".h264") as tmp:
            _run(["gst-launch-1.0", "-q", *_paced(media), "!", "filesink", f"location={tmp}"],
                 "video clip")
    pos, size = frame_index(path, fps)
    return Clip(media, path, int(pos.size), fps, pos, size)


# --- command lines --------------------------------------------------------------------------


def _paced(clip: Path) -> list[str]:
    """GStreamer elements reading the clip and releasing each frame at its media time."""
    return ["filesrc", f"location={clip}", "!", "qtdemux", "!", "h264parse", "!", PARSED]


def rtp_sender_argv(clip: Path, fps: float, src: str, dst: str, port: int) -> list[str]:
    """GStreamer sending the clip in real time as RTP/H.264 from ``src:port`` to ``dst:port``."""
    return ["gst-launch-1.0", "-q", *_paced(clip), "!", "rtph264pay", f"pt={PAYLOAD_TYPE}",
            f"mtu={PKT_SIZE}", "!", "udpsink", f"host={dst}", f"port={port}",
            f"bind-address={src}", f"bind-port={port}", "sync=true"]


def rtp_receiver_argv(address: str, port: int, out: Path) -> list[str]:
    """GStreamer receiving RTP/H.264 on ``address:port`` into a file."""
    return ["gst-launch-1.0", "-q", "udpsrc", f"address={address}", f"port={port}",
            f"caps={CAPS}", "!", "rtph264depay", "!", "filesink", f"location={out}"]


def tcp_sender_argv(clip: Path, fps: float, address: str, port: int) -> list[str]:
    """socat accepting one connection on ``address:port``, then the paced clip into it."""
    pipeline = " ".join(["gst-launch-1.0", "-q", *_paced(clip), "!", "fdsink", "fd=1",
                         "sync=true"])
    family = "TCP6" if is_v6(address) else "TCP4"
    return ["socat", "-U", f"{family}-LISTEN:{port},bind={url_host(address)},reuseaddr",
            f'EXEC:"{pipeline}"']


def tcp_receiver_argv(server: str, port: int, client: str, out: Path) -> list[str]:
    """socat connecting from ``client`` to ``server:port``, writing the bytes to ``out``."""
    family = "TCP6" if is_v6(server) else "TCP4"
    return ["socat", "-u", f"{family}:{hostport(server, port)},bind={url_host(client)}",
            f"CREATE:{out}"]


def listening_argv(proto: str, address: str, port: int) -> list[str]:
    """ss listing a socket bound to ``address:port`` (a readiness probe, no connection)."""
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    return ["ss", flag, f"src {hostport(address, port)}"]


# --- the client's capture -------------------------------------------------------------------

_LINK_HEADER = {1: 14, 101: 0, 113: 16, 276: 20}  # Ethernet, raw IP, Linux SLL, SLL2


@dataclass(frozen=True)
class RtpPackets:
    arrival_s: np.ndarray
    seq: np.ndarray
    rtp_ts: np.ndarray
    marker: np.ndarray
    payload: np.ndarray  # RTP payload bytes (UDP payload - 12)
    ssrc: int


def read_udp(pcap: Path, dst: str, dport: int) -> RtpPackets:
    """RTP headers of the UDP packets to ``dst:dport`` in a pcap (any byte order, ns or us)."""
    data = pcap.read_bytes()
    if len(data) < 24:
        raise SwellError(pcap, "capture is empty or cut")
    magic = data[:4]
    formats = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
    if magic not in formats:
        raise SwellError(pcap, "not a pcap file (pcapng is not read here)")
    endian, unit = formats[magic]
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    if linktype not in _LINK_HEADER:
        raise SwellError(pcap, f"link type {linktype} is not read here")
    want = ipaddress.ip_address(dst).packed
    # IPv4: protocol at 9, destination at 16; IPv6: next header at 6, destination at 24
    # (UDP right after the fixed header: the sender adds no extension headers)
    ver, proto_at, dst_at = (6, 6, 24) if len(want) == 16 else (4, 9, 16)
    rec = struct.Struct(endian + "IIII")
    rows: list[tuple[float, int, int, int, int, int]] = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = rec.unpack_from(data, off)
        off += 16
        pkt = data[off:off + caplen]
        off += caplen
        ip = pkt[_LINK_HEADER[linktype]:]
        if (len(ip) < 40 if ver == 6 else len(ip) < 20) or ip[0] >> 4 != ver \
                or ip[proto_at] != 17 or ip[dst_at:dst_at + len(want)] != want:
            continue
        ihl = 40 if ver == 6 else (ip[0] & 0x0F) * 4
        udp = ip[ihl:]
        if len(udp) < 8 + 12 or struct.unpack("!H", udp[2:4])[0] != dport:
            continue
        ulen = struct.unpack("!H", udp[4:6])[0]
        rtp = udp[8:]
        if rtp[0] >> 6 != 2:
            continue
        seq, ts, ssrc = struct.unpack("!HII", rtp[2:12])
        rows.append((sec + frac * unit, seq, ts, rtp[1] >> 7, ulen - 8 - 12, ssrc))
    if not rows:
        return RtpPackets(*(np.zeros(0) for _ in range(5)), ssrc=0)
    a = np.array(rows, dtype=np.float64)
    ids, counts = np.unique(a[:, 5], return_counts=True)
    ssrc = int(ids[counts.argmax()])  # the stream (any stray packet to the port is left out)
    a = a[a[:, 5] == ssrc]
    return RtpPackets(a[:, 0], a[:, 1].astype(np.int64), a[:, 2].astype(np.int64),
                      a[:, 3].astype(bool), a[:, 4], ssrc)


@dataclass(frozen=True)
class TcpSegments:
    arrival_s: np.ndarray
    offset: np.ndarray  # stream offset of the segment's first payload byte
    length: np.ndarray


def read_tcp(pcap: Path, server: str, sport: int) -> TcpSegments:
    """Data segments from ``server:sport`` in the client's capture, with stream offsets."""
    from swell.extract.reader import addr_to_cols, read_all

    ch = read_all(pcap)
    hi, lo = addr_to_cols(server)  # either family
    sel = np.asarray(ch.ipver) == (6 if is_v6(server) else 4)
    sel &= (np.asarray(ch.proto) == 6) & (np.asarray(ch.sport) == sport)
    sel &= (np.asarray(ch.saddr_hi) == hi) & (np.asarray(ch.saddr_lo) == lo)
    ts = np.asarray(ch.ts_ns, np.int64)[sel] / 1e9
    seq = np.asarray(ch.seq, np.int64)[sel]
    flags = np.asarray(ch.tcp_flags)[sel]
    plen = np.asarray(ch.payload_len, np.int64)[sel]
    syn = np.flatnonzero(flags & 0x02)
    if syn.size == 0:
        raise SwellError(pcap, "the stream's TCP handshake is not in the client capture")
    isn = seq[syn[0]]
    rel = (seq - isn - 1) % (1 << 32)
    data = plen > 0
    return TcpSegments(ts[data], rel[data], plen[data])
