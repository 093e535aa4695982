"""``swell doctor``: what this host offers for emulation, and which engine ``auto`` picks.

Checks, each with a plain answer and how it was found:

* qdiscs: netem, htb, tbf, bfifo. :func:`kernel_has_qdisc` is definitive as
  root (it adds the qdisc to ``lo`` inside a throw-away network namespace made
  with ``unshare -n``, which vanishes with the command); without root it reads
  ``/sys/module``, ``modules.builtin`` and asks ``modprobe -n``.
* TUN (``/dev/net/tun`` opens), AF_PACKET (a raw packet socket opens, root).
* offloads: the defaults a fresh veth pair gets (swell turns TSO/GSO/GRO off
  on every interface it creates; this shows what it is turning off).
* tools on PATH: tc, tcpdump, ethtool, Mininet (``mnexec`` and the Python
  module), D-ITG, httperf, apache2, tcpreplay, iperf3; and ``swell-link``.

Nothing here changes the host.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from swell.errors import SwellError

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
}
SBIN = ("/usr/sbin", "/sbin")
QDISCS = ("netem", "htb", "tbf", "bfifo")
_PROBE_ARGS = {
    "netem": ["delay", "1ms"],
    "htb": [],
    "tbf": ["rate", "1mbit", "burst", "10k", "latency", "10ms"],
    "bfifo": [],
}


def _which(name: str) -> str | None:
    path = os.environ.get("PATH", "") + os.pathsep + os.pathsep.join(SBIN)
    return shutil.which(name, path=path)


def _module_known(name: str) -> bool | None:
    """From files only: True (loaded/builtin), False (absent), None (unknown)."""
    mod = f"sch_{name}"
    if Path(f"/sys/module/{mod}").exists():
        return True
    release = platform.release()
    builtin = Path(f"/lib/modules/{release}/modules.builtin")
    if builtin.exists() and f"/{mod}.ko" in builtin.read_text():
        return True
    if _which("modprobe"):
        proc = subprocess.run(["modprobe", "-n", "-q", mod], capture_output=True)
        return proc.returncode == 0
    return None


def kernel_has_qdisc(name: str) -> bool:
    """Does this kernel provide qdisc ``name`` (e.g. "netem")?"""
    if name not in _PROBE_ARGS:
        raise SwellError("qdisc", f"no probe for {name!r}; known: {', '.join(_PROBE_ARGS)}")
    if os.geteuid() == 0 and _which("unshare") and _which("tc"):
        cmd = ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", name, *_PROBE_ARGS[name]]
        proc = subprocess.run(cmd, capture_output=True, timeout=10)
        return proc.returncode == 0
    return bool(_module_known(name))


def tun_available() -> bool:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def af_packet_available() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    except (OSError, AttributeError):
        return False
    return True


def native_engine_status() -> tuple[bool, str]:
    """(usable, why not): swell-link built, AF_PACKET usable, root."""
    from swell.native import native_artifact

    try:
        native_artifact("swell-link")
    except SwellError:
        return False, "swell-link is not built (scripts/bootstrap.sh)"
    if os.geteuid() != 0:
        return False, "the native engine needs root"
    if not af_packet_available():
        return False, "AF_PACKET sockets are not available"
    return True, ""


def veth_offload_defaults() -> dict[str, str] | None:
    """Offload settings of a fresh veth (made in a throw-away namespace), or None."""
    if os.geteuid() != 0 or not (_which("unshare") and _which("ethtool")):
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


def diagnose() -> dict[str, Any]:
    from swell.topologies.engines import EngineFacts, choose_engine

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
        "tools": {label: _which(exe) for label, exe in TOOLS.items()},
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
        lines.append(f"  {label:18s} {path or 'MISSING'}")
    lines.append(f"  {'mininet module':18s} {yes[report['mininet_module']]}")
    native = report["native_engine"]
    state = "built and usable" if native["usable"] else native["why_not"]
    lines.append(f"native engine (swell-link): {state}")
    lines.append(f"engine auto picks: {report['auto_engine']}")
    return "\n".join(lines)
