"""Provenance written into host.json reads back with what a rerun needs: the host part
from this host (checked against dpkg's own status file, the interpreter's packages, the
native library's bytes, /proc), the per-namespace network part through a command
runner that answers as a run's namespaces would (root-free)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
from pathlib import Path

from swell.experiments.provenance import (
    DEBIAN_TOOLS,
    _offloads,
    debian_versions,
    host_metadata,
    namespace_state,
)
from swell.fsutil import write_json
from swell.native import native_dir


def test_host_metadata_round_trip(tmp_path: Path) -> None:
    write_json(tmp_path / "host.json", host_metadata())
    host = json.loads((tmp_path / "host.json").read_text())
    assert host["python_packages"]["numpy"] == importlib.metadata.version("numpy")
    assert host["python_packages"]["pydantic"] == importlib.metadata.version("pydantic")
    lib = native_dir() / "libswell_pcap.so"
    assert host["native_sha256"]["libswell_pcap.so"] == hashlib.sha256(
        lib.read_bytes()).hexdigest()
    for pkg in ("d-itg", "iperf3", "tcpreplay", "mininet", "ffmpeg"):
        assert pkg in host["debian_packages"]
    assert host["sysctls"]["net.ipv4.tcp_congestion_control"]
    assert Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip() == \
        host["sysctls"]["net.ipv4.tcp_congestion_control"]


def test_static_facts_read_once_per_process(monkeypatch) -> None:
    """A study writes host.json once per run: the tools' versions are asked once, the
    git state every time, and a caller's edits do not leak."""
    from swell.experiments import provenance

    calls: list[str] = []
    real = provenance._run

    def counting(argv: list[str], timeout: float = 10.0):
        calls.append(argv[0])
        return real(argv, timeout)

    monkeypatch.setattr(provenance, "_run", counting)
    provenance._static_facts.cache_clear()
    try:
        first = host_metadata()
        first["tools"]["tc"] = "edited by a caller"
        n_first = len(calls)
        second = host_metadata()
    finally:
        provenance._static_facts.cache_clear()
    again = calls[n_first:]
    assert again.count("git") == 2 and set(again) <= {"git", "sysctl"}, again
    assert n_first >= len(provenance.VERSION_COMMANDS) + 3
    assert second["tools"]["tc"] != "edited by a caller"


def test_offloads_parsed() -> None:
    text = ("Features for eth0:\nrx-checksumming: on\ntx-checksumming: off\n"
            "tcp-segmentation-offload: on [fixed]\n")
    assert _offloads(text) == {"rx-checksumming": True, "tx-checksumming": False,
                               "tcp-segmentation-offload": True}


def _dpkg_status() -> dict[str, str]:
    """Package -> version of the installed ones, read from dpkg's own database file."""
    out: dict[str, str] = {}
    for stanza in Path("/var/lib/dpkg/status").read_text(errors="replace").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Status") == "install ok installed" and "Package" in fields:
            out[fields["Package"]] = fields.get("Version", "")
    return out


def test_debian_versions_are_dpkgs() -> None:
    """Each tool package's entry is what dpkg's status file says: its version, or "not
    installed" (the old code filled every key with "not installed" first, so a failed
    query looked like a host without the tools)."""
    status = _dpkg_status()
    found = debian_versions()
    assert set(found) == set(DEBIAN_TOOLS)
    for pkg in DEBIAN_TOOLS:
        assert found[pkg] == status.get(pkg, "not installed"), pkg
    assert any(v != "not installed" for v in found.values())  # this host has some of them


QDISC_C0 = ("qdisc htb 1: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0\n"
            " Sent 18734 bytes 131 pkt (dropped 2, overlimits 0 requeues 0)\n")
ETHTOOL = ("Features for {0}:\nrx-checksumming: off\ntx-checksumming: on\n"
           "\ttx-checksum-ip-generic: on\ntcp-segmentation-offload: off\n"
           "generic-receive-offload: on [fixed]\n")


def _namespace_runner(calls: list[tuple[str, tuple[str, ...]]]):
    """A command runner that answers as two namespaces of a run would (their own qdiscs,
    interfaces, offloads and sysctl values), recording what it was asked."""
    values = {"c0": ("cubic", "4096 131072 6291456"), "r0": ("reno", "4096 87380 6291456")}

    def run_in(node: str, argv: list[str], check: bool = False,
               timeout: float = 10) -> subprocess.CompletedProcess[str]:
        calls.append((node, tuple(argv)))
        out, code = "", 0
        if argv[:2] == ["tc", "-s"]:
            out = QDISC_C0 if node == "c0" else "qdisc noqueue 0: dev lo root refcnt 2\n"
        elif argv[0] == "ls":
            out = "lo\nc0-eth0\n" if node == "c0" else "lo\nr0-eth0\nr0-eth1\n"
        elif argv[0] == "ethtool":
            out = ETHTOOL.format(argv[-1])
        elif argv[0] == "sysctl":
            cc, rmem = values[node]
            out = (f"net.ipv4.tcp_congestion_control = {cc}\n"
                   f"net.ipv4.tcp_rmem = {rmem.replace(' ', chr(9))}\n")
        else:
            code = 1
        return subprocess.CompletedProcess(argv, code, out, "")

    return run_in


def test_network_state_reads_back_from_host_json(tmp_path: Path) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []
    state = namespace_state(["c0", "r0"], _namespace_runner(calls))
    write_json(tmp_path / "host.json", {"network": state})
    back = json.loads((tmp_path / "host.json").read_text())["network"]
    assert set(back) == {"c0", "r0"}
    assert back["c0"]["qdiscs"] == QDISC_C0 and "dropped 2" in back["c0"]["qdiscs"]
    assert back["r0"]["qdiscs"].startswith("qdisc noqueue")
    on = {"tx-checksumming": True, "tx-checksum-ip-generic": True,
          "generic-receive-offload": True}
    assert back["c0"]["offloads_on"] == {"c0-eth0": on}
    assert back["r0"]["offloads_on"] == {"r0-eth0": on, "r0-eth1": on}  # lo is not asked
    assert back["c0"]["sysctls"]["net.ipv4.tcp_congestion_control"] == "cubic"
    assert back["r0"]["sysctls"]["net.ipv4.tcp_congestion_control"] == "reno"
    assert back["r0"]["sysctls"]["net.ipv4.tcp_rmem"] == "4096 87380 6291456"
    assert back["c0"]["sysctls"]["net.core.rmem_max"] is None  # not answered: null
    assert ("r0", ("ethtool", "-k", "r0-eth1")) in calls
    assert not any(argv[-1] == "lo" for _, argv in calls if argv[0] == "ethtool")
