"""``swell gen ...``: run one generator between given addresses and namespaces.

The subcommands come from the kind registry (:mod:`swell.generators.registry`):
every kind that can run by hand names, in ``cli``, the module whose
``add_parsers(subparsers)`` adds its subcommands (``swing``, ``schedule`` and
``serve`` from the Swing kind; ``cbr``, ``poisson``; ``upb``, ``tpb``;
``replay``; ``harpoon``; ``packets`` and ``rps``). Nothing here knows a kind by name.

Every run shows live counters (sessions active, connections/s, Mbit/s per
direction) on stderr and prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import importlib

from swell.generators import registry


def register(subparsers: argparse._SubParsersAction) -> None:
    gen = subparsers.add_parser("gen", help="run a generator (swing, cbr, poisson, upb, ...)",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = gen.add_subparsers(dest="gen_command", metavar="GENERATOR", required=True)
    for module in registry.cli_modules():
        importlib.import_module(module).add_parsers(sub)
