"""The ``swell`` command line.

One entry point with subcommands. Each stage contributes its subcommands
through a module listed in :data:`COMMAND_MODULES`; such a module has a
``register(subparsers)`` function that adds its parsers and sets
``func=handler`` on them. A handler takes the parsed arguments and returns an
exit status.

Errors: a :class:`~swell.errors.SwellError` is printed as one line
(``swell: FILE: problem``) with exit status 2 (3 when the host lacks
something); ``--debug`` shows the traceback instead. Ctrl-C exits with 130
after the handlers' own clean-up has run. The signal is remembered where it
arrives: an interrupt that lands inside a C extension's import surfaces as
that import's ``ImportError: initialization failed`` (matplotlib's Agg backend
does this), and it still ends as an interrupt, not as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from swell import __version__
from swell.errors import SwellError

# Explicit registry: module path -> the top-level commands its register(subparsers)
# adds (a unit test checks that each module adds exactly these).
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "swell.extract.trace_cli": ("trace",),  # swell trace info
    "swell.extract.cli": ("extract", "model"),  # swell extract, swell model show|variant
    "swell.extract.flows_cli": ("flows",),  # swell flows read|collect
    "swell.extract.fit_cli": ("fit",),  # swell fit packets|mmpp
    "swell.extract.harpoon_cli": ("harpoon",),  # swell harpoon extract
    "swell.topologies.cli": ("topo", "cleanup", "doctor"),  # ... swell doctor
    "swell.generators.cli": ("gen",),  # swell gen ...
    "swell.analysis.cli": ("energy", "fidelity"),  # swell energy, swell fidelity
    "swell.experiments.cli": ("run", "report", "check"),  # swell run, report, check
    "swell.experiments.testbed_cli": ("testbed",),  # swell testbed render|host
}

EPILOG = """\
typical flow:
  swell trace info TRACE.pcap            what is in a capture
  swell extract TRACE.pcap -o MODEL      fit Swing models (users, apps, network)
  swell model show MODEL                 summary table and CDF plots
  swell doctor                           what this host offers (netem? TUN?)
  swell run experiments/demo.yaml        run a study; then swell report RUN_DIR

Every command takes --help. Set SWELL_QUIET=1 to hide progress output.
"""


def command_modules(argv: Sequence[str] | None = None) -> list[str]:
    """The command modules to load for ``argv``: only the one that provides its
    command when that is known (importing them all pulls in SciPy and Matplotlib:
    2.9 s per ``swell`` process on this host; ``swell testbed`` alone takes 0.1 s),
    all of them for help or an unknown command."""
    words = [a for a in argv or () if not a.startswith("-")]
    if words:
        for mod_name, commands in COMMAND_MODULES.items():
            if words[0] in commands:
                return [mod_name]
    return list(COMMAND_MODULES)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (every command when omitted)."""
    parser = argparse.ArgumentParser(
        prog="swell",
        description="Realistic, responsive background traffic for network experiments.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"swell {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of one-line errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod_name in command_modules(argv):
        importlib.import_module(mod_name).register(sub)
    return parser


_INTERRUPTED = threading.Event()


def _interrupted(signum: int, frame: object) -> None:
    """Ctrl-C: Python's own behaviour (KeyboardInterrupt), remembered."""
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM (``kill PID``, a batch system's stop) unwinds like Ctrl-C: every
    topology, generator and temporary file is cleaned up on the way out. Further
    SIGTERMs are ignored so they cannot cut the teardown short."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _INTERRUPTED.set()
    raise KeyboardInterrupt


def unwind_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C in this process (main thread only): what every
    ``swell`` command does, and scripts that build topologies (e.g. the benches)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _interrupted)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("SWELL_DEBUG") == "1"
    _INTERRUPTED.clear()
    unwind_on_sigterm()
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except SwellError as exc:
        if debug:
            traceback.print_exc()
        if _INTERRUPTED.is_set():  # raised while unwinding (a tool stopped mid-start)
            print(f"swell: interrupted (on the way out: {exc.one_line()})", file=sys.stderr)
            return 130
        print(f"swell: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("swell: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:
        if not _INTERRUPTED.is_set():
            raise
        if debug:
            traceback.print_exc()
        print("swell: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
