"""Back-to-back arrivals at the clients and what they do to the 2-8 ms octaves (manual).

``.venv/bin/python bench/rx_pairing.py ORIGINAL RUN_DIR... [--share 0.18]``: ORIGINAL is
the trace (pcap; directions by the roles rule), each RUN_DIR a fidelity bench run
directory (``WORK/seedK/<capture>``) whose ``capture/clients-c0-*.pcap`` hold the
traffic where the trace's monitor sat (the clients' side of their access links).

Issue 19: web-lan's server -> client energy is 0.5-1.2 (log2) below the trace's at 2-8
ms on a quiet host. The trace's client received a fifth of its full-sized data packets
in back-to-back groups: two (rarely three) packets under ``--pair-us`` apart, then a gap
of two packet times; a serialiser, as every emulated link is, spaces each packet by its
own time on the link. (Whether the trace's pairs are the access link's framing or its
capture host's interrupt coalescing, a pcap does not say.) Per capture this prints:

* the s2c data packets (frames of at least 1,000 bytes) in groups of 1, 2, 3, 4+ by
  arrival per client, and the share that arrived under ``--pair-us`` after the one
  before (the trace's *pairing share*);
* the energy of s2c bytes per 1 ms bin at 2-32 ms (``swell.analysis.energy``, the
  fidelity bench's wavelet) minus the original's, for the run as captured and after a
  *what-if*: per client, ``--share`` of the in-train data packets (under 2 ms after the
  one before, chosen at random, never two in a row) moved onto the arrival of the one
  before, as a receiver that gets them in pairs would see them. Bytes and their order
  are kept; only arrival times within a train move.

Also prints the 1 ms bins' p99.9 and maximum rates and the share of the 2 ms energy in
the top 1% of coefficients: a host that stole CPU from the run (hypervisor steal) makes
every client's queue drain at once afterwards, bursts far above the trace's (seen
2026-12-02: 420 Mbit/s in one 1 ms bin, 35-44% of the 2 ms energy in 1% of the
coefficients, against 19% in the trace). Reads captures only (numpy; seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.analysis.bottleneck import load_clients_side, merge_directions  # noqa: E402
from swell.analysis.energy import energy_plot  # noqa: E402
from swell.analysis.fidelity import FidelityConfig  # noqa: E402
from swell.analysis.timeseries import directions_by_rule, load_packets  # noqa: E402

BIN_NS = 1_000_000
OCTAVES = 5  # 2, 4, 8, 16, 32 ms
BIG = 1000  # a full-sized data frame (bytes)


def energies(ts: np.ndarray, size: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """log2 energy of bytes per 1 ms bin at 2, 4, ... ms over ``[t0, t1)``."""
    inside = (ts >= t0) & (ts < t1)
    x = np.bincount(((ts[inside] - t0) // BIN_NS).astype(np.int64), weights=size[inside],
                    minlength=int((t1 - t0) // BIN_NS))
    return energy_plot(x, BIN_NS / 1e9, FidelityConfig().vanishing_moments).y[:OCTAVES]


def burst_lines(ts: np.ndarray, size: np.ndarray, t0: int, t1: int) -> str:
    inside = (ts >= t0) & (ts < t1)
    b = np.bincount(((ts[inside] - t0) // BIN_NS).astype(np.int64),
                    weights=size[inside]) * 8 / 1e3  # Mbit/s
    pairs = b[: b.size // 2 * 2].reshape(-1, 2)
    e = np.sort((pairs[:, 0] - pairs[:, 1]) ** 2)[::-1]
    return (f"1 ms bins p99.9 {np.percentile(b, 99.9):.0f}, max {b.max():.0f} Mbit/s; "
            f"top 1% of the 2 ms coefficients hold {e[: e.size // 100].sum() / e.sum():.0%}"
            " of its energy")


def per_client(ts: np.ndarray, client: np.ndarray) -> list[np.ndarray]:
    """Indices of each client's packets in arrival order."""
    order = np.lexsort((ts, client))
    cuts = np.flatnonzero(np.diff(client[order])) + 1
    return np.split(order, cuts)


def groups(ts: np.ndarray, size: np.ndarray, client: np.ndarray, pair_ns: int) -> str:
    counts = np.zeros(5, dtype=int)
    paired = total = 0
    for idx in per_client(ts, client):
        t = ts[idx[size[idx] >= BIG]]
        if t.size < 2:
            continue
        close = np.diff(t) < pair_ns
        paired, total = paired + int(close.sum()), total + t.size
        starts = np.flatnonzero(np.r_[True, ~close])
        lengths = np.diff(np.r_[starts, t.size])
        counts += np.bincount(np.minimum(lengths, 4), minlength=5)
    return (f"data packets in groups of 1/2/3/4+: {counts[1]}/{counts[2]}/{counts[3]}/"
            f"{counts[4]}; pairing share {paired / max(total, 1):.1%}")


def what_if(ts: np.ndarray, size: np.ndarray, client: np.ndarray, share: float,
            rng: np.random.Generator) -> np.ndarray:
    moved = ts.copy()
    for idx in per_client(ts, client):
        gap = np.diff(ts[idx])
        cand = np.flatnonzero((gap < 2 * BIN_NS) & (size[idx[1:]] >= BIG))
        pick = cand[rng.random(cand.size) < share]
        pick = pick[np.diff(np.r_[-2, pick]) > 1]  # never two in a row
        moved[idx[pick + 1]] = ts[idx[pick]]
    return moved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original", type=Path)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--share", type=float, default=0.18,
                    help="share of in-train packets the what-if pairs (default: 0.18)")
    ap.add_argument("--pair-us", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    pair_ns = int(args.pair_us * 1e3)
    orig = load_packets(args.original)
    s2c = directions_by_rule(orig, "roles")["s2c"]
    ts, size, client = orig.ts_ns[s2c], orig.size[s2c].astype(float), orig.daddr_lo[s2c]
    t0, t1 = int(orig.ts_ns.min()), int(orig.ts_ns.max())
    eo = energies(ts, size, t0, t1)
    scales = "/".join(f"{2 ** j}" for j in range(1, OCTAVES + 1))
    print(f"original {args.original.name}: {groups(ts, size, client, pair_ns)}")
    print(f"  {burst_lines(ts, size, t0, t1)}; log2 energy at {scales} ms: "
          + " ".join(f"{y:.2f}" for y in eo))
    rng = np.random.default_rng(args.seed)
    for run in args.runs:
        gen, dirs = merge_directions(load_clients_side(run / "capture"))
        sel = dirs["s2c"]
        ts, size, client = gen.ts_ns[sel], gen.size[sel].astype(float), gen.daddr_lo[sel]
        # the bench's window: its last 170 s before the clients' hard stop (~3 s of tail)
        t1 = int(ts.max()) - 3_000_000_000
        t0 = t1 - 170_000_000_000
        print(f"{run}: {groups(ts, size, client, pair_ns)}")
        print(f"  {burst_lines(ts, size, t0, t1)}")
        diff = energies(ts, size, t0, t1) - eo
        paired = energies(what_if(ts, size, client, args.share, rng), size, t0, t1) - eo
        print(f"  minus the original at {scales} ms: as run "
              + " ".join(f"{d:+.2f}" for d in diff) + f"; {args.share:.0%} paired "
              + " ".join(f"{d:+.2f}" for d in paired))
    return 0


if __name__ == "__main__":
    sys.exit(main())
