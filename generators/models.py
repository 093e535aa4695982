"""Model inputs of traffic kinds: a Swing model from a trace (extracted once), its variants.

A kind that replays a model (Swing) or matches its rate (CBR/Poisson with
``match_model``) names a model directory or a trace. :func:`base_model`
returns the directory, extracting a trace once per study (cached under the
study's ``models/`` by the trace's content hash; damage the reader met in the
trace, records skipped or a cut end, is stored in the model's provenance as
``swell extract`` stores it, and :func:`model_damage` reads it back for the
run's warnings); :func:`apply_variant`
applies a :class:`VariantSpec` (RSP x k, HB constant RTT, zero think time,
capped access links, then session scaling or scaling to a target rate) and
saves the result as its own model directory, so a run keeps exactly what it
replayed. :func:`model_rate_bps` is the model's mean server -> client rate.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from swell.errors import SwellError
from swell.typed import StrictModel


class VariantSpec(StrictModel):
    """A model transformation (DESIGN 2.1); all fields optional and combinable."""

    scale: float | None = Field(None, gt=0, description="session arrival rate x k")
    target_mbps: float | None = Field(None, gt=0, description="scale sessions to this mean rate")
    rsp: float | None = Field(None, gt=0, description="response sizes x k")
    req: float | None = Field(None, gt=0, description="request sizes x k (client -> server)")
    hb_rtt_ms: float | None = Field(None, gt=0, description="every RTT set to this (HB: 4 ms)")
    zero_think: bool = False
    cap_mbps: float | None = Field(None, gt=0, description="cap every access link at this rate")

    @model_validator(mode="after")
    def _one_scaling(self) -> VariantSpec:
        if self.scale is not None and self.target_mbps is not None:
            raise ValueError("give either scale or target_mbps, not both")
        return self


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def base_model(model: str | None, trace: str | None, cache: Path, base_dir: Path
               ) -> Path | None:
    """The model directory a kind starts from (extracting a trace once), or None.

    Relative paths are relative to the experiment file's folder (``base_dir``).
    """
    from swell.extract.model import save_model
    from swell.extract.pipeline import extract_model

    if model:
        path = base_dir / model
        if not (path / "model.json").is_file():
            raise SwellError(path, "not a swell model directory")
        return path
    if not trace:
        return None
    from swell.extract.reader import last_damage

    src = base_dir / trace
    if not src.is_file():
        raise SwellError(src, "no such trace")
    dest = cache / f"model-{_hash_file(src)}"
    if not (dest / "model.json").is_file():
        m = extract_model(src, label=f"extract {src.name}")
        damage = last_damage(src)
        if damage:  # kept with the model: every run that replays it reports it
            m.meta["provenance"].setdefault("reader", {})["damage"] = damage.to_json()
        save_model(m, dest)
    return dest


def model_damage(model_dir: Path | None) -> tuple[dict[str, Any], str] | None:
    """The damage the reader met in the trace a model was extracted from (as stored in
    its ``model.json``: ``provenance.reader.damage``) and its one line for the screen;
    None when there was none (or no model)."""
    from swell.extract.reader import Damage

    if model_dir is None:
        return None
    try:
        prov = json.loads((Path(model_dir) / "model.json").read_text())["provenance"]
        d = prov["reader"]["damage"]
        line = Damage(str(prov.get("source", model_dir)), dict(d["reasons"]),
                      int(d["skipped_packets"]), d.get("first_offset")).one_line()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return ({"source": prov.get("source"), **d}, line) if line else None


def apply_variant(model_dir: Path, variant: VariantSpec | None, cache: Path) -> Path:
    """The variant of a model, saved beside the others (same inputs, same directory)."""
    from swell.extract import variants as v
    from swell.extract.model import load_model, save_model

    if variant is None or variant == VariantSpec():
        return model_dir
    key = hashlib.sha1(
        (str(model_dir.resolve()) + variant.model_dump_json()).encode()
    ).hexdigest()[:12]
    dest = cache / f"variant-{key}"
    if (dest / "model.json").is_file():
        return dest
    m = v.apply(load_model(model_dir), scale=variant.scale, target_mbps=variant.target_mbps,
                rsp=variant.rsp, hb_rtt_ms=variant.hb_rtt_ms, zero_think_times=variant.zero_think,
                cap_mbps=variant.cap_mbps, req=variant.req)
    save_model(m, dest)
    return dest


def model_rate_bps(model_dir: Path) -> float:
    """The model's mean rate server -> client (the direction the downloads compete in).

    Payload bytes the servers sent over the trace's duration, times the model's rate scale:
    what a CBR or Poisson background must carry to match the Swing background's load.
    """
    from swell.extract.model import load_model

    m = load_model(model_dir)
    scale = float(m.meta.get("rate_scale", 1.0))
    s2c = sum(a["bytes_s2c"] for a in m.meta["apps"].values())
    return 8.0 * s2c * scale / max(m.duration_s, 1e-9)
