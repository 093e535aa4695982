"""The run-wide TCP settings of an experiment land in every namespace of the run, and
nowhere else (as root, one small dumbbell).

``congestion_control`` and ``tcp_ssthresh_cache`` (net.ipv4.tcp_no_ssthresh_metrics_save
= 0: a new connection starts from the ssthresh its predecessor to the same host learnt,
as kernels before 5.6 did; docs/generators.md measures what it changes for TCP
baselines beside back-to-back downloads).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from swell.experiments.tcpsettings import SSTHRESH_SYSCTL, set_tcp
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces")

SYSCTL = Path("/proc/sys/" + SSTHRESH_SYSCTL.replace(".", "/"))
SPEC = {"network": "10.79.0.0/16", "bottleneck": {"rate_mbps": 50, "delay_ms": 1},
        "clients": {"count": 2, "access": {"delay_ms": 1}},
        "servers": {"count": 1, "access": {"delay_ms": 1}}}


def _read(topo: Topology, node, key: str) -> str:
    return topo.run_in(node, ["sysctl", "-n", key]).stdout.strip()


@pytest.mark.skipif(not SYSCTL.exists(), reason=f"this kernel has no {SSTHRESH_SYSCTL}")
@pytest.mark.parametrize("cache", [False, True])
def test_tcp_settings_in_every_namespace_only(cache: bool) -> None:
    host_before = SYSCTL.read_text().strip()
    host_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    with Topology(spec_from_dict(SPEC), engine="native") as topo:
        # a new namespace starts from the kernel's default (1), not the host's value
        assert {_read(topo, n, SSTHRESH_SYSCTL) for n in topo.layout.nodes} == {"1"}
        set_tcp(topo, "reno", cache)
        for node in topo.layout.nodes:
            assert _read(topo, node, "net.ipv4.tcp_congestion_control") == "reno"
            assert _read(topo, node, SSTHRESH_SYSCTL) == ("0" if cache else "1"), node
    assert SYSCTL.read_text().strip() == host_before  # the host's own stay as they were
    assert Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() == host_cc
