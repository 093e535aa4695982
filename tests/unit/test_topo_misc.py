"""Capture counters, cleanup's name matching, the doctor's report."""

from __future__ import annotations

import pytest

from swell.errors import SwellError
from swell.topologies import capture, cleanup, doctor

TCPDUMP_EXIT = """tcpdump: listening on sw1a2b-r-eth1, link-type EN10MB (Ethernet)
1204 packets captured
1210 packets received by filter
6 packets dropped by kernel
"""


def test_parse_tcpdump_counters():
    counters = capture.parse_tcpdump_counters(TCPDUMP_EXIT)
    assert counters == {"captured": 1204, "received": 1210, "dropped_kernel": 6}
    assert capture.parse_tcpdump_counters("1 packet captured\n0 packets dropped by interface") == {
        "captured": 1, "dropped_interface": 0}


def test_native_reports_and_problems(tmp_path):
    paths = capture.capture_paths(tmp_path)
    paths["forward"].write_bytes(b"x")
    stats = {"captures": {str(paths["forward"]): {"written": 10, "lost": 0},
                          str(paths["reverse"]): {"written": 7, "lost": 2}}}
    reports = capture.native_reports(stats, paths)
    assert [(r.direction, r.written, r.dropped) for r in reports] == [("forward", 10, 0),
                                                                     ("reverse", 7, 2)]
    found = capture.problems(reports)
    assert len(found) == 2 and "dropped 2 packets" in found[0] and "missing" in found[1]
    with pytest.raises(SwellError, match="reported nothing"):
        capture.native_reports({"captures": {}}, paths)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("sw1a2b-c0", "sw1a2b"), ("sw0000-r-eth1", "sw0000"), ("swt1a2-decoy", None),
     ("sw1a2b0-x", None), ("sw1A2B-c0", None), ("xsw1a2b-c0", None), ("sw1a2b", None)],
)
def test_only_well_formed_prefixes_match(name, prefix):
    match = cleanup.NAME_RE.match(name)
    assert (match.group(1) if match else None) == prefix


def test_engine_prefix_from_argv():
    argv = ["/x/target/release/swell-link", "--name", "sw00ff", "--spin-us", "30", "c.json"]
    assert cleanup._engine_prefix(argv) == "sw00ff"
    assert cleanup._engine_prefix(["/bin/swell-link", "--name", "other", "c.json"]) is None
    assert cleanup._engine_prefix(["python", "--name", "sw00ff", "x"]) is None
    with pytest.raises(ValueError):
        cleanup.find_leftovers("swt123")


def test_doctor_render_and_unknown_qdisc():
    with pytest.raises(SwellError, match="no probe"):
        doctor.kernel_has_qdisc("cake")
    report = {
        "kernel": "6.1", "root": False, "qdiscs": {"netem": False, "htb": True},
        "tun": True, "af_packet": None, "veth_offload_defaults": {"tso": "on"},
        "tools": {"tc": "/usr/sbin/tc", "httperf": None}, "mininet_module": True,
        "native_engine": {"usable": False, "why_not": "not built"}, "auto_engine": "none",
    }
    text = doctor.render(report)
    assert "qdisc netem  NO" in text and "httperf" in text and "MISSING" in text
    assert "engine auto picks: none" in text


def test_owner_alive_uses_pid_and_start_time(tmp_path, monkeypatch):
    import json
    import os

    from swell.topologies.topology import process_start

    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path)
    run = tmp_path / "sw00aa"
    run.mkdir()
    assert cleanup.owner_alive("sw00aa")  # no state yet: a run that is starting
    os.utime(run, (0, 0))
    assert not cleanup.owner_alive("sw00aa")  # an old empty state dir: crashed
    me = {"owner_pid": os.getpid(), "owner_start": process_start(os.getpid())}
    (run / "state.json").write_text(json.dumps(me))
    assert cleanup.owner_alive("sw00aa")
    (run / "state.json").write_text(json.dumps({**me, "owner_start": me["owner_start"] + 1}))
    assert not cleanup.owner_alive("sw00aa")  # the pid was reused by another process
    (run / "state.json").write_text("{not json")
    assert not cleanup.owner_alive("sw00aa")
