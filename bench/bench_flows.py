"""Flow input benchmark: flows/s reading an nfcapd file, swell next to ``nfdump -o csv``.

Run by hand (not in CI), under the shared CPU lock:
``flock /tmp/swell-cpu.lock .venv/bin/python bench/bench_flows.py [--flows 10000000]``.

Building the file: a synthetic Ethernet/IPv4/UDP pcap where every packet is a
flow of its own (distinct source address and port), packets spread evenly
over the trace (``--flows`` packets over ``--span`` seconds, so nfpcapd's 60 s
inactive timeout keeps its cache bounded), written with numpy in one go and
turned into an nfcapd file by ``nfpcapd -r PCAP -w DIR`` (one file: ``-t``
longer than the span). The files live in ``/tmp/swell-bench-flows`` and are
reused when the same size is asked for again.

Measured, in the same run, each best of ``--repeat`` (file in the page cache):

* ``swell``: :func:`swell.extract.flows.read_flows` on the nfcapd file (nfdump's
  ``fmt`` output parsed into numpy columns: nfdump formatting and swell parsing
  run as two processes, overlapping on the two cores);
* ``nfdump -r FILE -o csv > /dev/null``: nfdump alone printing its CSV, the
  floor under any reader that goes through nfdump's text output;
* ``nfdump -r FILE -q -N -6 -o fmt:... > /dev/null``: nfdump alone printing the
  format swell parses.

Prints a Markdown table plus the machine and the command.
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

from swell.extract.flows import read_flows
from swell.extract.flows.nfcapd import FMT, nfdump_version, pcap_to_nfcapd

WORK = Path("/tmp/swell-bench-flows")
FRAME = 14 + 20 + 8 + 18  # Ethernet + IPv4 + UDP + 18 bytes of payload (60-byte frame)


def make_pcap(path: Path, flows: int, span_s: float) -> None:
    """``flows`` one-packet UDP flows, evenly spread over ``span_s`` seconds."""
    rec = 16 + FRAME
    buf = np.zeros((flows, rec), dtype=np.uint8)
    t_us = 1_700_000_000 * 10**6 + (np.arange(flows, dtype=np.int64) * int(span_s * 1e6)) // flows
    hdr = buf[:, :16].view("<u4")
    hdr[:, 0] = t_us // 10**6
    hdr[:, 1] = t_us % 10**6
    hdr[:, 2] = hdr[:, 3] = FRAME
    f = buf[:, 16:]
    f[:, 12:14] = (8, 0)  # IPv4
    ip = f[:, 14:34]
    ip[:, 0] = 0x45
    ip[:, 2:4] = np.frombuffer(struct_be16(20 + 8 + 18), dtype=np.uint8)
    ip[:, 8], ip[:, 9] = 64, 17
    i = np.arange(flows, dtype=np.uint32)
    src = (10 << 24) + (i >> 10)  # 10.x.y.z: one address per 1024 flows
    ip[:, 12:16] = src.astype(">u4").view(np.uint8).reshape(flows, 4)
    ip[:, 16:20] = (192, 0, 2, 1)
    udp = f[:, 34:42]
    udp[:, 0:2] = (1024 + (i & 1023)).astype(">u2").view(np.uint8).reshape(flows, 2)
    udp[:, 2:4] = (0, 53)
    udp[:, 4:6] = np.frombuffer(struct_be16(8 + 18), dtype=np.uint8)
    with open(path, "wb") as fh:
        fh.write(
            np.array([0xA1B2C3D4], "<u4").tobytes()
            + np.array([2, 4], "<u2").tobytes()
            + np.array([0, 0, 65535, 1], "<u4").tobytes()
        )
        for k in range(0, flows, 1 << 20):
            fh.write(buf[k : k + (1 << 20)].tobytes())


def struct_be16(v: int) -> bytes:
    return int(v).to_bytes(2, "big")


def build(flows: int, span_s: float) -> Path:
    WORK.mkdir(parents=True, exist_ok=True)
    nf_dir = WORK / f"nfcapd-{flows}"
    done = nf_dir / "done"
    if done.exists():
        return Path(done.read_text().strip())
    pcap = WORK / f"flows-{flows}.pcap"
    t0 = time.perf_counter()
    make_pcap(pcap, flows, span_s)
    t1 = time.perf_counter()
    files = pcap_to_nfcapd(pcap, nf_dir, ["-t", str(int(span_s) * 4)])
    t2 = time.perf_counter()
    pcap.unlink()
    if len(files) != 1:
        sys.exit(f"expected one nfcapd file, nfpcapd wrote {len(files)}")
    print(f"built {files[0]}: pcap {t1 - t0:.1f} s, nfpcapd {t2 - t1:.1f} s", file=sys.stderr)
    done.write_text(str(files[0]))
    return files[0]


def best(fn: object, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times), out


def run_devnull(cmd: list[str]) -> None:
    with open(os.devnull, "wb") as null:
        subprocess.run(cmd, stdout=null, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=10_000_000)
    ap.add_argument("--span", type=float, default=3600.0, help="trace length, s (3600)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    nf = build(args.flows, args.span)
    size = nf.stat().st_size
    rows = []
    t, table = best(lambda: read_flows([nf], fmt="nfcapd"), args.repeat)
    n = len(table)  # type: ignore[arg-type]
    rows.append(("swell read_flows (nfcapd -> numpy columns)", t, n))
    t, _ = best(lambda: run_devnull(["nfdump", "-r", str(nf), "-o", "csv"]), args.repeat)
    rows.append(("nfdump -r FILE -o csv > /dev/null", t, n))
    fmt_cmd = ["nfdump", "-r", str(nf), "-q", "-N", "-6", "-o", FMT]
    t, _ = best(lambda: run_devnull(fmt_cmd), args.repeat)
    rows.append(("nfdump -q -N -6 -o fmt:(swell's) > /dev/null", t, n))
    print(f"nfcapd file: {n:,} flows, {size / 1e6:.0f} MB ({nf.name}); best of {args.repeat}\n")
    print("| reader | seconds | flows/s |")
    print("|---|---|---|")
    for name, t, k in rows:
        print(f"| {name} | {t:.2f} | {k / t:,.0f} |")
    print(
        f"\nmachine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, numpy {np.__version__}, {nfdump_version()}"
    )
    print(f"command: {' '.join(shlex.quote(a) for a in sys.argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
