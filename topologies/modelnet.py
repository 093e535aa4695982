"""Access links for background hosts: explicit values, or drawn from a Swing model.

A Swing model directory (docs/architecture.md section 3) keeps every network
distribution as empirical samples in ``arrays.npz`` under
``net/<side>/<param>``. For each emulated host we draw one sample of one-way
delay, capacity and loss with a seeded generator (ModelNet-style: each
virtual host gets its own access link). When the arrays have equal length they
are per observed host, so one index is drawn per emulated host and the three
values stay together (their correlation survives); otherwise each is drawn on
its own.

A directory with ``model.json`` is read with
:func:`swell.extract.model.load_model` (format and version checked); a bare
``arrays.npz`` is read directly. Units are read from the key's suffix:
``_ms``/``_us``/``_s`` for delay, ``_mbps``/``_bps``/``_kbps`` for capacity;
loss is a fraction. A missing
capacity or loss array means "no limit"/"no loss" and is reported back.

Drawn values become spec links (:class:`~swell.topologies.spec.LinkDir`),
so they are checked by the same rules as links written by hand, and reach the
engines by the same conversions (``linkemu.pipe_from_link``, ``netem``). A
drawn value the spec refuses (a capacity above its limit, say) is an error
naming the model, not a pydantic traceback.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from swell.errors import SwellError
from swell.topologies.spec import HostGroup, LinkDir, Loss, ModelDraw, format_validation_error

DELAY_KEYS = {"delay_ms": 1.0, "owd_ms": 1.0, "delay_us": 1e-3, "delay_s": 1e3, "owd_s": 1e3}
RATE_KEYS = {
    "capacity_mbps": 1.0,
    "capacity_kbps": 1e-3,
    "capacity_bps": 1e-6,
    "rate_mbps": 1.0,
    "rate_bps": 1e-6,
}
LOSS_KEYS = ("loss", "loss_rate", "loss_frac")
SIDE_NAMES = {"client": ("client", "clients"), "server": ("server", "servers")}


@dataclass(frozen=True)
class NetSamples:
    """One side's network samples, in ms, Mbit/s and fractions (None = absent)."""

    delay_ms: np.ndarray
    rate_mbps: np.ndarray | None
    loss: np.ndarray | None


def _pick(arrays: dict[str, np.ndarray], prefix: str, keys: dict[str, float]) -> np.ndarray | None:
    for key, scale in keys.items():
        if prefix + key in arrays:
            values = np.asarray(arrays[prefix + key], dtype=float) * scale
            return values[np.isfinite(values)]
    return None


def _net_arrays(model_dir: Path) -> dict[str, np.ndarray]:
    """The ``net/`` arrays: through ``load_model`` (validated) when model.json is there."""
    if (model_dir / "model.json").exists():
        from swell.extract.model import load_model

        model = load_model(model_dir)
        return {k: v for k, v in model.arrays.items() if k.startswith("net/")}
    path = model_dir / "arrays.npz"
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files if k.startswith("net/")}
    except (OSError, ValueError) as exc:
        raise SwellError(path, f"cannot read model arrays: {exc}") from None


def read_net_samples(model_dir: Path, side: str) -> NetSamples:
    """The network samples of ``side`` ("client" or "server") from a model directory."""
    path = Path(model_dir) / "arrays.npz"
    arrays = _net_arrays(Path(model_dir))
    for name in SIDE_NAMES[side]:
        prefix = f"net/{name}/"
        delay = _pick(arrays, prefix, DELAY_KEYS)
        if delay is not None:
            if delay.size == 0 or (delay < 0).any():
                raise SwellError(path, f"{prefix}delay has no usable samples")
            rate = _pick(arrays, prefix, RATE_KEYS)
            loss = next((arrays[prefix + k] for k in LOSS_KEYS if prefix + k in arrays), None)
            loss = None if loss is None else np.clip(np.asarray(loss, dtype=float), 0.0, 1.0)
            return NetSamples(delay, rate if rate is not None and rate.size else None, loss)
    have = sorted(arrays) or ["none"]
    raise SwellError(path, f"no net/{side}/delay_* samples; net arrays present: {', '.join(have)}")


def draw_links(samples: NetSamples, draw: ModelDraw, n: int, seed: int) -> list[LinkDir]:
    """``n`` access links drawn from ``samples`` with a generator seeded by ``seed``."""
    rng = np.random.default_rng(seed)
    arrays = [a for a in (samples.delay_ms, samples.rate_mbps, samples.loss) if a is not None]
    joint = len({a.size for a in arrays}) == 1

    def sample(values: np.ndarray | None, idx: np.ndarray) -> np.ndarray | None:
        if values is None:
            return None
        return values[idx if joint else rng.integers(0, values.size, n)]

    idx = rng.integers(0, samples.delay_ms.size, n)
    delay = sample(samples.delay_ms, idx)
    rate = sample(samples.rate_mbps, idx)
    loss = sample(samples.loss, idx)
    links = []
    for i in range(n):
        mbps = None if rate is None or rate[i] <= 0 else float(rate[i])
        if mbps is not None and draw.max_rate_mbps is not None:
            mbps = min(mbps, draw.max_rate_mbps)
        p = 0.0 if loss is None else float(loss[i])
        try:
            link = LinkDir(
                rate_mbps=mbps,
                delay_ms=round(float(delay[i]), 3),
                queue_packets=draw.queue_packets,
                loss=Loss.model_validate(p),
                pairing=draw.pairing,
            )
        except ValidationError as exc:
            problem = format_validation_error(exc)
            raise SwellError(draw.path, f"drawn access link {i}: {problem}") from None
        links.append(link)
    return links


def group_links(group: HostGroup, side: str, seed: int) -> list[LinkDir]:
    """One access link per background host of ``group`` (explicit or drawn)."""
    if group.count == 0:
        return []
    if isinstance(group.access, list):
        return list(group.access)
    if group.access is not None:
        return [group.access] * group.count
    assert group.model is not None
    samples = read_net_samples(group.model.path, group.model.side)
    side_seed = seed ^ zlib.crc32(side.encode())
    return draw_links(samples, group.model, group.count, side_seed)
