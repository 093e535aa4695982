"""``swell.analysis.acks`` against tshark on the bundled capture (issue 19).

Per direction (client = the host that sent the pure SYN of the TCP stream),
the data segments and the pure ACKs of the other side are counted by tshark's
dissector and must equal swell's counts exactly; the ratios are then what
docs/scale.md quotes for the trace (0.512 client ACKs per server data segment).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from swell.analysis.acks import measure

REPO = Path(__file__).resolve().parents[2]
PCAP = REPO / "data/pcap/example.pcap"


def tshark_counts(by_port: bool = False) -> dict[str, dict[str, int]]:
    fields = ["tcp.stream", "ip.src", "tcp.srcport", "tcp.len", "tcp.flags.syn",
              "tcp.flags.ack", "tcp.flags.fin", "tcp.flags.reset"]
    out = subprocess.run(["tshark", "-r", str(PCAP), "-Y", "tcp", "-T", "fields",
                          *(x for f in fields for x in ("-e", f))],
                         capture_output=True, text=True, check=True).stdout
    rows = [ln.split("\t") for ln in out.splitlines()]
    client, server_port = {}, {}
    for stream, src, sport, _, syn, ack, *_ in rows:
        if syn in ("1", "True") and ack in ("0", "False"):
            client[stream] = (src, sport)
    for stream, src, sport, *_ in rows:
        if stream in client and (src, sport) != client[stream]:
            server_port.setdefault(stream, sport)
    n: dict = {}
    for stream, src, sport, length, syn, ack, fin, rst in rows:
        if stream not in client:
            continue
        fwd = (src, sport) == client[stream]
        key = (server_port.get(stream, "?"),) if by_port else ()
        for d in ("c2s", "s2c"):
            n.setdefault((*key, d), {"data": 0, "acks": 0})
        if int(length) > 0:
            n[(*key, "c2s" if fwd else "s2c")]["data"] += 1
        elif ack in ("1", "True") and all(f in ("0", "False") for f in (syn, fin, rst)):
            n[(*key, "s2c" if fwd else "c2s")]["acks"] += 1  # a client's ACK: s2c data
    return {k[0] if not by_port else k: v for k, v in n.items()}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed (Debian: tshark)")
def test_counts_match_tshark() -> None:
    ref = tshark_counts()
    got = measure([str(PCAP)], by_size=True)
    for d in ("c2s", "s2c"):
        assert got[d]["data_segments"] == ref[d]["data"], d
        assert got[d]["acks_by_receiver"] == ref[d]["acks"], d
    assert got["s2c"]["acks_per_data_segment"] == pytest.approx(0.5117, abs=1e-4)
    rows = got["s2c_by_response_segments"]
    assert sum(r["data_segments"] for r in rows) == got["s2c"]["data_segments"]
    # connections without response data (25 client ACKs here) are in no size bin
    assert 0 < got["s2c"]["acks_by_receiver"] - sum(r["acks"] for r in rows) < 30


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed (Debian: tshark)")
def test_by_port_matches_tshark() -> None:
    ref = tshark_counts(by_port=True)
    got = measure([str(PCAP)], by_port=2)
    rows = {r["port"]: r for r in got["by_port"]}
    assert list(rows) == ["80", "443", "other"]  # the busiest two by data segments
    for (port, d), n in ref.items():
        row = rows.get(port, rows["other"])[d]
        if port in rows:
            assert (row["data_segments"], row["acks_by_receiver"]) == (n["data"], n["acks"])
    for d in ("c2s", "s2c"):
        assert sum(r[d]["data_segments"] for r in rows.values()) == got[d]["data_segments"]
        assert sum(r[d]["acks_by_receiver"] for r in rows.values()) \
            == got[d]["acks_by_receiver"]
    # the web server's client delays every second ACK (0.509); one host judged, not every
    assert rows["80"]["s2c"]["acks_per_data_segment"] == pytest.approx(0.509, abs=1e-3)
    assert rows["80"]["s2c"]["receivers_judged"] == 1
    assert rows["80"]["s2c"]["receivers_every_segment"] == 0.0
