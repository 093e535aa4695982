"""Fidelity of generated traffic against the original trace (issue 5, DESIGN 5).

For each direction (``c2s``/``s2c`` by default, see
:mod:`swell.analysis.timeseries`):

1. mean throughput of the original and the generated capture and their
   percentage difference (target: within 10%);
2. the energy plot of each (bytes per bin of ``D``, default 1 ms), the
   per-octave difference, and the original's floor (first half against second
   half, :func:`swell.analysis.compare.halves_floor`); an octave passes when
   the difference is within the floor;
3. Swing distributions re-extracted from the generated capture, compared by
   KS distance against the model it was generated from (or, without a model,
   against the same extraction of the original). :func:`reextracted_distributions`
   is the hook into ``swell.extract``; it returns ``None`` with a reason when
   extraction is not possible, and the table says so instead of inventing
   numbers.

:func:`fidelity` is pure (arrays in, a :class:`FidelityResult` out);
:func:`format_table` renders it for the terminal and :meth:`FidelityResult.to_dict`
for ``fidelity.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell.analysis.compare import (
    KSResult,
    OctaveComparison,
    ThroughputComparison,
    compare_energy,
    halves_floor,
    ks_table,
)
from swell.analysis.energy import EnergyPlot, energy_plot
from swell.analysis.timeseries import Packets, Series, direction_series, directions_by_rule
from swell.errors import SwellError


@dataclass(frozen=True)
class FidelityConfig:
    bin_s: float = 0.001
    vanishing_moments: int = 3
    unit: str = "bytes"  # or "packets"
    direction: str = "roles"
    tolerance_pct: float = 10.0
    min_coeffs: int = 8  # octaves with fewer coefficients are left out


@dataclass
class DirectionFidelity:
    direction: str
    throughput: ThroughputComparison
    original: EnergyPlot
    generated: EnergyPlot
    floor: dict[int, float]
    comparison: OctaveComparison
    original_series: Series
    generated_series: Series

    @property
    def octaves_passed(self) -> int:
        return int(self.comparison.passed.sum())

    @property
    def octaves_judged(self) -> int:
        c = self.comparison
        return int((np.isfinite(c.diff) & np.isfinite(c.floor)).sum())  # type: ignore[arg-type]


@dataclass
class FidelityResult:
    config: FidelityConfig
    directions: list[DirectionFidelity]
    ks: list[KSResult] | None = None
    ks_note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": self.config.__dict__,
            "meta": self.meta,
            "directions": [],
            "ks": None if self.ks is None else [k.__dict__ for k in self.ks],
            "ks_note": self.ks_note,
        }
        for d in self.directions:
            out["directions"].append({
                "direction": d.direction,
                "throughput": {
                    "original_bps": d.throughput.original_bps,
                    "generated_bps": d.throughput.generated_bps,
                    "diff_pct": d.throughput.diff_pct,
                    "pass": d.throughput.passed(self.config.tolerance_pct),
                },
                "octaves_passed": d.octaves_passed,
                "octaves_judged": d.octaves_judged,
                "octaves": d.comparison.rows(),
                "energy_original": d.original.to_dict(),
                "energy_generated": d.generated.to_dict(),
            })
        return out


def fidelity(
    original: Packets,
    generated: Packets,
    config: FidelityConfig = FidelityConfig(),
    directions: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None,
    grids: tuple[tuple[int, int | None], tuple[int, int | None]] | None = None,
) -> FidelityResult:
    """Throughput and energy comparison per direction (no KS; see :func:`add_ks`).

    ``directions`` gives precomputed masks (original, generated), e.g. found on
    whole captures before cutting a window; otherwise ``config.direction`` is
    applied to the packets given. ``grids`` gives each capture's bin grid
    ``(start_ns, end_ns or None)``; by default first to last packet.
    """
    bin_ns = int(round(config.bin_s * 1e9))
    if directions is None:
        directions = (directions_by_rule(original, config.direction),
                      directions_by_rule(generated, config.direction))
    (so_start, so_end), (sg_start, sg_end) = grids or ((None, None), (None, None))
    so = direction_series(original, directions[0], bin_ns, so_start, so_end)
    sg = direction_series(generated, directions[1], bin_ns, sg_start, sg_end)
    rows = []
    for name, s_orig in so.items():
        s_gen = sg.get(name)
        if s_gen is None:
            continue
        xo = s_orig.values(config.unit)
        xg = s_gen.values(config.unit)
        eo = energy_plot(xo, config.bin_s, config.vanishing_moments, config.min_coeffs)
        eg = energy_plot(xg, config.bin_s, config.vanishing_moments, config.min_coeffs)
        floor = halves_floor(xo, config.bin_s, config.vanishing_moments, config.min_coeffs)
        cmp = compare_energy(eo, eg).with_floor(floor)
        rows.append(DirectionFidelity(
            direction=name,
            throughput=ThroughputComparison(name, s_orig.mean_bps, s_gen.mean_bps),
            original=eo, generated=eg, floor=floor, comparison=cmp,
            original_series=s_orig, generated_series=s_gen,
        ))
    return FidelityResult(config=config, directions=rows, meta={
        "original_packets": len(original), "generated_packets": len(generated),
        "original_duration_s": original.duration_s, "generated_duration_s": generated.duration_s,
    })


# Parameters compared by KS: per-application distributions and per-host network values.
# Left out: sessionStart (absolute times), rreServer and sessClient (host indices), which
# are not comparable across captures, and the hosts / *_measured bookkeeping arrays.
KS_SKIP_PARAMS = ("sessionStart", "rreServer", "sessClient", "hosts")
KS_MIN_SAMPLES = 10  # below this a KS distance says little; the table flags it


def comparable_distributions(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model arrays that make sense to compare by KS distance."""
    out = {}
    for key, v in arrays.items():
        param = key.rsplit("/", 1)[-1]
        if param in KS_SKIP_PARAMS or param.endswith("_measured"):
            continue
        v = np.asarray(v)
        if v.dtype.kind in "iuf" and v.size:
            out[key] = v.astype(float)
    return out


def reextracted_distributions(path: str | Path) -> tuple[dict[str, np.ndarray] | None, str]:
    """Swing distributions of a capture, for KS distances: ``(arrays, note)``.

    The hook to the extract stage: ``swell.extract.pipeline.extract_model(path)``
    fits the same model the ``swell extract`` command does, and its arrays
    (``app/<app>/<param>``, ``net/<side>/<param>``) are returned. When the
    extract stage is missing or cannot model the capture, ``(None, reason)``.
    """
    try:
        from swell.extract.pipeline import extract_model
    except ImportError as exc:
        return None, f"KS distances not computed: swell.extract is not available ({exc})"
    try:
        model = extract_model(path, label=f"re-extract {Path(path).name}")
    except SwellError as exc:
        return None, f"KS distances not computed: {exc.one_line()}"
    return comparable_distributions(model.arrays), "Swing distributions re-extracted"


def model_distributions(model_dir: str | Path) -> dict[str, np.ndarray]:
    """Distributions of a saved model directory (``swell.extract.model.load_model``)."""
    from swell.extract.model import load_model

    return comparable_distributions(load_model(model_dir).arrays)


def add_ks(
    result: FidelityResult,
    original: dict[str, np.ndarray] | None,
    generated: dict[str, np.ndarray] | None,
    note: str,
) -> FidelityResult:
    """Attach KS distances between two sets of distributions (or the reason there are none)."""
    if original is None or generated is None:
        result.ks, result.ks_note = None, note
    else:
        result.ks, result.ks_note = ks_table(original, generated), note
    return result


def format_table(result: FidelityResult) -> str:
    """Human-readable fidelity table."""
    cfg = result.config
    lines = [f"fidelity: {cfg.unit} per {cfg.bin_s * 1e3:g} ms bin, db{cfg.vanishing_moments}, "
             f"directions by {cfg.direction}", ""]
    lines.append(f"{'direction':<10} {'original':>14} {'generated':>14} {'diff':>8}  "
                 f"(pass within {cfg.tolerance_pct:g}%)")
    for d in result.directions:
        t = d.throughput
        mark = "pass" if t.passed(cfg.tolerance_pct) else "FAIL"
        lines.append(f"{d.direction:<10} {t.original_bps / 1e6:>10.3f} Mb/s "
                     f"{t.generated_bps / 1e6:>9.3f} Mb/s {t.diff_pct:>+7.1f}%  {mark}")
    for d in result.directions:
        lines += ["", f"energy per octave, {d.direction}: {d.octaves_passed}/{d.octaves_judged} "
                  "octaves within the original's floor"]
        lines.append(f"{'j':>3} {'scale':>9} {'y_orig':>7} {'y_gen':>7} {'diff':>7} "
                     f"{'floor':>6}  result")
        for r in d.comparison.rows():
            res = "pass" if r.get("pass") else ("n/a" if not np.isfinite(r["floor"]) else "FAIL")
            lines.append(f"{r['octave']:>3} {_scale(r['time_scale_s']):>9} {r['y_original']:>7.2f} "
                         f"{r['y_generated']:>7.2f} {r['diff']:>+7.2f} {r['floor']:>6.2f}  {res}")
    lines.append("")
    if result.ks is None:
        lines.append(result.ks_note)
    else:
        lines.append(f"KS distances ({result.ks_note}):")
        for k in result.ks:
            few = "  few samples" if min(k.n_a, k.n_b) < KS_MIN_SAMPLES else ""
            lines.append(f"  {k.name:<40} D={k.distance:.3f} p={k.pvalue:.3g} "
                         f"(n={k.n_a}/{k.n_b}){few}")
    return "\n".join(lines)


def _scale(s: float) -> str:
    return f"{s:.3g} s" if s >= 1 else f"{s * 1e3:.3g} ms"
