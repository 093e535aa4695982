"""Provenance written into host.json reads back with what a rerun needs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from pathlib import Path

from swell.experiments.provenance import _offloads, host_metadata
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


def test_offloads_parsed() -> None:
    text = ("Features for eth0:\nrx-checksumming: on\ntx-checksumming: off\n"
            "tcp-segmentation-offload: on [fixed]\n")
    assert _offloads(text) == {"rx-checksumming": True, "tx-checksumming": False,
                               "tcp-segmentation-offload": True}
