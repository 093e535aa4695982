"""The netem engine as users meet it, on a kernel with sch_netem (the VM layer here).

This machine's kernel has no sch_netem, so these tests run inside a QEMU guest
booting Debian's stock kernel (``scripts/vmtest.sh``, called by ``./test.sh``);
elsewhere they run wherever the kernel has netem.

Functional assertions are kept apart from timing ones. Timing under TCG (no
KVM here) is coarse and changes from run to run: every packet costs emulated
CPU, and every netem delay is an hrtimer that fires late. So RTT checks are
relative to costs **measured in the same guest, on the same dumbbell, at the
same time** (``tests/integration/netem_timing.py``): its leaves switched to
zero delay (the path's own cost) and to 5 ms each (what a delayed hop costs
beyond its delay), interleaved with the configured setting. A path must take
configured + zero-delay cost, plus at most the measured lateness of each
delayed hop, within three standard errors of the medians. A delay applied
twice or not at all is off by whole milliseconds; the differential check (two
hosts whose access delays differ by 4 ms must differ by 8 ms in RTT) and the
kernel's own record of every leaf's delay (``tc -j qdisc show``) are exact.

The topology's life (up with the netem engine, down leaving nothing) is
checked by the module's fixture, whose dumbbell the delay, rate, loss and queue
tests share (one bring-up: about 20 s in the VM layer).

Loss, rate and queue checks are functional: counts from ping, iperf3, the
bottleneck capture and the kernel's own qdisc counters, with binomial
tolerances.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import dpkt
import pytest

from swell.topologies import netem
from swell.topologies.layout import EDGE
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import EmulatedHost, Topology
from tests.integration import netem_timing as nt
from tests.integration.netem_timing import ping
from tests.integration.test_topo import netns_inodes, traces

pytestmark = pytest.mark.netem

BERNOULLI_P = 0.1
GE = {"kind": "gilbert", "p_gb": 0.02, "p_bg": 0.25}  # mean loss 7.4%, mean burst 4 packets


def links_spec() -> dict:
    """One client namespace, one host per behaviour."""
    return {
        "network": "10.77.0.0/16",
        "bottleneck": {"rate_mbps": 100, "delay_ms": 10, "queue_packets": 2000,
                       "reverse": {"rate_mbps": 100, "delay_ms": 5, "queue_packets": 2000}},
        "clients": {"count": 6, "namespaces": 1, "access": [
            {"delay_ms": 1},
            {"delay_ms": 5},
            {"delay_ms": 1, "rate_mbps": 5, "queue_packets": 30},
            {"delay_ms": 1, "loss": {"kind": "bernoulli", "p": BERNOULLI_P}},
            {"delay_ms": 1, "loss": GE},
            # bandwidth-delay product 1,667 packets: netem's default limit (1000) would drop
            {"delay_ms": 200, "rate_mbps": 100, "queue_packets": 50},
        ]},
        "servers": {"count": 1, "access": {"delay_ms": 2}},
        "foreground": {"clients": 0, "servers": 0},
    }


def netem_leaf(topo: Topology, host: EmulatedHost, way: str) -> dict:
    """The kernel's record (counters, options) of ``host``'s netem leaf, "up" or "down"."""
    return nt.qdisc(topo, nt.host_leaf(topo, host, way))


def bottleneck_qdisc(topo: Topology, direction: str) -> dict:
    return nt.qdisc(topo, nt.bottleneck_leaf(topo, direction))


def runs_of_missing(seqs: set[int], count: int) -> list[int]:
    """Lengths of the runs of consecutive missing sequence numbers in 1..count."""
    runs, run = [], 0
    for s in range(1, count + 1):
        if s in seqs:
            if run:
                runs.append(run)
            run = 0
        else:
            run += 1
    return runs + ([run] if run else [])


@pytest.fixture(scope="module")
def links():
    """The netem dumbbell up for the module's tests; down leaves nothing behind
    (namespaces, links, qdiscs, processes, state: ``test_topo.traces``)."""
    with Topology(spec_from_dict(links_spec()), engine="netem") as topo:
        prefix, inodes = topo.prefix, netns_inodes(topo.prefix)
        assert topo.engine_name == "netem" and len(inodes) == 5  # r el er c0 s0
        yield topo
    assert topo.report["problems"] == []
    assert traces(prefix, inodes) == []


def test_delays_both_directions(links):
    # the kernel holds every leaf's configured delay (and limit), up and down
    nt.assert_configured(links, nt.all_leaves(links))
    c0, c1 = links.clients[:2]
    s0 = links.servers[0]
    t0, t1 = nt.measure_paths(links, [(c0, s0), (c1, s0)])
    nt.assert_timing(t0)
    nt.assert_timing(t1)
    # functional: the 4 ms of extra one-way access delay is applied once each way
    nt.assert_difference(t0, t1)


def iperf3_mbps(topo, client, server, reverse=False, seconds=3.0, port=5301) -> float:
    argv = ["iperf3", "-s", "-1", "--forceflush", "-B", server.ip, "-p", str(port)]
    srv = topo.popen_in(server, argv, stdout=subprocess.PIPE, text=True)
    while "listening" not in (line := srv.stdout.readline()):
        assert line, "iperf3 server exited"
    argv = ["iperf3", "-c", server.ip, "-B", client.ip, "-p", str(port), "-t", str(seconds),
            "-J", *(["-R"] if reverse else [])]
    out = topo.run_in(client, argv, timeout=60).stdout
    srv.wait(timeout=20)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6


def test_access_rate_both_directions(links):
    c2, s0 = links.clients[2], links.servers[0]
    for reverse in (False, True):
        mbps = iperf3_mbps(links, c2, s0, reverse=reverse)
        print(f"{c2.ip} 5 Mbit/s access, {'down' if reverse else 'up'}: TCP {mbps:.2f} Mbit/s")
        # TCP/IP headers take ~4% of a full frame; TCG may fall a little short
        assert 0.8 * 5 <= mbps <= 1.0 * 5, (reverse, mbps)


def test_bernoulli_loss_both_directions(links):
    c3, s0 = links.clients[3], links.servers[0]
    n = 1500
    before = {w: netem_leaf(links, c3, w) for w in ("up", "down")}
    replies = ping(links, c3, s0, n, interval=0.002)
    after = {w: netem_leaf(links, c3, w) for w in ("up", "down")}
    # each way: the kernel counts what its leaf dropped against what it let through
    for way in ("up", "down"):
        sent = after[way]["packets"] - before[way]["packets"]
        dropped = after[way]["drops"] - before[way]["drops"]
        rate = dropped / (sent + dropped)
        sd = (BERNOULLI_P * (1 - BERNOULLI_P) / (sent + dropped)) ** 0.5
        print(f"{way}: {dropped}/{sent + dropped} dropped ({rate:.3f})")
        assert abs(rate - BERNOULLI_P) < 4 * sd, (way, rate)
    # end to end: requests and replies each cross one lossy leaf
    expected = n * (1 - BERNOULLI_P) ** 2
    assert abs(len(replies) - expected) < 4 * (n * 0.19 * 0.81) ** 0.5, len(replies)
    runs = runs_of_missing(set(replies), n)
    assert statistics.mean(runs) < 1.6  # independent drops: short runs


def test_gilbert_elliott_loss_is_bursty(links):
    c4, s0 = links.clients[4], links.servers[0]
    n = 3000
    before = {w: netem_leaf(links, c4, w) for w in ("up", "down")}
    replies = ping(links, c4, s0, n, interval=0.002)
    after = {w: netem_leaf(links, c4, w) for w in ("up", "down")}
    pi_bad = GE["p_gb"] / (GE["p_gb"] + GE["p_bg"])  # stationary share of the bad state
    for way in ("up", "down"):
        sent = after[way]["packets"] - before[way]["packets"]
        dropped = after[way]["drops"] - before[way]["drops"]
        rate = dropped / (sent + dropped)
        print(f"GE {way}: {dropped}/{sent + dropped} dropped ({rate:.3f}, model {pi_bad:.3f})")
        assert 0.5 * pi_bad < rate < 1.6 * pi_bad, (way, rate)
    runs = runs_of_missing(set(replies), n)
    mean_run = statistics.mean(runs)
    print(f"GE: {n - len(replies)} of {n} round trips lost in {len(runs)} runs, "
          f"mean run {mean_run:.2f}")
    # bursts of mean 1/p_bg = 4 each way; Bernoulli at this loss would give runs of ~1.2
    assert mean_run > 2.5, mean_run


def settled_packets(topo: Topology, host: EmulatedHost, way: str, limit_s: float = 10.0) -> int:
    """The leaf's sent-packet count once it stops moving (read every 0.5 s): packets
    still in its delay line, or still being forwarded by a slow guest, are counted."""
    last, deadline = netem_leaf(topo, host, way)["packets"], time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = netem_leaf(topo, host, way)["packets"]
        if now == last:
            return now
        last = now
    return last


def test_queue_limit_holds_the_bandwidth_delay_product(links):
    c5, s0 = links.clients[5], links.servers[0]
    limit = netem.netem_limit(c5.link)
    assert limit == 50 + 1667 > netem.DEFAULT_QUEUE_PACKETS
    for way in ("up", "down"):
        assert netem_leaf(links, c5, way)["options"]["limit"] == limit
    # A burst from s0 to c5, all of it in flight at once: c5's down leaf (on the edge
    # router, forwarding) holds 1,200 packets in its 200 ms delay line. (A burst from c5
    # itself would not do: a local sender's socket is pushed back and retries.)
    # Every request reached c5: counted at c5's own up leaf (its replies), not by ping,
    # which stops waiting about two round trips after its last request, and whose
    # socket may overflow when 1,200 replies come back at once (CI's TCG guest: ping
    # counted 1,145 of 1,200 with no drop at the leaf).
    burst = 1200
    before = netem_leaf(links, c5, "down")["drops"]
    up_before = netem_leaf(links, c5, "up")["packets"]
    replies = ping(links, s0, c5, burst, interval=0.0005, size=1000, preload=burst)
    answered = settled_packets(links, c5, "up") - up_before
    print(f"limit {limit}: {burst}-packet burst, {answered} answered, "
          f"{len(replies)} replies counted by ping")
    assert netem_leaf(links, c5, "down")["drops"] == before
    assert burst <= answered <= burst + 2, f"{answered}/{burst} answered"  # + ARP
    # The same burst through netem's default limit loses what does not fit. The delay
    # line is 2 s long for this half: a slow emulated guest (TCG) may take longer than
    # 200 ms to forward 1,200 packets, and then never holds 1,000 at once (CI: 0 dropped).
    edge, dev = EDGE[c5.side], links.layout.edge_intf[c5.node]
    handle = netem.host_classid(5)
    change = ["tc", "qdisc", "change", "dev", dev, "parent", handle,
              "handle", handle.split(":")[1] + ":", "netem"]
    links.run_in(edge, [*change, "delay", "2000ms", "limit", str(netem.DEFAULT_QUEUE_PACKETS)])
    up_before = netem_leaf(links, c5, "up")["packets"]
    try:
        replies = ping(links, s0, c5, burst, interval=0.0005, size=1000, preload=burst)
        dropped = netem_leaf(links, c5, "down")["drops"] - before
        time.sleep(2.5)  # the last requests leave the 2 s line, their replies c5's 200 ms one
        answered = settled_packets(links, c5, "up") - up_before  # c5's replies
    finally:
        links.run_in(edge, [*change, *netem.netem_args(c5.link)])
    print(f"netem's default limit: {dropped} of a {burst}-packet burst dropped, "
          f"{answered} answered, {len(replies)} replies counted by ping")
    assert dropped >= burst - netem.DEFAULT_QUEUE_PACKETS - 20  # a few may leave in time
    # every request netem let through was answered: counted at c5's own up leaf, since
    # ping stops waiting about two round trips after its last request, and under TCG
    # late replies then go uncounted (the VM layer once had 903 of 1,000)
    assert burst - dropped <= answered <= burst - dropped + 2  # + an ARP exchange or so
    assert len(replies) <= answered


def read_udp(path: Path, dport: int, min_len: int) -> list[tuple[float, int]]:
    """(time, frame length) of the UDP packets to ``dport`` of ``min_len`` bytes or more.

    Lengths come from the IP header: the capture keeps only the first bytes (snaplen).
    """
    out = []
    with open(path, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, dpkt.ip.IP) and ip.p == dpkt.ip.IP_PROTO_UDP \
                    and ip.data.dport == dport and ip.len + 14 >= min_len:
                out.append((float(ts), ip.len + 14))
    return out


FWD = 5  # the forward bottleneck (Mbit/s): a TCG guest's iperf3 overloads it several times


@pytest.mark.slow
def test_bottleneck_rate_drops_and_capture(tmp_path):
    spec = spec_from_dict({
        "network": "10.78.0.0/16",
        "bottleneck": {"rate_mbps": FWD, "delay_ms": 5, "queue_packets": 20,
                       "reverse": {"rate_mbps": 10, "delay_ms": 5, "queue_packets": 40}},
        "foreground": {"clients": 1, "servers": 1},
    })
    with Topology(spec, engine="netem", capture_dir=tmp_path) as topo:
        a, b = topo.fg_clients[0], topo.fg_servers[0]
        for reverse, rate in ((False, FWD), (True, 10)):
            mbps = iperf3_mbps(topo, a, b, reverse=reverse)
            print(f"bottleneck {rate} Mbit/s: TCP {mbps:.2f} Mbit/s")
            assert 0.8 * rate <= mbps <= rate, (reverse, mbps)
        # UDP at six times the forward rate: the bottleneck's queue overflows
        before = bottleneck_qdisc(topo, "forward")
        srv = topo.popen_in(b, ["iperf3", "-s", "-1", "-B", b.ip, "-p", "5302", "-J"],
                            stdout=subprocess.PIPE, text=True)
        out = topo.run_in(a, ["iperf3", "-u", "-c", b.ip, "-B", a.ip, "-p", "5302", "-b", "30M",
                              "-l", "1000", "-t", "2", "-J"], timeout=60).stdout
        server = json.loads(srv.communicate(timeout=30)[0])
        after = bottleneck_qdisc(topo, "forward")
    sent, secs = (json.loads(out)["end"]["sum"][k] for k in ("packets", "seconds"))
    received = server["end"]["sum"]["packets"] - server["end"]["sum"]["lost_packets"]
    dropped = after["drops"] - before["drops"]
    reports = {c["direction"]: c for c in topo.report["captures"]}
    assert topo.report["problems"] == []
    assert reports["forward"]["dropped"] == 0  # tcpdump lost nothing
    # iperf3's data datagrams (1000 B payload), not its 4-byte hello
    captured = read_udp(Path(reports["forward"]["path"]), 5302, 1000)
    print(f"UDP: sent {sent}, bottleneck dropped {dropped}, captured {len(captured)}, "
          f"received {received}")
    # The overload is what the guest offered, not what was asked: under TCG iperf3 sent
    # 13.8 Mbit/s of the 20 asked, and 11.4-15.3 of 30 (CI, 2026-11-29; so the forward
    # bottleneck is 5 Mbit/s, not 10). Whatever the bottleneck could not carry in that
    # time, beyond its 20-packet queue, was dropped there.
    frame_bits = (1000 + 8 + 20 + 14) * 8
    offered = sent * frame_bits / secs / 1e6
    excess = sent - (FWD * 1e6 * secs / frame_bits + 20)
    print(f"UDP offered {offered:.2f} Mbit/s of frames for {secs:.2f} s: "
          f"{excess:.0f} packets over the bottleneck and its queue")
    assert offered > 1.2 * FWD, f"the sender offered only {offered:.2f} Mbit/s"
    assert dropped >= 0.8 * excess, (dropped, excess)
    # the capture is the bottleneck's exit, what the receiver got; the queue's
    # drop counter also counts the other packets that share the overflowing queue and
    # were dropped: iperf3's hello and end-of-test datagrams and its TCP control
    # connection's segments (1 and 5 of 5000 seen), so sent - dropped may fall short of
    # the capture by those, never exceed it
    # the capture may hold a few more than iperf3 counted: datagrams still queued or on
    # the wire when its server ended the test (CI's TCG guest: 2390 captured, 2386
    # counted); at most the 20-packet queue plus the 5 ms at FWD Mbit/s behind it
    assert 0 <= len(captured) - received <= 20 + 6, (len(captured), received)
    assert 0 <= len(captured) - (sent - dropped) <= 0.01 * sent, \
        (sent, dropped, len(captured))
    rate = sum(size for _, size in captured) * 8 / (captured[-1][0] - captured[0][0]) / 1e6
    assert 0.9 * FWD <= rate <= 1.1 * FWD, f"capture shows {rate:.2f} Mbit/s"
