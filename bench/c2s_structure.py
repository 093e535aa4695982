"""Where client -> server burstiness comes from: request timing across connections (no root).

    .venv/bin/python bench/c2s_structure.py --original TRACE \\
        [--run WORK_DIR:WARMUP_S:RUN_S ...] [--seeds 5] [--json OUT]

Issue 19 (docs/scale.md, section 7): web-lan's generated client -> server
series is smoother than the trace's at 2-16 ms and 256-512 ms.
``bench/c2s_energy_split.py`` puts the deficit in the HTTP requests, not the
ACKs. This measures, on the trace and on runs already on disk (a
``bench/fidelity.py`` work directory), what differs in the requests (HTTP:
TCP port 80, client -> server segments with payload):

* ``concurrency``: for each request segment, how many of its host's
  connections sent request segments in the same 64 ms bin (mean, share >= 3);
* ``long``: connections with >= 10 request segments, their share of the
  request segments, and how many other such connections of the same host
  sent their first request within 100 ms of theirs;
* ``gaps``: per-connection gaps between request segments (the request /
  response / think loop of one connection), in ms buckets; and the gaps
  between a host's successive SYNs to port 80 (Swing's ``interConn``);
* ``syns``: per port class (80 or not), the gaps between a host's successive
  SYNs and how many other SYNs of the host fall within 100 ms of each (the
  clustering of connection starts beyond the gap distribution);
* ``ack_lag``: for each client pure ACK, the time since the last server data
  segment of its connection seen at the same point (the clients' access
  delay is under 0.01 ms in these runs, so this is the receiver's delay plus
  the client access link's serialization): share at >= 40 ms is the
  delayed-ACK timer;

and on the trace alone, with ``--seeds`` random draws, what its own
client -> server energy becomes when the correlation *between* connections is
removed and everything else kept: each connection keeps its start (its first
client -> server packet) and gets the packet timing and sizes of another
connection of the same client host and the same class (port 80 or not),
drawn as a permutation (``permuted``); and with every connection moved by
its own random offset, wrapping inside the span (``shifted``: the starts'
clustering gone too). The energy difference to the trace
(log2, db3, 1 ms bins) is printed per octave next to the trace's first-half /
second-half floor.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from c2s_energy_split import as_packets, classes, client_start_ns, load  # noqa: E402

from swell.analysis.compare import halves_floor  # noqa: E402
from swell.analysis.energy import energy_plot  # noqa: E402
from swell.analysis.timeseries import bin_counts, syn_directions  # noqa: E402

MS = 1_000_000
GAP_EDGES = (0, 2, 16, 64, 256, 1e9)
LAG_EDGES = (0, 1, 5, 20, 40, 100, 200, 1e9)


def _hist(x: np.ndarray, edges: tuple[float, ...]) -> dict[str, float]:
    h = np.histogram(x, edges)[0] / max(len(x), 1)
    return {f"[{a:g},{b:g})": round(float(v), 3) for a, b, v in zip(edges, edges[1:], h,
                                                                     strict=False)}


def _conn_key(ip: np.ndarray, port: np.ndarray, sip: np.ndarray, sport: np.ndarray
              ) -> np.ndarray:
    return ((ip.astype(np.uint64) * np.uint64(1000003)) ^ (port.astype(np.uint64)
            * np.uint64(7919)) ^ (sip.astype(np.uint64) * np.uint64(31))
            ^ sport.astype(np.uint64))


def requests(p: dict[str, np.ndarray], c2s: np.ndarray, inside: np.ndarray
             ) -> dict[str, Any]:
    h = inside & c2s & classes(p)["http"]
    src, ts = p["saddr_lo"][h], p["ts_ns"][h]
    key = _conn_key(src, p["sport"][h], p["daddr_lo"][h], p["dport"][h])
    conc = []
    for s in np.unique(src):
        k = src == s
        b = ts[k] // (64 * MS)
        pairs = np.unique(np.stack([b, key[k].astype(np.int64)]), axis=1)
        _, per_bin = np.unique(pairs[0], return_counts=True)
        _, reqs = np.unique(b, return_counts=True)
        conc.append(np.repeat(per_bin, reqs))
    cc = np.concatenate(conc)
    order = np.lexsort((ts, key))
    ks, tss = key[order], ts[order]
    same = ks[1:] == ks[:-1]
    gaps = (np.diff(tss) / MS)[same]
    u, first, inv, cnt = np.unique(key, return_index=True, return_inverse=True,
                                   return_counts=True)
    t_first = np.full(len(u), np.iinfo(np.int64).max)
    np.minimum.at(t_first, inv, ts)
    host = src[first]
    lng = cnt >= 10
    near = []
    for i in np.flatnonzero(lng):
        other = (host == host[i]) & lng
        other[i] = False
        near.append(int((np.abs(t_first[other] - t_first[i]) < 100 * MS).sum()))
    nr = np.array(near) if near else np.zeros(1)
    syn = (inside & c2s & (p["proto"] == 6) & (p["dport"] == 80)
           & ((p["tcp_flags"].astype(np.int64) & 0x12) == 0x02))
    syn_gaps = [np.diff(np.sort(p["ts_ns"][syn & (p["saddr_lo"] == s)])) / MS
                for s in np.unique(p["saddr_lo"][syn])]
    return {"request_segments": int(h.sum()), "connections": len(u),
            "concurrency_64ms_mean": round(float(cc.mean()), 2),
            "concurrency_64ms_share_ge3": round(float((cc >= 3).mean()), 2),
            "long_connections": int(lng.sum()),
            "long_share_of_requests": round(float(cnt[lng].sum() / cnt.sum()), 2),
            "long_neighbours_within_100ms_mean": round(float(nr.mean()), 2),
            "long_with_no_neighbour": round(float((nr == 0).mean()), 2),
            "per_connection_gaps_ms": _hist(gaps, GAP_EDGES),
            "syn_gaps_per_host_ms": _hist(np.concatenate(syn_gaps), GAP_EDGES),
            "syns": {"port 80": syn_clusters(p, c2s, inside, True),
                     "other ports": syn_clusters(p, c2s, inside, False)}}


def syn_clusters(p: dict[str, np.ndarray], c2s: np.ndarray, inside: np.ndarray, web: bool
                 ) -> dict[str, Any]:
    """Gaps between a host's successive SYNs and how many of its SYNs fall within 100 ms."""
    syn = (inside & c2s & (p["proto"] == 6) & ((p["dport"] == 80) == web)
           & ((p["tcp_flags"].astype(np.int64) & 0x12) == 0x02))
    gaps, near = [], []
    for s in np.unique(p["saddr_lo"][syn]):
        t = np.sort(p["ts_ns"][syn & (p["saddr_lo"] == s)]) / MS
        gaps.append(np.diff(t))
        near.append(np.searchsorted(t, t + 100) - np.searchsorted(t, t - 100) - 1)
    if not gaps:
        return {"syns": 0}
    nr = np.concatenate(near)
    return {"syns": int(syn.sum()), "gaps_per_host_ms": _hist(np.concatenate(gaps), GAP_EDGES),
            "other_syns_within_100ms_mean": round(float(nr.mean()), 1),
            "other_syns_within_100ms_p90": float(np.percentile(nr, 90))}


def ack_lag(p: dict[str, np.ndarray], c2s: np.ndarray, inside: np.ndarray) -> dict[str, Any]:
    ack = inside & c2s & classes(p)["ack"]
    data = inside & ~c2s & (p["proto"] == 6) & (p["payload_len"] > 0)
    ka = _conn_key(p["saddr_lo"][ack], p["sport"][ack], p["daddr_lo"][ack], p["dport"][ack])
    kd = _conn_key(p["daddr_lo"][data], p["dport"][data], p["saddr_lo"][data], p["sport"][data])
    t0 = int(p["ts_ns"].min())
    ts = np.r_[p["ts_ns"][ack], p["ts_ns"][data]].astype(np.int64) - t0
    key = np.r_[ka, kd]
    isd = np.r_[np.zeros(int(ack.sum()), bool), np.ones(int(data.sum()), bool)]
    o = np.lexsort((~isd, ts, key))
    ts, key, isd = ts[o], key[o], isd[o]
    gi = np.unique(key, return_inverse=True)[1].astype(np.int64)
    big = np.int64(10**12)  # > any capture's span in ns
    last = np.maximum.accumulate(np.where(isd, ts + gi * big, gi * big - 1))
    ok = ~isd & (last >= gi * big)
    lag = (ts[ok] - (last[ok] - gi[ok] * big)) / MS
    return {"pure_acks": int((~isd).sum()), "with_data_before": int(ok.sum()),
            "lag_ms": _hist(lag, LAG_EDGES), "share_ge_40ms": round(float((lag >= 40).mean()), 3)}


def permuted(o: dict[str, np.ndarray], c2s: np.ndarray, seeds: int) -> dict[str, Any]:
    t0, t1 = int(o["ts_ns"].min()), int(o["ts_ns"].max()) + 1
    ts_a = o["ts_ns"][c2s].astype(np.int64)
    sz = o["wirelen"][c2s].astype(np.int64)
    key = _conn_key(o["saddr_lo"][c2s], o["sport"][c2s], o["daddr_lo"][c2s], o["dport"][c2s])
    u, first, inv = np.unique(key, return_index=True, return_inverse=True)
    start = np.full(len(u), np.iinfo(np.int64).max)
    np.minimum.at(start, inv, ts_a)
    rel = ts_a - start[inv]
    host = o["saddr_lo"][c2s][first]
    web = o["dport"][c2s][first] == 80

    def energy(t: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = bin_counts(t, s, MS, t0, t1).bytes
        return energy_plot(x, 0.001, 3, 8).y, x

    base, x = energy(ts_a, sz)
    floor = halves_floor(x, 0.001, 3, 8)
    diffs, shifted = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        perm = np.arange(len(u))
        for h in np.unique(host):
            for w in (True, False):
                grp = np.flatnonzero((host == h) & (web == w))
                perm[grp] = rng.permutation(grp)
        t = start[perm[inv]] + rel
        keep = t < t1
        diffs.append(energy(t[keep], sz[keep])[0] - base)
        off = rng.integers(0, t1 - t0, size=len(u))
        shifted.append(energy(t0 + (ts_a - t0 + off[inv]) % (t1 - t0), sz)[0] - base)
    d, sh = np.array(diffs), np.array(shifted)
    return {"octaves": [{"octave": j + 1, "time_scale_s": 2 ** (j + 1) / 1000,
                         "floor": floor.get(j + 1), "trace_y": round(float(base[j]), 3),
                         "diff_mean": round(float(d[:, j].mean()), 3),
                         "diff_min": round(float(d[:, j].min()), 3),
                         "diff_max": round(float(d[:, j].max()), 3),
                         "shifted_mean": round(float(sh[:, j].mean()), 3),
                         "shifted_min": round(float(sh[:, j].min()), 3),
                         "shifted_max": round(float(sh[:, j].max()), 3)}
                        for j in range(len(base))],
            "seeds": seeds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--original", type=Path, required=True)
    ap.add_argument("--run", action="append", default=[],
                    help="WORK_DIR:WARMUP_S:RUN_S (a bench/fidelity.py work dir)")
    ap.add_argument("--seeds", type=int, default=5, help="draws of the permutation")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()

    o = load(a.original)
    c2s = syn_directions(as_packets(o))["c2s"]
    everything = np.ones(len(o["ts_ns"]), bool)
    res: dict[str, Any] = {"original": {"requests": requests(o, c2s, everything),
                                        "ack_lag": ack_lag(o, c2s, everything)}, "runs": {}}
    for spec in a.run:
        work, warm, run = spec.rsplit(":", 2)
        fwd = load(Path(work) / "capture" / "bottleneck-forward.pcap")
        rev = load(Path(work) / "capture" / "bottleneck-reverse.pcap")
        t0 = client_start_ns(Path(work), fwd)
        p = {k: np.r_[fwd[k], rev[k]] for k in fwd}
        fw = np.r_[np.ones(len(fwd["ts_ns"]), bool), np.zeros(len(rev["ts_ns"]), bool)]
        inside = ((p["ts_ns"] >= t0 + int(float(warm) * 1e9))
                  & (p["ts_ns"] < t0 + int(float(run) * 1e9)))
        res["runs"][work] = {"requests": requests(p, fw, inside), "ack_lag": ack_lag(p, fw, inside)}
    res["permuted"] = permuted(o, c2s, a.seeds)
    for name, r in [("trace", res["original"]), *res["runs"].items()]:
        print(name)
        for part in ("requests", "ack_lag"):
            print(f"  {part}: " + json.dumps(r[part]))
    print(f"the trace, {a.seeds} draws, energy minus the trace's, log2: 'permuted' = each "
          "connection keeps its start and takes another's timing within its client host; "
          "'shifted' = each connection moved by its own random offset (wrapping in the span)")
    for row in res["permuted"]["octaves"]:
        f = row["floor"]
        print(f"  {row['time_scale_s'] * 1000:6.0f} ms  floor {f if f is None else round(f, 2)}"
              f"  permuted {row['diff_mean']:+.2f} ({row['diff_min']:+.2f} .. "
              f"{row['diff_max']:+.2f})  shifted {row['shifted_mean']:+.2f} "
              f"({row['shifted_min']:+.2f} .. {row['shifted_max']:+.2f})")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
