"""swell's one-sided RTT estimate against tshark (issue 19, item 4): ``bench/rtt_oneway_check.py``.

A one-directional trace (only the clients' packets, as on one side of a
monitored link) has no SYN/ACK, so swell estimates each TCP connection's round
trip as the time from the client's SYN to its first ACK (``one_sided_rtt``,
:mod:`swell.extract.conntable`); estimates at or above the 1 s initial SYN
timeout (a retransmitted or duplicate SYN, a delayed first ACK) are left out and
reported (:func:`swell.extract.network.implausible_rtts`).

The check: from each shared two-way capture, make a one-directional one with
tshark (keep the packets whose source sent a pure SYN: the clients), extract the
one-sided estimates from it with swell, and compare them per connection
(4-tuple) with tshark's handshake RTT (``tcp.analysis.initial_rtt``: SYN to the
ACK of the SYN/ACK) on the original two-way capture, the same interval seen
at the same point. tshark itself reports no initial RTT on the one-directional
file (it needs the SYN/ACK); that count is shown too. Connections whose SYN
tshark flags as a retransmission are counted: there swell measures from the
first SYN, tshark too, both then include the SYN timeout.

Writes ``docs/scale/rtt_oneway.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swell.extract.pipeline import read_connections  # noqa: E402
from swell.fsutil import write_json  # noqa: E402

SHARED = Path("/work/shared/data/pcap")
DEFAULT = ("pcapplusplus/example.pcap", "pcapplusplus/tls2.pcap",
           "pcapplusplus/http-packets.pcap", "pcapplusplus/example2.pcap",
           "ndpi/443-firefox.pcap", "ndpi/instagram.pcap", "ndpi/pinterest.pcap",
           "ndpi/tumblr.pcap", "ndpi/1kxun.pcap", "ndpi/alexa-app.pcapng", "misc/netml_demo.pcap")


def tshark(args: list[str]) -> list[list[str]]:
    out = subprocess.run(["tshark", "-n", *args], capture_output=True, text=True, check=True)
    return [line.split("\t") for line in out.stdout.splitlines() if line]


def tshark_rtts(path: Path) -> tuple[dict[tuple, float], set[tuple], set[str]]:
    """tshark's initial RTT per (client, cport, server, sport), SYN-retransmitted tuples,
    and the clients (sources of pure SYNs)."""
    syn = tshark(["-r", str(path), "-Y", "tcp.flags.syn==1 && tcp.flags.ack==0 && ip",
                  "-T", "fields", "-e", "tcp.stream", "-e", "ip.src", "-e", "tcp.srcport",
                  "-e", "ip.dst", "-e", "tcp.dstport", "-e", "tcp.analysis.retransmission"])
    key = {}
    retx = set()
    for stream, src, sp, dst, dp, rt in syn:
        k = (src, int(sp), dst, int(dp))
        key.setdefault(stream, k)
        if rt:
            retx.add(k)
    rtt = {}
    for stream, v in tshark(["-r", str(path), "-Y", "tcp.analysis.initial_rtt", "-T", "fields",
                             "-e", "tcp.stream", "-e", "tcp.analysis.initial_rtt"]):
        if stream in key and key[stream] not in rtt and v:
            rtt[key[stream]] = float(v)
    return rtt, retx, {k[0] for k in key.values()}


def swell_rtts(path: Path) -> dict[tuple, float]:
    t, _ = read_connections(path, 1 << 17)
    c = t.cols
    out = {}
    for i in np.flatnonzero(np.isfinite(c["one_sided_rtt"])):
        k = (t.hosts[int(c["client"][i])], int(c["cport"][i]), t.hosts[int(c["server"][i])],
             int(c["sport"][i]))
        out.setdefault(k, float(c["one_sided_rtt"][i]))
    return out


def check(path: Path, tmp: Path) -> dict[str, Any]:
    rtt, retx, clients = tshark_rtts(path)
    if not clients:
        return {"trace": str(path), "skipped": "no handshakes (no pure SYN) in the capture"}
    one = tmp / f"{path.stem}-c2s.pcap"
    flt = "ip.src in {" + ", ".join(sorted(clients)) + "}"
    subprocess.run(["tshark", "-n", "-r", str(path), "-Y", flt, "-F", "pcap", "-w", str(one)],
                   capture_output=True, check=True)
    ts_one, _, _ = tshark_rtts(one)
    est = swell_rtts(one)
    both = sorted(set(est) & set(rtt))
    err = np.array([est[k] - rtt[k] for k in both])
    big = [k for k in both if est[k] >= 1.0]
    same = sorted(set(est) & set(ts_one))
    err1 = np.array([est[k] - ts_one[k] for k in same])
    one_max = float(np.max(np.abs(err1)) * 1e3) if same else None
    return {"trace": str(path), "clients": len(clients), "tshark_two_way": len(rtt),
            "tshark_one_way": len(ts_one),
            "vs_tshark_one_way_max_ms": one_max, "swell_one_way": len(est),
            "matched": len(both),
            "abs_err_ms_p50": float(np.median(np.abs(err)) * 1e3) if both else None,
            "abs_err_ms_max": float(np.max(np.abs(err)) * 1e3) if both else None,
            "within_1ms": int(np.sum(np.abs(err) <= 1e-3)),
            "rtt_ms_p50": float(np.median([rtt[k] for k in both]) * 1e3) if both else None,
            "syn_retransmitted": len(retx & set(both)),
            "at_or_over_1s": len(big),
            "at_or_over_1s_with_syn_retx": len([k for k in big if k in retx]),
            "worst": [{"conn": list(k), "swell_s": est[k], "tshark_s": rtt[k]}
                      for k in sorted(both, key=lambda k: -abs(est[k] - rtt[k]))[:3]]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, default=Path("docs/scale/rtt_oneway.json"))
    args = ap.parse_args()
    traces = args.traces or [SHARED / t for t in DEFAULT if (SHARED / t).exists()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="swell-rtt-") as tmp:
        for t in traces:
            rows.append(check(t, Path(tmp)))
    write_json(args.out, {"runs": rows})
    print("| trace | clients | tshark RTTs (two-way) | tshark RTTs one-way (max diff ms) "
          "| swell one-sided "
          "| matched | abs error p50 / max (ms) | within 1 ms | RTT p50 (ms) "
          "| SYN retransmitted | >= 1 s (with SYN retx) |")
    print("|---" * 11 + "|")
    for r in rows:
        if "skipped" in r:
            print(f"| {Path(r['trace']).name} | skipped: {r['skipped']} |" + " |" * 9)
            continue
        e50 = "-" if r["abs_err_ms_p50"] is None else (
            f"{r['abs_err_ms_p50']:.3f} / {r['abs_err_ms_max']:.3f}")
        p50 = "-" if r["rtt_ms_p50"] is None else f"{r['rtt_ms_p50']:.1f}"
        print(f"| {Path(r['trace']).name} | {r['clients']} | {r['tshark_two_way']} "
              f"| {r['tshark_one_way']} ({r['vs_tshark_one_way_max_ms'] or 0:.3f}) "
              f"| {r['swell_one_way']} | {r['matched']} | {e50} "
              f"| {r['within_1ms']} | {p50} | {r['syn_retransmitted']} "
              f"| {r['at_or_over_1s']} ({r['at_or_over_1s_with_syn_retx']}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
