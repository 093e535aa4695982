"""The Harpoon model directory: format, saving, loading, summary and plots.

Same conventions as the Swing model (:mod:`swell.extract.model`)::

    MODEL/model.json   "format": "swell-harpoon-model", "format_version", "kind":
                       "harpoon", provenance (inputs, flow format, engine, the
                       self-configuration parameters), trace span, counts (records,
                       coalesced, files, dropped), notes, units
    MODEL/arrays.npz   tcp/file_size, tcp/ict_s          empirical samples
                       pool/{client,server}_{addr,weight} addresses by rank, weights
                       interval/tcp_bytes, udp_bytes      byte targets per interval
                       interval/sessions, sessions_sd     active sessions (Figure 4)
                       interval/pairs_active              host pairs seen active
                       interval/udp_{cbr,periodic,exp}    UDP sources per interval
                       udp/{cbr,periodic,exp}_{param,size} per source: rate bit/s,
                                                          period s or mean gap s;
                                                          datagram bytes

Written with :func:`swell.fsutil.atomic_dir` (all or nothing); :func:`load`
checks format, version and that the arrays agree with each other.
``swell model show`` dispatches here when ``model.json`` says ``"kind":
"harpoon"`` (:func:`is_harpoon`).
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from swell import __version__
from swell.errors import SwellError
from swell.extract import modeldir
from swell.extract.harpoon import Fit, HarpoonParams, session_mean

FORMAT = "swell-harpoon-model"
FORMAT_VERSION = 2  # 2: interval/sessions counted on persistent sessions (the generator's)
KIND = "harpoon"
UDP_KINDS = ("cbr", "periodic", "exp")
INTERVAL_KEYS = ("tcp_bytes", "udp_bytes", "sessions", "sessions_sd", "pairs_active",
                 *(f"udp_{k}" for k in UDP_KINDS))
UNITS = {
    "tcp/file_size": "bytes per file (bytes - 40 x packets)",
    "tcp/ict_s": "s between connection starts of one address pair",
    "interval/tcp_bytes": "TCP payload bytes per interval (target)",
    "interval/sessions": "active sessions per interval (mean of the trials)",
    "udp/cbr_param": "bit/s", "udp/periodic_param": "period, s", "udp/exp_param": "mean gap, s",
}


@dataclass
class HarpoonModel:
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def interval_s(self) -> float:
        return float(self.meta["params"]["interval_s"])

    @property
    def intervals(self) -> int:
        return len(self.arrays["interval/tcp_bytes"])

    @property
    def files(self) -> np.ndarray:
        return self.arrays["tcp/file_size"]

    @property
    def icts(self) -> np.ndarray:
        return self.arrays["tcp/ict_s"]

    @property
    def session_mean(self) -> float:
        """Mean bytes one active session fetches in one interval (Figure 4's unit)."""
        return session_mean(self.files, self.icts, self.interval_s)

    def pool(self, side: str) -> tuple[list[str], np.ndarray]:
        """(addresses by rank, weights) of the client or server pool."""
        return ([str(a) for a in self.arrays[f"pool/{side}_addr"]],
                self.arrays[f"pool/{side}_weight"].astype(float))

    def mean_rate_bps(self) -> float:
        """Mean TCP payload rate of the modelled traffic, bit/s."""
        return 8.0 * float(self.arrays["interval/tcp_bytes"].sum()) / (
            self.intervals * self.interval_s)


def build(fit: Fit, params: HarpoonParams, provenance: dict[str, Any]) -> HarpoonModel:
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "kind": KIND,
        "swell_version": __version__,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "provenance": provenance, "params": params.as_dict(),
        "trace": {"t0_ns": fit.t0_ns, "duration_s": fit.duration_s},
        "counts": fit.counts, "notes": fit.notes, "units": UNITS,
    }
    return HarpoonModel(meta, fit.arrays)


def validate(m: HarpoonModel, where: str) -> None:
    a = m.arrays
    for key in ("params", "provenance", "trace", "counts"):
        if key not in m.meta:
            raise SwellError(where, f"model.json lacks {key!r}")
    need = ["tcp/file_size", "tcp/ict_s", *(f"interval/{k}" for k in INTERVAL_KEYS),
            *(f"pool/{s}_{x}" for s in ("client", "server") for x in ("addr", "weight")),
            *(f"udp/{k}_{x}" for k in UDP_KINDS for x in ("param", "size"))]
    for k in need:
        if k not in a:
            raise SwellError(where, f"arrays.npz lacks {k}")
    if a["tcp/file_size"].size == 0 or (a["tcp/file_size"] < 0).any():
        raise SwellError(where, "tcp/file_size is empty or negative")
    if not np.isfinite(a["tcp/ict_s"]).all() or (a["tcp/ict_s"] < 0).any():
        raise SwellError(where, "tcp/ict_s: not finite values >= 0")
    n = len(a["interval/tcp_bytes"])
    for k in INTERVAL_KEYS:
        v = a[f"interval/{k}"]
        if len(v) != n or not np.isfinite(v).all() or (v < 0).any():
            raise SwellError(where, f"interval/{k}: not one finite value >= 0 per interval")
    for s in ("client", "server"):
        if len(a[f"pool/{s}_addr"]) != len(a[f"pool/{s}_weight"]) or not len(a[f"pool/{s}_addr"]):
            raise SwellError(where, f"pool/{s}: addresses and weights disagree or are empty")
    for k in UDP_KINDS:
        if len(a[f"udp/{k}_param"]) != len(a[f"udp/{k}_size"]):
            raise SwellError(where, f"udp/{k}: parameters and sizes disagree")


def save(m: HarpoonModel, dest: str | os.PathLike[str]) -> Path:
    validate(m, str(dest))
    return modeldir.save(dest, m.meta, m.arrays, default=str)


def is_harpoon(src: str | os.PathLike[str]) -> bool:
    """Whether a model directory's ``model.json`` says ``"kind": "harpoon"``."""
    return modeldir.peek_kind(src) == KIND


def load(src: str | os.PathLike[str]) -> HarpoonModel:
    meta, arrays = modeldir.load(src, FORMAT, FORMAT_VERSION, KIND)
    m = HarpoonModel(meta, arrays)
    validate(m, str(src))
    return m


# --------------------------------------------------------------------- summary and plots

def _q(v: np.ndarray) -> str:
    if v.size == 0:
        return "-"
    p = np.percentile(v.astype(float), [50, 90, 99])
    return " / ".join(f"{x:.4g}" for x in p)


def summary(m: HarpoonModel) -> str:
    a, c = m.arrays, m.meta["counts"]
    iv = a["interval/tcp_bytes"]
    lines = [
        f"Harpoon model: {m.intervals} intervals of {m.interval_s:g} s, "
        f"{m.mean_rate_bps() / 1e6:.4g} Mbit/s mean TCP payload "
        f"(+{8 * a['interval/udp_bytes'].sum() / (m.intervals * m.interval_s) / 1e6:.3g} UDP)",
        f"records {c['records']:,} -> {c['flows_after_surgery']:,} flows after surgery "
        f"({c['coalesced']:,} coalesced); TCP {c['tcp_flows']:,}, UDP {c['udp_flows']:,}, "
        f"other {c['other_flows']:,}",
        f"files: {c['files']:,} (TCP with SYN and FIN/RST: {c['tcp_with_syn_and_fin']:,}, "
        f"{c['dropped_small']:,} under {m.meta['params']['min_file_bytes']} B dropped)",
        "",
        f"{'parameter':<26}{'samples':>9}  {'p50 / p90 / p99':<27} mean",
        f"{'file size (B)':<26}{m.files.size:>9}  {_q(m.files):<27} {m.files.mean():.4g}",
        f"{'inter-connection (s)':<26}{m.icts.size:>9}  {_q(m.icts):<27} "
        f"{(m.icts.mean() if m.icts.size else float('nan')):.4g}",
        f"{'bytes per interval':<26}{iv.size:>9}  {_q(iv):<27} {iv.mean():.4g}",
        f"{'active sessions':<26}{iv.size:>9}  {_q(a['interval/sessions']):<27} "
        f"{a['interval/sessions'].mean():.4g}  ({m.session_mean:.4g} B per session "
        f"and interval)",
        f"{'host pairs active':<26}{iv.size:>9}  {_q(a['interval/pairs_active']):<27} "
        f"{a['interval/pairs_active'].mean():.4g}",
    ]
    for side in ("client", "server"):
        addrs, w = m.pool(side)
        top = ", ".join(f"{x} ({int(k)})" for x, k in zip(addrs[:3], w[:3], strict=False))
        lines.append(f"{side} pool: {len(addrs)} addresses; top {top}")
    for k in UDP_KINDS:
        n = len(m.arrays[f"udp/{k}_param"])
        if n:
            lines.append(f"UDP {k}: {n} sources, {UNITS[f'udp/{k}_param']} "
                         f"{_q(m.arrays[f'udp/{k}_param'])}")
    lines += [f"note: {x}" for x in m.meta.get("notes", [])]
    return "\n".join(lines)


def plot(m: HarpoonModel, dest: str | os.PathLike[str]) -> list[Path]:
    """CDFs of file sizes and inter-connection times, targets and sessions per interval,
    and the pools' rank-frequency (PNG and SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from swell.extract.modelplots import _cdf_axes, _save

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    for key, title in (("tcp/file_size", "file sizes"), ("tcp/ict_s", "inter-connection times")):
        fig, _ = _cdf_axes(title, UNITS[key], [("model", m.arrays[key])])
        files += _save(fig, plt, dest, key.split("/")[1])
    a = m.arrays
    x = np.arange(m.intervals) * m.interval_s / 3600
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.step(x, 8 * a["interval/tcp_bytes"] / m.interval_s / 1e6, where="post", label="TCP target")
    ax.set_xlabel("hours from the trace start")
    ax.set_ylabel("Mbit/s (payload)")
    ax2 = ax.twinx()
    ax2.step(x, a["interval/sessions"], where="post", color="tab:orange", label="sessions")
    ax2.step(x, a["interval/pairs_active"], where="post", color="tab:green", alpha=0.6,
             label="host pairs seen")
    ax2.set_ylabel("active sessions")
    ax.set_title(f"per {m.interval_s:g} s interval")
    fig.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    files += _save(fig, plt, dest, "intervals")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for side in ("client", "server"):
        _, w = m.pool(side)
        ax.loglog(np.arange(1, len(w) + 1), w / w.sum(), marker=".", label=f"{side} pool")
    ax.set_xlabel("address rank")
    ax.set_ylabel("share of files")
    ax.set_title("address pools (rank-frequency)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files += _save(fig, plt, dest, "pools")
    return files


def show(src: str | os.PathLike[str], plots: Path | None, no_plots: bool) -> int:
    """``swell model show`` for a Harpoon model."""
    m = load(src)
    print(summary(m))
    if not no_plots:
        out = plots if plots else Path(src) / "plots"
        written = plot(m, out)
        print(f"\nwrote {len(written)} plot files to {out}")
    return 0
