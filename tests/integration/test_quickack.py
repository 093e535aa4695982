"""A group's quick-ack receivers (swell.topologies.quickack) through a real dumbbell.

Two clients in one namespace, one server; the clients' group makes half its hosts
ACK every segment on port 5001, the servers' group all its hosts on port 5002.
Each client downloads bursts of eight segments from both ports and uploads them to
both: per port and direction, the receivers that ACK 0.75 or more of their
segments (``swell.analysis.acks`` by port, on the bottleneck capture) must be the
chosen ones and only they (a delayed-ACK receiver ACKs about one per two). The
run's network state names the rules. About 10 s.
"""

from __future__ import annotations

import subprocess
import sys
import time

from swell.analysis.acks import measure
from swell.experiments.provenance import network_state
from swell.topologies.quickack import chosen_hosts
from swell.topologies.spec import spec_from_dict
from swell.topologies.topology import Topology

TOPOLOGY = {
    "network": "10.87.0.0/16",
    "bottleneck": {"rate_mbps": 100, "delay_ms": 2, "queue_packets": 500},
    "clients": {"count": 2, "access": {"delay_ms": 1},
                "quickack": [{"port": 5001, "share": 0.5}]},
    "servers": {"count": 1, "access": {"delay_ms": 1},
                "quickack": [{"port": 5002, "share": 1.0}]},
    "foreground": {"clients": 0, "servers": 0},
    "seed": 3,
}
BURSTS = 40  # of 8 segments, 10 ms apart

PEER = r'''
import socket, sys, threading, time
role, ip = sys.argv[1], sys.argv[2]
BURST = b"x" * (1448 * 8)

def bursts(c):
    for _ in range(int(sys.argv[3])):
        c.sendall(BURST)
        time.sleep(0.010)

def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port)); s.listen(8)
    print("ready", port, flush=True)
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if c.recv(1) == b"d":
            bursts(c)
        else:
            while c.recv(65536):
                pass
        c.close()

if role == "server":
    for port in (5001, 5002):
        threading.Thread(target=serve, args=(port,), daemon=True).start()
    time.sleep(3600)
else:
    server = sys.argv[4]
    for port in (5001, 5002):
        for what in (b"d", b"u"):
            c = socket.socket()
            c.bind((ip, 0)); c.connect((server, port))
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.sendall(what)
            if what == b"d":
                while c.recv(65536):
                    pass
            else:
                bursts(c)
                c.shutdown(socket.SHUT_WR)
                c.recv(1)
            c.close()
'''


def test_chosen_hosts_ack_every_segment_on_their_port(tmp_path):
    spec = spec_from_dict(TOPOLOGY)
    with Topology(spec, engine="native", capture_dir=tmp_path / "cap") as topo:
        server = topo.servers[0]
        srv = topo.popen_in(server, [sys.executable, "-c", PEER, "server", server.ip, str(BURSTS)],
                            stdout=subprocess.PIPE, text=True)
        assert srv.stdout is not None
        assert [srv.stdout.readline().split()[0] for _ in range(2)] == ["ready", "ready"]
        for client in topo.clients:
            topo.run_in(client, [sys.executable, "-c", PEER, "client", client.ip, str(BURSTS),
                                 server.ip], timeout=60)
        time.sleep(0.3)
        state = network_state(topo)
        rules = {node: s["quickack_rules"] for node, s in state.items() if s["quickack_rules"]}
        shown = topo.run_in(topo.clients[0], ["ip", "rule", "show"]).stdout
    chosen = chosen_hosts([c.ip for c in topo.clients], 0.5, 3, 5001, "left")
    assert len(chosen) == 1 and f"from {chosen[0]} " in shown
    assert rules == {"c0": {"dport 5001": 1}, "s0": {"sport 5002": 1}}
    got = measure([str(p) for p in sorted((tmp_path / "cap").glob("*.pcap"))], by_port=2)
    rows = {r["port"]: r for r in got["by_port"]}
    # downloads: clients receive (s2c); uploads: the server receives (c2s)
    assert rows["5001"]["s2c"]["receivers_judged"] == 2
    assert rows["5001"]["s2c"]["receivers_every_segment"] == 0.5
    assert rows["5002"]["s2c"]["receivers_every_segment"] == 0.0
    assert rows["5002"]["c2s"]["receivers_judged"] == 1
    assert rows["5002"]["c2s"]["receivers_every_segment"] == 1.0
    assert rows["5001"]["c2s"]["receivers_every_segment"] == 0.0
    assert rows["5002"]["c2s"]["acks_per_data_segment"] > 0.9
    assert rows["5001"]["c2s"]["acks_per_data_segment"] < 0.7
