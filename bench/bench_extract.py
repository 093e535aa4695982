"""Extraction benchmark: ``swell extract`` time next to plain reading time, same files, one run.

Run by hand (not in CI)::

    .venv/bin/python bench/bench_extract.py [--packets 10000000] [--repeat 1]

Files: every bundled capture in ``data/pcap`` plus a **generated composite**
of about ``--packets`` packets in ``/tmp/swell-bench/composite-<N>.pcap``,
made by merging and time-shifting captures: the Ethernet/IPv4 TCP and UDP
packets of the bundled ``example.pcap``, ``tls2.pcap`` and ``http-packets.pcap``
(each rebased to start at 0) form one block; copy ``k`` of the block gets a
random time offset within the block's span and its IPv4 addresses' middle two
octets XORed with ``k`` (so copies are distinct hosts and connections); copies
are merged by time in groups of 16, groups follow each other in time. Records
are cut to a snap length of 96 (a header-only trace: the reader takes sizes
from the IP/TCP headers), which keeps the file near 1 GB.

For each file, fresh subprocesses: ``read`` (iterate the reader's chunks,
no work) and one ``extract`` per connection tracker (``--engines``: the native
Rust tracker, the default, and the numpy reference; ``SWELL_CONNTRACK``):
:func:`swell.extract.pipeline.extract_model` (reader + connection reconstruction +
model fit, no file written). Reported: wall time,
packets/s, the ratio extract/read (target <= 2), each process's peak RSS
(``VmHWM``), which shows memory stays bounded on a trace far larger than
what would fit if loaded whole, each process's CPU time (user + system, all
threads: less sensitive than wall time to other work on a shared machine) and
the 1-minute load average when the row was done (the machine's other work).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("example.pcap", "tls2.pcap", "http-packets.pcap")
SNAP = 96
GROUP = 16


def _records(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat bytes, record starts, record lengths (cut to SNAP) and times (us) of a pcap."""
    raw = np.frombuffer(path.read_bytes(), dtype=np.uint8)
    assert bytes(raw[:4]) == b"\xd4\xc3\xb2\xa1", "expects a little-endian microsecond pcap"
    assert int.from_bytes(bytes(raw[20:24]), "little") == 1, "expects Ethernet"
    starts, pos = [], 24
    while pos + 16 <= len(raw):
        starts.append(pos)
        pos += 16 + int.from_bytes(bytes(raw[pos + 8 : pos + 12]), "little")
    st = np.array(starts, dtype=np.int64)
    hdr = raw[st[:, None] + np.arange(16)].view("<u4").reshape(-1, 4)
    t_us = hdr[:, 0].astype(np.int64) * 1_000_000 + hdr[:, 1]
    etype = raw[st + 16 + 12].astype(np.int64) << 8 | raw[st + 16 + 13]
    proto = raw[np.minimum(st + 16 + 23, len(raw) - 1)]
    keep = (etype == 0x0800) & ((proto == 6) | (proto == 17)) & (hdr[:, 2] >= 54)
    return raw, st[keep], np.minimum(hdr[keep, 2], SNAP).astype(np.int64) + 16, t_us[keep]


def _block() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One block: the source captures' packets rebased to 0, as (bytes, starts, lens, t_us)."""
    parts, st_all, ln_all, t_all, base = [], [], [], [], 0
    for name in SOURCES:
        raw, st, ln, t = _records(REPO / "data" / "pcap" / name)
        idx = np.repeat(st - np.r_[0, np.cumsum(ln)[:-1]], ln) + np.arange(ln.sum())
        parts.append(raw[idx])
        st_all.append(base + np.r_[0, np.cumsum(ln)[:-1]])
        ln_all.append(ln)
        t_all.append(t - t.min())
        base += int(ln.sum())
    data = np.concatenate(parts)
    st, ln, t = np.concatenate(st_all), np.concatenate(ln_all), np.concatenate(t_all)
    o = np.argsort(t, kind="stable")
    return data, st[o], ln[o], t[o]


def _put_u32(buf: np.ndarray, at: np.ndarray, val: np.ndarray) -> None:
    for i in range(4):
        buf[at + i] = (val >> (8 * i)) & 0xFF


def build_composite(out: Path, packets: int, seed: int = 7) -> Path:
    """Write the composite trace described in the module docstring (cached)."""
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    data, st, ln, t = _block()
    n, span = len(st), int(t.max()) + 1
    copies = -(-packets // n)
    rng = np.random.default_rng(seed)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00" + bytes(8))
        f.write(SNAP.to_bytes(4, "little") + (1).to_bytes(4, "little"))
        for g0 in range(0, copies, GROUP):
            ks = np.arange(g0, min(g0 + GROUP, copies))
            offs = rng.integers(0, span, len(ks))
            tt = (1_500_000_000_000_000 + g0 // GROUP * 2 * span + offs[:, None] + t).ravel()
            kk = np.repeat(ks, n)
            pk = np.tile(np.arange(n), len(ks))
            o = np.argsort(tt, kind="stable")
            tt, kk, pk = tt[o], kk[o], pk[o]
            lens = ln[pk]
            ostart = np.r_[0, np.cumsum(lens)[:-1]]
            buf = data[np.repeat(st[pk] - ostart, lens) + np.arange(lens.sum())]
            _put_u32(buf, ostart, tt // 1_000_000)
            _put_u32(buf, ostart + 4, tt % 1_000_000)
            _put_u32(buf, ostart + 8, lens - 16)
            for a in (16 + 26 + 1, 16 + 30 + 1):  # src, dst: octets 2 and 3
                buf[ostart + a] ^= (kk >> 8).astype(np.uint8)
                buf[ostart + a + 1] ^= (kk & 0xFF).astype(np.uint8)
            f.write(buf.tobytes())
    tmp.rename(out)
    return out


def _one(mode: str, path: str) -> None:
    """Child process: time one mode on one file, print JSON."""
    # both modes are timed after importing their entry point (what they do lazily
    # inside, e.g. the model fit's modules, is timed)
    from swell.extract.reader import open_trace

    if mode != "read":
        from swell.extract.pipeline import extract_model
    t0 = time.perf_counter()
    if mode == "read":
        n = 0
        with open_trace(path) as tr:
            for ch in tr.chunks():
                n += len(ch)
    else:
        m = extract_model(path, label="bench")
        n = int(m.meta["trace"]["packets"])
    dt = time.perf_counter() - t0
    cpu = sum(os.times()[:2])  # user + system of every thread of this process
    # VmHWM, not ru_maxrss: the latter survives exec() and would show the parent's peak
    hwm = [
        ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith("VmHWM:")
    ]
    rss = int(hwm[0].split()[1]) / 1024 if hwm else float("nan")
    print(json.dumps({"packets": n, "seconds": dt, "cpu_s": cpu, "rss_mb": rss}))


def _run(mode: str, path: Path, repeat: int, engine: str = "native") -> dict:
    best = None
    env = {"SWELL_QUIET": "1", "PATH": "/usr/bin:/bin", "SWELL_CONNTRACK": engine}
    for _ in range(repeat):
        r = subprocess.run(
            [sys.executable, __file__, "--one", mode, str(path)],
            capture_output=True,
            text=True,
            env=env,
        )
        if r.returncode:
            raise SystemExit(f"{mode} {path}: {r.stderr.strip()[-500:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if best is None or res["seconds"] < best["seconds"]:
            best = res
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--packets", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--engines",
        default="native,numpy",
        help="connection trackers to time, comma-separated (SWELL_CONNTRACK values)",
    )
    ap.add_argument("--one", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        _one(*args.one)
        return
    files = sorted((REPO / "data" / "pcap").glob("*.pcap"))
    comp = Path("/tmp/swell-bench") / f"composite-{args.packets}.pcap"
    t0 = time.perf_counter()
    build_composite(comp, args.packets)
    print(
        f"composite: {comp} ({comp.stat().st_size / 1e9:.2f} GB, built or cached in "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}; command: {' '.join(sys.argv)}\n"
    )
    engines = args.engines.split(",")
    head = ["file", "packets", "read s", "read Mpkt/s"]
    for e in engines:
        head += [f"extract s ({e})", f"Mpkt/s ({e})", f"extract/read ({e})"]
    head += ["read RSS MB", *(f"RSS MB ({e})" for e in engines)]
    head += ["CPU s read", *(f"CPU s ({e})" for e in engines), "load avg"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for f in [*files, comp]:
        r = _run("read", f, args.repeat)
        res = {e: _run("extract", f, args.repeat, e) for e in engines}
        row = [f.name, f"{r['packets']:,}", f"{r['seconds']:.3f}"]
        row.append(f"{r['packets'] / r['seconds'] / 1e6:.2f}")
        for e in engines:
            x = res[e]
            row += [f"{x['seconds']:.3f}", f"{x['packets'] / x['seconds'] / 1e6:.2f}"]
            row.append(f"{x['seconds'] / r['seconds']:.2f}")
        row += [f"{r['rss_mb']:.0f}", *(f"{res[e]['rss_mb']:.0f}" for e in engines)]
        row += [f"{r['cpu_s']:.2f}", *(f"{res[e]['cpu_s']:.2f}" for e in engines)]
        row.append(f"{os.getloadavg()[0]:.1f}")
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
