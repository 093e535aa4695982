"""The Harpoon model: self-configuration from flow records (Sommers and Barford, IMC 2004).

Input is a :class:`~swell.extract.flows.FlowTable` (any flow source: nfcapd,
NetFlow v5/v9/IPFIX, a pcap through swell's tracker or nfpcapd). The steps
follow the paper's section 3 and Harpoon's ``selfconf`` scripts:

0. **Times screened** (:func:`swell.extract.flows.timecheck.screen`): records
   of bogus exporter clocks (before 1996, in the future) and a single
   exporter's stray timestamps (further than ``max_span_s`` from its median)
   are dropped and counted in the notes; flows that still span more than
   ``max_span_s`` (31 days) are a one-line error. Only TCP and UDP records are
   modelled; the model's clock (interval 0) starts at the first of them, so
   ICMP seen by nfpcapd but not by swell's tracker does not shift the grid.
1. **Flow surgery**: records of the same 5-tuple that follow each other
   within ``coalesce_gap_s`` (end of one to start of the next) and whose first
   part carries no FIN/RST were cut by the exporter's active timeout; they are
   coalesced (bytes and packets added, flags OR-ed, the later end kept).
2. **File sizes** (TCP): ``bytes - 40 * packets`` of every record with a
   start marker (SYN) and an end marker (FIN or RST); records under
   ``min_file_bytes`` (100) are ACK flows or requests and dropped.
3. **Inter-connection times**: per ordered (source, destination) address
   pair, the differences of consecutive start times of SYN records; gaps over
   ``max_ict_s`` (60 s) are dropped (the paper's bound).
4. **Address pools**: how often each address is the client (the file's
   receiver, the requester) and the server (the file's sender) of a file;
   the generator draws from them with these weights (rank-frequency kept).
5. **Byte targets per interval** (``interval_s``, 300 by default): the TCP
   payload (``bytes - 40 * packets``) of *every* TCP record, spread over the
   record's lifetime pro rata; and the UDP bytes likewise.
6. **Active sessions per interval**, the paper's Figure 4: sessions are
   imitated as the generator (:mod:`swell.generators.harpoon`) runs them,
   persistent (:func:`session_bytes`: a session caught running, its next
   connection a stationary residual of the inter-connection times, then one
   connection per drawn inter-connection time, start to start, each fetching
   a drawn file, over one interval); enough of them are imitated once to make
   ``POOL_CONNS`` connections, and sessions drawn from them are added one by
   one until the interval's target is met; ``trials`` (100)
   repetitions, the mean is the model's count. The generator starts that many
   sessions per interval, which therefore offer the target on average plus
   Figure 4's overshoot (the last session added passes the target: under one
   session's bytes, negligible with hundreds of sessions).
7. **UDP sources**: per (client, server, server port), a source with many
   packets per record over more than a second is constant bit rate (its
   rate and datagram size); otherwise it is ping-pong: periodic when the
   starts of its records are evenly spaced (coefficient of variation under
   0.2, NTP-like), else exponential (DNS-like) with the mean spacing. Each
   type has its active sources per interval.

Also kept for checks: the host pairs active per interval counted directly
(a pair is active from its first to its last record, a gap of more than
``interval_s`` splitting it: the paper's "direct" estimate). Saving, loading,
summaries and plots are in :mod:`swell.extract.harpoon_model`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.extract.flows.table import FlowTable, format_addresses
from swell.extract.flows.timecheck import DEFAULT_MAX_SPAN_S, screen

TCP, UDP = 6, 17
FIN, SYN, RST = 1, 2, 4
HEADER_BYTES = 40  # IP + TCP without options, per packet (the paper's estimate)


@dataclass(frozen=True)
class HarpoonParams:
    """The self-configuration's knobs (stored in the model)."""

    interval_s: float = 300.0
    max_ict_s: float = 60.0
    min_file_bytes: int = 100
    coalesce_gap_s: float = 1.0
    trials: int = 100
    seed: int = 1
    max_span_s: float = DEFAULT_MAX_SPAN_S

    def check(self) -> None:
        if not self.interval_s > 0:
            raise SwellError("harpoon", f"interval must be positive, not {self.interval_s}")
        if not self.max_ict_s > 0:
            raise SwellError("harpoon", f"max inter-connection time must be positive, "
                                        f"not {self.max_ict_s}")
        if self.trials < 1:
            raise SwellError("harpoon", "trials must be at least 1")
        if not self.max_span_s > 0:
            raise SwellError("harpoon", f"max span must be positive, not {self.max_span_s}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Fit:
    """What the self-configuration produced (arrays and counts), before it is a model."""

    arrays: dict[str, np.ndarray]
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    t0_ns: int = 0
    duration_s: float = 0.0


# --------------------------------------------------------------------- flow surgery

def _addr_ids(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense ids of (hi, lo) addresses: (ids, unique hi, unique lo)."""
    pair = np.stack([hi, lo], axis=1) if len(hi) else np.zeros((0, 2), dtype=np.uint64)
    uniq, inv = np.unique(pair, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), uniq[:, 0], uniq[:, 1]


def coalesce(t: FlowTable, gap_s: float) -> tuple[dict[str, np.ndarray], int]:
    """Records split by an active timeout joined again; (columns, records merged).

    Columns returned: start_ns, end_ns, src, dst (dense address ids into
    ``hosts_hi/hosts_lo``), sport, dport, proto, flags, packets, bytes.
    """
    c = t.cols
    n = len(t)
    src_hi = np.concatenate([c["src_hi"], c["dst_hi"]])
    src_lo = np.concatenate([c["src_lo"], c["dst_lo"]])
    ids, hosts_hi, hosts_lo = _addr_ids(src_hi, src_lo)
    src, dst = ids[:n], ids[n:]
    key = [c["start_ns"], c["proto"].astype(np.int64), c["dport"].astype(np.int64),
           c["sport"].astype(np.int64), dst, src]
    order = np.lexsort(key)
    cols = {"start_ns": c["start_ns"][order], "end_ns": c["end_ns"][order],
            "src": src[order], "dst": dst[order], "sport": c["sport"][order].astype(np.int64),
            "dport": c["dport"][order].astype(np.int64), "proto": c["proto"][order],
            "flags": c["tcp_flags"][order], "packets": c["packets"][order].astype(np.int64),
            "bytes": c["bytes"][order].astype(np.int64)}
    if n == 0:
        return {**cols, "hosts_hi": hosts_hi, "hosts_lo": hosts_lo}, 0
    same = np.ones(n, dtype=bool)
    same[0] = False
    for k in ("src", "dst", "sport", "dport", "proto"):
        same[1:] &= cols[k][1:] == cols[k][:-1]
    gap_ns = int(gap_s * 1e9)
    closed = (cols["flags"] & (FIN | RST)) != 0
    tcp = cols["proto"] == TCP
    join = np.zeros(n, dtype=bool)
    # the previous record ends within the gap of this one's start and was not closed
    join[1:] = same[1:] & (cols["start_ns"][1:] - cols["end_ns"][:-1] <= gap_ns) & \
        (cols["start_ns"][1:] >= cols["start_ns"][:-1]) & ~(tcp[:-1] & closed[:-1])
    # a new SYN opens a new connection even close to the previous one
    join[1:] &= ~(tcp[1:] & ((cols["flags"][1:] & SYN) != 0))
    group = np.cumsum(~join) - 1
    heads = np.flatnonzero(~join)
    out = {k: cols[k][heads] for k in ("start_ns", "src", "dst", "sport", "dport", "proto")}
    out["end_ns"] = np.maximum.reduceat(cols["end_ns"], heads)
    out["flags"] = np.bitwise_or.reduceat(cols["flags"], heads)
    out["packets"] = np.add.reduceat(cols["packets"], heads)
    out["bytes"] = np.add.reduceat(cols["bytes"], heads)
    del group
    return {**out, "hosts_hi": hosts_hi, "hosts_lo": hosts_lo}, int(join.sum())


def roles(f: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(client id, server id, record goes client -> server) of every record.

    Unidirectional records with OR-ed flags do not say who opened the connection
    (both directions carry a SYN); the client is the side with the higher port
    (the ephemeral one), ties broken by the lower address id.
    """
    sp, dp = f["sport"], f["dport"]
    from_client = (sp > dp) | ((sp == dp) & (f["src"] <= f["dst"]))
    return (np.where(from_client, f["src"], f["dst"]), np.where(from_client, f["dst"], f["src"]),
            from_client)


# --------------------------------------------------------------------- per-interval volumes

def spread(start_s: np.ndarray, end_s: np.ndarray, amount: np.ndarray, edges: np.ndarray
           ) -> np.ndarray:
    """``amount`` of each record spread evenly over [start, end], summed per bin of ``edges``.

    Cumulative amount at an edge e: sum over records of rate * (min(e, end) -
    min(e, start)); computed with sorted starts/ends and prefix sums (O(n log n)).
    Zero-length records count at their start.
    """
    amount = amount.astype(float)
    dur = end_s - start_s
    point = dur <= 1e-6
    out = np.histogram(start_s[point], bins=edges, weights=amount[point])[0].astype(float)
    s, e, a = start_s[~point], end_s[~point], amount[~point]
    if len(s):
        rate = a / (e - s)

        def cum(x: np.ndarray, t: np.ndarray) -> np.ndarray:
            o = np.argsort(x)
            xs, rs = x[o], rate[o]
            c_r, c_rx = np.concatenate([[0], np.cumsum(rs)]), np.concatenate(
                [[0], np.cumsum(rs * xs)])
            k = np.searchsorted(xs, t, side="right")
            return c_r[k] * t - c_rx[k]

        total = cum(s, edges) - cum(e, edges)
        out += np.diff(total)
    return np.maximum(out, 0.0)  # rounding of the prefix sums can leave -1e-9


# --------------------------------------------------------------------- imitating sessions

POOL_CONNS = 200_000  # connections the imitated sessions Figure 4 draws from make, about
POOL_SESSIONS = (4000, 400_000)  # and the fewest and most sessions imitated
FIG4_DIRECT = 5000  # sessions per interval beyond which Figure 4's renewal limit is used


def session_mean(files: np.ndarray, icts: np.ndarray, length: float) -> float:
    """Mean bytes one active session fetches in ``length`` seconds, exactly: a session
    caught running makes ``length / mean gap`` connections on average (a stationary
    renewal process), one when there are no inter-connection times."""
    per = float(np.mean(files))
    if icts.size == 0 or float(icts.max()) <= 0:
        return per
    return per * length / float(np.mean(icts))


def pool_size(icts: np.ndarray, length: float) -> int:
    """Sessions to imitate so that they make about ``POOL_CONNS`` connections (the pool's
    mean then within a fraction of a percent of :func:`session_mean`), to two digits:
    inputs that differ a little (times in ms or in us) imitate the same number."""
    conns = 1.0 if icts.size == 0 or float(icts.max()) <= 0 else length / float(np.mean(icts))
    return int(float(f"{np.clip(POOL_CONNS / max(conns, 1e-9), *POOL_SESSIONS):.2g}"))


def stationary_first(icts: np.ndarray, n: int, rng: np.random.Generator,
                     cum: np.ndarray | None = None) -> np.ndarray:
    """Time to the next connection of ``n`` sessions caught running: a uniform phase of
    an inter-connection time drawn in proportion to its length (the renewal process's
    stationary start; a uniform phase of a plainly drawn gap would start sessions inside
    the short gaps of a bursty session). ``cum``: the gaps' cumulative sums, if at hand."""
    cum = np.cumsum(icts) if cum is None else cum
    k = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], "right"), icts.size - 1)
    return rng.random(n) * icts[k]


def session_bytes(files: np.ndarray, icts: np.ndarray, length: float, n: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Bytes ``n`` active sessions fetch in one interval of ``length`` seconds, as the
    generator runs them: caught running (:func:`stationary_first`), then one connection
    per drawn inter-connection time (start to start), a drawn file each. Without
    inter-connection times a session makes one connection per interval."""
    files = np.asarray(files, dtype=float)
    if icts.size == 0 or float(icts.max()) <= 0:
        return files[rng.integers(0, files.size, n)]
    t = stationary_first(icts, n, rng)
    out = np.zeros(n)
    width = int(min(max(16.0, 1.3 * length / float(icts.mean()) + 16), 1 << 16))
    rows = max(1, (1 << 21) // width)
    live = np.arange(n)  # every session draws its first row, live or not
    while live.size:  # a session's gaps and files are drawn in its own row: a session
        part, live = live[:rows], live[rows:]  # that differs leaves the others as they were
        steps = icts[rng.integers(0, icts.size, (part.size, width))]
        got = files[rng.integers(0, files.size, (part.size, width))]
        times = t[part, None] + np.cumsum(steps, axis=1) - steps
        inside = times < length
        out[part] += (got * inside).sum(axis=1)
        t[part] = times[:, -1] + steps[:, -1]
        live = np.r_[live, part[inside[:, -1]]]
    return out


def sessions_for(targets: np.ndarray, pool: np.ndarray, trials: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Figure 4: per target, sessions (bytes drawn from ``pool``, :func:`session_bytes`)
    added until the target is met; (mean, sd) of the count over ``trials``.

    Every interval's trial ``i`` adds the same sequence of sessions (common random
    numbers): a larger target never gets fewer sessions, and two fits whose targets
    differ a little get counts that differ as little, not by the trials' own noise.
    Beyond ``FIG4_DIRECT`` sessions the renewal limit is used (mean target / m + (1 +
    cv^2) / 2, sd sqrt(cv^2 target / m), m and cv of the pool: the same numbers
    without drawing millions of sessions)."""
    targets = np.asarray(targets, dtype=float)
    means, sds = np.zeros(len(targets)), np.zeros(len(targets))
    mean = float(pool.mean()) if pool.size else 0.0
    if mean <= 0:
        return means, sds
    cv2 = float(pool.var()) / mean**2
    far = targets / mean > FIG4_DIRECT
    means[far] = targets[far] / mean + (1 + cv2) / 2
    sds[far] = np.sqrt(cv2 * targets[far] / mean)
    near = np.flatnonzero(~far & (targets > 0))
    if near.size:
        top, parts, last = float(targets[near].max()), [], np.zeros((trials, 1))
        while last.min() < top:  # blocks of a fixed width: the same draws whatever ``top``
            parts.append(last + np.cumsum(pool[rng.integers(0, pool.size, (trials, 256))],
                                          axis=1))
            last = parts[-1][:, -1:]
        cum = np.hstack(parts)
        counts = np.array([np.searchsorted(row, targets[near]) + 1 for row in cum])
        means[near], sds[near] = counts.mean(axis=0), counts.std(axis=0)
    return means, sds


# --------------------------------------------------------------------- fitting

def _intervals(start_s: np.ndarray, end_s: np.ndarray, interval: float) -> np.ndarray:
    last = float(end_s.max()) if end_s.size else interval
    n = max(1, int(np.ceil(max(last, 1e-9) / interval)))
    return np.arange(n + 1) * interval


def _pair_activity(src: np.ndarray, dst: np.ndarray, s: np.ndarray, e: np.ndarray,
                   edges: np.ndarray, split_s: float) -> np.ndarray:
    """Host pairs active per interval: a pair lives from its first to its last record,
    split where it is idle longer than ``split_s``; counted in every interval it touches."""
    a, b = np.minimum(src, dst), np.maximum(src, dst)
    order = np.lexsort([s, b, a])
    a, b, s, e = a[order], b[order], s[order], e[order]
    key = a * (int(b.max(initial=0)) + 1) + b
    span = float(e.max(initial=0.0)) + 2 * split_s + 1.0
    # running end per pair: offset each pair by a large constant so one accumulate suffices
    pair_no = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    run_end = np.maximum.accumulate(e + pair_no * span) - pair_no * span
    new = np.r_[True, (key[1:] != key[:-1]) | (s[1:] > run_end[:-1] + split_s)]
    heads = np.flatnonzero(new)
    first = s[heads]
    last = np.maximum.reduceat(e, heads)
    lo = np.clip(np.searchsorted(edges, first, side="right") - 1, 0, len(edges) - 2)
    hi = np.clip(np.searchsorted(edges, last, side="right") - 1, 0, len(edges) - 2)
    diff = np.zeros(len(edges))
    np.add.at(diff, lo, 1)
    np.add.at(diff, hi + 1, -1)
    return np.cumsum(diff)[:-1]


def _udp_sources(f: dict[str, np.ndarray], t0: int, edges: np.ndarray, span_s: float
                 ) -> dict[str, np.ndarray]:
    """Classify UDP (client, server, port) groups into CBR / periodic / exponential sources."""
    udp = np.flatnonzero(f["proto"] == UDP)
    out: dict[str, np.ndarray] = {}
    kinds = {"cbr": [], "periodic": [], "exp": []}  # type: dict[str, list[tuple[float, ...]]]
    spans: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
    if udp.size:
        cli_all, srv_all, from_client = roles(f)
        cli, srv, client_is_src = cli_all[udp], srv_all[udp], from_client[udp]
        port = np.where(client_is_src, f["dport"][udp], f["sport"][udp])
        s = (f["start_ns"][udp] - t0) / 1e9
        e = (f["end_ns"][udp] - t0) / 1e9
        pk, by = f["packets"][udp], f["bytes"][udp]
        order = np.lexsort([s, port, srv, cli])
        keys = np.stack([cli, srv, port], axis=1)[order]
        cuts = np.flatnonzero(np.r_[True, (keys[1:] != keys[:-1]).any(axis=1), True])
        for g0, g1 in zip(cuts[:-1], cuts[1:], strict=True):
            idx = order[g0:g1]
            fwd = idx[client_is_src[idx]]
            if fwd.size == 0:
                fwd = idx
            dur = float(e[idx].max() - s[idx].min())
            size = float(by[idx].sum() / max(pk[idx].sum(), 1))
            per_rec = float(np.median(pk[fwd]))
            span = (float(s[idx].min()), float(e[idx].max()))
            if per_rec >= 10 and dur > 1.0:
                kinds["cbr"].append((8.0 * float(by[idx].sum()) / dur, size))
                spans["cbr"].append(span)
                continue
            starts = np.sort(s[fwd])
            gaps = np.diff(starts)
            gaps = gaps[gaps > 0]
            if gaps.size >= 3 and gaps.std() < 0.2 * gaps.mean():
                kinds["periodic"].append((float(np.median(gaps)), size))
                spans["periodic"].append(span)
            else:
                # one record: it did not come back within the data's span
                mean = float(gaps.mean()) if gaps.size else span_s
                kinds["exp"].append((mean, size))
                spans["exp"].append(span)
    for k, rows in kinds.items():
        arr = np.array(rows, dtype=float).reshape(-1, 2)
        out[f"udp/{k}_param"] = arr[:, 0]
        out[f"udp/{k}_size"] = arr[:, 1]
        sp_ = np.array(spans[k], dtype=float).reshape(-1, 2)
        lo = np.clip(np.searchsorted(edges, sp_[:, 0], side="right") - 1, 0, len(edges) - 2)
        hi = np.clip(np.searchsorted(edges, sp_[:, 1], side="right") - 1, 0, len(edges) - 2)
        diff = np.zeros(len(edges))
        np.add.at(diff, lo, 1)
        np.add.at(diff, hi + 1, -1)
        out[f"interval/udp_{k}"] = np.cumsum(diff)[:-1]
    return out


def fit(t: FlowTable, p: HarpoonParams) -> Fit:
    """The Harpoon self-configuration of one flow table (see the module docstring)."""
    p.check()
    if len(t) == 0:
        raise SwellError("harpoon", "no flow records in the input")
    t, times = screen(t, p.max_span_s)
    f, merged = coalesce(t, p.coalesce_gap_s)
    other = int((~np.isin(f["proto"], (TCP, UDP))).sum())
    if other:  # ICMP and the rest are not modelled; nor do they set the clock
        f = {k: (v[np.isin(f["proto"], (TCP, UDP))] if k not in ("hosts_hi", "hosts_lo")
                 else v) for k, v in f.items()}
    if f["start_ns"].size == 0:
        raise SwellError("harpoon", "no TCP or UDP flow records in the input")
    t0 = int(f["start_ns"].min())
    s = (f["start_ns"] - t0) / 1e9
    e = np.maximum((f["end_ns"] - t0) / 1e9, s)
    tcp = f["proto"] == TCP
    payload = np.maximum(f["bytes"] - HEADER_BYTES * f["packets"], 0)
    marked = tcp & ((f["flags"] & SYN) != 0) & ((f["flags"] & (FIN | RST)) != 0)
    is_file = marked & (payload >= p.min_file_bytes)
    if not is_file.any():
        raise SwellError("harpoon", f"no TCP flow with SYN and FIN/RST carrying at least "
                                    f"{p.min_file_bytes} bytes: no file sizes (are TCP flags "
                                    f"exported?)")
    files = np.sort(payload[is_file])  # sorted: the model depends on the flows, not
    # on the order an input format lists them in (the draws index these arrays)
    cli, srv, from_client = roles(f)
    # inter-connection times per (client, server) pair, from the client's SYN records
    syn = np.flatnonzero(tcp & from_client & ((f["flags"] & SYN) != 0))
    o = syn[np.lexsort([s[syn], f["dst"][syn], f["src"][syn]])]
    same = (f["src"][o][1:] == f["src"][o][:-1]) & (f["dst"][o][1:] == f["dst"][o][:-1])
    ict = np.diff(s[o])[same]
    too_long = int((ict > p.max_ict_s).sum())
    ict = np.sort(ict[ict <= p.max_ict_s])
    notes = times.notes()
    if ict.size == 0:
        notes.append("no address pair opened two connections within the inter-connection "
                     "bound: each session makes one connection per interval")
    # pools: the client (requester) and server of each file's connection
    hosts = format_addresses(f["hosts_hi"], f["hosts_lo"])
    arrays: dict[str, np.ndarray] = {"tcp/file_size": files.astype(np.int64),
                                     "tcp/ict_s": ict.astype(float)}
    for side, ids_all in (("client", cli), ("server", srv)):
        ids, cnt = np.unique(ids_all[is_file], return_counts=True)
        rank = np.argsort(-cnt, kind="stable")
        arrays[f"pool/{side}_addr"] = np.array([str(x) for x in hosts[ids[rank]]], dtype=str)
        arrays[f"pool/{side}_weight"] = cnt[rank].astype(float)
    edges = _intervals(s, e, p.interval_s)
    arrays["interval/tcp_bytes"] = spread(s[tcp], e[tcp], payload[tcp], edges)
    arrays["interval/udp_bytes"] = spread(s[~tcp], e[~tcp], f["bytes"][~tcp], edges)
    covered = float(e.max()) - float(edges[-2])
    if 0 < covered < p.interval_s:
        k = p.interval_s / covered
        for key in ("interval/tcp_bytes", "interval/udp_bytes"):
            arrays[key][-1] *= k
        notes.append(f"the data covers {covered:.4g} s of its last {p.interval_s:g} s "
                     f"interval: that interval's byte targets extrapolated (x{k:.3g})")
    arrays["interval/pairs_active"] = _pair_activity(f["src"][tcp], f["dst"][tcp], s[tcp],
                                                     e[tcp], edges, p.interval_s)
    rng = np.random.default_rng(p.seed)
    pool = session_bytes(files, ict, p.interval_s, pool_size(ict, p.interval_s), rng)
    arrays["interval/sessions"], arrays["interval/sessions_sd"] = sessions_for(
        arrays["interval/tcp_bytes"], pool, p.trials, rng)
    arrays.update(_udp_sources(f, t0, edges, float(e.max())))
    counts = {
        "records": len(t), "flows_after_surgery": len(f["start_ns"]), "coalesced": merged,
        "tcp_flows": int(tcp.sum()), "udp_flows": int((f["proto"] == UDP).sum()),
        "other_flows": other, "time_dropped": times.n_dropped,
        "tcp_with_syn_and_fin": int(marked.sum()), "files": int(is_file.sum()),
        "dropped_small": int((marked & ~is_file).sum()),
        "ict_samples": int(ict.size), "ict_over_bound": too_long,
        "intervals": len(edges) - 1,
    }
    return Fit(arrays, counts, notes, t0, float(e.max()))


# --------------------------------------------------------------------- a volume profile

def read_profile(path: str, interval_s: float, day: str | None = None) -> np.ndarray:
    """Bytes per ``interval_s`` of one day from a CSV of ``timestamp,...,size|bytes``.

    Rows are time-stamped counts (e.g. the WorldCup98 per-minute log: ``1998-05-01
    00:00,requests,size``); the day (``YYYY-MM-DD``, default the first full day) is cut
    into intervals from midnight and each interval's bytes summed.
    """
    import csv
    import datetime as dt

    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise SwellError(path, f"cannot read profile ({exc.strerror})") from None
    if not rows:
        raise SwellError(path, "empty profile")
    col = next((k for k in ("bytes", "size") if k in rows[0]), None)
    if "timestamp" not in rows[0] or col is None:
        raise SwellError(path, "profile needs a 'timestamp' and a 'bytes' (or 'size') column")
    try:
        ts = np.array([dt.datetime.fromisoformat(r["timestamp"]).timestamp() for r in rows])
        vol = np.array([float(r[col]) for r in rows])
    except ValueError as exc:
        raise SwellError(path, f"bad profile row: {exc}") from None
    first = dt.datetime.fromtimestamp(float(ts.min()))
    if day is None:
        start = dt.datetime.combine(first.date(), dt.time())
        if first > start:
            start += dt.timedelta(days=1)
    else:
        try:
            start = dt.datetime.fromisoformat(day)
        except ValueError:
            raise SwellError(day, "profile day must be YYYY-MM-DD") from None
    t0 = start.timestamp()
    edges = t0 + np.arange(int(np.ceil(86400 / interval_s)) + 1) * interval_s
    inside = (ts >= t0) & (ts < edges[-1])
    if not inside.any():
        raise SwellError(path, f"no rows on {start.date()}")
    return np.histogram(ts[inside], bins=edges, weights=vol[inside])[0].astype(float)


def reshape(fit_: Fit, p: HarpoonParams, profile: np.ndarray, source: str) -> Fit:
    """Per-interval targets with the shape of ``profile`` and the flows' mean level.

    The flow data keeps its distributions (files, inter-connection times, pools, UDP
    sources); only the time series changes: each per-interval array becomes the
    profile's shape times that array's mean over the flow data (a short capture
    then runs as a day with the profile's diurnal swing). Sessions are found again
    by the Figure 4 procedure for the new targets.
    """
    if profile.sum() <= 0:
        raise SwellError(source, "the profile carries no bytes")
    shape = profile / profile.mean()
    a = dict(fit_.arrays)
    for k in ("tcp_bytes", "udp_bytes", "pairs_active", "udp_cbr", "udp_periodic", "udp_exp"):
        a[f"interval/{k}"] = shape * float(a[f"interval/{k}"].mean())
    rng = np.random.default_rng(p.seed)
    pool = session_bytes(a["tcp/file_size"], a["tcp/ict_s"], p.interval_s,
                         pool_size(a["tcp/ict_s"], p.interval_s), rng)
    a["interval/sessions"], a["interval/sessions_sd"] = sessions_for(
        a["interval/tcp_bytes"], pool, p.trials, rng)
    notes = [*fit_.notes, f"per-interval targets shaped by {source} ({len(profile)} intervals),"
                          f" levels from the flow data"]
    return Fit(a, {**fit_.counts, "intervals": len(profile)}, notes, fit_.t0_ns,
               len(profile) * p.interval_s)
