"""``swell cleanup`` finds what a testbed run left on a machine, as root.

Testbed runs name everything ``swl`` + four hex digits
(:func:`swell.experiments.testbed_run.new_testbed_prefix`); local runs ``sw`` +
four. A run that died before its teardown (a failed test, a full disk) left
the router's core namespace ``<prefix>-core`` behind, and ``swell cleanup``
did not see it: its prefix pattern knew only the local form.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest

from swell.experiments.testbed_run import new_testbed_prefix
from swell.topologies.cleanup import PREFIX_RE, cleanup, find_prefixes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")


def test_both_prefix_forms_are_swells() -> None:
    assert PREFIX_RE.match(new_testbed_prefix())
    assert PREFIX_RE.match("sw" + secrets.token_hex(2))
    assert not PREFIX_RE.match("swlb") and not PREFIX_RE.match("swx1234")


def test_cleanup_removes_a_testbed_core_namespace() -> None:
    prefix = new_testbed_prefix()
    ns = f"{prefix}-core"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        assert prefix in find_prefixes()
        results = cleanup(prefix)
        assert results and not any(problems for _, problems, _ in results), results
        assert not Path(f"/run/netns/{ns}").exists()
        assert prefix not in find_prefixes()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
