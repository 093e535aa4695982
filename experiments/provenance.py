"""What it takes to redo a run: the host, the code and the network as they stood.

Flent's lesson (``shared/STYLE.md``): a results file carries the host's state,
so a result can be judged and redone later from that file alone. Two parts:

* :func:`host_metadata` (once per study, and in every run's ``host.json``):
  kernel, CPUs, git revision and whether the tree was modified, swell's
  version, the Python packages installed (name -> version), the SHA-256 of
  swell's native binaries, the Debian versions of the tools runs use (D-ITG,
  iperf3, tcpreplay, Mininet, ffmpeg, httperf, Apache, tcpdump, iproute2,
  ethtool) and the host's TCP sysctls. What cannot change while swell runs (the
  tools' and packages' versions, the native binaries' hashes, the kernel's
  features) is read once per process: a study called it once per run, and the
  tools' ``--version`` alone took 20 s per call in the VM layer's guest; the git
  state and the sysctls are read at every call;
* :func:`network_state` (each run, with its topology up): per namespace of
  the run, its qdiscs (``tc -s qdisc show``), the TCP sysctls in force there
  and each interface's offloads (``ethtool -k``: what is on), all read by one
  shell process per namespace.

Everything is best effort and never fails a run: a tool that is missing or a
command that fails is recorded as such (``"not installed"`` when dpkg says so,
``"unknown"`` when it says nothing, ``null``). ``tests/unit/test_provenance.py``
reads both parts back from ``host.json`` (the network state through a command
runner that answers as a namespace would).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from swell import __version__
from swell.topologies.quickack import TABLE as QUICKACK_TABLE

REPO = Path(__file__).resolve().parent.parent

# Debian packages of the tools a run may use (package -> what it provides).
DEBIAN_TOOLS = ("d-itg", "iperf3", "tcpreplay", "mininet", "ffmpeg", "httperf", "apache2",
                "tcpdump", "iproute2", "ethtool", "openvswitch-switch")
# Binaries whose first line of version output is kept too (the package says less).
VERSION_COMMANDS = {
    "tc": ["tc", "-V"],
    "tcpdump": ["tcpdump", "--version"],
    "httperf": ["httperf", "--version"],
    "apache2": ["/usr/sbin/apache2", "-v"],
    "iperf3": ["iperf3", "--version"],
    "tcpreplay": ["tcpreplay", "--version"],
    "mininet": ["mn", "--version"],
    "ffmpeg": ["ffmpeg", "-version"],
}
NATIVE_FILES = ("libswell_pcap.so", "swell-link", "swell-gen", "swell-probe")
SYSCTLS = (
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_window_scaling",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_no_ssthresh_metrics_save",
    "net.ipv4.tcp_slow_start_after_idle",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
    "net.ipv4.ip_forward",
)


def _run(argv: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _first_line(argv: list[str]) -> str:
    proc = _run(argv)
    if proc is None:
        return "not found"
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def python_packages() -> dict[str, str]:
    """Every installed distribution of this interpreter, name -> version."""
    out = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            out[name.lower()] = dist.version
    return dict(sorted(out.items()))


def native_hashes() -> dict[str, str | None]:
    """SHA-256 of each of swell's built native files (None when not built)."""
    from swell.native import native_dir

    out: dict[str, str | None] = {}
    for name in NATIVE_FILES:
        path = native_dir() / name
        try:
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[name] = None
    return out


def debian_versions() -> dict[str, str]:
    """Installed Debian version of each tool package, as dpkg answers: its version,
    ``"not installed"`` (dpkg knows the package but it is not installed, or does not
    know it), or ``"unknown"`` when dpkg's answer does not name the package."""
    proc = _run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n",
                 *DEBIAN_TOOLS])
    if proc is None:
        return {p: "unknown (no dpkg-query)" for p in DEBIAN_TOOLS}
    out = dict.fromkeys(DEBIAN_TOOLS, "unknown")
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            out[parts[0].split(":")[0]] = parts[1] if parts[2] == "installed" \
                else "not installed"
    for line in proc.stderr.splitlines():  # "dpkg-query: no packages found matching X"
        name = line.rpartition(" ")[2]
        if "no packages found" in line and name in out:
            out[name] = "not installed"
    return out


def sysctls(run: Callable[[list[str]], subprocess.CompletedProcess[str] | None] = _run
            ) -> dict[str, str | None]:
    """The TCP/queue sysctls in force (where ``run`` runs: the host, or a namespace)."""
    proc = run(["sysctl", "-e", *SYSCTLS])
    return _parse_sysctls(proc.stdout if proc is not None else "")


def _parse_sysctls(text: str) -> dict[str, str | None]:
    """``sysctl`` output -> each of :data:`SYSCTLS` (``None`` where it said nothing)."""
    out: dict[str, str | None] = dict.fromkeys(SYSCTLS)
    for line in text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip() in out:
            out[key.strip()] = " ".join(value.split())
    return out


@functools.cache
def _static_facts() -> dict[str, Any]:
    """The host facts that stay put for the life of a process (read once)."""
    from swell.topologies.engines import probe_engines

    # the tools' version commands at once: one after the other they took 14 s of a short
    # study in the VM layer's TCG guest (each process start costs 10-50 times more there)
    with ThreadPoolExecutor(max_workers=8) as pool:
        debian = pool.submit(debian_versions)
        tools = dict(zip(VERSION_COMMANDS, pool.map(_first_line, VERSION_COMMANDS.values()),
                         strict=True))
        facts = probe_engines()
        debian_packages = debian.result()
    return {
        "swell_version": __version__,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "engine_facts": facts.__dict__ if hasattr(facts, "__dict__") else str(facts),
        "tools": tools,
        "debian_packages": debian_packages,
        "python_packages": python_packages(),
        "native_sha256": native_hashes(),
    }


def host_metadata() -> dict[str, Any]:
    """What a reader of the results needs to know about the host and the code."""
    static = copy.deepcopy(_static_facts())  # callers may add to what they get
    git = _run(["git", "-C", str(REPO), "rev-parse", "HEAD"])
    dirty = _run(["git", "-C", str(REPO), "status", "--porcelain"])
    return {
        "swell_version": static.pop("swell_version"),
        "git_revision": (git.stdout.strip() or None) if git else None,
        "git_dirty": bool(dirty and dirty.stdout.strip()),
        **static,
        "sysctls": sysctls(),
    }


def _offloads(text: str) -> dict[str, bool]:
    """``ethtool -k`` output -> feature -> on (fixed features included)."""
    out = {}
    for line in text.splitlines()[1:]:
        key, sep, value = line.strip().partition(":")
        if sep and value.split():
            out[key.strip()] = value.split()[0] == "on"
    return out


def network_state(topo: Any) -> dict[str, Any]:
    """Per namespace of a running topology: qdiscs, sysctls, interface offloads and
    its quick-ack receivers' policy rules per port."""
    return namespace_state(topo.layout.nodes, topo.run_in)


# What network_state reads in one namespace, as ONE process: a shell that prints each
# command's output under a "@@ " header line. One process per namespace instead of
# about five (tc, ls, ethtool per interface, sysctl): in the VM layer's TCG guest each
# process start costs 0.2-0.5 s, and a run has about a dozen namespaces.
_MARK = "@@ "
_STATE_SCRIPT = (
    f'echo "{_MARK}qdiscs"; tc -s qdisc show || echo "{_MARK}failed"; '
    'for i in $(ls /sys/class/net); do [ "$i" = lo ] && continue; '
    f'echo "{_MARK}ethtool $i"; ethtool -k "$i" || echo "{_MARK}failed"; done; '
    f'echo "{_MARK}sysctls"; sysctl -e {" ".join(SYSCTLS)}; '
    f'echo "{_MARK}rules"; ip rule show; ip -6 rule show'
)


def _sections(text: str) -> list[tuple[str, str | None]]:
    """The script's output -> (header, output or None where the command failed)."""
    out: list[tuple[str, str | None]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(_MARK) and line.strip() == f"{_MARK}failed" and out:
            out[-1] = (out[-1][0], None)
        elif line.startswith(_MARK):
            out.append((line[len(_MARK):].strip(), ""))
        elif out and out[-1][1] is not None:
            out[-1] = (out[-1][0], out[-1][1] + line)
    return out


def namespace_state(nodes: Any, run_in: Callable[..., subprocess.CompletedProcess[str]]
                    ) -> dict[str, Any]:
    """:func:`network_state` for ``nodes``: one ``run_in(node, ["sh", "-c", SCRIPT],
    check=False, timeout=30)`` each (a topology's ``run_in``)."""
    state: dict[str, Any] = {}
    for node in nodes:
        try:
            proc = run_in(node, ["sh", "-c", _STATE_SCRIPT], check=False, timeout=30)
            text = proc.stdout or ""
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        qdiscs: str | None = None
        offloads: dict[str, dict[str, bool]] = {}
        found: dict[str, str | None] = {}
        for head, body in _sections(text):
            if head == "qdiscs":
                qdiscs = body
            elif head.startswith("ethtool ") and body is not None:
                offloads[head.split(" ", 1)[1]] = {
                    f: on for f, on in _offloads(body).items() if on}
            else:
                found[head] = body
        state[str(node)] = {
            "qdiscs": qdiscs,
            "sysctls": _parse_sysctls(found.get("sysctls") or ""),
            "offloads_on": offloads,
            "quickack_rules": quickack_rules(found.get("rules") or ""),
        }
    return state


def quickack_rules(text: str) -> dict[str, int]:
    """``ip rule show`` output -> the policy rules of quick-ack receivers per port
    match (``dport 443``: hosts that ACK every segment they get from port 443; see
    :mod:`swell.topologies.quickack`)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.search(rf"ipproto tcp ([sd]port \d+) lookup {QUICKACK_TABLE}\b", line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + 1
    return out
