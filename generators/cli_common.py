"""Options shared by the ``swell gen`` subcommands (places, output folder, lists)."""

from __future__ import annotations

import argparse
from pathlib import Path

from swell.fsutil import gen_output_dir
from swell.placement import Local, Netns, Place


def place(ns: str | None) -> Place:
    return Netns(ns) if ns else Local()


def out_dir(arg: str | None, label: str, force: bool = False) -> Path:
    """``--out``: a new temporary directory without it; else a missing or empty one, or
    one a previous ``swell gen`` wrote, or anything with ``--force`` (swell.fsutil)."""
    return gen_output_dir(arg, label, force)


def split(text: str) -> list[str]:
    return [x for x in text.replace(",", " ").split() if x]


def add_places(p: argparse.ArgumentParser) -> None:
    p.add_argument("--src-ns", help="network namespace of the client side (default: this one)")
    p.add_argument("--dst-ns", help="network namespace of the server side (default: this one)")
    p.add_argument("--out", help="output directory (default: a new temporary one)")
    p.add_argument("--force", action="store_true",
                   help="write into --out even when it is not a previous swell gen output")
    p.add_argument("--warmup", type=float, default=0.0, help="seconds left out of the series")


