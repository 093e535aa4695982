"""An IPv6 study end to end: `swell run` on an IPv6 dumbbell, then the report.

Two short runs on a ``fd00::/48`` address plan: Swing from a model extracted
from a real IPv6 capture (the shared nDPI ``pinterest.pcap``; the bundled
IPv4 capture ``example2.pcap`` when the shared data is absent: the model is
address-free; ``example.pcap``'s model delivered 64-69% of its offer in 8-20 s
windows beside the foreground, its long sessions cut at the end), and
a Poisson (UDP) baseline, each with the httperf foreground (ApacheBench over
IPv6). Checks that every emulated address is IPv6, that the bottleneck
captures see the background at the load it was asked for (Poisson at its
rate, Swing's delivered share of what it offered), that the foreground's
response times from its IPv6 client capture agree with ab's own count and
mean, and that the report is written from the results.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import numpy as np
import pytest

from swell.cli import main as swell_main

REPO = Path(__file__).resolve().parents[2]
V6_TRACE = REPO.parent / "shared/data/pcap/ndpi/pinterest.pcap"

EXP = """
name: it-ipv6
duration_s: 8
warmup_s: 2
topology:
  network: fd00:5e79::/48
  bottleneck: {{rate_mbps: 20, delay_ms: 5, queue_bytes: 100000}}
  clients: {{count: 6}}
  servers: {{count: 3}}
foreground: {{kind: httperf, object_bytes: 200000}}
sweep:
  background:
    - {{kind: swing, trace: {trace}, variant: {{target_mbps: 4}}, label: Swing}}
    - {{kind: poisson, proto: udp, rate_mbps: 6, label: Poisson 6M}}
"""


@pytest.mark.slow
def test_ipv6_study_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWELL_QUIET", "1")
    trace = V6_TRACE if V6_TRACE.exists() else REPO / "data/pcap/example2.pcap"
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXP.format(trace=trace))
    study = tmp_path / "study"
    assert swell_main(["run", str(exp), "-o", str(study)]) == 0
    data = json.loads((study / "results.json").read_text())
    by = {r["label"]: r for r in data["runs"]}
    assert set(by) == {"Swing", "Poisson 6M"}
    for label, r in by.items():
        topo = json.loads((study / "runs" / r["key"] / "rep0" / "topology.json").read_text())
        assert ipaddress.ip_network(topo["network"]).version == 6
        fg = r["foreground"]
        assert fg["capture_packets"] > 0  # IPv6 packets to and from the server
        rts = np.asarray(fg["response_times_s"])
        assert rts.size >= 5, (label, fg.get("httperf"))
        ab = fg["httperf"]  # ab's numbers under httperf's names (IPv6 client)
        assert ab["errors"] == 0 and ab["status_other"] == 0
        assert abs(rts.size - ab["replies"]) <= 1, (label, rts.size, ab)
        # ab reports whole milliseconds: its mean against the capture's, within 5% or 3 ms
        hp = ab["conn_time_ms_avg"] / 1e3
        assert abs(rts.mean() - hp) <= max(0.05 * hp, 0.003), (label, rts.mean(), hp)
        assert rts.min() > 0.08  # 200 kB over 20 Mbit/s
        assert all(c["dropped"] == 0 for c in r["captures"])
    poisson = by["Poisson 6M"]["bottleneck"]["reverse"]
    assert 6 * 0.85 < poisson["bg_mean_mbps"] < 6 * 1.1, poisson["bg_mean_mbps"]
    swing = by["Swing"]
    load = swing["load"]["reverse"]
    assert swing["generator"]["summary"]["client"]["conns_ok"] > 0
    assert swing["bottleneck"]["reverse"]["bg_packets"] > 0
    # what the drawn sessions offered in the window reached the far side over IPv6 (the
    # short window of a heavy-tailed model's draw is compared with itself, not the ask)
    assert 0.7 < load["delivered_mbps"] / load["offered_mbps"] < 1.3, load
    report = study / "report" / "index.html"
    assert swell_main(["report", str(study)]) == 0 and report.exists()
    assert "Poisson 6M" in report.read_text()
