"""The ``swell`` entry point: which command modules it loads, and Ctrl-C.

Ctrl-C ends every ``swell`` command with status 130, wherever it lands.

A SIGINT that arrives while a C extension initialises (matplotlib's Agg
backend, imported lazily by the report) surfaces as that import's
``ImportError: initialization failed``, not as KeyboardInterrupt: CI saw the
report exit 1 with a traceback on 2026-11-29. The CLI remembers the signal and
still exits 130; the same error without a signal stays an error.

A tool stopped while it is still starting can fail to say anything (httperf
SIGINTed before it installs its handler dies with no statistics), and the
SwellError its stop raises in a ``finally`` replaces the KeyboardInterrupt: CI
saw ``swell run`` exit 2 instead of 130 on 2026-11-30. That too exits 130 and
names the error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import subprocess
import sys

import pytest

from swell import cli
from swell.errors import SwellError


def _parser_running(func) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="swell")
    parser.set_defaults(func=func)
    return parser


def _import_hit_by_sigint(args: argparse.Namespace) -> int:
    """What a C extension's module init does when PyErr_CheckSignals fails."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # let the handler run at a bytecode boundary
            pass
    except KeyboardInterrupt:
        raise ImportError("initialization failed") from None
    raise AssertionError("SIGINT was not delivered")


def _stop_fails_while_unwinding(args: argparse.Namespace) -> int:
    """A run's ``finally`` whose stop raises after Ctrl-C (the foreground's stop)."""
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        raise AssertionError("SIGINT was not delivered")
    finally:
        raise SwellError("httperf", "output lacks 'Total: connections'")


def _plain_swell_error(args: argparse.Namespace) -> int:
    raise SwellError("httperf", "output lacks 'Total: connections'")


def _plain_import_error(args: argparse.Namespace) -> int:
    raise ImportError("initialization failed")


def _running(func):
    """A build_parser stand-in whose parser runs ``func``."""
    return lambda argv=None: _parser_running(func)


@pytest.fixture
def restore_signals():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_interrupt_inside_an_import_exits_130(monkeypatch, capsys, restore_signals) -> None:
    monkeypatch.setattr(cli, "build_parser", _running(_import_hit_by_sigint))
    assert cli.main([]) == 130
    assert "swell: interrupted" in capsys.readouterr().err


def test_the_same_error_without_a_signal_is_not_hidden(monkeypatch, restore_signals) -> None:
    monkeypatch.setattr(cli, "build_parser", _running(_import_hit_by_sigint))
    assert cli.main([]) == 130  # leaves the flag set ...
    monkeypatch.setattr(cli, "build_parser", _running(_plain_import_error))
    with pytest.raises(ImportError):  # ... which the next command clears
        cli.main([])


def test_an_error_raised_while_unwinding_from_ctrl_c_exits_130(monkeypatch, capsys,
                                                               restore_signals) -> None:
    monkeypatch.setattr(cli, "build_parser", _running(_stop_fails_while_unwinding))
    assert cli.main([]) == 130
    err = capsys.readouterr().err
    assert "swell: interrupted" in err and "httperf: output lacks" in err
    monkeypatch.setattr(cli, "build_parser", _running(_plain_swell_error))
    assert cli.main([]) == 2  # without a signal, the same error is an error
    assert capsys.readouterr().err.startswith("swell: httperf: output lacks")


def test_each_command_module_adds_the_commands_the_registry_names() -> None:
    for mod_name, commands in cli.COMMAND_MODULES.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        importlib.import_module(mod_name).register(sub)
        assert tuple(sub.choices) == commands, mod_name
        for command in commands:
            assert cli.command_modules(["--debug", command, "--help"]) == [mod_name]
    assert cli.command_modules(["--help"]) == list(cli.COMMAND_MODULES)
    assert cli.command_modules(["no-such-command"]) == list(cli.COMMAND_MODULES)


def test_a_testbed_host_command_loads_neither_scipy_nor_matplotlib() -> None:
    """What a testbed machine runs a dozen times per run stays cheap to start."""
    code = ("import sys; from swell import cli; cli.build_parser(['testbed', 'host', 'up', 'x']);"
            "print(sorted(m for m in ('scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
