"""Integration tests of the namespace-set helper (swell.nsset), as root.

The helper is the fixture every other integration test stands on, so it is
checked on its own: namespaces and veths are made with the set's prefix and
offloads off, traffic flows (directly and through a routed middle namespace),
cleanup kills what runs inside and leaves nothing with the prefix behind,
including after an exception in a ``with`` block.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from swell.nsset import NetnsSet, NsCommandError, ns_path, ns_pids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")


def offload_state(nss: NetnsSet, ns: str, ifname: str) -> dict[str, str]:
    out = nss.run(ns, "ethtool", "-k", ifname).stdout
    rows = (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    return {k.strip(): v.split()[0] if v.split() else "" for k, v in rows}


def test_veth_ping_and_cleanup_leaves_nothing() -> None:
    nss = NetnsSet("swt")
    try:
        a, b = nss.add("a"), nss.add("b")
        assert (a, b) == (f"{nss.prefix}-a", f"{nss.prefix}-b")
        assert os.path.exists(ns_path(a))
        nss.veth(a, "va", b, "vb")
        for ns, ifname in ((a, "va"), (b, "vb")):
            state = offload_state(nss, ns, ifname)
            for feature in ("tcp-segmentation-offload", "generic-segmentation-offload",
                            "generic-receive-offload"):
                assert state[feature] == "off", (ns, ifname, feature)
        nss.add_addresses(a, "va", ["10.93.0.1/24", "10.93.0.11/24"])
        nss.add_addresses(b, "vb", ["10.93.0.2/24"])
        assert nss.mac(a, "va").count(":") == 5
        nss.run(a, "ping", "-c", "2", "-i", "0.05", "-W", "2", "10.93.0.2")
        nss.run(b, "ping", "-c", "1", "-W", "2", "10.93.0.11")
        sleeper = nss.popen(b, ["sleep", "60"])  # ip netns exec: setns, then exec (same pid)
        deadline = time.monotonic() + 5
        while sleeper.pid not in nss.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sleeper.pid in ns_pids(b)
        # A prefixed interface in the host namespace (a half-made veth) is the set's too.
        subprocess.run(["ip", "link", "add", f"{nss.prefix}x", "type", "veth", "peer", "name",
                        f"{nss.prefix}y"], check=True)
        assert {f"link {nss.prefix}x", f"link {nss.prefix}y"} <= set(nss.leftovers())
    finally:
        nss.cleanup()
    assert sleeper.wait(timeout=5) == -9
    assert nss.leftovers() == []
    assert nss.names == []
    nss.cleanup()  # twice is harmless


def test_routed_with_sysctls_and_context_manager() -> None:
    with pytest.raises(RuntimeError, match="boom"), NetnsSet("swt") as nss:
        off = "net.ipv6.conf.all.disable_ipv6=1"
        a, r, b = nss.add("a", sysctls=[off]), nss.add("r"), nss.add("b", sysctls=[off])
        assert nss.run(a, "sysctl", "-n", "net.ipv6.conf.all.disable_ipv6").stdout.strip() == "1"
        nss.veth(a, "eth0", r, "ra", offloads_off=("tso", "gso", "gro", "tx"))
        nss.veth(r, "rb", b, "eth0")
        assert offload_state(nss, a, "eth0")["tx-checksumming"] == "off"
        nss.add_addresses(a, "eth0", ["10.94.0.1/24"])
        nss.add_addresses(r, "ra", ["10.94.0.254/24"])
        nss.add_addresses(r, "rb", ["10.94.1.254/24"])
        nss.ip_batch(b, ["address add 10.94.1.1/24 dev eth0",
                         "route add default via 10.94.1.254"])
        nss.add_route(a, "10.94.1.0/24", "10.94.0.254", dev="eth0")
        nss.sysctl(r, "net.ipv4.ip_forward=1")
        nss.run(a, "ping", "-c", "2", "-i", "0.05", "-W", "2", "10.94.1.1")
        with pytest.raises(NsCommandError, match="exit status"):
            nss.run(a, "ip", "route", "add", "10.94.1.0/24", "via", "10.94.0.254")
        raise RuntimeError("boom")
    assert nss.leftovers() == []


def test_prefixes_are_distinct_and_tags_checked() -> None:
    sets = [NetnsSet("swb") for _ in range(20)]
    assert all(s.prefix.startswith("swb") and len(s.prefix) == 7 for s in sets)
    assert len({s.prefix for s in sets}) > 1
    for bad in ("", "SWT", "1ab", "a-b", "waytoolongtag"):
        with pytest.raises(ValueError):
            NetnsSet(bad)


def test_helper_stays_below_the_pipeline() -> None:
    """Benches and tests import it without pulling in topologies, generators, experiments."""
    code = ("import sys, swell.nsset; print(' '.join(m for m in sys.modules if m.startswith("
            "('swell.topologies', 'swell.generators', 'swell.experiments'))))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == ""
