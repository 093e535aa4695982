"""Estimators' results: truth and error per estimate, per-run summaries, report figures.

:func:`judge` turns what an estimator collected (estimates with their probing
spans, wall clock) into its results: the truth per 1 s bin from the
bottleneck capture of the probed direction (server side -> client side, the
``reverse`` file; the foreground hosts' packets, i.e. the probe's, left out),
each estimate's truth over its span and its error in percent, and per-run
summaries (mean and sd of low, high, estimate and error; time to the first
estimate; probe bytes per estimate, counted by the sender or, for the real
tools, in the capture).

:func:`report` draws, from stored results alone, the estimates against the
truth over time (one panel per configuration, its first run) and a Fig. 12-style
bar chart of the error per configuration (mean over runs, sd as the bar), and
a table.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis import bwest as est
from swell.generators.base import GenResult
from swell.generators.kind import ReportPart, Window

CAPTURE = "bottleneck-reverse.pcap"


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


def judge(gen: GenResult, window: Window, capacity_mbps: float | None
          ) -> tuple[dict[str, Any], list[str]]:
    """The metrics of one estimator run and its problems (see the module docstring)."""
    s = gen.summary
    estimates = [dict(e) for e in s.get("estimates", [])]
    problems: list[str] = []
    pcap = Path(gen.files.get("capture_dir", ".")) / CAPTURE
    truth: est.Truth | None = None
    probe_ts = probe_len = None
    hosts = [s.get("server_ip"), s.get("client_ip")]
    hosts = [h for h in hosts if h]
    if capacity_mbps is None:
        problems.append("the bottleneck has no rate: no truth")
    elif not pcap.is_file() or pcap.stat().st_size <= 24:
        problems.append(f"no bottleneck capture {pcap}: no truth")
    else:
        truth = est.truth_from_capture(pcap, hosts, capacity_mbps * 1e6, window.start,
                                       window.end)
        from swell.analysis.bottleneck import only_hosts
        from swell.analysis.timeseries import load_packets

        mine = only_hosts(load_packets(pcap, size_field="ip_len"), hosts)
        probe_ts, probe_len = mine.ts_ns / 1e9, mine.size
    for e in estimates:
        t = math.nan if truth is None else est.truth_over(truth, e["t_start"], e["t_end"])
        e["truth_mbps"] = _r(t / 1e6)
        for key, out in (("estimate_mbps", "error_pct"), ("low_mbps", "error_low_pct"),
                         ("high_mbps", "error_high_pct")):
            v = e.get(key)
            e[out] = _r(est.error_pct(v * 1e6, t)) if v is not None else None
        if e.get("probe_bytes") is None and probe_ts is not None:
            sel = (probe_ts >= e["t_start"]) & (probe_ts <= e["t_end"])
            e["probe_bytes"] = int(probe_len[sel].sum())
        e["t_s"] = _r(e["t_end"] - window.start)
    done = [e for e in estimates if not e.get("timeout")]
    timeouts = [e for e in estimates if e.get("timeout")]
    for e in timeouts:
        problems.append(f"an estimate timed out after {e['t_end'] - e['t_start']:.1f} s "
                        "(never converged)")

    def col(key: str) -> list[float]:
        return [e[key] for e in done if e.get(key) is not None]

    total_bytes = s.get("probe_bytes")
    if total_bytes is None:
        total_bytes = int(probe_len.sum()) if probe_len is not None else None
    metrics: dict[str, Any] = {
        "estimates": estimates,
        "estimate_times_s": [e["t_s"] for e in done],
        "low_mbps": col("low_mbps"),
        "high_mbps": col("high_mbps"),
        "estimate_mbps": col("estimate_mbps"),
        "truth_mbps": [] if truth is None else (truth.avail_bps / 1e6).round(3).tolist(),
        "truth_bin_s": 1.0,
        "estimate_truth_mbps": col("truth_mbps"),
        "error_pct": col("error_pct"),
        "probe_bytes": total_bytes,
        "bytes_per_estimate": (float(np.mean(col("probe_bytes"))) if col("probe_bytes")
                               else None),
        "time_to_first_s": (done[0]["t_end"] - window.start) if done else None,
        "timeouts": len(timeouts),
        "summary": {k: est.summarize(col(k)) for k in
                    ("low_mbps", "high_mbps", "estimate_mbps", "truth_mbps", "error_pct",
                     "error_low_pct", "error_high_pct")},
    }
    if "trains" in s:  # how many trains the sender's kernel stamped (swell-probe)
        metrics["trains"] = s["trains"]
        metrics["kernel_stamped_trains"] = s["kernel_stamped_trains"]
        if s["trains"] and s["kernel_stamped_trains"] < s["trains"]:
            problems.append(f"{s['trains'] - s['kernel_stamped_trains']} of {s['trains']} "
                            "probe trains lacked kernel transmit stamps and used the "
                            "sender's own (a sender preempted before its send reads as "
                            "queueing)")
    if "chirps" in s:
        metrics["chirps"] = [[_r(c["t"] - window.start), _r(c["estimate_mbps"])]
                             for c in s["chirps"]]
        # chirps discarded because the hypervisor held the machine's CPUs meanwhile
        # (swell.steal), and that steal in all (ms)
        stolen = [c.get("steal_ms", 0.0) for c in s["chirps"]]
        metrics["chirps_steal"] = sum(x > 0 for x in stolen)
        metrics["steal_ms"] = _r(sum(stolen))
        held = [c for c in s["chirps"] if c.get("discarded", "").startswith(
            "the sender was held up")]
        metrics["chirps_held_out"] = len(held)
        if 2 * len(held) > len(s["chirps"]):
            problems.append(f"{len(held)} of {len(s['chirps'])} chirps discarded: their "
                            "sender was held up more than max_breaks times (a busy host)")
    if not done:
        problems.append("no estimate finished in the measurement window")
    return metrics, problems


# --------------------------------------------------------------------------- report


def _fg(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("foreground") or {}


def _run_mean(run: dict[str, Any], key: str) -> float | None:
    s = _fg(run).get("summary", {}).get(key, {})
    return s.get("mean")


def group_table(groups: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per configuration: means and sds over its runs of the per-run means."""
    rows = []
    for label, runs in groups.items():
        row: dict[str, Any] = {"label": label, "runs": len(runs)}
        for key in ("low_mbps", "high_mbps", "estimate_mbps", "truth_mbps", "error_pct",
                    "error_low_pct", "error_high_pct"):
            row[key] = est.summarize([_run_mean(r, key) for r in runs])
        row["bytes_per_estimate"] = est.summarize([_fg(r).get("bytes_per_estimate")
                                                   for r in runs])
        row["time_to_first_s"] = est.summarize([_fg(r).get("time_to_first_s") for r in runs])
        row["timeouts"] = sum(_fg(r).get("timeouts", 0) for r in runs)
        rows.append(row)
    return rows


def _ms(s: dict[str, Any], nd: int = 1) -> str:
    if s.get("mean") is None:
        return "-"
    return f"{s['mean']:.{nd}f} ± {s['sd']:.{nd}f}"


def report(kind: str, groups: dict[str, list[dict[str, Any]]], out: Path) -> ReportPart:
    """Estimate-vs-truth panels, the error bar chart and a table (results alone)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    part = ReportPart()
    if not groups:
        return part
    out.mkdir(parents=True, exist_ok=True)
    labels = list(groups)
    n = len(labels)
    cols = min(3, n)
    rows_n = math.ceil(n / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 2.8 * rows_n), squeeze=False,
                             sharey=True)
    for ax, label in zip(axes.flat, labels, strict=False):
        fg = _fg(groups[label][0])
        truth = fg.get("truth_mbps", [])
        if truth:
            ax.step(np.arange(len(truth) + 1), [*truth, truth[-1]], where="post", color="k",
                    lw=1.2, label="truth (1 s)")
        if fg.get("chirps"):
            c = np.array([x for x in fg["chirps"] if x[1] is not None], float).reshape(-1, 2)
            ax.plot(c[:, 0], c[:, 1], ".", ms=2, color="0.6", label="one chirp")
        for e in fg.get("estimates", []):
            if e.get("timeout") or e.get("estimate_mbps") is None:
                continue
            a, b = e["t_s"] - (e["t_end"] - e["t_start"]), e["t_s"]
            lo, hi = e.get("low_mbps"), e.get("high_mbps") or e.get("low_mbps")
            ax.fill_between([a, b], [lo, lo], [hi, hi], color="C0", alpha=0.35, lw=0)
            ax.plot([a, b], [e["estimate_mbps"]] * 2, color="C0", lw=1.5)
        ax.set_title(label, fontsize=8)
        ax.set_xlabel("time in window [s]", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[n:]:
        ax.axis("off")
    axes[0][0].set_ylabel("available bandwidth [Mbit/s]", fontsize=8)
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    p1 = out / f"{kind}-estimates.png"
    fig.savefig(p1, dpi=110)
    fig.savefig(p1.with_suffix(".svg"))
    plt.close(fig)
    part.figures.append((p1, f"{kind}: estimates (blue: range or value over its probing span) "
                             "against the truth per 1 s bin (black), first run of each"))

    table = group_table(groups)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * n + 2), 3.4))
    x = np.arange(n)
    if kind in ("slops", "pathload"):
        series = [("error_low_pct", "low", -0.2), ("error_high_pct", "high", 0.2)]
        width = 0.4
    else:
        series = [("error_pct", "estimate", 0.0)]
        width = 0.6
    for key, name, dx in series:
        m = [r[key]["mean"] if r[key]["mean"] is not None else np.nan for r in table]
        sd = [r[key]["sd"] if r[key]["sd"] is not None else 0 for r in table]
        ax.bar(x + dx, m, width, yerr=sd, capsize=3, label=name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(x, labels, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("error vs truth [%]")
    ax.set_title(f"{kind}: error against the true available bandwidth (mean, sd over runs)",
                 fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    p2 = out / f"{kind}-error.png"
    fig.savefig(p2, dpi=110)
    fig.savefig(p2.with_suffix(".svg"))
    plt.close(fig)
    part.figures.append((p2, f"{kind}: error per configuration (Fig. 12 style)"))

    head = ("configuration", "runs", "low Mbit/s", "high Mbit/s", "truth Mbit/s", "error %",
            "bytes/estimate", "first estimate s", "timeouts")
    body = []
    for r in table:
        cells = (r["label"], str(r["runs"]), _ms(r["low_mbps"]), _ms(r["high_mbps"]),
                 _ms(r["truth_mbps"]), _ms(r["error_pct"]), _ms(r["bytes_per_estimate"], 0),
                 _ms(r["time_to_first_s"]), str(r["timeouts"]))
        body.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    part.html = (f"<h3>{html.escape(kind)}: available-bandwidth estimates</h3><table><tr>"
                 + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(body)
                 + "</table>")
    return part
