"""Energy per octave of one direction split by packet class, original against generated (no root).

    .venv/bin/python bench/c2s_energy_split.py --original TRACE \\
        --run WORK_DIR:WARMUP_S:RUN_S [--run ...] [--direction c2s] [--at clients]
        [--gaps] [--json OUT]

Issue 19 (docs/scale.md, section 7): after swell-gen's receivers moved to
delayed ACKs, web-lan's client -> server energy of the mean over seeds got
smoother than the trace at 2-16 ms and 256-512 ms. This reads runs already on
disk (a ``bench/fidelity.py`` work directory: ``capture/bottleneck-*.pcap``, or
with ``--at clients`` the client namespaces' ``capture/clients-*-*.pcap``, and
``background/records.jsonl``) and the original trace, and gives, per octave,
the log2 energy (``analysis.energy.energy_plot``, db3, 1 ms bins, as
``bench/fidelity.py`` compares) of the direction's series built from:

* ``all``: every IP packet of the direction (what the fidelity table compares);
* ``data``: TCP segments with payload, and UDP;
* ``ack``: pure TCP ACKs (no payload, no SYN/FIN/RST);
* ``ctl``: SYN/FIN/RST without payload;
* ``no-ack``: ``all`` without the pure ACKs;
* ``http``, ``dns``, ``other``: the ``data`` packets of TCP port 80, of UDP
  port 53, and the rest; ``other-tcp`` and ``other-udp``: ``other`` by protocol
  (each class's rate, packets a second and mean IP bytes per packet are printed:
  a client that sends a request as a stream of small packets and one that writes
  it whole carry the same bytes in different packets);

with ``--gaps``, per class also the gaps within a flow (same addresses, ports and
protocol, this direction) longer than 1 ms at p10/25/50/75/90: a client's rhythm
(the trace's HTTPS clients sent every ~30 ms; swell-gen's after each response and
its think time);

and the generated minus original difference of each against the original's
first-half / second-half floor of ``all``; then the same difference with
each series divided by its mean (``shape``: the log2 energy minus twice the
log2 of the mean, so a series that only carries more or fewer bytes per
packet, in proportion, has the same shape). Energies do not add across
classes (the classes are correlated), so a class explains a deficit when the
series without it loses the deficit (``no-ack``) or when its own deficit is
large where its share of the energy is.

Direction: in the original by the model's roles (``analysis.timeseries.
syn_directions``: the SYN sender is the client, and a UDP flow's client as the
extractor decides it: the side of a well-known port serves, else the first
sender is the client), or with ``--udp-client port`` a UDP flow's higher port
(the judge before 2026-12-01); in a run, ``c2s`` is the forward file, whose
roles are the model's. A run's clock: its measured
window is ``[t0 + warm-up, t0 + run)`` where ``t0`` is the client's start,
found as the first SYN of the earliest TCP record minus that record's start.
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

from swell.analysis.compare import halves_floor  # noqa: E402
from swell.analysis.energy import energy_plot  # noqa: E402
from swell.analysis.timeseries import (  # noqa: E402
    Packets,
    address_words,
    bin_counts,
    syn_directions,
)

BIN_S = 0.001
SYN, FIN, RST = 2, 1, 4
CLASSES = ("all", "data", "ack", "ctl", "no-ack", "http", "dns", "other", "other-tcp",
           "other-udp")
GAPS = False  # --gaps


def load(*paths: Path) -> dict[str, np.ndarray]:
    """IP packets of one or more captures with payload lengths, time-ordered together."""
    from swell.extract.reader import open_trace

    cols: dict[str, list[np.ndarray]] = {}
    names = ("ts_ns", "wirelen", "payload_len", "proto", "tcp_flags", "saddr_hi", "saddr_lo",
             "daddr_hi", "daddr_lo", "sport", "dport")
    for path in paths:
        with open_trace(path) as tr:
            for ch in tr.chunks(max_packets=1 << 18):
                ip = np.asarray(ch.ipver) != 0
                for k in names:
                    cols.setdefault(k, []).append(np.asarray(getattr(ch, k))[ip])
    out = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(out["ts_ns"], kind="stable")
    return {k: v[order] for k, v in out.items()}


def classes(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tcp = p["proto"] == 6
    fl = p["tcp_flags"].astype(np.int64)
    pay = p["payload_len"].astype(np.int64)
    ctl = tcp & (pay == 0) & ((fl & (SYN | FIN | RST)) != 0)
    ack = tcp & (pay == 0) & ~ctl
    data = ~tcp | (pay > 0)
    http = data & tcp & ((p["dport"] == 80) | (p["sport"] == 80))
    dns = data & (p["proto"] == 17) & ((p["dport"] == 53) | (p["sport"] == 53))
    other = data & ~http & ~dns
    return {"all": np.ones(len(pay), bool), "data": data, "ack": ack, "ctl": ctl,
            "no-ack": ~ack, "http": http, "dns": dns, "other": other,
            "other-tcp": other & tcp, "other-udp": other & ~tcp}


def as_packets(p: dict[str, np.ndarray]) -> Packets:
    return Packets(ts_ns=p["ts_ns"].astype(np.int64), size=p["wirelen"].astype(np.int64),
                   saddr_hi=p["saddr_hi"].astype(np.uint64),
                   saddr_lo=p["saddr_lo"].astype(np.uint64),
                   daddr_hi=p["daddr_hi"].astype(np.uint64),
                   daddr_lo=p["daddr_lo"].astype(np.uint64),
                   sport=p["sport"].astype(np.uint16), dport=p["dport"].astype(np.uint16),
                   proto=p["proto"].astype(np.uint8), tcp_flags=p["tcp_flags"].astype(np.uint8))


def run_captures(work: Path, way: str, at: str) -> list[Path]:
    """A run's captures of ``way`` (forward: client -> server) where it was measured:
    the bottleneck's one file, or every client namespace's tap (before the uplinks,
    after the downlinks: where ``bench/fidelity.py --monitor`` puts the trace's
    monitor beside its clients)."""
    pattern = f"bottleneck-{way}.pcap" if at == "bottleneck" else f"clients-*-{way}.pcap"
    files = sorted((work / "capture").glob(pattern))
    if not files:
        raise SystemExit(f"{work}: no capture/{pattern}")
    return files


def client_start_ns(work: Path, fwd: dict[str, np.ndarray]) -> int:
    """The run's t0: the first SYN of the earliest TCP record, minus its start."""
    import ipaddress

    best = None
    with open(work / "background" / "records.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r.get("proto") == "tcp" and (best is None or r["start"] < best["start"]):
                best = r
    if best is None:
        raise SystemExit(f"{work}: no TCP record")
    ip, port = best["client"].rsplit(":", 1)
    hi, lo = address_words([ipaddress.ip_address(ip)])
    m = ((fwd["saddr_hi"] == hi[0]) & (fwd["saddr_lo"] == lo[0]) & (fwd["sport"] == int(port))
         & ((fwd["tcp_flags"].astype(np.int64) & SYN) != 0))
    if not m.any():
        raise SystemExit(f"{work}: the first record's SYN is not in the forward capture")
    return int(fwd["ts_ns"][np.flatnonzero(m)[0]]) - int(round(best["start"] * 1e9))


GAP_MIN_NS = 1_000_000  # gaps within a flow shorter than this are a burst's own
GAP_QS = (10, 25, 50, 75, 90)


def flow_gaps(p: dict[str, np.ndarray], m: np.ndarray) -> list[float]:
    """Percentiles (``GAP_QS``, ms) of the gaps longer than ``GAP_MIN_NS`` between a
    flow's consecutive packets among ``m`` (NaN without any)."""
    keys = [p[k][m].astype(np.int64) for k in ("saddr_hi", "saddr_lo", "daddr_hi",
                                                 "daddr_lo", "sport", "dport", "proto")]
    ts = p["ts_ns"][m].astype(np.int64)
    if ts.size < 2:
        return [float("nan")] * len(GAP_QS)
    order = np.lexsort((ts, *keys))
    same = np.ones(ts.size - 1, bool)
    for k in keys:
        same &= k[order][1:] == k[order][:-1]
    gaps = np.diff(ts[order])[same]
    gaps = gaps[gaps > GAP_MIN_NS]
    if not gaps.size:
        return [float("nan")] * len(GAP_QS)
    return (np.percentile(gaps, GAP_QS) / 1e6).round(2).tolist()


def energies(p: dict[str, np.ndarray], mask: np.ndarray, start: int, end: int
             ) -> dict[str, dict[str, Any]]:
    cls = classes(p)
    inside = mask & (p["ts_ns"] >= start) & (p["ts_ns"] < end)
    out = {}
    for name in CLASSES:
        m = inside & cls[name]
        s = bin_counts(p["ts_ns"][m], p["wirelen"][m].astype(np.int64), int(BIN_S * 1e9),
                       start, end)
        e = energy_plot(s.bytes, BIN_S, 3, 8)
        out[name] = {"y": e.y.tolist(), "log2_mean": float(np.log2(max(e.mean, 1e-12))),
                     "mbps": float(s.bytes.sum() * 8 / (s.bytes.size * BIN_S)
                                                       / 1e6),
                     "packets": int(m.sum()),
                     "pps": float(m.sum() / max((end - start) * 1e-9, 1e-9)),
                     "mean_ip_bytes": float(p["wirelen"][m].mean()) if m.any() else 0.0,
                     "gaps_ms": flow_gaps(p, m) if GAPS else None}
        if name == "all":
            out[name]["floor"] = halves_floor(s.bytes, BIN_S, 3, 8)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--original", type=Path, required=True)
    ap.add_argument("--run", action="append", required=True,
                    help="WORK_DIR:WARMUP_S:RUN_S (a bench/fidelity.py work dir)")
    ap.add_argument("--direction", choices=("c2s", "s2c"), default="c2s")
    ap.add_argument("--at", choices=("bottleneck", "clients"), default="bottleneck",
                    help="where the run is measured (clients: the client namespaces' taps)")
    ap.add_argument("--udp-client", choices=("port", "first"), default="first",
                    help="the original's UDP clients: the first sender unless ports say "
                         "otherwise (as the extractor and bench/fidelity.py decide; "
                         "default) or the higher port (the judge before 2026-12-01)")
    ap.add_argument("--gaps", action="store_true",
                    help="per class, the gaps within a flow longer than 1 ms (percentiles)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    global GAPS
    GAPS = a.gaps

    orig = load(a.original)
    d = syn_directions(as_packets(orig), udp=a.udp_client)[a.direction]
    res: dict[str, Any] = {"original": energies(orig, d, int(orig["ts_ns"].min()),
                                                int(orig["ts_ns"].max()) + 1), "runs": {}}
    way = "forward" if a.direction == "c2s" else "reverse"
    for spec in a.run:
        work, warm, run = spec.rsplit(":", 2)
        cap = load(*run_captures(Path(work), way, a.at))
        fwd = cap if way == "forward" else load(*run_captures(Path(work), "forward", a.at))
        t0 = client_start_ns(Path(work), fwd)
        w0, w1 = t0 + int(float(warm) * 1e9), t0 + int(float(run) * 1e9)
        res["runs"][work] = energies(cap, np.ones(len(cap["ts_ns"]), bool), w0, w1)
    floor = res["original"]["all"]["floor"]
    ys = {n: np.array(res["original"][n]["y"]) for n in CLASSES}
    print(f"original {a.original.name} {a.direction}: " + ", ".join(
        f"{n} {res['original'][n]['mbps']:.3f} Mb/s ({res['original'][n]['packets']} pk)"
        for n in CLASSES))
    for work, r in res["runs"].items():
        print(f"run {work}: " + ", ".join(f"{n} {r[n]['mbps']:.3f} Mb/s ({r[n]['packets']} pk)"
                                          for n in CLASSES))
    print("per class: Mb/s, packets/s, mean IP bytes per packet (original | mean of runs)")
    for n in CLASSES:
        o, rs = res["original"][n], list(res["runs"].values())
        print(f"  {n:>9}  {o['mbps']:7.3f} {o['pps']:8.1f} {o['mean_ip_bytes']:6.0f} | "
              f"{np.mean([r[n]['mbps'] for r in rs]):7.3f} "
              f"{np.mean([r[n]['pps'] for r in rs]):8.1f} "
              f"{np.mean([r[n]['mean_ip_bytes'] for r in rs]):6.0f}")
    if GAPS:
        print("per class: gaps within a flow > 1 ms, p" + "/".join(map(str, GAP_QS))
              + " (ms): original | each run")
        for n in CLASSES:
            print(f"  {n:>9}  " + " | ".join(
                "/".join(f"{g:.1f}" for g in r[n]["gaps_ms"])
                for r in [res["original"], *res["runs"].values()]))
    gen = {n: np.mean([np.array(r[n]["y"])[:len(ys[n])] for r in res["runs"].values()], axis=0)
           for n in CLASSES}
    res["mean_of_runs_y"] = {n: v.tolist() for n, v in gen.items()}
    # twice the log2 mean: a series scaled by c has its energy scaled by c**2
    shift = {n: 2 * (np.mean([r[n]["log2_mean"] for r in res["runs"].values()])
                     - res["original"][n]["log2_mean"]) for n in CLASSES}
    res["shape_shift"] = shift
    for title, sh in (("energy", {n: 0.0 for n in CLASSES}), ("shape (mean removed)", shift)):
        print(f"{title}: generated minus original, log2")
        print("octave  scale   floor | " + " | ".join(f"{n:>6} orig  gen-orig" for n in CLASSES))
        for j in range(len(ys["all"])):
            row = [f"{j + 1:>6} {2 ** (j + 1) * BIN_S:7.3f} {floor.get(j + 1, float('nan')):6.2f}"]
            for n in CLASSES:
                if j < len(gen[n]):
                    row.append(f"{ys[n][j]:12.2f} {gen[n][j] - ys[n][j] - sh[n]:+8.2f}")
            print(" | ".join(row))
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
