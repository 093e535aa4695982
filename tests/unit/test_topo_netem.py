"""tc command lines of the netem engine, checked against known-good forms."""

from __future__ import annotations

import ipaddress

import pytest

from swell.topologies import netem
from swell.topologies.spec import LinkDir, Loss

A = ipaddress.IPv4Address


def test_bottleneck_known_good_form():
    link = LinkDir(rate_mbps=20, delay_ms=10, queue_bytes=150_000)
    cmds = netem.bottleneck_cmds("sw1a2b-r-eth1", link)
    # queue 150000 B = 100 packets of 1500 B; BDP 20 Mbit/s x 10 ms = 25000 B = 17 packets
    assert [" ".join(c) for c in cmds] == [
        "qdisc replace dev sw1a2b-r-eth1 root handle 1: htb default 1",
        "class add dev sw1a2b-r-eth1 parent 1: classid 1:1 htb rate 20000000bit "
        "ceil 20000000bit burst 1514b cburst 1514b quantum 1514",
        "qdisc add dev sw1a2b-r-eth1 parent 1:1 handle 10: netem limit 117 delay 10000us",
    ]


def test_access_classes_and_hashed_filters():
    net = ipaddress.IPv4Network("10.77.0.0/23")
    hosts = [
        (A("10.77.0.2"), LinkDir(rate_mbps=10, delay_ms=5, queue_packets=50, loss=0.01)),
        (A("10.77.1.2"), LinkDir(delay_ms=0.5)),
    ]
    lines = [" ".join(c) for c in netem.access_cmds("sw1a2b-c0-eth0", hosts, "src", net)]
    assert lines[:3] == [
        "qdisc replace dev sw1a2b-c0-eth0 root handle 1: htb default 0",
        "filter add dev sw1a2b-c0-eth0 parent 1: prio 1 handle 100: protocol ip u32 divisor 256",
        "filter add dev sw1a2b-c0-eth0 parent 1: prio 1 protocol ip u32 ht 800:: "
        "match ip src 10.77.0.0/23 hashkey mask 0x000000ff at 12 link 100:",
    ]
    assert lines[3:6] == [
        "class add dev sw1a2b-c0-eth0 parent 1: classid 1:2 htb rate 10000000bit "
        "ceil 10000000bit burst 1514b cburst 1514b quantum 1514",
        # 50 queued + ceil(10 Mbit/s x 5 ms / 1500 B) = 50 + 5
        "qdisc add dev sw1a2b-c0-eth0 parent 1:2 handle 2: netem limit 55 delay 5000us "
        "loss random 1%",
        "filter add dev sw1a2b-c0-eth0 parent 1: prio 1 protocol ip u32 ht 100:2: "
        "match ip src 10.77.0.2/32 flowid 1:2",
    ]
    # no rate: an unshaped htb class, and a delay line with room for in-flight packets
    assert lines[6].endswith("rate 100000000000bit ceil 100000000000bit burst 1514b "
                             "cburst 1514b quantum 1514")
    assert lines[7] == ("qdisc add dev sw1a2b-c0-eth0 parent 1:3 handle 3: netem "
                        "limit 11000 delay 500us")
    assert lines[8].endswith("ht 100:2: match ip src 10.77.1.2/32 flowid 1:3")


def test_access_down_direction_matches_destination():
    net = ipaddress.IPv4Network("10.77.0.0/24")
    cmds = netem.access_cmds("x", [(A("10.77.0.255"), LinkDir())], "dst", net)
    text = netem.to_batch(cmds)
    assert "match ip dst 10.77.0.0/24 hashkey mask 0x000000ff at 16 link 100:" in text
    assert "ht 100:ff: match ip dst 10.77.0.255/32 flowid 1:2" in text
    with pytest.raises(ValueError, match="not in"):
        netem.access_cmds("x", [(A("10.78.0.1"), LinkDir())], "dst", net)


def test_loss_forms():
    assert netem.loss_args(Loss()) == []
    assert netem.loss_args(Loss(kind="bernoulli", p=0.001)) == ["loss", "random", "0.1%"]
    ge = Loss(kind="gilbert", p_gb=0.01, p_bg=0.25, loss_good=0.0, loss_bad=1.0)
    # tc-netem(8): loss gemodel p r 1-h 1-k
    assert netem.loss_args(ge) == ["loss", "gemodel", "1%", "25%", "100%", "0%"]


def test_limits_and_formatting():
    assert netem.queue_packets(LinkDir()) == netem.DEFAULT_QUEUE_PACKETS
    assert netem.queue_packets(LinkDir(queue_bytes=100_000)) == 66
    assert netem.netem_limit(LinkDir(rate_mbps=100, delay_ms=20, queue_packets=10)) == 10 + 167
    assert netem.netem_limit(LinkDir(queue_packets=7)) == 7
    assert netem.fmt_delay(0.0005) == "0us" and netem.fmt_delay(12.3456) == "12346us"
    assert netem.host_classid(0) == "1:2" and netem.host_classid(998) == "1:3e8"
    with pytest.raises(ValueError):
        netem.host_classid(0xFFF0)


def test_batch_rejects_unsafe_arguments():
    assert netem.to_batch([["qdisc", "del", "dev", "a", "root"]]) == "qdisc del dev a root\n"
    for bad in ("a b", "", "x#y", "q'"):
        with pytest.raises(ValueError):
            netem.to_batch([["qdisc", bad]])
