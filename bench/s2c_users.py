"""Where server -> client energy lives: inside each connection, or between a user's (manual).

``.venv/bin/python bench/s2c_users.py ORIGINAL CAPTURE_DIR... [--window-s 172]``.
ORIGINAL is a pcap (directions by the SYN rule), each CAPTURE_DIR a ``bench/fidelity.py``
seed's ``capture/`` directory (bottleneck files: reverse = ``s2c``), measured over its
last ``--window-s`` seconds before the hard stop (the run's window to within the 2 s
stop; ``fidelity.json``'s ``window_s``). Issue 19: web-lan's server -> client energy
stayed 0.8-1.4 log2 above the original's at 16-64 ms whatever the transport did
(docs/fidelity.md); this splits it.

Energy adds over independent parts: the energy of a sum of independent series is the
sum of their energies, octave by octave. So per octave (1 ms byte series, db3, as
``swell.analysis.fidelity``):

* ``aggregate``: the direction as captured;
* ``connections``: the sum over connections of each connection's energy alone: what the
  aggregate would have if the connections were independent;
* ``users``: the same over clients (each client's connections together).

``aggregate - connections`` below 0 means a user's connections take turns (a burst of one
while the others pause: they share a link before the monitor); ``users`` close to
``aggregate`` means users are independent of each other. Also per capture: the share of
data packets sent in 10 ms bins where two or more of the same client's connections send
(overlap), and the client's rate in such bins by how many connections send (a shared
link caps it). Reads the captures only (numpy; seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.analysis.energy import energy_plot  # noqa: E402
from swell.analysis.timeseries import Packets, directions_by_rule, load_packets  # noqa: E402

OCTAVES = 11  # 2 ms .. 2 s: the octaves a 60 s original has
BIN_S = 0.001
STOP_S = 2.0  # bench/fidelity.py stops the generators this long after the window


def _series(ts: np.ndarray, size: np.ndarray, t0: int, t1: int) -> np.ndarray:
    n = int((t1 - t0) // int(BIN_S * 1e9))
    k = (ts - t0) // int(BIN_S * 1e9)
    keep = (k >= 0) & (k < n)
    return np.bincount(k[keep].astype(np.int64), weights=size[keep], minlength=n)[:n]


def _mu(ts: np.ndarray, size: np.ndarray, t0: int, t1: int) -> np.ndarray:
    mu = energy_plot(_series(ts, size, t0, t1), BIN_S).mu[:OCTAVES]
    return np.pad(mu, (0, OCTAVES - mu.size))


def _sum_over(q: Packets, group: np.ndarray, t0: int, t1: int) -> np.ndarray:
    total = np.zeros(OCTAVES)
    for g in np.unique(group):
        sel = group == g
        if sel.sum() > 1:
            total += _mu(q.ts_ns[sel], q.size[sel].astype(float), t0, t1)
    return total


def split(p: Packets, mask: np.ndarray, t0: int, t1: int) -> dict[str, object]:
    """Energies (log2) of the aggregate and of the sums over connections and users, the
    overlap share and the client's rate by concurrency, for the packets in ``mask``."""
    q = p.take(mask & (p.ts_ns >= t0) & (p.ts_ns < t1))
    flow = np.unique(np.stack([q.saddr_hi, q.saddr_lo, q.daddr_hi, q.daddr_lo,
                               q.sport.astype(np.uint64), q.dport.astype(np.uint64)], axis=1),
                     axis=0, return_inverse=True)[1].ravel()
    user = np.unique(np.stack([q.daddr_hi, q.daddr_lo], axis=1), axis=0,
                     return_inverse=True)[1].ravel()
    size = q.size.astype(float)
    with np.errstate(divide="ignore"):
        out: dict[str, object] = {
            "aggregate": np.log2(_mu(q.ts_ns, size, t0, t1)),
            "connections": np.log2(_sum_over(q, flow, t0, t1)),
            "users": np.log2(_sum_over(q, user, t0, t1)),
        }
    data = q.size > 500
    b = (q.ts_ns - t0) // 10_000_000
    cell = np.unique(np.stack([user, b]), axis=1, return_inverse=True)[1].ravel()
    n_cells = int(cell.max()) + 1 if cell.size else 0
    pairs = np.unique(np.stack([cell[data], flow[data]]), axis=1)
    busy = np.bincount(pairs[0], minlength=n_cells)
    rate = np.bincount(cell, weights=size, minlength=n_cells) * 8 / 0.010 / 1e6
    out["overlap"] = float(data[busy[cell] >= 2].sum() / max(data.sum(), 1))
    out["rate_p90"] = {k: float(np.percentile(rate[(busy >= k) if k == 3 else (busy == k)], 90))
                       if np.any((busy >= k) if k == 3 else (busy == k)) else float("nan")
                       for k in (1, 2, 3)}
    return out


def _row(name: str, v: np.ndarray) -> str:
    return f"  {name:24s}" + "".join(f"{x:7.2f}" for x in v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original", type=Path)
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--window-s", type=float, default=172.0,
                    help="the generated window: this long before the hard stop")
    args = ap.parse_args()
    orig = load_packets(args.original)
    runs = [(str(args.original), orig, directions_by_rule(orig, "syn")["s2c"],
             int(orig.ts_ns.min()), int(orig.ts_ns.max()) + 1)]
    from swell.analysis.bottleneck import load_bottleneck, merge_directions

    for path in args.captures:
        gen, dirs = merge_directions(load_bottleneck(path))
        t1 = int(gen.ts_ns.max()) - int(STOP_S * 1e9)
        runs.append((str(path), gen, dirs["s2c"], t1 - int(args.window_s * 1e9), t1))
    print("server -> client, log2 energy per octave (1 ms bins):")
    print("  " + " " * 24 + "".join(f"{(2 ** j) * BIN_S * 1e3:6.0f}ms" if 2 ** j < 1000
                                     else f"{2 ** j * BIN_S:6.2f}s " for j in range(1, 12)))
    for name, p, mask, t0, t1 in runs:
        s = split(p, mask, t0, t1)
        agg, conns, users = s["aggregate"], s["connections"], s["users"]
        print(name)
        print(_row("aggregate", agg))
        print(_row("sum over connections", conns))
        print(_row("sum over users", users))
        print(_row("aggregate - connections", agg - conns))
        r = s["rate_p90"]
        print(f"  data packets in 10 ms with >= 2 of the client's connections sending: "
              f"{s['overlap']:.0%}; client rate p90 with 1 / 2 / >= 3 sending: "
              f"{r[1]:.1f} / {r[2]:.1f} / {r[3]:.1f} Mbit/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
