"""Packet-level fits and D-ITG presets: re-fits from known distributions give back
the family and parameters within their intervals; presets give D-ITG's sizes and
rates exactly; flow classes from crafted traces; bad traces."""

from __future__ import annotations

import numpy as np
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from swell.errors import SwellError
from swell.extract import ditg_presets
from swell.extract.packetfit import (
    Dist,
    fit_samples,
    fit_trace,
    load_packet_model,
    save_packet_model,
)
from tests.conftest import DATA

EXAMPLE = DATA / "pcap" / "example.pcap"

KNOWN = [
    Dist("exponential", {"mean": 0.02}),
    Dist("gamma", {"shape": 3.0, "scale": 0.004}),
    Dist("pareto", {"shape": 1.5, "scale": 0.001}),
    Dist("lognormal", {"mu": -5.0, "sigma": 1.2}),
    Dist("uniform", {"low": 0.01, "high": 0.03}),
    Dist("cauchy", {"location": 0.05, "scale": 0.002}),
]


@pytest.fixture(scope="module")
def refits():
    out = []
    for i, true in enumerate(KNOWN):
        x = true.sample(np.random.default_rng(101 + i), 1000)
        out.append((true, fit_samples(x, "idt", seed=3)))
    return out


@pytest.mark.parametrize("i", range(len(KNOWN)), ids=[d.family for d in KNOWN])
def test_refit_gives_back_the_family(refits, i):
    true, r = refits[i]
    assert r.chosen.family == true.family
    assert not r.rejected and r.pvalue >= 0.05
    # the chosen family has the lowest BIC of all
    assert r.table[0]["family"] == true.family


def test_refit_parameters_within_their_intervals(refits):
    # 95 % intervals: of the 11 true parameters, at most one may fall outside
    # (P(two or more misses) is about 10 % for independent intervals; the seeds are fixed)
    inside, total, misses = 0, 0, []
    for true, r in refits:
        for k, v in true.params.items():
            lo, hi = r.ci[k]
            total += 1
            if lo <= v <= hi:
                inside += 1
            else:
                misses.append((true.family, k, v, (lo, hi)))
            assert lo < hi
    assert inside >= total - 1, misses


def test_wrong_family_is_rejected_by_the_monte_carlo_test():
    rng = np.random.default_rng(5)
    # two modes (a header-sized and an MSS-sized packet): no single family fits
    x = np.r_[rng.normal(60, 3, 600), rng.normal(1400, 20, 400)].round()
    r = fit_samples(x, "size", seed=1)
    assert r.rejected
    assert r.pvalue < 0.05
    assert any("rejected" in n for n in r.notes)


def test_truncated_sizes_fit_as_d_itg_draws_them():
    true = Dist("normal", {"mean": 500.0, "std": 40.0})
    sizes = np.floor(true.sample(np.random.default_rng(9), 1500))  # D-ITG: (int) X
    r = fit_samples(sizes, "size", seed=2)
    assert r.chosen.family == "normal"
    assert r.ci["mean"][0] <= 500.0 <= r.ci["mean"][1]
    assert r.chosen.ditg_args("size")[0] == "-n"


def test_constant_flows():
    sizes = np.full(50, 172.0)
    r = fit_samples(sizes, "size")
    assert r.chosen.family == "constant" and r.chosen.params["value"] == 172.0
    idt = 0.02 + np.random.default_rng(1).normal(0, 2e-5, 200)  # 0.1 % timer jitter
    r = fit_samples(idt, "idt")
    assert r.chosen.family == "constant"
    assert r.chosen.ditg_args("idt") == ["-C", f"{1 / r.chosen.params['value']:.6g}"]
    assert r.ci["value"][0] <= 0.02 <= r.ci["value"][1]


def test_too_few_samples_is_an_error_naming_the_source():
    with pytest.raises(SwellError, match="flowX.*at least 20"):
        fit_samples(np.arange(1.0, 10.0), "idt", where="flowX")


def test_ditg_argument_mapping_follows_itgsend():
    # -W takes the scale first (newran's Weibull(scale, shape)); IDT options in ms or pkt/s
    assert Dist("weibull", {"shape": 0.7, "scale": 0.01}).ditg_args("idt") == ["-W", "10", "0.7"]
    assert Dist("exponential", {"mean": 0.004}).ditg_args("idt") == ["-E", "250"]
    assert Dist("uniform", {"low": 0.01, "high": 0.02}).ditg_args("idt") == ["-U", "50", "100"]
    assert Dist("pareto", {"shape": 1.2, "scale": 0.002}).ditg_args("idt") == ["-V", "1.2", "2"]
    assert Dist("lognormal", {"mu": 0.0, "sigma": 1.0}).ditg_args("idt") is None


# -- presets: D-ITG 2.8.1 traffic.cpp ---------------------------------------------------------

# (codec, bytes with RTP, packets per second): DESIGN 2.3 and the D-ITG paper
VOIP = [
    ("G.711.1", 92, 100),
    ("G.711.2", 172, 50),
    ("G.729.2", 32, 50),
    ("G.729.3", 42, 33),
    ("G.723.1", 42, 26),
]


@pytest.mark.parametrize(("codec", "size", "pps"), VOIP)
def test_voip_presets_exact(codec, size, pps):
    p = ditg_presets.voip(codec, "RTP")
    assert p.size_bytes == size
    assert p.rate_pps == pytest.approx(pps, rel=1e-12)
    assert p.transports == ("udp",)
    assert p.ditg_args == ("VoIP", "-x", codec, "-h", "RTP")
    crtp = ditg_presets.voip(codec, "CRTP")
    assert crtp.size_bytes == size - 10  # 2-byte compressed header instead of 12
    assert crtp.rate_pps == p.rate_pps
    # every packet identical: sampling gives exactly these values
    rng = np.random.default_rng(0)
    assert set(p.size.sample(rng, 10)) == {float(size)}


def test_vad_scales_size_only_with_itgsend_truncation():
    # measured with ITGSend + ITGDec 2.8.1 on loopback (docs/packet-mmpp.md):
    # G.729.3 CRTP VAD 5.578956 kbit/s at 33.208071 pkt/s = 21 B; G.723.1 RTP VAD
    # 6.510930 kbit/s at 26.253751 pkt/s = 31 B; G.711.1 RTP 72.996464 at 99.179979 = 92 B
    assert ditg_presets.preset("VoIP:G.729.3:CRTP:VAD").size_bytes == 21
    assert ditg_presets.preset("VoIP:G.723.1:RTP:VAD").size_bytes == 31
    assert ditg_presets.preset("voip:G.711.1").size_bytes == 92
    assert ditg_presets.preset("VoIP:G.711.1:RTP:VAD").size_bytes == 64  # 0.65*80 + 12
    assert ditg_presets.preset("VoIP:G.711.1:RTP:VAD").rate_pps == 100


def test_telnet_and_dns_presets():
    t = ditg_presets.preset("Telnet")
    assert t.transports == ("tcp",)
    assert t.idt.family == "pareto"
    assert t.idt.params == {"shape": 0.95, "scale": 0.0011}
    v = np.array(t.size.params["values"])
    assert v[0] == 21 and v[-1] == 35 and sum(t.size.params["probs"]) == pytest.approx(1.0)
    x = t.size.sample(np.random.default_rng(2), 20000)
    assert np.mean(x == 21) == pytest.approx(0.65, abs=0.015)
    d = ditg_presets.preset("DNS")
    assert d.rate_pps == pytest.approx(0.56)
    assert (d.size.params["low"], d.size.params["high"]) == (100.0, 320.0)
    assert set(d.transports) == {"udp", "tcp"}
    assert len(ditg_presets.preset_names()) == 22
    with pytest.raises(SwellError, match="unknown"):
        ditg_presets.preset("Quake9")
    with pytest.raises(SwellError, match="codec"):
        ditg_presets.voip("G.722")


# -- traces -----------------------------------------------------------------------------------


def _flow_pcap(path, n=40, seed=0):
    """A TCP connection to port 5555 (not well known: the SYN says who serves) with
    n exponential-gap requests of 100 B and 1200 B responses, and single UDP packets."""
    rng = np.random.default_rng(seed)
    pkts, t = [], 1000.0
    c, s = "10.0.0.1", "10.0.0.2"
    syn = Ether() / IP(src=c, dst=s) / TCP(sport=40000, dport=5555, flags="S")
    syn.time = t
    pkts.append(syn)
    for _ in range(n):
        t += float(rng.exponential(0.05))
        q = Ether() / IP(src=c, dst=s) / TCP(sport=40000, dport=5555, flags="PA") / Raw(b"q" * 100)
        q.time = t
        a = Ether() / IP(src=s, dst=c) / TCP(sport=5555, dport=40000, flags="PA") / Raw(b"a" * 1200)
        a.time = t + 0.001
        pkts += [q, a]
    for i in range(3):  # one packet per UDP class
        u = (
            Ether()
            / IP(src=c, dst=f"10.0.1.{i}")
            / UDP(sport=50000 + i, dport=7000 + i)
            / Raw(b"x")
        )
        u.time = t + i
        pkts.append(u)
    wrpcap(str(path), pkts)


def test_classes_from_a_crafted_trace(tmp_path):
    p = tmp_path / "flows.pcap"
    _flow_pcap(p)
    m = fit_trace(p, mc_reps=19, ci_reps=19)
    assert set(m.classes) == {"tcp-5555-c2s", "tcp-5555-s2c"}
    c2s = m.meta["classes"]["tcp-5555-c2s"]
    assert c2s["packets"] == 40 and c2s["flows"] == 1
    assert m.dist("tcp-5555-c2s", "size").params["value"] == 100
    assert m.dist("tcp-5555-s2c", "size").params["value"] == 1200
    assert len(m.samples("tcp-5555-c2s", "idt")) == 39
    assert any("udp-7000" in k for k in m.meta["skipped"])
    save_packet_model(m, tmp_path / "model")
    back = load_packet_model(tmp_path / "model")
    assert back.meta["kind"] == "packet"
    assert back.fit("tcp-5555-c2s", "idt").chosen == m.fit("tcp-5555-c2s", "idt").chosen


def test_one_packet_per_class_is_a_clear_error(tmp_path):
    p = tmp_path / "sparse.pcap"
    pkts = []
    for i in range(5):
        u = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1000 + i, dport=9000 + i)
        u = u / Raw(b"x" * 10)
        u.time = 1.0 + i
        pkts.append(u)
    wrpcap(str(p), pkts)
    with pytest.raises(SwellError, match=r"sparse\.pcap.*no flow class has 20"):
        fit_trace(p)


def test_load_rejects_other_models(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.json").write_text('{"format": "swell-swing-model"}')
    np.savez(tmp_path / "m" / "arrays.npz", x=np.zeros(1))
    with pytest.raises(SwellError, match="expected 'swell-packet-model'"):
        load_packet_model(tmp_path / "m")


def test_example_pcap_classes():
    m = fit_trace(EXAMPLE, mc_reps=19, ci_reps=19, max_classes=2)
    assert m.classes == ["tcp-80-s2c", "tcp-80-c2s"]  # the two largest
    assert m.meta["classes"]["tcp-80-s2c"]["app"] == "http"
    for name in m.classes:
        for q in ("idt", "size"):
            fr = m.fit(name, q)
            assert fr.n == len(m.samples(name, q))
            assert 0 <= fr.statistic <= 1 and 0 < fr.pvalue <= 1


def test_cli_fit_packets_and_show(tmp_path, capsys):
    import argparse

    from swell.extract import fit_cli

    p = tmp_path / "flows.pcap"
    _flow_pcap(p, n=60, seed=4)
    parser = argparse.ArgumentParser(prog="swell")
    fit_cli.register(parser.add_subparsers(dest="command"))
    out = tmp_path / "pm"
    args = parser.parse_args(
        ["fit", "packets", str(p), "-o", str(out), "--mc-reps", "19", "--ci-reps", "19"]
    )
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "tcp-5555-c2s" in text and "-c 100" in text and "not fitted: udp-7000" in text
    assert (out / "plots" / "packets_tcp-5555-s2c.png").is_file()
    assert fit_cli.peek_kind(out) == "packet"
    assert fit_cli.show(out, no_plots=True) == 0
