"""Host probes for link emulation: which qdiscs the kernel has, whether the native engine runs.

Two parts of swell ask the host the same questions: the engine choice
(:func:`swell.topologies.engines.probe_engines`, before a topology is built) and
``swell doctor`` (:mod:`swell.topologies.doctor`, which reports them with
everything else). Both import the probes from here, so neither imports the other
for them (``doctor`` uses ``engines`` for the choice itself; ``engines`` never
imports ``doctor``).

* :func:`kernel_has_qdisc` is definitive as root (it adds the qdisc to ``lo``
  inside a throw-away network namespace made with ``unshare -n``, which vanishes
  with the command); without root it reads ``/sys/module``, ``modules.builtin``
  and asks ``modprobe -n``.
* :func:`native_engine_status`: ``swell-link`` built, root, and AF_PACKET sockets
  (:func:`af_packet_available`).
* :func:`which` finds tools on PATH and in the sbin directories (``tc``,
  ``modprobe`` and ``unshare`` live there and a user's PATH may lack them).

Nothing here changes the host.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

from swell.errors import SwellError
from swell.native import native_artifact

SBIN = ("/usr/sbin", "/sbin")
_PROBE_ARGS = {
    "netem": ["delay", "1ms"],
    "htb": [],
    "tbf": ["rate", "1mbit", "burst", "10k", "latency", "10ms"],
    "bfifo": [],
}


def which(name: str) -> str | None:
    """``shutil.which`` over PATH plus the sbin directories."""
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
    if which("modprobe"):
        proc = subprocess.run(["modprobe", "-n", "-q", mod], capture_output=True)
        return proc.returncode == 0
    return None


def kernel_has_qdisc(name: str) -> bool:
    """Does this kernel provide qdisc ``name`` (e.g. "netem")?"""
    if name not in _PROBE_ARGS:
        raise SwellError("qdisc", f"no probe for {name!r}; known: {', '.join(_PROBE_ARGS)}")
    if os.geteuid() == 0 and which("unshare") and which("tc"):
        cmd = ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", name, *_PROBE_ARGS[name]]
        proc = subprocess.run(cmd, capture_output=True, timeout=10)
        return proc.returncode == 0
    return bool(_module_known(name))


def af_packet_available() -> bool:
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
    except (OSError, AttributeError):
        return False
    return True


def native_engine_status() -> tuple[bool, str]:
    """(usable, why not): swell-link built, AF_PACKET usable, root."""
    try:
        native_artifact("swell-link")
    except SwellError:
        return False, "swell-link is not built (scripts/bootstrap.sh)"
    if os.geteuid() != 0:
        return False, "the native engine needs root"
    if not af_packet_available():
        return False, "AF_PACKET sockets are not available"
    return True, ""
