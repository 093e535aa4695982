"""The model directory every fitted swell model is stored in: one writer, one reader.

A model directory holds ``model.json`` (metadata: ``format``, ``format_version``,
usually ``kind``, provenance, the fit's numbers) and ``arrays.npz`` (the
samples and matrices, no pickles). Swing models (:mod:`swell.extract.model`),
packet models (:mod:`swell.extract.packetfit`), Harpoon models
(:mod:`swell.extract.harpoon_model`) and MMPP models (:mod:`swell.extract.mmpp`)
all go through :func:`save` and :func:`load`:

* :func:`save` writes both files into a temporary directory beside the
  destination and swaps it into place (:func:`swell.fsutil.atomic_dir`): a
  failed or interrupted write leaves the old directory (or nothing), never
  half a model.
* :func:`load` checks that both files are there, that the JSON and the
  arrays read, and that ``format`` and ``format_version`` are the expected
  ones; a directory of another model kind is named as such ("a packet model,
  not a mmpp model"). Every problem is one :class:`SwellError` line naming
  the file. Validation of the contents stays with each model's module.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError

FILES = ("model.json", "arrays.npz")


def json_default(o: Any) -> Any:
    """JSON for numpy scalars and arrays; anything else as its text."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def save(dest: str | os.PathLike[str], meta: dict[str, Any], arrays: dict[str, np.ndarray],
         default: Callable[[Any], Any] = json_default) -> Path:
    """Write ``meta`` and ``arrays`` as the model directory ``dest``, all or nothing."""
    from swell.fsutil import atomic_dir

    with atomic_dir(dest) as tmp:
        np.savez_compressed(tmp / "arrays.npz", **arrays)
        (tmp / "model.json").write_text(
            json.dumps(meta, indent=2, sort_keys=True, default=default) + "\n")
    return Path(dest)


def peek_kind(src: str | os.PathLike[str]) -> str | None:
    """``kind`` from a directory's ``model.json`` (Swing models have none: ``swing``);
    None when it is no readable model directory."""
    try:
        meta = json.loads((Path(src) / "model.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict):
        return None
    if "kind" in meta:
        return str(meta["kind"])
    return "swing" if meta.get("format") == "swell-swing-model" else None


def load(src: str | os.PathLike[str], fmt: str, version: int,
         kind: str | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a model directory of format ``fmt`` (version ``version``): (meta, arrays).
    ``kind`` names the expected model in the error when the directory holds another."""
    src = Path(src)
    mj, npz = src / "model.json", src / "arrays.npz"
    if not mj.is_file() or not npz.is_file():
        raise SwellError(src, "not a swell model directory (model.json and arrays.npz needed)")
    try:
        meta = json.loads(mj.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SwellError(mj, f"unreadable JSON: {exc}") from None
    except OSError as exc:
        raise SwellError(mj, f"cannot read: {exc.strerror or exc}") from None
    if not isinstance(meta, dict):
        raise SwellError(mj, "not a JSON object")
    if meta.get("format") != fmt:
        other = meta.get("kind")
        if kind is not None and isinstance(other, str) and other != kind:
            raise SwellError(mj, f"a {other} model (format {meta.get('format')!r}), not a "
                                 f"{kind} model (expected {fmt!r})")
        raise SwellError(mj, f"format is {meta.get('format')!r}, expected {fmt!r}")
    if meta.get("format_version") != version:
        raise SwellError(mj, f"format version {meta.get('format_version')} is not supported "
                             f"(this swell reads version {version})")
    try:
        with np.load(npz, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise SwellError(npz, f"unreadable arrays: {exc}") from None
    return meta, arrays
