"""Back-to-back trains of server -> client data, original against generated (manual).

``.venv/bin/python bench/s2c_trains.py [--gap-ms 2] CAPTURE...``; a CAPTURE is a pcap
(directions by the SYN rule) or a bench ``capture/`` directory (bottleneck files:
reverse = ``s2c``). Issue 19: with BBR in every namespace (the host's default, which
``bench/fidelity.py`` inherited before ``--cc``) campus's s2c energy was too low at
4-128 ms, with reno too high at 4-64 ms and web-lan's at 16-128 ms; this measures what
the congestion control changes in the packet stream.

A train is a run of data packets (TCP, frame over 100 bytes) of one flow, server ->
client, each within ``--gap-ms`` of the one before. Per capture: the share of s2c data
bytes in trains of at least 4, 16 and 64 packets, the byte-weighted median train
length, and the byte-weighted median rate of the trains of at least 4 packets (bytes
over first-to-last packet time). The *cycle*: the gap from a train's last packet to the
next train of the same flow when it is under ``--cycle-max-ms`` (a flight waiting for
the ACKs of the one before, a round trip under load, not a think time), p25/p50/p75
weighted by the next train's bytes, and the share of data bytes whose train follows
such a gap. Reads the captures only (numpy; a few seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.analysis.timeseries import Packets, directions_by_rule, load_packets  # noqa: E402


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    return float(values[order][min(np.searchsorted(cum, q), len(values) - 1)])


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    return _weighted_quantile(values, weights, 0.5)


def trains(p: Packets, mask: np.ndarray, gap_ms: float,
           cycle_max_ms: float = 400.0) -> dict[str, float]:
    """Train statistics of the packets in ``mask`` (one direction)."""
    m = mask & (p.proto == 6) & (p.size > 100)
    key = np.stack([p.saddr_hi[m], p.saddr_lo[m], p.daddr_hi[m], p.daddr_lo[m],
                    p.sport[m].astype(np.uint64), p.dport[m].astype(np.uint64)], axis=1)
    ts, size = p.ts_ns[m], p.size[m].astype(np.float64)
    flow = np.unique(key, axis=0, return_inverse=True)[1].ravel()
    order = np.lexsort((ts, flow))
    flow, ts, size = flow[order], ts[order], size[order]
    new = np.ones(len(ts), dtype=bool)
    new[1:] = (flow[1:] != flow[:-1]) | (np.diff(ts) > gap_ms * 1e6)
    tid = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    n = np.bincount(tid)
    nbytes = np.bincount(tid, weights=size)
    dur_s = (np.maximum.reduceat(ts, starts) - ts[starts]) / 1e9
    long = n >= 4
    rate = 8 * nbytes[long] / np.maximum(dur_s[long], 1e-6) / 1e6
    out = {f"share_ge{k}": float(nbytes[n >= k].sum() / nbytes.sum()) for k in (4, 16, 64)}
    out["median_train_pkts"] = _weighted_median(n.astype(np.float64), nbytes)
    out["median_rate_mbps"] = _weighted_median(rate, nbytes[long])
    out["data_bytes"] = float(nbytes.sum())
    # the gap before each train that continues its flow (not the flow's first)
    ends = np.maximum.reduceat(ts, starts)
    same = np.zeros(len(starts), dtype=bool)
    same[1:] = flow[starts[1:]] == flow[starts[:-1]]
    gap = np.full(len(starts), np.inf)
    gap[1:] = (ts[starts[1:]] - ends[:-1]) / 1e6
    cyc = same & (gap <= cycle_max_ms)
    for q in (0.25, 0.5, 0.75):
        out[f"cycle_p{int(q * 100)}_ms"] = (_weighted_quantile(gap[cyc], nbytes[cyc], q)
                                           if cyc.any() else float("nan"))
    out["cycle_share"] = float(nbytes[cyc].sum() / nbytes.sum())
    return out


def s2c(path: Path) -> tuple[Packets, np.ndarray]:
    if path.is_dir():
        from swell.analysis.bottleneck import load_bottleneck, merge_directions

        p, dirs = merge_directions(load_bottleneck(path))
    else:
        p = load_packets(path)
        dirs = directions_by_rule(p, "syn")
    return p, dirs["s2c"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", type=Path)
    ap.add_argument("--gap-ms", type=float, default=2.0,
                    help="largest gap inside a train, ms")
    ap.add_argument("--cycle-max-ms", type=float, default=400.0,
                    help="largest gap between a flow's trains counted as a cycle, ms")
    args = ap.parse_args()
    print(f"s2c data trains (gap <= {args.gap_ms:g} ms): share of data bytes in trains of "
          ">= 4 / 16 / 64 packets; byte-weighted median train; median rate of trains >= 4; "
          f"cycle (gap to the flow's next train <= {args.cycle_max_ms:g} ms) p25/p50/p75 and "
          "the share of bytes after one")
    for path in args.captures:
        if not path.exists():
            print(f"{path}: absent, skipped")
            continue
        t = trains(*s2c(path), args.gap_ms, args.cycle_max_ms)
        print(f"{path}: {t['share_ge4']:.0%} / {t['share_ge16']:.0%} / {t['share_ge64']:.0%}; "
              f"median {t['median_train_pkts']:.0f} packets; {t['median_rate_mbps']:.1f} Mbit/s; "
              f"cycle {t['cycle_p25_ms']:.0f}/{t['cycle_p50_ms']:.0f}/{t['cycle_p75_ms']:.0f} ms "
              f"({t['cycle_share']:.0%} of the bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
