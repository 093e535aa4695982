"""What a Swing run asked, offered and delivered, and what went wrong: its accounting.

Three loads per direction (forward: client -> server, requests; reverse:
server -> client, responses), all application payload in Mbit/s:

* **asked**: the model's mean rate with its variants (``SwingKind.asked_mbps``);
* **offered**: what the drawn schedule carries in the steady-state window: each
  connection's bytes by the overlap of its estimated transfer with the window (the
  count a target is built with, :mod:`swell.analysis.swing_window` over the path in
  the schedule's ``meta["steady_start"]``), or, for a schedule drawn with
  ``start: empty``, by the scheduled start of each connection (a lower bound of when
  it starts);
* **delivered**: what the client side's sockets moved during the window
  (``swell-gen run``'s cumulative counters, one line a second; intervals ending
  after the warm-up and no later than the run's end).

The steady-state window is the measurement window: from the end of the
warm-up (sessions started since the beginning, so long ones are under way) to
the end of the run. The experiment's collector compares these with the bytes
seen at the bottleneck and raises the problems.

Connections: started (a record each), completed, cut at the end of the run
(``cut``), failed (any other error, counted by message); sessions: scheduled,
started, completed (every connection of a started session done and ok).
``cpu``: the link engine's, the generators' and the machine's CPU while the
traffic ran (:mod:`swell.generators.cpushare`), so a shortfall can be told
apart from a network limit.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis.swing_window import PathEstimate, conn_spans, share_in
from swell.errors import SwellError
from swell.generators.base import GenResult
from swell.generators.kind import Window
from swell.generators.schedule import Schedule


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Per-connection records written by ``swell-gen run``."""
    try:
        return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise SwellError(path, f"cannot read records: {exc}") from None


def offered_by_direction(sched: Schedule, start_s: float, end_s: float | None = None
                         ) -> dict[str, float]:
    """Payload per direction offered in ``[start_s, end_s)``: by the estimated transfers
    when the schedule names its path (a steady start), else of the connections scheduled
    to start in it."""
    end = sched.duration_s if end_s is None else end_s
    path = sched.meta.get("steady_start", {}).get("path")
    if path:
        est = PathEstimate.from_meta(path)
        q = a = 0.0
        for sess in sched.sessions:
            for s0, s1, c in conn_spans(sess, sess.t, est):
                share = share_in(s0, s1, start_s, end)
                q += c.req_bytes * share
                a += c.rsp_bytes * share
        span = max(end - start_s, 1e-9)
        return {"forward": 8 * q / span / 1e6, "reverse": 8 * a / span / 1e6}
    return scheduled_by_direction(sched, start_s, end)


def scheduled_by_direction(sched: Schedule, start_s: float, end_s: float | None = None
                           ) -> dict[str, float]:
    """Payload per direction (Mbit/s over ``[start_s, end_s)``) of the connections
    scheduled to start in it. A connection's scheduled start is its session's arrival
    plus the think times of the RREs before it plus its offset in the RRE: transfer
    times are not known in advance, so this is a lower bound of when it starts."""
    end = sched.duration_s if end_s is None else end_s
    req = rsp = 0
    for sess in sched.sessions:
        t = sess.t
        for rre in sess.rres:
            t += rre.gap
            for c in rre.conns:
                if start_s <= t + c.offset < end:
                    req += c.req_bytes
                    rsp += c.rsp_bytes
    span = max(end - start_s, 1e-9)
    return {"forward": 8 * req / span / 1e6, "reverse": 8 * rsp / span / 1e6}


def delivered_by_direction(series: dict[str, Any], warmup_s: float, end_s: float
                           ) -> dict[str, float] | None:
    """Mean payload rates of the counter intervals inside the window (None: no counters)."""
    t = np.asarray(series.get("t", []), dtype=float)
    if t.size == 0 or "tx_mbps" not in series:
        return None
    keep = (t > warmup_s + 0.5) & (t <= end_s + 0.5)
    if not keep.any():
        return None
    tx = np.asarray(series["tx_mbps"], dtype=float)[keep]
    rx = np.asarray(series["rx_mbps"], dtype=float)[keep]
    return {"forward": float(np.nanmean(tx)), "reverse": float(np.nanmean(rx))}


def connection_counts(records: list[dict[str, Any]], sched: Schedule) -> dict[str, Any]:
    """Connections and sessions started, completed, cut and failed."""
    errors = Counter(str(r.get("error")) for r in records if not r.get("ok"))
    cut = errors.pop("cut", 0)
    want: Counter[int] = Counter(s for s, *_ in sched.conns())
    done: Counter[int] = Counter(r["session"] for r in records if r.get("ok"))
    started = {r["session"] for r in records}
    return {
        "connections": {"started": len(records), "completed": len(records) - cut
                        - sum(errors.values()), "cut": cut, "failed": sum(errors.values()),
                        "errors": dict(errors.most_common(5))},
        "sessions": {"scheduled": len(sched.sessions), "started": len(started),
                     "completed": sum(1 for s in started if done[s] == want[s])},
    }


def run_accounting(sched: Schedule, gen: GenResult, window: Window) -> dict[str, Any]:
    """The ``load`` part of a Swing run's results (see the module docstring)."""
    warm = float(sched.meta.get("window_start_s", 0.0))
    records = load_records(gen.files["records"]) if gen.files["records"].exists() else []
    return {
        "load": {
            "window_s": [warm, sched.duration_s],
            "offered_mbps": offered_by_direction(sched, warm),
            "offered_run_mbps": sched.meta.get("offered_mbps"),
            "delivered_mbps": delivered_by_direction(gen.series, warm, sched.duration_s),
            "target_mbps": sched.meta.get("target_mbps"),
            "arrivals": sched.meta.get("arrivals"),
            "steady_start": sched.meta.get("steady_start"),
        },
        **connection_counts(records, sched),
        "hosts": sched.meta.get("hosts", {}),
        "cpu": gen.summary.get("cpu"),
    }
