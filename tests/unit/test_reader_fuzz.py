"""Bounded fuzzing of the shipped native reader through its C ABI.

cargo-fuzz needs nightly Rust, which this machine lacks, so this is a seeded
mutation fuzzer in Python: real captures are mutated (bit flips, interesting
32-bit values in length fields, truncation, splices, deletions) and read to
the end through ``open_bytes`` with random chunk sizes. It runs in a child
process because the release library aborts on a panic: a crash shows up as
the child's exit status, with the seed to replay it. The
crate's own ``cargo test -p swell-pcap`` runs the same idea in a debug build
(overflow checks on).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECONDS = float(os.environ.get("SWELL_FUZZ_SECS", "12"))
SEED = int(os.environ.get("SWELL_FUZZ_SEED", "20261123"))

CHILD = r"""
import random, sys, time
from pathlib import Path
import numpy as np
from swell.extract.reader import TraceError, open_bytes

seed, secs = int(sys.argv[1]), float(sys.argv[2])
files = sorted(Path(sys.argv[3]).glob("*.pcap*"))
seeds = [f.read_bytes()[: 32 * 1024] for f in files]
rng = random.Random(seed)
INTERESTING = [0, 1, 4, 12, 16, 24, 52, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0xFFFF]

def mutate(d):
    for _ in range(rng.randint(1, 8)):
        k = rng.randrange(6)
        if not d:
            d = bytearray(rng.choice(seeds)[:64])
        if k == 0:
            d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        elif k == 1:
            d[rng.randrange(len(d))] = rng.randrange(256)
        elif k == 2 and len(d) >= 4:
            at = rng.randrange(len(d) - 3)
            d[at:at + 4] = rng.choice(INTERESTING).to_bytes(4, rng.choice(["little", "big"]))
        elif k == 3:
            del d[rng.randrange(len(d) + 1):]
        elif k == 4:
            o = rng.choice(seeds)
            a = rng.randrange(len(o))
            at = rng.randrange(len(d) + 1)
            d[at:at] = o[a:a + rng.randrange(4096)]
        else:
            at = rng.randrange(len(d))
            del d[at:at + rng.randrange(512)]
    return d

deadline = time.monotonic() + secs
runs = errors = packets = 0
while time.monotonic() < deadline:
    data = bytes(mutate(bytearray(rng.choice(seeds))))
    runs += 1
    try:
        tr = open_bytes(data)
    except TraceError:
        errors += 1
        continue
    with tr:
        n = 0
        for c in tr.chunks(rng.randint(1, 300)):
            n += len(c)
            assert set(np.unique(c.ipver).tolist()) <= {0, 4, 6}
            ip = c.ipver != 0
            assert (c.payload_len[ip] <= c.ip_len[ip]).all()
        info = tr.info
        assert info.packets == n and info.complete
        tr.warnings
    packets += n
print(f"runs={runs} rejected={errors} packets={packets}")
"""


def test_mutated_captures_never_crash_the_native_reader() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(SEED), str(SECONDS), str(REPO / "data" / "pcap")],
        capture_output=True,
        text=True,
        timeout=SECONDS + 60,
    )
    tail = proc.stderr[-2000:]
    assert proc.returncode == 0, f"seed {SEED}: child died ({proc.returncode}): {tail}"
    stats = dict(kv.split("=") for kv in proc.stdout.split())
    assert int(stats["runs"]) > 200
    assert int(stats["packets"]) > 0
