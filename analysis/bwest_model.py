"""An ideal FIFO serialiser with a background, to see what a probing method reads by itself.

The chirp method's reading under a background depends on the method, not only
on the engine that carries it: :func:`fifo_chirp_estimates` pushes chirps
through an ideal FIFO of capacity ``C`` (each packet served in ``size/C`` in
arrival order, no stamp noise, no sender jitter) that also carries a
background of fixed-size packets, either periodic (CBR, random phase per
chirp) or Poisson, and returns what :func:`swell.analysis.bwest.chirp_estimate`
reads from each chirp. The integration test compares swell's reading on
swell-link with this model; ``bench/bwest_chirp_params.py`` sweeps pathChirp's
parameters through it (docs/bwest.md, "chirp under CBR").

``bg_late`` reproduces what the bottleneck captures of swell-link showed under
CBR on a 2-core host (docs/bwest.md, "Why the chirp read CBR 10% high"):
background packets sent during a chirp's dense end reached the link after
probe packets sent later, and a link that serves each packet from
``max(its send time, the end of the packet before it in arrival order)``
queued them behind those probe packets. The chirp then reads the link it
measured, one with less cross traffic in front of its packets.
"""

from __future__ import annotations

import numpy as np

from swell.analysis import bwest as est


def fifo_chirp_estimates(cap_bps: float, bg_bps: float, bg_bytes: int, n: int = 200, *,
                         packet_bytes: int = 1000, spread: float = 1.1,
                         decrease: float = 1.5, busy: int = 5, noise_us: float = 10.0,
                         onset: float = 0.01, lo_frac: float = 0.1, hi_frac: float = 1.5,
                         poisson: bool = False, seed: int = 0, holds: int = 0,
                         hold_us: tuple[float, float] = (100.0, 3000.0),
                         min_span: float = 2.0, noise_gap: float = 0.0,
                         noise_max_us: float = 50.0,
                         bg_late: tuple[float, float, float] | None = None) -> np.ndarray:
    """``n`` single-chirp estimates (bit/s) through an ideal FIFO (see the module doc).

    ``holds``: the sender is held up before that many random packets of each chirp
    (uniformly ``hold_us`` µs); the rest of the chirp keeps its planned gaps. The
    chirps, their grid offsets and the background's phase are drawn the same with
    or without holds.

    ``bg_late`` ``(share, mean_us, window_ms)``: each background packet sent in the
    last ``window_ms`` before the chirp's last packet reaches the link late with
    probability ``share``, by an exponential delay of mean ``mean_us``, and is served
    from ``max(its send time, the link's end of service)`` in arrival order."""
    rng = np.random.default_rng(seed)
    serve = 8e9 / cap_bps  # ns per byte
    period = bg_bytes * 8 / bg_bps * 1e9 if bg_bps > 0 else np.inf
    out = np.empty(n)
    for c in range(n):
        gaps = est.chirp_gaps(lo_frac * cap_bps, hi_frac * cap_bps, packet_bytes, spread,
                              float(rng.random()))
        tx = np.concatenate([[0.0], np.cumsum(gaps)]) + 20e6
        hrng = np.random.default_rng([seed, c, 1])
        for k in hrng.choice(np.arange(1, tx.size), size=min(holds, tx.size - 1),
                             replace=False):
            tx[k:] += hrng.uniform(*hold_us) * 1e3
        end = tx[-1] + 1e6
        if not np.isfinite(period):
            bg = np.empty(0)
        elif poisson:
            k = int(end / period * 1.5) + 20
            bg = np.cumsum(rng.exponential(period, k))
            bg = bg[bg < end]
        else:
            bg = np.arange(rng.random() * period, end, period)
        arrive = bg.copy()
        if bg_late is not None:
            share, mean_us, window_ms = bg_late
            lrng = np.random.default_rng([seed, c, 2])
            late = (bg > tx[-1] - window_ms * 1e6) & (bg < tx[-1]) \
                & (lrng.random(bg.size) < share)
            arrive[late] += lrng.exponential(mean_us * 1e3, int(late.sum()))
        times = np.concatenate([tx, arrive])
        stamps = np.concatenate([tx, bg])
        sizes = np.concatenate([np.full(tx.size, packet_bytes), np.full(bg.size, bg_bytes)])
        which = np.concatenate([np.arange(tx.size), np.full(bg.size, -1)])
        order = np.argsort(times, kind="stable")
        free, rx = 0.0, np.zeros(tx.size)
        for t, size, k in zip(stamps[order], sizes[order], which[order], strict=True):
            free = max(t, free) + size * serve
            if k >= 0:
                rx[k] = free
        out[c] = est.chirp_estimate(tx.astype(np.int64), rx.astype(np.int64), packet_bytes,
                                    decrease, busy, noise_us * 1e3, onset, min_span,
                                    noise_gap, noise_max_us * 1e3)
    return out
