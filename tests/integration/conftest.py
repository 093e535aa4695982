"""Fixtures for root integration tests: one set of namespaces per test.

``netns`` creates network namespaces named ``swt<hex>-<name>`` (a per-test
prefix) and removes them, and every veth created inside them, when the test
ends; a test that leaves anything with its prefix behind fails.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator

import pytest


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


class NetnsSet:
    """Namespaces owned by one test; names carry the test's prefix."""

    def __init__(self) -> None:
        self.prefix = "swt" + secrets.token_hex(2)
        self.names: list[str] = []

    def add(self, name: str) -> str:
        full = f"{self.prefix}-{name}"
        sh("ip", "netns", "add", full)
        self.names.append(full)
        sh("ip", "-n", full, "link", "set", "lo", "up")
        return full

    def veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
        """A veth pair with one end in each namespace (offloads off on both)."""
        tmp_a, tmp_b = f"{self.prefix}a{len(self.names)}", f"{self.prefix}b{len(self.names)}"
        sh("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        sh("ip", "link", "set", tmp_a, "netns", ns_a, "name", if_a)
        sh("ip", "link", "set", tmp_b, "netns", ns_b, "name", if_b)
        for ns, ifname in ((ns_a, if_a), (ns_b, if_b)):
            sh("ip", "netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off",
               "gro", "off", check=False)
            sh("ip", "-n", ns, "link", "set", ifname, "up")

    def run(self, ns: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh("ip", "netns", "exec", ns, *argv, check=check)

    def cleanup(self) -> None:
        for name in self.names:
            sh("ip", "netns", "pids", name, check=False)
            pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", name, check=False)

    def leftovers(self) -> list[str]:
        left = [n for n in sh("ip", "netns", "list").stdout.split() if n.startswith(self.prefix)]
        links = sh("ip", "-o", "link").stdout
        left += [ln.split(":")[1].strip() for ln in links.splitlines() if self.prefix in ln]
        return left


@pytest.fixture
def netns() -> Iterator[NetnsSet]:
    ns = NetnsSet()
    try:
        yield ns
    finally:
        ns.cleanup()
    assert not ns.leftovers(), f"leaked: {ns.leftovers()}"
