"""Fixtures for root integration tests: one set of namespaces per test.

``netns`` is a :class:`swell.nsset.NetnsSet` with the per-test prefix
``swt<hex>``: namespaces are ``swt<hex>-<name>``, veths between them have
segmentation offloads off. When the test ends every process in its namespaces
is killed and the namespaces (with their veths) and any host interface with
the prefix are removed; a test that leaves anything with its prefix behind
fails.

Re-runs: these tests measure real stacks on a shared 2-core host, and their
timing checks (delays to 0.2 ms, rates, estimator errors) fail now and then when
the host is busy: each of CI's last four runs (2026-11-28/29) failed a different
single timing check that passed alone. Every test here is re-run once after a
failure (pytest-rerunfailures); the run reports it as a rerun (``R`` and the
"rerun" count in the summary, the first failure's output kept), and two
failures in a row fail. Modules whose checks do not depend on timing, where a
failure is a bug however busy the host, are never re-run: :data:`NO_RERUN`.
``SWELL_RERUNS=0`` turns re-runs off. What made each re-run is listed at the end
of pytest's output, and appended to the file ``SWELL_RERUN_LOG`` names (the test
command prints it again last, so a re-run is seen in a CI log's tail).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from swell.nsset import NetnsSet

NO_RERUN = frozenset({
    "test_interrupts.py",  # signals and leftovers: the CLI's unwinding
    "test_cleanup_testbed.py",  # what swell cleanup removes
    "test_nsset.py",  # the namespace fixture itself
    "test_relative_output.py",  # paths
    "test_tcp_settings.py",  # sysctls in each namespace
})
RERUNS = int(os.environ.get("SWELL_RERUNS", "1"))
HERE = Path(__file__).parent
RERUN_LOG = os.environ.get("SWELL_RERUN_LOG")
_reruns: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if RERUNS <= 0:
        return
    for item in items:
        if item.path.parent != HERE or item.path.name in NO_RERUN:
            continue
        if item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=RERUNS, reruns_delay=1))


@pytest.fixture
def netns() -> Iterator[NetnsSet]:
    ns = NetnsSet("swt")
    try:
        yield ns
    finally:
        ns.cleanup()
    left = ns.leftovers()
    assert not left, f"leaked: {left}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome != "rerun":
        return
    why = str(report.longrepr or "").strip().splitlines()
    errors = [" ".join(ln.split()) for ln in why if ln.startswith("E ")] or why[-1:]
    line = f"{report.nodeid} ({report.when}): {' | '.join(errors[:3])[:500]}"
    _reruns.append(line)
    if RERUN_LOG:
        with open(RERUN_LOG, "a") as f:
            f.write(line + "\n")


def pytest_terminal_summary(terminalreporter) -> None:
    if _reruns:
        terminalreporter.section("re-run once after a failure (the first failure)")
        for line in _reruns:
            terminalreporter.write_line(line)
