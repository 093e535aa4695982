"""Fixtures for root integration tests: one set of namespaces per test.

``netns`` is a :class:`swell.nsset.NetnsSet` with the per-test prefix
``swt<hex>``: namespaces are ``swt<hex>-<name>``, veths between them have
segmentation offloads off. When the test ends every process in its namespaces
is killed and the namespaces (with their veths) and any host interface with
the prefix are removed; a test that leaves anything with its prefix behind
fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from swell.nsset import NetnsSet


@pytest.fixture
def netns() -> Iterator[NetnsSet]:
    ns = NetnsSet("swt")
    try:
        yield ns
    finally:
        ns.cleanup()
    left = ns.leftovers()
    assert not left, f"leaked: {left}"
