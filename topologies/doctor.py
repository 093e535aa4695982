"""``swell doctor``: what this host offers for emulation, and which engine ``auto`` picks.

Checks, each with a plain answer and how it was found:

* qdiscs: netem, htb, tbf, bfifo. :func:`~swell.topologies.probe.kernel_has_qdisc`
  is definitive as root (it adds the qdisc to ``lo`` inside a throw-away network
  namespace made with ``unshare -n``, which vanishes with the command); without
  root it reads ``/sys/module``, ``modules.builtin`` and asks ``modprobe -n``.
* TUN (``/dev/net/tun`` opens), AF_PACKET (a raw packet socket opens, root).
* offloads: the defaults a fresh veth pair gets (swell turns TSO/GSO/GRO off
  on every interface it creates; this shows what it is turning off).
* tools on PATH: tc, tcpdump, ethtool, Mininet (``mnexec`` and the Python
  module), D-ITG, httperf, apache2, tcpreplay, iperf3, ffmpeg, GStreamer;
  the real bandwidth estimators pathload and pathChirp (not packaged: a missing
  one says where docs/bwest.md tells how to build it); and ``swell-link``.

The probes the engine choice needs too (qdiscs, the native engine) live in
:mod:`swell.topologies.probe`; the choice itself is
:func:`swell.topologies.engines.choose_engine`. This module imports both; neither
imports it (only ``swell doctor``'s CLI does).

Nothing here changes the host.
"""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Any

from swell.errors import SwellError
from swell.topologies.engines import EngineFacts, choose_engine
from swell.topologies.probe import (
    af_packet_available,
    kernel_has_qdisc,
    native_engine_status,
    which,
)

TOOLS = {
    "tc": "tc",
    "tcpdump": "tcpdump",
    "ethtool": "ethtool",
    "mininet (mnexec)": "mnexec",
    "d-itg (ITGSend)": "ITGSend",
    "httperf": "httperf",
    "apache2": "apache2",
    "tcpreplay": "tcpreplay",
    "iperf3": "iperf3",
    "pathload_snd": "pathload_snd",
    "pathload_rcv": "pathload_rcv",
    "pathchirp_snd": "pathchirp_snd",
    "pathchirp_rcv": "pathchirp_rcv",
    "ffmpeg": "ffmpeg",
    "gstreamer (gst-launch-1.0)": "gst-launch-1.0",
}
# programs no Debian package has: built by hand from their public source
HAND_BUILT = {"pathload_snd", "pathload_rcv", "pathchirp_snd", "pathchirp_rcv"}
QDISCS = ("netem", "htb", "tbf", "bfifo")


def tun_available() -> bool:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def veth_offload_defaults() -> dict[str, str] | None:
    """Offload settings of a fresh veth (made in a throw-away namespace), or None."""
    if os.geteuid() != 0 or not (which("unshare") and which("ethtool")):
        return None
    script = "ip link add name v0 type veth peer name v1 && ethtool -k v0"
    proc = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    wanted = {
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
        "tx-checksumming",
        "rx-checksumming",
    }
    out = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in wanted:
            out[key.strip()] = value.strip()
    return out


def mininet_importable() -> bool:
    try:
        import mininet.node  # noqa: F401
    except ImportError:
        return False
    return True


def tools_found() -> dict[str, str | None]:
    """Each tool's label and where it was found on PATH (None: missing)."""
    return {label: which(exe) for label, exe in TOOLS.items()}


def diagnose() -> dict[str, Any]:
    qdiscs = {q: kernel_has_qdisc(q) for q in QDISCS}
    native_ok, why = native_engine_status()
    facts = EngineFacts(qdiscs["netem"], qdiscs["htb"], native_ok, why)
    try:
        auto = choose_engine("auto", facts)
    except SwellError as exc:
        auto = f"none ({exc.message})"
    return {
        "kernel": platform.release(),
        "root": os.geteuid() == 0,
        "qdiscs": qdiscs,
        "tun": tun_available(),
        "af_packet": af_packet_available(),
        "veth_offload_defaults": veth_offload_defaults(),
        "tools": tools_found(),
        "mininet_module": mininet_importable(),
        "native_engine": {"usable": native_ok, "why_not": why},
        "auto_engine": auto,
    }


def render(report: dict[str, Any]) -> str:
    yes = {True: "yes", False: "NO", None: "unknown"}
    lines = [f"kernel {report['kernel']} (root: {yes[report['root']]})"]
    lines += [f"  qdisc {q:6s} {yes[v]}" for q, v in report["qdiscs"].items()]
    lines.append(f"  TUN          {yes[report['tun']]}")
    lines.append(f"  AF_PACKET    {yes[report['af_packet']]}")
    off = report["veth_offload_defaults"]
    if off:
        lines.append("veth offload defaults (swell turns these off on every interface):")
        lines += [f"  {k}: {v}" for k, v in sorted(off.items())]
    lines.append("tools:")
    for label, path in report["tools"].items():
        missing = ("MISSING (not packaged: build it by hand, see docs/bwest.md)"
                   if label in HAND_BUILT else "MISSING")
        lines.append(f"  {label:18s} {path or missing}")
    lines.append(f"  {'mininet module':18s} {yes[report['mininet_module']]}")
    native = report["native_engine"]
    state = "built and usable" if native["usable"] else native["why_not"]
    lines.append(f"native engine (swell-link): {state}")
    lines.append(f"engine auto picks: {report['auto_engine']}")
    return "\n".join(lines)
