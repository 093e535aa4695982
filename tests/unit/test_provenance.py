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


RULES_PLAIN = ("0:\tfrom all lookup local\n32766:\tfrom all lookup main\n",
               "0:\tfrom all lookup local\n32766:\tfrom all lookup main\n")
RULES_C0 = ("0:\tfrom all lookup local\n"
            "1000:\tfrom 10.77.0.2 ipproto tcp dport 443 lookup 77\n"
            "1000:\tfrom 10.77.0.4 ipproto tcp dport 443 lookup 77\n"
            "1000:\tfrom 10.77.0.4 ipproto tcp dport 8443 lookup 770\n"
            "32766:\tfrom all lookup main\n",
            "1000:\tfrom fd00::5 ipproto tcp sport 80 lookup 77\n")


def _namespace_runner(tmp: Path, calls: list[tuple[str, tuple[str, ...]]]):
    """A command runner that answers as three namespaces of a run would: it runs the
    real ``sh -c`` it is given, with ``tc``, ``ls``, ``ethtool`` and ``sysctl``
    replaced by scripts that print what each namespace's own would (its qdiscs,
    interfaces, offloads and sysctl values; in ``x0`` tc and ethtool fail) and log
    their arguments."""
    values = {"c0": ("cubic", "4096 131072 6291456"), "r0": ("reno", "4096 87380 6291456"),
              "x0": ("cubic", "4096 131072 6291456")}
    links = {"c0": "lo c0-eth0", "r0": "lo r0-eth0 r0-eth1", "x0": "lo x0-eth0"}
    qdiscs = {"c0": QDISC_C0, "r0": "qdisc noqueue 0: dev lo root refcnt 2\n"}

    def tools(node: str) -> Path:
        bin_dir = tmp / node / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        log = tmp / node / "argv.log"
        cc, rmem = values[node]
        data = {"qdiscs": qdiscs.get(node, ""), "ethtool": ETHTOOL.format("IFACE"),
                "sysctl": (f"net.ipv4.tcp_congestion_control = {cc}\n"
                           f"net.ipv4.tcp_rmem = {rmem.replace(' ', chr(9))}\n")}
        for name, text in data.items():
            (tmp / node / name).write_text(text)
        ok = node != "x0"
        scripts = {
            "tc": f"cat {tmp / node / 'qdiscs'}" if ok else "exit 1",
            "ls": f"echo {links[node]}",
            "ethtool": (f'sed "s/IFACE/$2/" {tmp / node / "ethtool"}' if ok
                        else "echo 'no such device' >&2; exit 75"),
            "sysctl": f"cat {tmp / node / 'sysctl'}",
            # ip rule show (IPv4) and ip -6 rule show: c0 has quick-ack receivers
            "ip": (f'[ "$1" = -6 ] && cat {tmp / node / "rules6"} || cat {tmp / node / "rules"}'),
        }
        rules = RULES_C0 if node == "c0" else RULES_PLAIN
        (tmp / node / "rules").write_text(rules[0])
        (tmp / node / "rules6").write_text(rules[1])
        for name, body in scripts.items():
            (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n{body}\n')
            (bin_dir / name).chmod(0o755)
        return bin_dir

    def run_in(node: str, argv: list[str], check: bool = False,
               timeout: float = 10) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{tools(node)}:/usr/bin:/bin"}
        calls.append((node, ("<process>", *argv[:1])))
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
        log = tmp / node / "argv.log"
        calls.extend((node, tuple(line.split())) for line in log.read_text().splitlines())
        log.unlink()
        return proc

    return run_in


def test_network_state_reads_back_from_host_json(tmp_path: Path) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []
    state = namespace_state(["c0", "r0", "x0"], _namespace_runner(tmp_path, calls))
    write_json(tmp_path / "host.json", {"network": state})
    back = json.loads((tmp_path / "host.json").read_text())["network"]
    assert set(back) == {"c0", "r0", "x0"}
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
    # the quick-ack receivers' rules per port match, both families; table 770 is not 77
    assert back["c0"]["quickack_rules"] == {"dport 443": 2, "sport 80": 1}
    assert back["r0"]["quickack_rules"] == {} and back["x0"]["quickack_rules"] == {}
    # where tc and ethtool fail: null qdiscs, no offloads, the sysctls still read
    assert back["x0"]["qdiscs"] is None and back["x0"]["offloads_on"] == {}
    assert back["x0"]["sysctls"]["net.ipv4.tcp_congestion_control"] == "cubic"
    assert ("r0", ("ethtool", "-k", "r0-eth1")) in calls
    assert ("x0", ("ethtool", "-k", "x0-eth0")) in calls
    assert not any(argv[-1] == "lo" for _, argv in calls if argv[0] == "ethtool")
    # one process per namespace, whatever its interfaces
    assert [node for node, argv in calls if argv[0] == "<process>"] == ["c0", "r0", "x0"]
