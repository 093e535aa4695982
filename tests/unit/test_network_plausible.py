"""One-sided RTT estimates inflated by a retransmitted SYN are reported, not emulated."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from swell.extract.network import SYN_RTO_S, NetworkModel, implausible_rtts
from swell.extract.pipeline import extract_model

REPO = Path(__file__).resolve().parents[2]


def test_rtts_at_the_syn_timeout_are_left_out_and_reported():
    net = NetworkModel(sides={})
    rtt = np.array([0.02, 0.05, np.nan, 1.03, 3.2])
    out = implausible_rtts(rtt, net)
    assert np.array_equal(np.isnan(out), [False, False, True, True, True])
    assert rtt[3] == 1.03  # the input is not changed
    (note,) = net.assumed
    assert note.startswith("2 of 4 one-sided RTT estimates") and "SYN" in note


def test_a_one_directional_capture_has_no_retransmission_sized_paths():
    """netml_demo.pcap: one host's SYNs without SYN/ACKs (CIC-IDS2017 excerpt)."""
    m = extract_model(REPO / "data/pcap/netml_demo.pcap", label="test")
    delay = m.arrays["net/server/delay_s"]
    assert (2 * delay < SYN_RTO_S).all()
    assert any("one direction captured" in a for a in m.assumed)
