"""Reduce one run's raw data to its results entry (``run.json``).

Inputs are what the run left on disk (bottleneck captures per direction, the
client-side foreground capture, generator counters) plus what the runner
measured (timing, httperf's summary, the topology's report). Output is plain
JSON: everything the report needs, so a report never reopens a capture.

* background at the bottleneck, per direction, with the foreground hosts'
  packets removed: mean rate, a 100 ms throughput series, and the energy plot
  of the 1 ms byte series (Abry-Veitch, :mod:`swell.analysis.energy`) over the
  measurement window (after the warm-up);
* all traffic at the bottleneck per direction (mean rate), for utilisation;
* delivered versus asked per direction, connections cut or failed, saturated
  pipes, and the problems when the background fell short
  (:mod:`swell.experiments.delivery`);
* the background and foreground kinds' own results
  (:class:`~swell.generators.kind.KindResult`), e.g. httperf's per-request
  response times from its client-side capture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis.bottleneck import touches_hosts
from swell.analysis.energy import energy_plot
from swell.analysis.timeseries import Packets, bin_counts, load_packets
from swell.experiments.delivery import delivery
from swell.experiments.emulation import lateness, lateness_warning
from swell.experiments.schema import RunPlan
from swell.generators.kind import KindResult

ENERGY_BIN_S = 0.001
SERIES_BIN_S = 0.1


def _window(ts_ns: np.ndarray, timing: dict[str, float]) -> tuple[int, int]:
    """The measurement window in the capture's clock (wall clock when it matches)."""
    start, end = timing.get("foreground_start"), timing.get("end")
    if ts_ns.size and start and end and abs(ts_ns[0] / 1e9 - start) < 3600:
        return int(start * 1e9), int(end * 1e9)
    if not ts_ns.size:
        return 0, 0
    warm = (timing.get("foreground_start", 0) - timing.get("background_start", 0)) * 1e9
    return int(ts_ns[0] + warm), int(ts_ns[-1]) + 1


def direction_result(p: Packets | None, fg_ips: list[str], timing: dict[str, float]
                     ) -> dict[str, Any]:
    """Background and total figures of one bottleneck direction."""
    if p is None or len(p) == 0:
        return {"packets": 0, "bg_mean_mbps": 0.0, "all_mean_mbps": 0.0, "series_mbps": [],
                "energy": None}
    t0, t1 = _window(p.ts_ns, timing)
    fg = touches_hosts(p, fg_ips)
    inwin = (p.ts_ns >= t0) & (p.ts_ns < t1)
    span = max((t1 - t0) / 1e9, 1e-9)
    bg = inwin & ~fg
    energy = None
    series: list[float] = []
    if bg.any():
        fine = bin_counts(p.ts_ns[bg], p.size[bg], int(ENERGY_BIN_S * 1e9), t0, t1)
        energy = energy_plot(fine.bytes, ENERGY_BIN_S).to_dict()
        coarse = bin_counts(p.ts_ns[bg], p.size[bg], int(SERIES_BIN_S * 1e9), t0, t1)
        series = (coarse.bits_per_s / 1e6).round(4).tolist()
    return {
        "packets": int(inwin.sum()),
        "bg_packets": int(bg.sum()),
        "bg_mean_mbps": float(p.size[bg].sum() * 8 / span / 1e6),
        "all_mean_mbps": float(p.size[inwin].sum() * 8 / span / 1e6),
        "series_bin_s": SERIES_BIN_S,
        "series_mbps": series,
        "energy": energy,
    }


def collect_run(plan: RunPlan, rdir: Path, engine: str | None, timing: dict[str, float],
                background: KindResult, foreground: dict[str, Any] | None,
                report: dict[str, Any], topo: dict[str, Any], model: Path | None,
                prefix: str | None = None, warnings: list[str] | None = None,
                asked_mbps: dict[str, float] | None = None) -> dict[str, Any]:
    """The results entry of one run (``asked_mbps``: the background's asked load per
    bottleneck direction, when its kind has one)."""
    from swell.topologies.addressing import plan_addresses
    from swell.topologies.spec import spec_from_dict

    spec = spec_from_dict(topo)
    plan_addr = plan_addresses(spec)
    fg_ips = [str(ip) for node in plan_addr.nodes if node.role == "fg" for ip in node.hosts]
    directions = {}
    for d in ("forward", "reverse"):
        path = rdir / "capture" / f"bottleneck-{d}.pcap"
        # IP bytes (headers included, no link header): the level at which every kind
        # asks its rate; frame lengths read 14 bytes more per packet (+12% for VoIP)
        p = (load_packets(path, size_field="ip_len")
             if path.exists() and path.stat().st_size > 24 else None)
        directions[d] = direction_result(p, fg_ips, timing)
    path_mbps = {"forward": spec.bottleneck.forward_dir().rate_mbps,
                 "reverse": spec.bottleneck.reverse_dir().rate_mbps}
    active = timing.get("end", 0.0) - timing.get("background_start", 0.0)
    load, load_problems = delivery(asked_mbps, background.metrics, directions,
                                   report.get("engine_stats"), topo, path_mbps,
                                   active if active > 0 else None)
    late = lateness(report.get("engine_stats"))
    late_warning = lateness_warning(late)
    gen_summary = None
    if background.metrics:
        gen_summary = {"name": background.metrics.get("generator", background.kind),
                       "summary": background.metrics.get("summary", {})}
    return {
        "key": plan.key,
        "label": plan.label,
        "repetition": plan.repetition,
        "seed": plan.seed,
        "point": dict(plan.point),
        "spec": json.loads(plan.spec.model_dump_json()),
        "background": plan.spec.background.model_dump(),
        "background_kind": plan.spec.background.kind,
        "model": str(model) if model else None,
        "engine": engine,
        "prefix": prefix,
        "timing": timing,
        "bottleneck": directions,
        "foreground": foreground,
        "generator": gen_summary,
        "captures": report.get("captures", []),
        "problems": report.get("problems", []) + background.problems + load_problems,
        "warnings": ((warnings or []) + list(background.metrics.get("warnings", []))
                     + ([late_warning] if late_warning else [])),
        "engine_lateness": late,
        "asked_mbps": asked_mbps,
        "load": load,
    }
