"""Run-wide TCP settings in every namespace of a topology: congestion control and the
ssthresh cache.

A new network namespace starts with the kernel's defaults for the per-namespace
``net.ipv4`` settings except ``tcp_congestion_control``, which it inherits from the
host's: on a host whose default is ``bbr`` every emulated sender would pace at its
bandwidth estimate unless the run sets otherwise. So everything that brings up a
topology and runs TCP through it (``swell run``: :mod:`swell.experiments.runner`; the
fidelity bench, ``bench/fidelity.py --cc``) sets the experiment's algorithm in every
namespace right after the topology is up, with :func:`set_tcp`, and records it.

The host's own settings are never changed: outside the initial namespace the kernel
only accepts algorithms listed in the host's ``net.ipv4.tcp_allowed_congestion_control``,
and an algorithm outside that list is refused with a one-line :class:`SwellError`
naming the allowed ones. ``tcp_no_ssthresh_metrics_save`` is per namespace (Linux >=
5.6); an older kernel lacks it and caches ssthresh anyway.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from swell.errors import SwellError

__all__ = ["CONGESTION_CONTROLS", "SSTHRESH_SYSCTL", "set_tcp"]

SSTHRESH_SYSCTL = "net.ipv4.tcp_no_ssthresh_metrics_save"
CONGESTION_CONTROLS = ("reno", "cubic", "bbr")  # the choices benches offer


def set_tcp(topo: Any, algo: str, ssthresh_cache: bool = False) -> None:
    """Set TCP congestion control ``algo`` (and, asked for, the ssthresh cache: a new
    connection starts from the ssthresh its predecessor to the same host learnt) in
    every namespace of ``topo`` (a brought-up ``Topology``), and check it took."""
    for node in topo.layout.nodes:
        res = topo.run_in(node, ["sysctl", "-q", "-w",
                                 f"net.ipv4.tcp_congestion_control={algo}"], check=False)
        if res.returncode != 0:
            allowed = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text()
            raise SwellError("congestion_control", f"{algo!r} cannot be set inside a "
                             f"namespace on this host (allowed: {allowed.strip()}); "
                             "choose one of those")
        if ssthresh_cache and Path("/proc/sys/" + SSTHRESH_SYSCTL.replace(".", "/")).exists():
            res = topo.run_in(node, ["sysctl", "-q", "-w", f"{SSTHRESH_SYSCTL}=0"],
                              check=False)
            if res.returncode != 0:
                raise SwellError("tcp_ssthresh_cache", f"cannot set {SSTHRESH_SYSCTL}=0 in "
                                 f"a namespace: {(res.stderr or '').strip()[:200]}")
