"""What a viewer of a video stream would see, from packet arrivals at the client.

Pure functions over arrays (no files, no processes): the video traffic kind
(:mod:`swell.generators.video`) reads the client's capture and hands the
columns here. Times are seconds (any common origin), sizes bytes.

Frames are rebuilt from RTP packets (:func:`rtp_frames`), whichever way they
came: packets of one frame share an RTP timestamp and the last one carries
the marker bit; a frame is complete when its marker packet and every sequence
number between the previous frame's marker and its own arrived. Its completion
time is the arrival of its last packet. A frame missing a packet never
completes (H.264 cannot show it; its references are not followed further).
Over UDP a packet arrives with its datagram; over RTSP-interleaved TCP when
its last byte is in order at the client (:func:`inorder_frontier` gives when
the in-order byte stream grew).

Playout (:func:`playout`): playback starts when the first frame completes
plus a buffer of ``D`` seconds; frame *i* is due at ``start + D + (m_i -
m_0)`` (``m`` its media time) and is *late* when it completes after that or
never. A run of consecutive late frames is a *stall* (the picture freezes for
the run's length in media time): fixed deadlines, no re-buffering, so late
frames can only fall as ``D`` grows.

Also: RFC 3550 interarrival jitter (:func:`rfc3550_jitter`), loss from RTP
sequence numbers (:func:`rtp_loss`), received rate per second
(:func:`rate_series`) and inter-arrival quantiles for CDFs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

QUANTILES = np.linspace(0.0, 1.0, 201)
DUE_SLACK_S = 1e-6  # rounding of stamps and deadlines, far below a frame time


@dataclass(frozen=True)
class Frames:
    """One row per frame of the stream, in media order."""

    media_s: np.ndarray  # media time from the first frame (s)
    complete_s: np.ndarray  # completion time at the client (NaN: never complete)
    nbytes: np.ndarray  # bytes of the frame as received (RTP payload / encoded size)

    @property
    def count(self) -> int:
        return int(self.media_s.size)


def unwrap_seq(seq: np.ndarray, bits: int = 16) -> np.ndarray:
    """Extended sequence numbers (wrap-arounds undone, in arrival order)."""
    s = np.asarray(seq, dtype=np.int64)
    if s.size == 0:
        return s
    mod = 1 << bits
    d = np.diff(s)
    d = (d + mod // 2) % mod - mod // 2  # nearest step, either way
    return np.concatenate(([s[0]], s[0] + np.cumsum(d)))


def unwrap_ts(ts: np.ndarray) -> np.ndarray:
    """RTP timestamps (32 bits) made monotone across wrap-arounds."""
    return unwrap_seq(ts, 32)


def rtp_loss(seq: np.ndarray) -> tuple[int, int]:
    """``(expected, lost)`` as RFC 3550 counts them: highest - lowest + 1 - received."""
    ext = unwrap_seq(seq)
    if ext.size == 0:
        return 0, 0
    expected = int(ext.max() - ext.min() + 1)
    return expected, expected - int(ext.size)


def rfc3550_jitter(arrival_s: np.ndarray, rtp_ts: np.ndarray, clock_hz: float) -> np.ndarray:
    """The running interarrival jitter estimate J (seconds) after each packet.

    RFC 3550 section 6.4.1: ``D = (R_j - R_i) - (S_j - S_i)`` between packets in
    arrival order, ``J += (|D| - J) / 16``. The first packet gives J = 0.
    """
    r = np.asarray(arrival_s, dtype=float)
    s = unwrap_ts(rtp_ts).astype(float) / clock_hz
    out = np.zeros(r.size)
    j = 0.0
    transit = r - s
    for k in range(1, r.size):
        d = abs(transit[k] - transit[k - 1])
        j += (d - j) / 16.0
        out[k] = j
    return out


def rtp_frames(arrival_s: np.ndarray, seq: np.ndarray, rtp_ts: np.ndarray,
               marker: np.ndarray, payload: np.ndarray, clock_hz: float,
               fps: float) -> Frames:
    """Frames from RTP packets (any arrival order; duplicates ignored).

    Frames that never arrived at all are rows too (from the timestamp grid of
    ``clock_hz / fps`` ticks), so every frame of the stream has a row.
    """
    if len(arrival_s) == 0:
        return Frames(np.zeros(0), np.zeros(0), np.zeros(0))
    ext = unwrap_seq(seq)
    ts = unwrap_ts(rtp_ts)
    order = np.argsort(ext, kind="stable")
    ext, ts, t = ext[order], ts[order], np.asarray(arrival_s, float)[order]
    mk = np.asarray(marker, bool)[order]
    size = np.asarray(payload, float)[order]
    keep = np.ones(ext.size, bool)
    keep[1:] = ext[1:] != ext[:-1]  # duplicates: the first arrival counts
    ext, ts, t, mk, size = ext[keep], ts[keep], t[keep], mk[keep], size[keep]
    tick = clock_hz / fps
    idx = np.rint((ts - ts.min()) / tick).astype(np.int64)
    n = int(idx.max()) + 1
    media = np.arange(n) / fps
    complete = np.full(n, np.nan)
    nbytes = np.zeros(n)
    np.add.at(nbytes, idx, size)
    heads = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    ends = np.r_[heads[1:], idx.size] - 1
    for h, e in zip(heads, ends, strict=True):
        if not mk[e] or ext[e] - ext[h] != e - h:
            continue  # no marker, or a hole inside the frame
        if h > 0 and not _starts_clean(mk[h - 1], int(ext[h] - ext[h - 1] - 1)):
            continue  # the frame's first packet(s) may be lost
        complete[idx[h]] = t[h:e + 1].max()
    return Frames(media, complete, nbytes)


def _starts_clean(prev_marker: bool, gap: int) -> bool:
    """Whether a frame's first packet arrived, from the packet received just before it.

    After the previous frame's marker with no gap, yes; after a previous frame
    without its marker and exactly one packet missing, that packet was the marker,
    so yes; otherwise the missing packets may be this frame's first ones.
    """
    return (prev_marker and gap == 0) or (not prev_marker and gap == 1)


def inorder_frontier(arrival_s: np.ndarray, seq: np.ndarray,
                     length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times and byte offsets at which the in-order received stream grew.

    ``seq`` are stream offsets (0 = first payload byte) of TCP segments in
    arrival order, ``length`` their payload lengths. Retransmissions and
    out-of-order segments are handled: the frontier moves only when the bytes
    just below it have all arrived.
    """
    t = np.asarray(arrival_s, float)
    order = np.argsort(t, kind="stable")
    front = 0
    pending: dict[int, int] = {}  # start -> end of segments above the frontier
    times, offsets = [], []
    for k in order:
        a, ln = int(seq[k]), int(length[k])
        if ln <= 0 or a + ln <= front:
            continue
        pending[a] = max(pending.get(a, a), a + ln)
        moved = False
        while True:
            nxt = [s for s in pending if s <= front]
            if not nxt:
                break
            for s in nxt:
                front = max(front, pending.pop(s))
            moved = True
        if moved:
            times.append(t[k])
            offsets.append(front)
    return np.asarray(times, float), np.asarray(offsets, np.int64)


@dataclass(frozen=True)
class Playout:
    buffer_s: float
    start_s: float  # playback start (first frame complete + buffer)
    late: np.ndarray  # bool per frame
    stalls: int
    stall_s: float
    longest_stall_s: float

    def to_json(self) -> dict[str, Any]:
        return {"buffer_s": self.buffer_s, "late_frames": int(self.late.sum()),
                "stalls": self.stalls, "stall_s": round(self.stall_s, 4),
                "longest_stall_s": round(self.longest_stall_s, 4)}


def playout(frames: Frames, buffer_s: float, fps: float) -> Playout:
    """Late frames and stalls with a playout buffer of ``buffer_s`` seconds."""
    done = np.isfinite(frames.complete_s)
    if not done.any():
        late = np.ones(frames.count, bool)
        return Playout(buffer_s, float("nan"), late, int(frames.count > 0),
                       frames.count / fps, frames.count / fps)
    first = int(np.argmax(done))
    start = float(frames.complete_s[first]) + buffer_s
    due = start + frames.media_s - frames.media_s[first]
    late = ~done | (np.where(done, frames.complete_s, np.inf) > due + DUE_SLACK_S)
    late[:first] = True  # frames before the first complete one are never shown
    runs = run_lengths(late)
    return Playout(buffer_s, start, late, len(runs), float(sum(runs)) / fps,
                   float(max(runs, default=0)) / fps)


def run_lengths(mask: np.ndarray) -> list[int]:
    """Lengths of the runs of True in a boolean array."""
    m = np.r_[False, np.asarray(mask, bool), False].astype(np.int8)
    d = np.diff(m)
    return (np.flatnonzero(d == -1) - np.flatnonzero(d == 1)).tolist()


def rate_series(arrival_s: np.ndarray, nbytes: np.ndarray, t0: float,
                bin_s: float = 1.0) -> np.ndarray:
    """Received rate (kbit/s) per ``bin_s`` from ``t0`` to the last arrival."""
    t = np.asarray(arrival_s, float) - t0
    if t.size == 0:
        return np.zeros(0)
    n = int(np.floor(t.max() / bin_s)) + 1
    b = np.clip((t // bin_s).astype(np.int64), 0, n - 1)
    return np.bincount(b, weights=np.asarray(nbytes, float), minlength=n) * 8e-3 / bin_s


def quantiles(values: np.ndarray) -> list[float]:
    """The values at :data:`QUANTILES` (for CDFs in the report), empty when none."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return np.quantile(v, QUANTILES).tolist() if v.size else []


def percentiles(values: np.ndarray, ps: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {}
    out = {f"p{p}": float(x) for p, x in zip(ps, np.percentile(v, ps), strict=True)}
    out["mean"], out["max"] = float(v.mean()), float(v.max())
    return out


def frame_interarrival(frames: Frames) -> np.ndarray:
    """Gaps between completions of consecutive complete frames (seconds)."""
    c = frames.complete_s[np.isfinite(frames.complete_s)]
    return np.diff(c)
