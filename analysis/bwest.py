"""Available-bandwidth estimation: the two probing methods, and the truth to judge them by.

Pure functions on arrays; no I/O except :func:`truth_from_capture`. The probing
itself (paced UDP trains, kernel receive stamps) is done by ``swell-probe``
and driven by :mod:`swell.generators.bwest`.

**SLoPS** (Self-Loading Periodic Streams, Jain and Dovrolis; pathload's
method). A stream of ``K`` packets sent at a constant rate ``R`` leaves the
one-way delays (OWD) flat while ``R`` is below the available bandwidth ``A``
and makes them grow when ``R > A`` (the stream fills the bottleneck queue).
:func:`owd_trend` reduces a stream's OWDs to ``Γ = √K`` group medians and
computes two statistics: PCT, the fraction of consecutive medians that
increase (1 for a steady rise, about 0.5 for noise), and PDT, the end-to-end
rise over the total variation (+1 steady rise, about 0 for noise).
:func:`stream_trend` classifies a stream as increasing (``I``),
non-increasing (``N``) or unclear (``U``) with pathload's thresholds (PCT:
> 0.66 / < 0.54; PDT: > 0.55 / < 0.45; one statistic may be unclear, the two
may not disagree); a stream that lost more than ``loss_increasing`` of its
packets is increasing. :func:`stream_trends` first cleans a stream the way
pathload 1.3 does: it splits the stream where the sender left a gap (it was
descheduled: the queue drains there, whatever the rate), drops packets that
arrived closer than the bottleneck could have spaced them (released late,
back to back, by the receiving side), and classifies each sub-stream long
enough to judge (36 packets) as one entry of the fleet;
:func:`sent_rate` is the rate the stream was actually sent at (pathload's
mean interval without its top 15%). A fleet of streams at one rate gives a verdict
(:func:`fleet_verdict`): ``above`` (R > A) when a fraction ``f`` of its
streams increase, ``below`` when a fraction ``f`` do not, else ``grey``.
:class:`SlopsSearch` is pathload's iterative search: a binary search on
``[Rmin, Rmax]`` that tracks the grey region ``[Gmin, Gmax]`` and stops when
the range is within the resolution ``ω``; the estimate is the range
``[Rmin, Rmax]`` (low, high).

**Chirps** (pathChirp, Ribeiro et al.). A chirp of ``N`` packets with
exponentially shrinking gaps (``Δ_{k+1} = Δ_k / γ``) probes the rates
``R_k = P / Δ_k`` from low to high in one train. :func:`chirp_estimate` is
pathChirp's excursion analysis: an excursion starts at packet ``i`` where the
queuing delay rises (``q_{i+1} > q_i``) and ends at the first ``j`` where it
has fallen back to within ``1/F`` of its peak rise; excursions shorter than
``L`` packets are noise. Inside an excursion that ended, packets whose delay
rises say ``A < R_k`` there (``E_k = R_k``); the last excursion, if it runs to
the chirp's end, started at ``l`` where ``R_l`` first exceeded ``A``; every
other packet gets ``E_k = R_l``. The chirp's estimate is the gap-weighted mean
of the ``E_k``. One deviation, documented in ``docs/bwest.md``: ``A`` lies
between ``R_{l-1}`` and ``R_l``, and pathChirp's ``R_l`` overestimates by up to
the spread factor (20% at γ=1.2) on an idle link, so ``E`` uses the geometric
midpoint ``√(R_{l-1} R_l)``. A chirp whose sender was held up mid-chirp is read
at the rates it actually had (:func:`chirp_reading`: split at the hold, one
discard rule, ``min_span``).

**Truth.** The available bandwidth per 1 s bin at the bottleneck is its
capacity minus the background's bit rate there
(:func:`swell.analysis.metrics.available_bandwidth_truth`), counting IP bytes
(the link engine's rate counts IP total length) and leaving out the probe's
own packets; :func:`truth_over` averages the bins an estimate's probing spans
(overlap-weighted), :func:`error_pct` compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from swell.analysis.metrics import available_bandwidth_truth

Trend = Literal["I", "N", "U"]
Verdict = Literal["above", "below", "grey"]

PCT_HI, PCT_LO = 0.66, 0.54
PDT_HI, PDT_LO = 0.55, 0.45

# --------------------------------------------------------------------------- SLoPS


def owd_trend(owd: np.ndarray) -> tuple[float, float]:
    """(PCT, PDT) of one stream's one-way delays (any unit; at least 4 samples)."""
    d = np.asarray(owd, dtype=float)
    if d.size < 4:
        return math.nan, math.nan
    groups = max(int(math.sqrt(d.size)), 2)
    med = np.array([np.median(g) for g in np.array_split(d, groups)])
    steps = np.diff(med)
    pct = float(np.mean(steps > 0))
    total = float(np.abs(steps).sum())
    pdt = float((med[-1] - med[0]) / total) if total > 0 else 0.0
    return pct, pdt


def _classify(value: float, hi: float, lo: float) -> Trend:
    if math.isnan(value):
        return "U"
    return "I" if value > hi else "N" if value < lo else "U"


def stream_trend(owd: np.ndarray, sent: int | None = None,
                 loss_increasing: float = 0.1) -> Trend:
    """I (increasing), N (non-increasing) or U (unclear) for one stream."""
    d = np.asarray(owd, dtype=float)
    if sent and sent > 0 and 1.0 - d.size / sent > loss_increasing:
        return "I"
    pct, pdt = owd_trend(d)
    a, b = _classify(pct, PCT_HI, PCT_LO), _classify(pdt, PDT_HI, PDT_LO)
    if a == b:
        return a
    if "U" in (a, b):
        return a if b == "U" else b
    return "U"  # the two statistics disagree


SPLIT_MIN_NS = 100_000  # a sender gap this much (or one period) over plan splits a stream
MIN_SUBSTREAM = 36  # pathload's MIN_STREAM_LEN: shorter sub-streams are not judged


def stream_trends(seqs: np.ndarray, tx_ns: np.ndarray, rx_ns: np.ndarray, sent: int,
                  gap_ns: float, min_rx_gap_ns: float, min_len: int = MIN_SUBSTREAM,
                  loss_increasing: float = 0.1) -> list[Trend]:
    """The trends of one stream's usable sub-streams (``[]``: nothing to judge).

    ``seqs``/``tx_ns``/``rx_ns``: the received packets in sequence order with their
    send and receive stamps; ``gap_ns`` the planned period. The stream is split
    where consecutive sends are more than ``max(gap, SPLIT_MIN_NS)`` over plan
    (pathload: ``max(T, 1 ms)``; its sender catches up nothing, and neither does
    swell-probe's, so a split loses no burst). Inside a sub-stream a packet whose
    successor arrived less than ``min_rx_gap_ns`` after it is dropped (pathload's
    receiver-side discard; the bottleneck spaces packets by at least their
    serialisation time). A sub-stream with ``min_len`` usable packets (or all of a
    shorter stream but one) gives one trend. More than ``loss_increasing`` lost:
    ``["I"]``, the stream overflowed the queue.
    """
    seqs = np.asarray(seqs, np.int64)
    if sent <= 0:
        return []
    if 1.0 - seqs.size / sent > loss_increasing:
        return ["I"]
    if seqs.size < 4:
        return []
    tx = np.asarray(tx_ns, np.int64)
    rx = np.asarray(rx_ns, np.int64)
    over = np.diff(tx) - np.diff(seqs) * gap_ns
    cuts = np.flatnonzero(over > max(gap_ns, SPLIT_MIN_NS)) + 1
    need = min(min_len, sent - 1)
    out: list[Trend] = []
    for part in np.split(np.arange(seqs.size), cuts):
        if part.size == 0:
            continue
        keep = np.ones(part.size, bool)
        keep[:-1] = np.diff(rx[part]) >= min_rx_gap_ns
        idx = part[keep]
        if idx.size >= need:
            out.append(stream_trend(rx[idx] - tx[idx]))
    return out


def sent_rate(seqs: np.ndarray, tx_ns: np.ndarray, ip_bytes: int) -> float:
    """The rate (bit/s) a stream was sent at: pathload's mean interval between
    consecutive packets, the longest 15% left out (NaN with fewer than 2 packets)."""
    seqs = np.asarray(seqs, np.int64)
    tx = np.asarray(tx_ns, np.int64)
    ok = np.diff(seqs) == 1
    iv = np.sort(np.diff(tx)[ok].astype(float))
    if iv.size == 0:
        return math.nan
    iv = iv[:iv.size - int(round(iv.size * 0.15))] if iv.size > 2 else iv
    return ip_bytes * 8 / (iv.mean() * 1e-9) if iv.mean() > 0 else math.nan


def fleet_verdict(trends: list[Trend], f: float = 0.7) -> Verdict:
    """``above`` (R > A), ``below`` (R < A) or ``grey`` from a fleet's stream trends."""
    usable = [t for t in trends if t != "U"]
    if not usable or len(usable) < len(trends) / 2:
        return "grey"
    inc = sum(t == "I" for t in usable) / len(usable)
    if inc >= f:
        return "above"
    if 1.0 - inc >= f:
        return "below"
    return "grey"


@dataclass
class SlopsSearch:
    """pathload's iterative search for the range ``[Rmin, Rmax]`` holding A (bit/s)."""

    rmin: float
    rmax: float
    resolution: float
    gmin: float = math.inf
    gmax: float = -math.inf
    rates: list[tuple[float, Verdict]] = field(default_factory=list)

    def next_rate(self) -> float | None:
        """The next probing rate, or None when the search is done."""
        if self.done():
            return None
        if self.gmax < self.gmin:  # no grey region yet: bisect
            return (self.rmin + self.rmax) / 2
        if self.rmax - self.gmax > self.resolution:
            return (self.rmax + self.gmax) / 2
        if self.gmin - self.rmin > self.resolution:
            return (self.gmin + self.rmin) / 2
        return None

    def done(self) -> bool:
        if self.rmax - self.rmin <= self.resolution:
            return True
        return (self.gmax >= self.gmin and self.rmax - self.gmax <= self.resolution
                and self.gmin - self.rmin <= self.resolution)

    def update(self, rate: float, verdict: Verdict) -> None:
        self.rates.append((rate, verdict))
        if verdict == "above":
            self.rmax = min(self.rmax, rate)
            if self.gmax >= rate:  # the grey region cannot reach above a rate that is above A
                self.gmax = rate
        elif verdict == "below":
            self.rmin = max(self.rmin, rate)
            if self.gmin <= rate:
                self.gmin = rate
        else:
            self.gmin = min(self.gmin, rate)
            self.gmax = max(self.gmax, rate)

    def range(self) -> tuple[float, float]:
        return self.rmin, self.rmax


def slops_packet_size(rate_bps: float, period_s: float = 100e-6, lo: int = 200,
                      hi: int = 1500) -> int:
    """IP bytes per packet of a stream at ``rate_bps``: a period of at least ``period_s``."""
    return int(min(max(rate_bps * period_s / 8, lo), hi))


# --------------------------------------------------------------------------- chirps


def chirp_gaps(low_bps: float, high_bps: float, ip_bytes: int, gamma: float,
               offset: float = 0.0) -> np.ndarray:
    """Gaps (ns) of a chirp from ``low_bps`` up to ``high_bps`` with spread ``gamma``.

    ``offset`` in [0, 1) shifts the rate grid by that fraction of one step (a
    random offset per chirp keeps the grid from lining up with a fixed A).
    """
    steps = int(math.floor(math.log(high_bps / low_bps) / math.log(gamma) - offset)) + 1
    rates = low_bps * gamma ** (np.arange(max(steps, 2)) + offset)
    return np.round(ip_bytes * 8 / rates * 1e9).astype(np.int64)


def excursions(q: np.ndarray, decrease: float = 1.5, busy: int = 5,
               noise: np.ndarray | float = 0.0, onset: np.ndarray | float = 0.0
               ) -> tuple[list[tuple[int, int]], int | None]:
    """Excursions of a chirp's queuing delays: (start, end) pairs that ended, and the
    start of the last one if it runs to the end of the chirp (else None).

    An excursion also ends when three packets after its start the delay has not risen
    beyond ``noise``, so a start on a low stamp-noise sample does not run on into the
    real queue build-up (a real one grows faster once the rates pass A). The last
    excursion starts at its last packet ``k`` still within ``onset[k]`` of its first
    (a scalar or one value per packet): a rise of a few µs of stamp noise just before
    the build-up does not move the start back."""
    n = len(q)
    on = np.broadcast_to(np.asarray(onset, float), (n,))
    floor = np.broadcast_to(np.asarray(noise, float), (n,))
    done: list[tuple[int, int]] = []
    i = 0
    while i < n - 1:
        if q[i + 1] <= q[i]:
            i += 1
            continue
        peak = 0.0
        j = i + 1
        while j < n:
            peak = max(peak, q[j] - q[i])
            if q[j] - q[i] < peak / decrease or (j - i >= 3 and peak <= floor[i]):
                break
            j += 1
        if j >= n:  # runs to the end of the chirp
            k = i
            while k + 1 < n and q[k + 1] - q[i] <= on[k]:
                k += 1
            return done, k
        if j - i >= busy:
            done.append((i, j))
        i = j
    return done, None


BREAK_RATIO, BREAK_NS = 1.15, 2000  # a send gap this much over its predecessor is a break


def chirp_breaks(tx_ns: np.ndarray) -> np.ndarray:
    """Pair indices ``k`` (packets k, k+1) where the sender was held up mid-chirp.

    A chirp's gaps shrink; a gap more than ``BREAK_RATIO`` times its predecessor
    plus ``BREAK_NS`` is where swell-probe's sender was descheduled and re-anchored
    the rest of the chirp (one long gap, then the planned gaps again)."""
    g = np.diff(np.asarray(tx_ns, np.int64)).astype(float)
    if g.size < 2:
        return np.empty(0, np.int64)
    return np.flatnonzero(g[1:] > BREAK_RATIO * g[:-1] + BREAK_NS) + 1


@dataclass(frozen=True)
class ChirpReading:
    """One chirp's analysis: the estimate (bit/s; NaN when unusable), the rates (bit/s)
    that bracket the crossing (``lo`` NaN when it lies below the first rate, both
    NaN when no excursion ran to the end), the number of breaks, and why unusable."""

    estimate: float
    lo: float
    hi: float
    breaks: int
    reason: str = ""


def chirp_reading(tx_ns: np.ndarray, rx_ns: np.ndarray, ip_bytes: int,
                  decrease: float = 1.5, busy: int = 5, noise_ns: float = 10_000,
                  onset: float = 0.01, min_span: float = 2.0, noise_gap: float = 0.0,
                  noise_max_ns: float = 50_000) -> ChirpReading:
    """pathChirp's excursion analysis at the rates the chirp actually had.

    The stamps' noise floor (the rise that three packets on must be exceeded for an
    excursion to go on) is ``noise_ns``, or ``noise_gap`` times the gap after the
    excursion's first packet where that is larger, up to ``noise_max_ns``: a link
    engine that sleeps through the long gaps of a chirp's slow part wakes up to
    tens of µs late, and a plateau of that lateness once ran on into the build-up
    at the chirp's end (idle 20 Mbit/s chirps of 6-15, docs/bwest.md).

    The rates come from the actual send stamps. Where the sender was held up
    (:func:`chirp_breaks`) the chirp is split: each part is analysed alone (the
    queue may drain during the break) and the break's own gap is left out of the
    weights (the chirp did not probe a rate there). The crossing (the start ``l`` of
    the last excursion, running to the chirp's end) is taken from the last part that
    sees the delay start to build inside it; a part whose delay builds from its very
    first packet after a part that ended without a build-up puts the crossing inside
    the break, bracketed by the rates on either side of it. An earlier part's
    excursion cut by a break counts as ended (the queue drained there).

    The one discard: a crossing in a part after a break must lie at least
    ``min_span`` (a rate ratio) above that part's first rate, else the chirp is
    unusable (NaN, with the reason). A part that starts near or above the
    available bandwidth cannot show where the queue starts to build (in an ideal
    FIFO under CBR at half the capacity, such chirps read +5% with one hold and
    +11% with two; ``min_span`` 2 brings both within 2.5%, docs/bwest.md). A chirp
    without breaks is analysed exactly as before."""
    tx = np.asarray(tx_ns, dtype=np.int64)
    rx = np.asarray(rx_ns, dtype=np.int64)
    n = tx.size
    if n < 3:
        return ChirpReading(math.nan, math.nan, math.nan, 0, "fewer than 3 packets")
    gaps = np.diff(tx).astype(float)
    gaps[gaps <= 0] = 1.0
    rates = ip_bytes * 8 / (gaps * 1e-9)  # R_k: the rate packet k+1 was sent at
    q = (rx - tx).astype(float)
    q -= q.min()
    breaks = chirp_breaks(tx)
    weights = gaps.copy()
    weights[breaks] = 0.0
    bounds = np.concatenate([[0], breaks + 1, [n]])  # packet ranges [a, b) of the parts
    rising = np.zeros(n - 1, bool)
    cross: tuple[int, float, float, int] | None = None  # (l, lo, hi, start of its part)
    prev_end_rate = math.nan
    cross_end = n
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        if b - a < 3:  # too short to read; its pairs take the chirp's E
            continue
        seg_q = q[a:b]
        seg_gaps = np.append(gaps[a:b - 1], 0.0)
        floor = np.maximum(noise_ns, np.minimum(noise_gap * seg_gaps, noise_max_ns))
        ended, last = excursions(seg_q, decrease, busy, floor, onset * seg_gaps)
        for i, j in ended:
            for k in range(i, min(j, b - a - 1)):
                if seg_q[k + 1] > seg_q[k]:
                    rising[a + k] = True
        new: tuple[int, float, float, int] | None
        if last is None:
            new = None  # the rates up to the part's end did not build a queue
        elif last >= b - a - 1:
            new = (a + last, rates[b - 2], rates[b - 2], a)
        elif last > 0:
            new = (a + last, rates[a + last - 1], rates[a + last], a)
        elif cross is None:  # builds from its first packet: A lies in the break
            new = (a, prev_end_rate, rates[a], a)
        else:  # the queue built before the break too: the crossing stays there
            new = cross
        if cross is not None and new is not cross:
            # superseded: the earlier part's excursion ended in the break (the queue
            # drained), so it counts as an ended excursion
            l0, e0 = cross[0], cross_end
            if e0 - l0 >= busy:
                for k in range(l0, e0 - 1):
                    rising[k] |= q[k + 1] > q[k]
        if new is not cross:
            cross_end = b
        cross = new
        prev_end_rate = rates[b - 2]
    if cross is None:
        l_rate, lo, hi, start = rates[-1], math.nan, math.nan, n - 1
    else:
        start, lo, hi, part = cross
        l_rate = math.sqrt(lo * hi) if math.isfinite(lo) else hi
        if part > 0 and min_span > 1 and not rates[part] * min_span <= lo:
            return ChirpReading(math.nan, lo, hi, breaks.size,
                                f"the part after a break that holds the crossing ({lo / 1e6:.1f}"
                                f"-{hi / 1e6:.1f} Mbit/s) starts at {rates[part] / 1e6:.1f}")
    est = np.where(rising, rates, l_rate)
    est[start:] = l_rate
    if weights.sum() <= 0:
        return ChirpReading(math.nan, lo, hi, breaks.size, "no probing gaps")
    return ChirpReading(float((est * weights).sum() / weights.sum()), lo, hi, breaks.size)


def chirp_estimate(tx_ns: np.ndarray, rx_ns: np.ndarray, ip_bytes: int,
                   decrease: float = 1.5, busy: int = 5, noise_ns: float = 10_000,
                   onset: float = 0.01, min_span: float = 2.0, noise_gap: float = 0.0,
                   noise_max_ns: float = 50_000) -> float:
    """Available bandwidth (bit/s) from one chirp's send and receive stamps (no losses).

    Rates come from the actual send stamps, so sender jitter does not bias them
    (:func:`chirp_reading`, which also handles breaks); ``noise_ns`` is the
    stamps' noise floor; a rise smaller than ``onset`` times the gap does not start
    the last excursion (see :func:`excursions`): on a serialiser the first packet
    above A adds ``gap (R/A - 1)``, while stamp noise is a few µs whatever the gap.
    """
    return chirp_reading(tx_ns, rx_ns, ip_bytes, decrease, busy, noise_ns, onset,
                         min_span, noise_gap, noise_max_ns).estimate


# --------------------------------------------------------------------------- truth


@dataclass(frozen=True)
class Truth:
    """Available bandwidth per bin (bit/s) from ``start_s`` (wall clock), bins of ``bin_s``."""

    start_s: float
    bin_s: float
    avail_bps: np.ndarray
    background_bps: np.ndarray


def truth_bins(ts_ns: np.ndarray, ip_bytes: np.ndarray, capacity_bps: float, start_s: float,
               end_s: float, bin_s: float = 1.0) -> Truth:
    """Per-bin truth from the background packets' stamps (ns) and IP sizes at the bottleneck.

    A last partial bin counts if it covers at least half a bin, with its rate over
    its own length (a window of 8.04 s has 8 bins, not a ninth of 40 ms read as a
    whole second of a nearly idle link)."""
    span = end_s - start_s
    nbins = max(int(math.floor(span / bin_s + 0.5)), 1)
    lengths = np.minimum((np.arange(nbins) + 1) * bin_s, max(span, bin_s / 2)) \
        - np.arange(nbins) * bin_s
    t = np.asarray(ts_ns, dtype=np.int64) / 1e9 - start_s
    idx = np.floor(t / bin_s).astype(np.int64)
    keep = (idx >= 0) & (idx < nbins) & (t < span)
    used = np.bincount(idx[keep], weights=np.asarray(ip_bytes, float)[keep], minlength=nbins)
    full = used * bin_s / lengths  # bytes per whole bin at the partial bin's rate
    return Truth(start_s, bin_s, available_bandwidth_truth(full, capacity_bps, bin_s),
                 full * 8.0 / bin_s)


def truth_over(truth: Truth, a_s: float, b_s: float) -> float:
    """Mean available bandwidth over ``[a_s, b_s]`` (wall clock), weighted by bin overlap.

    An instant (a == b) takes its own bin. NaN outside the truth's span.
    """
    n = truth.avail_bps.size
    rel_a, rel_b = a_s - truth.start_s, b_s - truth.start_s
    if rel_b - rel_a < 1e-9:
        k = int(math.floor(rel_a / truth.bin_s))
        return float(truth.avail_bps[k]) if 0 <= k < n else math.nan
    edges = np.arange(n + 1) * truth.bin_s
    overlap = np.clip(np.minimum(edges[1:], rel_b) - np.maximum(edges[:-1], rel_a), 0, None)
    if overlap.sum() <= 0:
        return math.nan
    return float((truth.avail_bps * overlap).sum() / overlap.sum())


def error_pct(estimate: float, truth: float) -> float:
    """``100 (estimate - truth) / truth`` (NaN when the truth is 0 or unknown)."""
    if not truth or math.isnan(truth) or math.isnan(estimate):
        return math.nan
    return 100.0 * (estimate - truth) / truth


def truth_from_capture(pcap: Path, exclude_ips: list[str], capacity_bps: float,
                       start_s: float, end_s: float, bin_s: float = 1.0) -> Truth:
    """The truth from one bottleneck direction's capture, leaving out ``exclude_ips``'
    packets (the probe's hosts)."""
    from swell.analysis.bottleneck import touches_hosts
    from swell.analysis.timeseries import load_packets

    p = load_packets(pcap, size_field="ip_len")
    bg = ~touches_hosts(p, exclude_ips) if exclude_ips else np.ones(len(p), bool)
    return truth_bins(p.ts_ns[bg], p.size[bg], capacity_bps, start_s, end_s, bin_s)


def summarize(values: list[float]) -> dict[str, float | None]:
    """Mean and sample sd of the finite values (None when there are none)."""
    v = np.array([x for x in values if x is not None and math.isfinite(x)], float)
    if v.size == 0:
        return {"mean": None, "sd": None, "n": 0}
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "n": int(v.size)}
