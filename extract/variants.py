"""Variants: transformations of a Swing model (DESIGN 2.1).

Each function returns a new :class:`~swell.extract.model.SwingModel` (the
input is not changed) and appends a record to ``meta["variants"]`` so a model
always says how it was derived.

* :func:`scale_sessions` multiplies the session arrival rate by ``k``
  (``interSession`` divided by ``k``, ``sessions_per_s`` and ``rate_scale``
  multiplied); :func:`scale_to_rate` picks ``k`` so that the mean offered load
  (:meth:`SwingModel.mean_rate_bps`) reaches a target.
* :func:`scale_responses` multiplies every response size by ``k`` (RSP2, RSP4);
  the per-application byte totals in the metadata follow.
* :func:`scale_requests` multiplies every request size by ``k`` (a heavier
  client -> server direction with the same responses: Fig. 13's reverse-path load).
* :func:`constant_rtt` sets every round trip to a constant (high burst "HB":
  4 ms): each access link's one-way delay becomes ``rtt / 4``, so a path
  client link + server link, traversed both ways, adds up to ``rtt``.
* :func:`zero_think` sets user think times (``interRRE``) and the in-connection
  request think times (``reqThink``) to 0, and drops the whole sessions' request
  times (``pairAt``, which hold the trace's pauses).

The size and think-time variants act on the whole sessions too when the model
stores them (``pairReq``, ``pairRsp``, ``sessGaps``, ``pairThink``: what
``rre_draw="session"`` draws), so every draw sees the same variant.
* :func:`cap_capacity` caps every access capacity at a value (e.g. 2 Mbit/s).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.extract.model import SwingModel
from swell.extract.network import SIDES


def _record(m: SwingModel, name: str, **params: Any) -> SwingModel:
    m.meta.setdefault("variants", []).append({"name": name, **params})
    return m


def scale_sessions(model: SwingModel, k: float) -> SwingModel:
    """Session arrival rate times ``k``."""
    if not k > 0:
        raise SwellError("--scale", f"factor must be positive, got {k}")
    m = model.copy()
    for app in m.apps:
        m.arrays[f"app/{app}/interSession"] = m.arrays[f"app/{app}/interSession"] / k
        m.meta["apps"][app]["sessions_per_s"] *= k
    m.meta["rate_scale"] = float(m.meta.get("rate_scale", 1.0)) * k
    return _record(m, "scale_sessions", k=k)


def scale_to_rate(model: SwingModel, target_bps: float) -> SwingModel:
    """Scale the session rate so that the mean offered load is ``target_bps``."""
    now = model.mean_rate_bps()
    if now <= 0:
        raise SwellError("--target-mbps", "the model carries no bytes; cannot scale to a rate")
    if not target_bps > 0:
        raise SwellError("--target-mbps", f"target must be positive, got {target_bps}")
    m = scale_sessions(model, target_bps / now)
    m.meta["variants"][-1].update({"name": "scale_to_rate", "target_bps": target_bps})
    return m


def scale_responses(model: SwingModel, k: float) -> SwingModel:
    """Response sizes times ``k`` (the RSP variants)."""
    if not k > 0:
        raise SwellError("--rsp", f"factor must be positive, got {k}")
    m = model.copy()
    for app in m.apps:
        for key in (f"app/{app}/rspSize", f"app/{app}/pairRsp"):  # pairRsp: whole sessions
            if key in m.arrays:
                m.arrays[key] = np.rint(m.arrays[key] * k).astype(np.int64)
        m.meta["apps"][app]["bytes_s2c"] = int(round(m.meta["apps"][app]["bytes_s2c"] * k))
    return _record(m, "scale_responses", k=k)


def scale_requests(model: SwingModel, k: float) -> SwingModel:
    """Request sizes times ``k`` (more load client -> server, responses unchanged)."""
    if not k > 0:
        raise SwellError("--req", f"factor must be positive, got {k}")
    m = model.copy()
    for app in m.apps:
        for key in (f"app/{app}/reqSize", f"app/{app}/pairReq"):  # pairReq: whole sessions
            if key in m.arrays:
                m.arrays[key] = np.rint(m.arrays[key] * k).astype(np.int64)
        m.meta["apps"][app]["bytes_c2s"] = int(round(m.meta["apps"][app]["bytes_c2s"] * k))
    return _record(m, "scale_requests", k=k)


def constant_rtt(model: SwingModel, rtt_s: float = 0.004) -> SwingModel:
    """Every RTT set to ``rtt_s`` (HB: 4 ms): one-way access delays of ``rtt_s / 4``."""
    if not rtt_s >= 0:
        raise SwellError("--hb-rtt-ms", f"RTT must be non-negative, got {rtt_s}")
    m = model.copy()
    for side in SIDES:
        key = f"net/{side}/delay_s"
        m.arrays[key] = np.full_like(m.arrays[key], rtt_s / 4.0)
    return _record(m, "constant_rtt", rtt_s=rtt_s)


def zero_think(model: SwingModel) -> SwingModel:
    """User think times (interRRE) and request think times (reqThink) set to 0."""
    m = model.copy()
    for app in m.apps:
        # sessGaps and pairThink: the same think times in the whole sessions, if stored
        for p in ("interRRE", "reqThink", "sessGaps", "pairThink"):
            key = f"app/{app}/{p}"
            if key in m.arrays:
                m.arrays[key] = np.zeros_like(m.arrays[key])
        # the requests' times in the trace hold its pauses: no anchors without them
        m.arrays.pop(f"app/{app}/pairAt", None)
    return _record(m, "zero_think")


def cap_capacity(model: SwingModel, cap_bps: float) -> SwingModel:
    """Every access capacity capped at ``cap_bps``."""
    if not cap_bps > 0:
        raise SwellError("--cap-mbps", f"capacity must be positive, got {cap_bps}")
    m = model.copy()
    for side in SIDES:
        key = f"net/{side}/capacity_bps"
        m.arrays[key] = np.minimum(m.arrays[key], cap_bps)
    return _record(m, "cap_capacity", cap_bps=cap_bps)


def size_weights(variants: list[dict[str, Any]]) -> tuple[float, float]:
    """How much a request's and a response's byte count towards a target load, from the
    model's variant records: sizes scaled after the session rate was set to the target
    (``req``, ``rsp``) count at their size before the factor. Two variants that differ
    only in a size factor then stop drawing sessions at the same place, and with the
    same seed (``seeds: common``) draw the same sessions: Figure 13's two backgrounds,
    requests x1.6 and x16, get the same responses."""
    kq = kr = 1.0
    for v in variants:
        if v.get("name") in ("scale_sessions", "scale_to_rate"):
            kq = kr = 1.0  # a factor before the rate was set is part of the target
        elif v.get("name") == "scale_requests":
            kq *= float(v["k"])
        elif v.get("name") == "scale_responses":
            kr *= float(v["k"])
    return 1.0 / kq, 1.0 / kr


def apply(model: SwingModel, scale: float | None = None, target_mbps: float | None = None,
          rsp: float | None = None, hb_rtt_ms: float | None = None, zero_think_times: bool = False,
          cap_mbps: float | None = None, req: float | None = None) -> SwingModel:
    """Several transformations in the one order swell uses everywhere.

    Session scaling comes first, so ``target_mbps`` is the load of the model as
    extracted and the others act on top (RSP2 of a 3.3 Mbit/s model offers
    6.6 Mbit/s); then response sizes, request sizes, zero think time, constant RTT, capped capacity.
    """
    m = model
    if scale is not None:
        m = scale_sessions(m, scale)
    if target_mbps is not None:
        m = scale_to_rate(m, target_mbps * 1e6)
    if rsp is not None:
        m = scale_responses(m, rsp)
    if req is not None:
        m = scale_requests(m, req)
    if zero_think_times:
        m = zero_think(m)
    if hb_rtt_ms is not None:
        m = constant_rtt(m, hb_rtt_ms / 1e3)
    if cap_mbps is not None:
        m = cap_capacity(m, cap_mbps * 1e6)
    return m
