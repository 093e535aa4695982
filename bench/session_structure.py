"""Bytes per session: the trace's sessions against the sessions a schedule draws.

Diagnosis for issue 19 (docs/scale.md, section 7.3): the generated campus
traffic lacks energy at 0.5-8 s. If a user's heavy responses come together in
one session in the trace, while the schedule draws request/response sizes
i.i.d. per pair from the application's pooled samples (spreading them over many
sessions), the trace's sessions are heavier and more concentrated than the drawn
ones.

The trace side is the extractor's own grouping (``swell.extract.sessions.group``
on the connection table of ``--trace``): each session's payload bytes are the
sums of its connections' request/response pairs (the same pairs the model's
``reqSize``/``rspSize`` samples are), its span the time from its first
connection start to its last connection start (what a schedule fixes; transfer
times are not in a schedule). The drawn side: ``build_schedule`` from the model
fitted on that table, over the trace's duration at scale 1 (a Poisson count at
the trace's session rate, no target), seeds 1..``--seeds``, each draw
(``independent``, ``joint``, ``session`` where the model allows it).

Per application and draw: sessions, mean server->client bytes per session, the
coefficient of variation (sd / mean), the share of all s2c bytes in the top 1%
and top 10% of sessions, the largest session's share, the Spearman correlation
of bytes with span, and the s2c rate of the heavy sessions (bytes / span, the
median over the top 10%), and the sum of the squared session bytes per second
(MB^2/s: for sessions placed at random, the variance of the s2c bytes at time
scales longer than a session is about proportional to it). Drawn rows are
medians over the seeds. Usage::

    .venv/bin/python bench/session_structure.py --trace /tmp/swell-fidelity/campus/campus.pcap
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

DRAWS = ("independent", "joint", "session")


def extract(trace: Path) -> tuple[object, object]:
    """The connection table and the fitted model of ``trace`` (one read)."""
    from swell.extract.model import fit_model
    from swell.extract.network import Evidence
    from swell.extract.pipeline import read_connections
    from swell.extract.sessions import Thresholds

    table, pair_hist = read_connections(trace, 1 << 16)
    return table, fit_model(table, pair_hist, Thresholds(), {"source": str(trace)},
                            Evidence())


def session_ids(table: object) -> np.ndarray:
    """The extractor's session id of each connection (table row)."""
    from swell.extract.sessions import Thresholds, app_codes, group

    _, code = app_codes(table)
    gr = group(table, code, Thresholds())
    out = np.empty(len(code), dtype=np.int64)
    out[gr.order] = gr.session
    return out


def moved_sessions(table: object, seed: int) -> np.ndarray:
    """Per trace session, a shift moving its first connection start to a uniform time
    of the trace (the session kept whole: the arrivals a stationary process gives)."""
    sid = session_ids(table)
    start = table.cols["start"]
    first = np.full(int(sid.max()) + 1, np.inf)
    np.minimum.at(first, sid, start)
    t0, t1 = float(np.nanmin(start)), float(np.nanmax(table.cols["end"]))
    return np.random.default_rng(seed).uniform(t0, t1, first.size) - first


def trace_sessions(table: object) -> dict[str, dict[str, np.ndarray]]:
    """Per application: each trace session's (c2s bytes, s2c bytes, span s)."""
    from swell.extract.sessions import Thresholds, app_codes, group

    names, code = app_codes(table)
    gr = group(table, code, Thresholds())
    c = table.cols
    sess_of = np.empty(len(code), dtype=np.int64)
    sess_of[gr.order] = gr.session
    p = table.pairs
    nsess = int(gr.session.max()) + 1
    req = np.bincount(sess_of[p["conn"]], weights=p["req_size"], minlength=nsess)
    rsp = np.bincount(sess_of[p["conn"]], weights=p["rsp_size"], minlength=nsess)
    start = c["start"]
    t0 = np.full(nsess, np.inf)
    t1 = np.full(nsess, -np.inf)
    np.minimum.at(t0, sess_of, start)
    np.maximum.at(t1, sess_of, start)
    app_of = np.zeros(nsess, dtype=np.int64)
    app_of[sess_of] = code
    return {name: {"req": req[app_of == i], "rsp": rsp[app_of == i],
                   "span": (t1 - t0)[app_of == i]} for i, name in enumerate(names)}


def drawn_sessions(model_dir: Path, duration_s: float, seed: int, draw: str
                   ) -> dict[str, dict[str, np.ndarray]] | None:
    """Per application: each drawn session's (c2s bytes, s2c bytes, scheduled span s)."""
    from swell.errors import SwellError
    from swell.generators.schedule import build_schedule, load_app_samples

    apps, scale = load_app_samples(model_dir)
    clients = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(256)]
    servers = [f"10.1.{i // 250}.{i % 250 + 1}" for i in range(256)]
    try:
        sched = build_schedule(apps, clients, servers, duration_s, seed, scale=scale,
                               rre_draw=draw)
    except SwellError:
        return None  # a draw this code does not have
    out: dict[str, dict[str, list[float]]] = {}
    for s in sched.sessions:
        app = s.rres[0].conns[0].app
        t, starts = 0.0, []
        for rre in s.rres:
            t += rre.gap
            starts += [t + c.offset for c in rre.conns]
        row = out.setdefault(app, {"req": [], "rsp": [], "span": []})
        row["req"].append(sum(c.req_bytes for r in s.rres for c in r.conns))
        row["rsp"].append(sum(c.rsp_bytes for r in s.rres for c in r.conns))
        row["span"].append(max(starts) - min(starts))
    return {a: {k: np.asarray(v, dtype=float) for k, v in d.items()} for a, d in out.items()}


def ideal_series(times: np.ndarray, nbytes: np.ndarray, t0: float, t1: float,
                 bin_s: float) -> np.ndarray:
    """Bytes per bin of ``[t0, t1)``, each response whole in the bin of its time."""
    keep = (times >= t0) & (times < t1)
    idx = ((times[keep] - t0) / bin_s).astype(np.int64)
    return np.bincount(idx, weights=nbytes[keep], minlength=int((t1 - t0) / bin_s))


def trace_responses(table: object, shift: np.ndarray | None = None
                    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per server port: each response's time as a schedule would place it (its
    connection's start, plus the think times before it: transfers take no time) and
    its bytes; ``shift``: seconds added to every time of each session (by its id)."""
    p, c = table.pairs, table.cols
    conn = p["conn"]
    think = np.nan_to_num(p["think_before"], nan=0.0).clip(0)
    first = np.r_[True, conn[1:] != conn[:-1]]
    cum = np.cumsum(think)
    head = np.maximum.accumulate(np.where(first, np.arange(len(conn)), 0))
    t = c["start"][conn] + cum - cum[head]
    if shift is not None:
        t = t + shift[session_ids(table)[conn]]
    port = c["sport"][conn]
    return {int(q): (t[port == q], p["rsp_size"][port == q].astype(float))
            for q in np.unique(port)}


def schedule_responses(sched: object) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The same placement for a schedule's responses, per server port."""
    out: dict[int, tuple[list[float], list[float]]] = {}
    for s in sched.sessions:
        t = s.t
        for rre in s.rres:
            t += rre.gap
            for c in rre.conns:
                ts, bs = out.setdefault(int(c.server.rsplit(":", 1)[1]), ([], []))
                at = t + c.offset
                for _, a, k in c.pairs:
                    ts.append(at)
                    bs.append(a)
                    at += k
    return {q: (np.asarray(ts), np.asarray(bs, dtype=float)) for q, (ts, bs) in out.items()}


def ideal_energy(model: object, model_dir: Path, table: object, seeds: int,
                 octaves: range) -> list[str]:
    """Energy of the s2c responses placed by the schedule's own clock (transfers take
    no time), per server port: the trace's connections and think times, against the
    schedules ``bench/fidelity.py --calibrate`` draws (3 trace lengths, the first
    one warm-up, the model's mean rate by construction), in the window after it."""
    from swell.analysis.energy import energy_plot
    from swell.generators.schedule import build_schedule, load_app_samples

    bin_s, dur = 0.001, model.duration_s
    run_s, warm = round(3 * dur, 1), round(dur, 1)
    trace = trace_responses(table)
    t0 = float(np.nanmin(table.cols["start"]))
    apps, scale = load_app_samples(model_dir)
    hosts = [f"10.0.{i // 250}.{i % 250 + 1}" for i in range(256)]
    lines = [f"| port | series | {' | '.join(f'{2 ** j * bin_s:g} s' for j in octaves)} |",
             "|---|---|" + "---|" * len(octaves)]

    def cells(x: np.ndarray) -> str:
        e = energy_plot(x, bin_s, 3, 8)
        return " | ".join(f"{e.y[e.at(j)]:.2f}" if j in e.octaves else "" for j in octaves)

    for port in (80, 443):
        t, b = trace[port]
        lines.append(f"| {port} | trace | {cells(ideal_series(t, b, t0, t0 + dur, bin_s))} |")
        ys = []
        for seed in range(1, seeds + 1):
            mt, mb = trace_responses(table, moved_sessions(table, seed))[port]
            mt = t0 + np.mod(mt - t0, dur)  # wrapped: every byte stays in the trace
            e = energy_plot(ideal_series(mt, mb, t0, t0 + dur, bin_s), bin_s, 3, 8)
            ys.append([e.y[e.at(j)] if j in e.octaves else np.nan for j in octaves])
        m = np.log2(np.nanmean(np.exp2(np.array(ys)), axis=0))
        lines.append(f"| {port} | trace, each session whole at a uniform start, mean of "
                     f"{len(ys)} | " + " | ".join(f"{v:.2f}" for v in m) + " |")
        for draw in DRAWS:
            ys = []
            for seed in range(1, seeds + 1):
                try:
                    sched = build_schedule(apps, hosts, hosts, run_s, seed, scale=scale,
                                           target_mbps=model.mean_rate_bps() / 1e6,
                                           cuts=(warm,), rre_draw=draw)
                except Exception:  # noqa: BLE001 - a draw this code does not have
                    break
                st, sb = schedule_responses(sched).get(port, (np.zeros(0), np.zeros(0)))
                e = energy_plot(ideal_series(st, sb, warm, run_s, bin_s), bin_s, 3, 8)
                ys.append([e.y[e.at(j)] if j in e.octaves else np.nan for j in octaves])
            if ys:
                m = np.log2(np.nanmean(np.exp2(np.array(ys)), axis=0))
                lines.append(f"| {port} | {draw}, mean of {len(ys)} seeds | "
                             + " | ".join(f"{v:.2f}" for v in m) + " |")
    return lines


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3:
        return float("nan")
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def stats(d: dict[str, np.ndarray], duration_s: float) -> dict[str, float]:
    b = np.sort(d["rsp"])[::-1]
    n, total = len(b), float(b.sum())

    def top(frac: float) -> float:
        return float(b[:max(1, int(np.ceil(frac * n)))].sum() / total) if total else float("nan")

    heavy = np.argsort(d["rsp"])[::-1][:max(1, int(np.ceil(0.1 * n)))]
    rate = d["rsp"][heavy] / np.maximum(d["span"][heavy], 0.1)
    return {"n": n, "mean": float(b.mean()) if n else float("nan"),
            "cv": float(b.std() / b.mean()) if n and b.mean() else float("nan"),
            "top1": top(0.01), "top10": top(0.10), "max": float(b[0] / total) if total else 0.0,
            "rho": spearman(d["rsp"], d["span"]), "heavy_rate": float(np.median(rate)) * 8 / 1e6,
            "shot": float((b / 1e6) ** 2 @ np.ones(n)) / duration_s}


def row(app: str, what: str, s: dict[str, float]) -> str:
    return (f"| {app} | {what} | {s['n']:.0f} | {s['mean'] / 1e3:.1f} | {s['cv']:.2f} | "
            f"{s['top1']:.0%} | {s['top10']:.0%} | {s['max']:.0%} | {s['rho']:.2f} | "
            f"{s['heavy_rate']:.3f} | {s['shot']:.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", type=Path,
                    default=Path("/tmp/swell-fidelity/campus/campus.pcap"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--min-sessions", type=int, default=20,
                    help="leave out applications with fewer trace sessions")
    args = ap.parse_args()
    from swell.extract.model import save_model

    table, model = extract(args.trace)
    trace = trace_sessions(table)
    with tempfile.TemporaryDirectory(prefix="swell-sess-") as tmp:
        model_dir = save_model(model, Path(tmp) / "model")
        drawn = {d: [drawn_sessions(model_dir, model.duration_s, seed, d)
                     for seed in range(1, args.seeds + 1)] for d in DRAWS}
        energy = ideal_energy(model, model_dir, table, args.seeds, range(1, 14))
    print(f"trace {args.trace} ({model.duration_s:.1f} s); drawn: build_schedule over the "
          f"trace's duration at scale 1, seeds 1-{args.seeds}, medians over seeds")
    print("| application | sessions from | sessions | mean s2c kB/session | CV | top 1% share "
          "| top 10% share | largest | Spearman(bytes, span) | heavy sessions' s2c Mbit/s "
          "| sum of squares, MB^2/s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for app in sorted(trace, key=lambda a: -trace[a]["rsp"].sum()):
        if len(trace[app]["rsp"]) < args.min_sessions or trace[app]["rsp"].sum() == 0:
            continue
        print(row(app, "trace", stats(trace[app], model.duration_s)))
        for d in DRAWS:
            per = [stats(x[app], model.duration_s) for x in drawn[d] if x is not None and app in x]
            if per:
                print(row(app, f"drawn, {d}", {k: float(np.nanmedian([p[k] for p in per]))
                                                for k in per[0]}))
    print("\nserver->client energy (log2 bytes^2 per 1 ms bin, db3) of the responses placed "
          "by the schedule's clock (a connection's start plus the think times before each "
          "response; transfers take no time), per server port; schedules as "
          "bench/fidelity.py --calibrate draws them, window after the warm-up")
    print("\n".join(energy))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
