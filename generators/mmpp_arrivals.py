"""A fitted MMPP (``swell fit mmpp``) as a Swing session arrival process.

``background: {kind: swing, ..., arrivals: "mmpp:DIR"}`` or ``"mmpp:DIR@1"``.

The Swing schedule decides *how many* sessions start in a segment (from the
model's session rate times the scale, or from a byte target:
:mod:`swell.generators.arrivals`); this process decides *when*: the run is cut
into the MMPP's intervals (``interval_s`` of the model, or the length after
``@`` in seconds, which compresses or stretches the model's time axis so that
a per-minute model can shape a one-minute run), a path of the MMPP is drawn
over them (the states as :func:`swell.extract.mmpp.simulate` draws them, from
the schedule's generator), and the ``n`` starts are spread over the intervals in proportion
to the MMPP's rates (multinomial), uniformly within each. So the sessions'
count comes from Swing and the burstiness across time scales from the
fitted MMPP; the mean is Swing's, the autocovariance shape the MMPP's.

``DIR`` is absolute or relative to the working directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from swell.errors import SwellError
from swell.extract.mmpp import MMPPModel, _two_state_path, load_mmpp_model

if TYPE_CHECKING:
    from swell.generators.schedule import AppSamples


class MmppArrivals:
    """Session starts modulated by a fitted MMPP path."""

    steady = True  # a path of the chain from its stationary mixture: no beginning

    def __init__(self, model: MMPPModel, path: Path, interval_s: float | None = None) -> None:
        self.model = model
        self.path = path
        self.interval_s = float(interval_s or model.interval_s)
        self.name = f"mmpp:{path}" + (f"@{interval_s:g}" if interval_s else "")

    @classmethod
    def from_option(cls, text: str) -> MmppArrivals:
        """``DIR`` or ``DIR@SECONDS``."""
        where, sep, scale = text.rpartition("@") if "@" in text else (text, "", "")
        if not where:
            raise SwellError("arrivals", "mmpp needs a model directory: mmpp:DIR[@SECONDS]")
        interval = None
        if sep:
            try:
                interval = float(scale)
            except ValueError:
                raise SwellError("arrivals", f"mmpp:{text}: {scale!r} is not seconds") from None
            if not interval > 0:
                raise SwellError("arrivals", f"mmpp:{text}: the interval must be positive")
        model, _ = load_mmpp_model(where)
        return cls(model, Path(where), interval)

    def expected(self, app: AppSamples, duration: float, scale: float) -> float:
        """As ``stationary``: the model's mean session rate times the scale (the
        arrivals module's ``trace_rate``, not imported: it imports this one)."""
        rate = app.session_starts.size / max(app.trace_duration_s, 1e-9)
        return rate * scale * duration

    def weights(self, n_intervals: int, rng: np.random.Generator) -> np.ndarray:
        """The MMPP's rate per interval along one drawn path of its states (the
        intensity, not Poisson counts: the multinomial below is the count noise)."""
        m = self.model
        lam = np.zeros(n_intervals)
        for s in m.scales:
            lam += s.rate * _two_state_path(s, n_intervals, rng)
        lam += rng.choice(m.marg_rates, size=n_intervals, p=m.marg_probs / m.marg_probs.sum())
        return lam

    def place(self, app: AppSamples, n: int, start: float, end: float,
              rng: np.random.Generator) -> np.ndarray:
        if n <= 0 or end <= start:
            return np.zeros(0)
        width = self.interval_s
        k = max(1, int(np.ceil((end - start) / width)))
        w = self.weights(k, rng)
        lo = start + np.arange(k) * width
        hi = np.minimum(lo + width, end)
        w *= (hi - lo) / width  # a last, partial interval gets its share
        if w.sum() <= 0:  # a path with no arrivals at all: spread evenly
            w = hi - lo
        per = rng.multinomial(n, w / w.sum())
        idx = np.repeat(np.arange(k), per)
        return np.sort(rng.uniform(lo[idx], hi[idx]))
