"""Trace reader benchmark: packets/s of swell, dpkt, scapy and tshark on the same files.

Run by hand (not in CI): ``.venv/bin/python bench/bench_reader.py``.

It builds large Ethernet/IPv4/TCP pcaps in ``/tmp/swell-bench`` from the
bundled ``data/pcap/example.pcap`` (its TCP packets, repeated with timestamps
shifted so time keeps increasing): one with full payloads and one
header-only (snap length 96, like a header trace). Each tool extracts the
same per-packet fields (timestamp, addresses, ports, TCP flags, seq, ack,
window, IP length, payload length) on the same file, pinned to one CPU.
swell reads every packet (best of ``--repeat`` runs, file in the page
cache); dpkt, scapy and tshark are much slower, so they read the first
``--dpkt``, ``--scapy`` and ``--tshark`` packets of the same file; the rate
is per packet either way. Prints a Markdown table plus the machine and
command.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from swell.extract.reader import open_trace, read_all

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "data" / "pcap" / "example.pcap"
TSHARK_FIELDS = (
    "frame.time_epoch ip.src ip.dst tcp.srcport tcp.dstport tcp.flags tcp.seq_raw "
    "tcp.ack_raw tcp.window_size_value ip.len tcp.len"
).split()


def _records(path: Path) -> list[bytes]:
    """Raw record bytes (16-byte header + data) of a little-endian microsecond pcap."""
    raw = path.read_bytes()
    assert raw[:4] == b"\xd4\xc3\xb2\xa1", "expects a little-endian microsecond pcap"
    out, pos = [], 24
    while pos + 16 <= len(raw):
        caplen = int.from_bytes(raw[pos + 8 : pos + 12], "little")
        out.append(raw[pos : pos + 16 + caplen])
        pos += 16 + caplen
    return out


def build(out: Path, packets: int, snaplen: int | None) -> Path:
    """Repeat example.pcap's TCP packets to ``packets`` records, shifting time."""
    if out.exists():
        return out
    tcp = read_all(SOURCE).proto == 6
    recs = [r for r, keep in zip(_records(SOURCE), tcp, strict=True) if keep]
    if snaplen:
        recs = [
            r[:8] + min(len(r) - 16, snaplen).to_bytes(4, "little") + r[12 : 16 + snaplen]
            for r in recs
        ]
    block = np.frombuffer(b"".join(recs), dtype=np.uint8).copy()
    starts = np.cumsum([0] + [len(r) for r in recs[:-1]])
    secs = block[starts[:, None] + np.arange(4)].copy().view("<u4").ravel()
    span = int(secs.max() - secs.min()) + 1
    hdr = SOURCE.read_bytes()[:24]
    if snaplen:
        hdr = hdr[:16] + snaplen.to_bytes(4, "little") + hdr[20:]
    tmp = out.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(hdr)
        written, rep = 0, 0
        while written < packets:
            n = min(len(recs), packets - written)
            shifted = (secs + np.uint32(rep * span)).astype("<u4").view(np.uint8).reshape(-1, 4)
            block[starts[:, None] + np.arange(4)] = shifted
            end = int(starts[n]) if n < len(recs) else len(block)
            f.write(block[:end].tobytes())
            written += n
            rep += 1
    tmp.rename(out)
    return out


def run_swell(path: Path, limit: int | None = None) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = total = 0
    with open_trace(path) as tr:
        for c in tr.chunks(1 << 18):  # the chunk size of the published table
            n += len(c)
            total += int(c.payload_len.sum())
    return n, time.perf_counter() - t0


def run_dpkt(path: Path, limit: int) -> tuple[int, float]:
    import dpkt

    t0 = time.perf_counter()
    n = 0
    rows = []
    with path.open("rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(buf)
            ip = eth.data
            tcp = ip.data
            rows.append(
                (
                    ts,
                    ip.src,
                    ip.dst,
                    tcp.sport,
                    tcp.dport,
                    tcp.flags,
                    tcp.seq,
                    tcp.ack,
                    tcp.win,
                    ip.len,
                    ip.len - 4 * ip.hl - 4 * tcp.off,
                )
            )
            n += 1
            if n >= limit:
                break
    return n, time.perf_counter() - t0


def run_scapy(path: Path, limit: int) -> tuple[int, float]:
    from scapy.layers.inet import IP, TCP
    from scapy.utils import PcapReader

    t0 = time.perf_counter()
    n = 0
    rows = []
    with PcapReader(str(path)) as rd:
        for p in rd:
            ip, tcp = p[IP], p[TCP]
            rows.append(
                (
                    p.time,
                    ip.src,
                    ip.dst,
                    tcp.sport,
                    tcp.dport,
                    int(tcp.flags),
                    tcp.seq,
                    tcp.ack,
                    tcp.window,
                    ip.len,
                    ip.len - 4 * ip.ihl - 4 * tcp.dataofs,
                )
            )
            n += 1
            if n >= limit:
                break
    return n, time.perf_counter() - t0


def run_tshark(path: Path, limit: int) -> tuple[int, float]:
    argv = ["tshark", "-n", "-r", str(path), "-c", str(limit), "-T", "fields"]
    argv += ["-o", "tcp.analyze_sequence_numbers:FALSE"]
    for f in TSHARK_FIELDS:
        argv += ["-e", f]
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, check=True).stdout
    return out.count(b"\n"), time.perf_counter() - t0


def machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    tshark = subprocess.run(["tshark", "--version"], capture_output=True, text=True).stdout
    load = os.getloadavg()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores (pinned to one), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, "
        f"{tshark.splitlines()[0].rstrip('.') if tshark else 'tshark ?'}; "
        f"load average {load:.2f} at start"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=2_000_000, help="packets per bench file")
    ap.add_argument("--dpkt", type=int, default=200_000, help="packets dpkt reads")
    ap.add_argument("--scapy", type=int, default=20_000, help="packets scapy reads")
    ap.add_argument("--tshark", type=int, default=300_000, help="packets tshark reads")
    ap.add_argument("--repeat", type=int, default=3, help="swell runs (best is kept)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/swell-bench"))
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    args.dir.mkdir(parents=True, exist_ok=True)
    files = {
        "full payload": build(args.dir / f"tcp-full-{args.packets}.pcap", args.packets, None),
        "header-only (snaplen 96)": build(
            args.dir / f"tcp-hdr-{args.packets}.pcap", args.packets, 96
        ),
    }
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"machine: {machine()}\n")
    print("| file | tool | packets read | seconds | packets/s | vs tshark |")
    print("|---|---|---:|---:|---:|---:|")
    for label, path in files.items():
        size = path.stat().st_size / 1e6
        run_swell(path)  # warm the page cache
        results = {"swell": min((run_swell(path) for _ in range(args.repeat)), key=lambda r: r[1])}
        results["tshark -T fields"] = run_tshark(path, args.tshark)
        results["dpkt"] = run_dpkt(path, args.dpkt)
        results["scapy (PcapReader)"] = run_scapy(path, args.scapy)
        ref = results["tshark -T fields"][0] / results["tshark -T fields"][1]
        for tool, (n, secs) in results.items():
            rate = n / secs
            print(
                f"| {label}, {size:,.0f} MB | {tool} | {n:,} | {secs:.2f} | {rate:,.0f} | "
                f"{rate / ref:.1f}x |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
