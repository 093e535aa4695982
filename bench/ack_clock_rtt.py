"""Round trips under load from TCP timestamps, original against generated (manual).

``.venv/bin/python bench/ack_clock_rtt.py CAPTURE...``; a CAPTURE is a pcap read by
tshark: an original, or a bench run's ``capture/clients-c0-*.pcap`` merged with mergecap
(where the trace's monitor sat; the bench's ``generated.pcap`` is the bottleneck's,
before the clients' downlinks and their queues). Issue 19: web-lan's server ->
client energy is too high at 16-32 ms and too low at 64-128 ms; a flow's flights come
once a round trip, so the round trip a flight waits for under load places its energy.

Passive, in the manner of pping: at the monitor, a packet of the connection's client
(the side that sent the SYN) that carries no data and a TSval first seen at t0 is an
ACK; the first server packet with data that echoes that TSval (TSecr) at t1 is the
flight it released, and t1 - t0 is a round trip from the monitor to the server and
back, queues included. A TSval also carried by a client packet with data (a request)
is left out: the server's answer to it includes its own wait. Needs TCP timestamps on
both sides (Linux's default; the traces here have them) and SYNs in the capture.
Prints the count and p10/p25/p50/p75/p90/p99 in ms per capture (tshark: about a
minute for 300 MB).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

FIELDS = ("tcp.stream", "frame.time_epoch", "ip.src", "ipv6.src", "tcp.srcport",
          "tcp.flags.syn", "tcp.flags.ack", "tcp.len", "tcp.options.timestamp.tsval",
          "tcp.options.timestamp.tsecr")


def _flag(v: str) -> bool:
    return v in ("1", "True")


def rtts(path: Path) -> list[float]:
    """The ACK-clocked round trips (seconds) of one capture."""
    argv = ["tshark", "-n", "-r", str(path), "-Y", "tcp.options.timestamp.tsval",
            "-T", "fields"] + [a for f in FIELDS for a in ("-e", f)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    client: dict[str, tuple[str, str]] = {}   # stream -> the SYN's (address, port)
    first: dict[tuple[str, str], float] = {}  # (stream, client TSval) -> first seen
    with_data: set[tuple[str, str]] = set()   # client TSvals also on a request
    used: set[tuple[str, str]] = set()
    out: list[float] = []
    for line in proc.stdout:
        f = line.rstrip("\n").split("\t")
        if len(f) < len(FIELDS) or not f[8]:
            continue
        stream, t, src4, src6, sport, syn, ack, length, tsval, tsecr = f[:10]
        src = src4 or src6
        if _flag(syn):
            if not _flag(ack):
                client[stream] = (src, sport)
            continue
        side = client.get(stream)
        if side is None:
            continue
        key = (stream, tsval)
        if (src, sport) == side:
            first.setdefault(key, float(t))
            if int(length or 0) > 0:
                with_data.add(key)
        elif int(length or 0) > 0:
            echo = (stream, tsecr)
            if echo in first and echo not in used and echo not in with_data:
                used.add(echo)
                out.append(float(t) - first[echo])
    proc.wait()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captures", nargs="+", type=Path)
    args = ap.parse_args()
    if shutil.which("tshark") is None:
        print("ack_clock_rtt: tshark is not installed (scripts/bootstrap.sh installs it)")
        return 1
    qs = (10, 25, 50, 75, 90, 99)
    print("round trips an ACK waited for its flight (TCP timestamps at the monitor), ms: "
          + " / ".join(f"p{q}" for q in qs))
    for path in args.captures:
        if not path.exists():
            print(f"{path}: absent, skipped")
            continue
        r = sorted(rtts(path))
        if not r:
            print(f"{path}: no samples (timestamps or SYNs missing)")
            continue
        cells = " / ".join(f"{1000 * r[min(len(r) - 1, len(r) * q // 100)]:.1f}" for q in qs)
        print(f"{path}: {len(r)} samples; {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
