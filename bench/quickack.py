"""What makes a Linux TCP receiver acknowledge every segment (manual; root).

    .venv/bin/python bench/quickack.py [--trace CAPTURE]

Campus's HTTPS hosts acknowledged 0.82 (clients) and 0.84 (servers) of the data
segments they received, three in four of its HTTPS clients 0.75 or more; its HTTP
hosts 0.51 and 0.16, and swell's generated hosts (stock Linux) 0.54-0.56 and
0.31-0.38 (``bench/ack_ratio.py --by-port``; docs/fidelity.md, "Who acknowledges
every segment"). This bench measures, on one path, which of Linux's knobs gives a
receiver that ACKs every segment, so a generator can make such hosts:

* ``stack``: nothing set (delayed ACKs: one ACK per two full segments, or per
  batch of segments the receiver's softirq handles at once);
* ``TCP_QUICKACK``: the socket option set again after every read (as
  applications do: the option is not permanent);
* ``route quickack``: the receiver's route to the sender carries ``quickack 1``
  (``ip route``, RTAX_QUICKACK since Linux 3.11: the stack leaves delayed ACKs for
  every connection on that route).

Two senders over a veth pair between two namespaces (``<prefix>-a``,
``<prefix>-b``, a fresh ``sw`` prefix, removed at the end and by ``swell
cleanup``; offloads off so the capture sees wire segments): single segments 2 ms
apart, and bursts of eight back to back every 10 ms. The receiver's pure ACKs per
data segment are counted in a capture at the receiver. With ``--trace``, the
trace's own per-port table is printed beside.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from ack_ratio import by_port_table  # noqa: E402

from swell.analysis.acks import measure  # noqa: E402
from swell.topologies.topology import new_prefix  # noqa: E402

PEER = r'''
import socket, sys, time
role, burst = sys.argv[1], int(sys.argv[2])
quick = len(sys.argv) > 3 and sys.argv[3] == "1"
if role == "send":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.250.0.1", 5001)); s.listen(1)
    c, _ = s.accept(); c.recv(16)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(3200 // burst):
        c.sendall(b"x" * (1448 * burst))
        time.sleep(0.002 if burst == 1 else 0.010)
    c.close()
else:
    for _ in range(100):
        try:
            c = socket.create_connection(("10.250.0.1", 5001)); break
        except OSError:
            time.sleep(0.05)
    c.sendall(b"go")
    while c.recv(65536):
        if quick:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
'''
RECEIVERS = ("stack", "TCP_QUICKACK", "route quickack")
SENDERS = ((1, "segments 2 ms apart"), (8, "bursts of 8 every 10 ms"))


def sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def one(a: str, b: str, burst: int, receiver: str, work: Path) -> dict[str, float]:
    """One transfer from ``a`` (sender) to ``b``; the receiver's ACKs per data segment."""
    route = "quickack 1" if receiver == "route quickack" else "quickack 0"
    sh(f"ip -n {b} route change 10.250.0.0/24 dev {b}-v {route}")
    pcap = work / f"{burst}-{receiver.replace(' ', '-')}.pcap"
    cap = subprocess.Popen(["ip", "netns", "exec", b, "tcpdump", "-i", f"{b}-v", "-s", "96",
                            "-U", "-w", str(pcap), "tcp"], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    peer = work / "peer.py"
    snd = subprocess.Popen(["ip", "netns", "exec", a, sys.executable, str(peer), "send",
                            str(burst)])
    subprocess.run(["ip", "netns", "exec", b, sys.executable, str(peer), "recv", str(burst),
                    "1" if receiver == "TCP_QUICKACK" else "0"], check=True, timeout=120)
    snd.wait(timeout=30)
    time.sleep(0.3)
    cap.terminate()
    cap.wait(timeout=10)
    m = measure([str(pcap)])["s2c"]
    return {"segments": m["data_segments"], "acks": m["acks_by_receiver"],
            "ratio": m["acks_per_data_segment"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", help="a capture whose per-port table is printed beside")
    args = ap.parse_args()
    prefix = new_prefix()
    a, b = f"{prefix}-a", f"{prefix}-b"
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as tmp:
        work = Path(tmp)
        (work / "peer.py").write_text(PEER)
        try:
            sh(f"ip netns add {a}; ip netns add {b}")
            sh(f"ip link add {a}-v netns {a} type veth peer name {b}-v netns {b}")
            for ns, ip in ((a, "10.250.0.1"), (b, "10.250.0.2")):
                sh(f"ip -n {ns} addr add {ip}/24 dev {ns}-v; ip -n {ns} link set {ns}-v up; "
                   f"ip -n {ns} link set lo up; "
                   f"ip netns exec {ns} ethtool -K {ns}-v tso off gso off gro off")
            for burst, what in SENDERS:
                for receiver in RECEIVERS:
                    rows.append((what, receiver, one(a, b, burst, receiver, work)))
        finally:
            subprocess.run(f"ip netns del {a}; ip netns del {b}", shell=True,
                           capture_output=True)
    uname = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    print(f"one receiver's pure ACKs per data segment received (veth, Linux {uname})")
    print(f"{'sender':<26} {'receiver':<16} {'segments':>9} {'ACKs':>6} {'ACKs/segment':>13}")
    for what, receiver, r in rows:
        print(f"{what:<26} {receiver:<16} {r['segments']:>9} {r['acks']:>6} "
              f"{r['ratio']:>13.2f}")
    if args.trace:
        print(f"\n{args.trace}: per server port, ACKs per data segment received and the "
              "share of receiving hosts (10+ segments) that ACK 0.75 or more of them")
        print("\n".join(by_port_table(measure([args.trace], by_port=2)["by_port"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
