"""Options shared by the ``swell gen`` subcommands (places, output folder, lists)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from swell.placement import Local, Netns, Place


def place(ns: str | None) -> Place:
    return Netns(ns) if ns else Local()


def out_dir(arg: str | None, label: str) -> Path:
    return Path(arg) if arg else Path(tempfile.mkdtemp(prefix=f"swell-gen-{label}-"))


def split(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


def add_places(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src-ns", help="network namespace of the client side (default: this one)")
    p.add_argument("--dst-ns", help="network namespace of the server side (default: this one)")
    p.add_argument("--out", help="output directory (default: a new temporary one)")
    p.add_argument("--warmup", type=float, default=0.0, help="seconds left out of the series")


