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
* **TCP, RTSP-interleaved** (RFC 2326 section 10.12): the client runs ffmpeg's
  RTSP receiver (``-rtsp_flags listen``, bound to its address); at the server
  the GStreamer pacer writes the frames into a FIFO at their media times and
  ffmpeg reads them (as they come, no ``-re``) and records them to the client
  (OPTIONS, ANNOUNCE with the SDP, SETUP ``RTP/AVP/TCP;interleaved=0-1``,
  RECORD, then RTP packets behind ``$``, channel, length headers, TEARDOWN).
  A live stream over TCP: never ahead of real time, TCP retransmits what the
  link loses, and a sender blocked by a full window catches up in a burst.
  The receiver writes the depacketized stream to a file, byte-identical to the
  clip on a clean link (the tests check it). Not a progressive HTTP download
  from Apache, which would send the whole file as fast as TCP allows and turn
  every playout question into one of bulk throughput.

The client's own capture (``tcpdump`` in its place, kernel stamps) is what
the metrics come from: :func:`read_udp` parses RTP headers out of its UDP
datagrams; :func:`read_tcp_stream` reassembles the RTSP connection's bytes
(retransmissions and reordering handled, full snap length) and
:func:`interleaved_rtp` reads the RTP packets out of them, each stamped with
the time its last byte was in order.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swell.analysis import video as V
from swell.errors import EnvironmentProblem, SwellError
from swell.fsutil import atomic_path
from swell.inet import hostport

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


def rtsp_url(client: str, port: int) -> str:
    """The URL the RTSP receiver listens on and the sender records to."""
    return f"rtsp://{hostport(client, port)}/live"


def pacer_argv(clip: Path, fifo: Path) -> list[str]:
    """GStreamer writing the clip's frames into ``fifo`` at their media times (unbuffered)."""
    return ["gst-launch-1.0", "-q", *_paced(clip), "!", "filesink", f"location={fifo}",
            "buffer-mode=unbuffered", "sync=true"]


def rtsp_sender_argv(fifo: Path, fps: float, client: str, port: int) -> list[str]:
    """ffmpeg reading the paced frames from ``fifo`` and recording them to the client's
    RTSP receiver (ANNOUNCE, SETUP with ``RTP/AVP/TCP;interleaved``, RECORD): RTP
    packets inside the RTSP connection, each behind a ``$``, channel, length header.

    The input is read as it comes (no ``-re``: its 10 ms polling would bunch frames);
    a frame leaves once the parser sees the next one start, a constant one-frame lag.
    """
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin",
            "-fflags", "+genpts", "-framerate", f"{fps:g}", "-probesize", "32",
            "-analyzeduration", "0", "-f", "h264", "-i", str(fifo), "-c", "copy",
            "-f", "rtsp", "-rtsp_transport", "tcp", rtsp_url(client, port)]


def rtsp_receiver_argv(client: str, port: int, out: Path) -> list[str]:
    """ffmpeg listening on ``client:port`` for an RTSP RECORD over TCP, the stream to ``out``."""
    return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
            "-rtsp_flags", "listen", "-rtsp_transport", "tcp", "-i", rtsp_url(client, port),
            "-c", "copy", "-f", "h264", str(out)]


def listening_argv(proto: str, address: str, port: int) -> list[str]:
    """ss listing a socket bound to ``address:port`` (a readiness probe, no connection)."""
    flag = "-Hltn" if proto == "tcp" else "-Hlun"
    return ["ss", flag, f"src {hostport(address, port)}"]


# --- the client's capture -------------------------------------------------------------------

# link header bytes: Ethernet, raw IP, Linux SLL, raw IPv4, raw IPv6, SLL2
_LINK_HEADER = {1: 14, 101: 0, 113: 16, 228: 0, 229: 0, 276: 20}
_PCAP_FORMATS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
                 b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}


@dataclass(frozen=True)
class IpPacket:
    time_s: float
    proto: int
    src: bytes
    dst: bytes
    payload: bytes  # the transport header and its payload (IP padding cut off)
    cut: bool  # the capture's snap length cut the packet short


def ip_packets(pcap: Path) -> Iterator[IpPacket]:
    """The IP packets of a pcap (any byte order, ns or us stamps, common link types).

    IPv6: the transport header right after the fixed header (the senders add no
    extension headers).
    """
    data = pcap.read_bytes()
    if len(data) < 24:
        raise SwellError(pcap, "capture is empty or cut")
    if data[:4] not in _PCAP_FORMATS:
        raise SwellError(pcap, "not a pcap file (pcapng is not read here)")
    endian, unit = _PCAP_FORMATS[data[:4]]
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    if linktype not in _LINK_HEADER:
        raise SwellError(pcap, f"link type {linktype} is not read here")
    rec = struct.Struct(endian + "IIII")
    off = 24
    while off + 16 <= len(data):
        sec, frac, caplen, _ = rec.unpack_from(data, off)
        ip = data[off + 16 + _LINK_HEADER[linktype]:off + 16 + caplen]
        off += 16 + caplen
        if len(ip) >= 40 and ip[0] >> 4 == 6:
            end = 40 + struct.unpack("!H", ip[4:6])[0]
            yield IpPacket(sec + frac * unit, ip[6], ip[8:24], ip[24:40], ip[40:end],
                           len(ip) < end)
        elif len(ip) >= 20 and ip[0] >> 4 == 4:
            ihl, end = (ip[0] & 0x0F) * 4, struct.unpack("!H", ip[2:4])[0]
            yield IpPacket(sec + frac * unit, ip[9], ip[12:16], ip[16:20], ip[ihl:end],
                           len(ip) < end)


@dataclass(frozen=True)
class RtpPackets:
    arrival_s: np.ndarray
    seq: np.ndarray
    rtp_ts: np.ndarray
    marker: np.ndarray
    payload: np.ndarray  # RTP payload bytes (packet - 12)
    ssrc: int


def rtp_packets(rows: list[tuple[float, bytes, int]]) -> RtpPackets:
    """RTP headers of ``(arrival, packet or its first bytes, packet length)`` rows; the
    most frequent SSRC is the stream."""
    parsed = []
    for t, rtp, size in rows:
        if len(rtp) < 12 or rtp[0] >> 6 != 2 or 200 <= rtp[1] <= 204:  # not RTP, or RTCP
            continue
        seq, ts, ssrc = struct.unpack("!HII", rtp[2:12])
        parsed.append((t, seq, ts, rtp[1] >> 7, size - 12, ssrc))
    if not parsed:
        return RtpPackets(*(np.zeros(0) for _ in range(5)), ssrc=0)
    a = np.array(parsed, dtype=np.float64)
    ids, counts = np.unique(a[:, 5], return_counts=True)
    ssrc = int(ids[counts.argmax()])  # any stray packet to the port is left out
    a = a[a[:, 5] == ssrc]
    return RtpPackets(a[:, 0], a[:, 1].astype(np.int64), a[:, 2].astype(np.int64),
                      a[:, 3].astype(bool), a[:, 4], ssrc)


def read_udp(pcap: Path, dst: str, dport: int) -> RtpPackets:
    """RTP packets in the UDP datagrams to ``dst:dport`` in a capture (headers are enough:
    a packet's length is the UDP header's)."""
    want = ipaddress.ip_address(dst).packed
    rows = [(p.time_s, p.payload[8:], struct.unpack("!H", p.payload[4:6])[0] - 8)
            for p in ip_packets(pcap) if p.proto == 17 and p.dst == want
            and len(p.payload) >= 8 and struct.unpack("!H", p.payload[2:4])[0] == dport]
    return rtp_packets(rows)


@dataclass(frozen=True)
class TcpStream:
    """One direction of a TCP connection from a capture, reassembled."""

    arrival_s: np.ndarray  # data segments, in capture order
    offset: np.ndarray  # stream offset of each segment's first payload byte (0 = first byte)
    length: np.ndarray
    data: bytes  # the in-order bytes (up to the first hole)
    front_s: np.ndarray  # times at which the in-order stream grew ...
    front: np.ndarray  # ... and its length then

    @property
    def retransmitted(self) -> int:
        """Segments carrying bytes at or below the highest byte seen before them."""
        ends = self.offset + self.length
        seen = np.maximum.accumulate(np.r_[0, ends[:-1]]) if ends.size else ends
        return int((self.offset < seen).sum())

    def time_of(self, end: int) -> float:
        """When the in-order stream first held ``end`` bytes (NaN: never)."""
        k = int(np.searchsorted(self.front, end, side="left"))
        return float(self.front_s[k]) if k < self.front.size else float("nan")


def read_tcp_stream(pcap: Path, src: str, dst: str, dport: int) -> TcpStream:
    """The bytes ``src`` sent to ``dst:dport`` (the first connection's SYN sets the origin)."""
    s, d = ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed
    segs: list[tuple[float, int, bytes]] = []
    isn: int | None = None
    for p in ip_packets(pcap):
        tcp = p.payload
        if p.proto != 6 or p.src != s or p.dst != d or len(tcp) < 20 \
                or struct.unpack("!H", tcp[2:4])[0] != dport:
            continue
        if p.cut:
            raise SwellError(pcap, "a segment of the stream was cut by the snap length")
        seq = struct.unpack("!I", tcp[4:8])[0]
        if tcp[13] & 0x02:  # SYN
            isn = seq if isn is None else isn
            continue
        body = tcp[(tcp[12] >> 4) * 4:]
        if isn is not None and body:
            segs.append((p.time_s, (seq - isn - 1) % (1 << 32), body))
    if isn is None:
        raise SwellError(pcap, f"no TCP connection from {src} to {dst} port {dport} "
                               "in the client capture")
    t = np.array([x[0] for x in segs], float)
    off = np.array([x[1] for x in segs], np.int64)
    ln = np.array([len(x[2]) for x in segs], np.int64)
    front_s, front = V.inorder_frontier(t, off, ln)
    buf = bytearray(int(front[-1]) if front.size else 0)
    for _, a, body in segs:
        if a < len(buf):
            buf[a:a + len(body)] = body[:len(buf) - a]
    return TcpStream(t, off, ln, bytes(buf), front_s, front)


def interleaved_rtp(stream: TcpStream) -> tuple[RtpPackets, int]:
    """RTP packets of an RTSP connection carrying them interleaved (RFC 2326 10.12).

    The bytes are RTSP messages (headers, then a body of Content-Length bytes)
    and ``$``, channel, 16-bit length frames; the RTP channel is the first of
    the ``interleaved=`` pair the SETUP request named (0 when none is seen). A
    packet arrives when its last byte is in order at the client (what the
    receiving application can read). Returns the packets and the RTSP messages seen.
    """
    data, pos, channel, messages = stream.data, 0, 0, 0
    rows: list[tuple[float, bytes, int]] = []
    while pos < len(data):
        if data[pos] == 0x24:  # '$'
            if pos + 4 > len(data):
                break
            ch, size = data[pos + 1], struct.unpack("!H", data[pos + 2:pos + 4])[0]
            end = pos + 4 + size
            if end > len(data):
                break  # cut inside the last packet
            if ch == channel:
                rows.append((stream.time_of(end), data[pos + 4:end], size))
            pos = end
            continue
        head_end = data.find(b"\r\n\r\n", pos)
        if head_end < 0:
            break
        head = data[pos:head_end].decode("latin-1")
        m = _INTERLEAVED.search(head)
        if m is not None and head.startswith("SETUP"):
            channel = int(m.group(1))
        length = _CONTENT_LENGTH.search(head)
        pos = head_end + 4 + (int(length.group(1)) if length else 0)
        messages += 1
    return rtp_packets(rows), messages


_INTERLEAVED = re.compile(r"interleaved=(\d+)", re.IGNORECASE)
_CONTENT_LENGTH = re.compile(r"^content-length:\s*(\d+)", re.IGNORECASE | re.MULTILINE)
