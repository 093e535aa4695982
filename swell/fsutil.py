"""Atomic file and directory writing: nothing half-written is ever left.

Every output swell produces goes to a temporary sibling first and is renamed
into place once complete, so an interrupted run leaves either the old file or
the new one, never a truncated one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(dest: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``dest``; rename it onto ``dest`` on success."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=suffix or ".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_text(dest: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``dest`` atomically."""
    with atomic_path(dest) as tmp:
        tmp.write_text(text)


def write_json(dest: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``dest`` atomically."""
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def atomic_dir(dest: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory beside ``dest``; swap it into place on success.

    An existing ``dest`` is replaced only after the new one is complete.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        yield tmp
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.replace(dest, old / "x")
            os.replace(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
