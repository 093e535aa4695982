"""nfcapd files through Debian's nfdump, and pcaps turned into flows by nfpcapd.

nfcapd's file format (LZ4/LZO blocks of version-3 records with extensions)
changes between nfdump releases, so swell does not parse it: it runs
``nfdump -r FILE -q -N -6 -o fmt:...`` and reads the text. Checked on this
machine's nfdump 1.7.1: ``-o csv`` prints start and end times at one-second
resolution only, ``%ter`` mixes the end's seconds with the wrong milliseconds,
and ``-o json`` is ~16 lines per flow, so the format used is :data:`FMT`:
start as epoch seconds with milliseconds (``%tsr``), duration in seconds
(``%td`` with ``-N``), full IPv6 addresses (``-6``), numeric protocol (``-N``),
the flags as nfdump's 8-letter string (``CEUAPRSF``, dots for unset), input
packets and bytes, the exporter's address (``%ra``) and nfdump's exporter
system id (``%exp``, stored as the domain: nfcapd files do not keep the
observation domain in their flow records).

Parsing is vectorised: nfdump's stdout is read in blocks of whole lines, each
block split on whitespace into a 2-D byte-string array; numbers are converted
by numpy, flags by comparing the letters with '.', and addresses by parsing
each distinct text once. The nfdump process and the parsing overlap (nfdump
writes into the pipe while the previous block is converted).

Sampling: nfcapd applies the sampling rates it knows when it stores the
records, so counts are taken as they are and ``sampling`` is 1.

:func:`pcap_to_nfcapd` runs ``nfpcapd -r PCAP -w DIR`` (trace timestamps kept;
nfpcapd's own flow cache and timeouts), for :func:`read_pcap_via_nfpcapd`.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from swell.errors import EnvironmentProblem, SwellError
from swell.extract.flows.table import FlowBuilder, FlowTable, parse_addresses

FMT = "fmt:%tsr %td %sa %da %sp %dp %pr %flg %ipkt %ibyt %ra %exp"
NCOLS = 12
FLAG_BITS = np.array([128, 64, 32, 16, 8, 4, 2, 1], dtype=np.uint8)  # C E U A P R S F
NFCAPD_MAGIC = b"\x0c\xa5"
BLOCK = 16 << 20


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise EnvironmentProblem(
            tool, "not installed (Debian package nfdump; scripts/bootstrap.sh)"
        )
    return path


def is_nfcapd(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == NFCAPD_MAGIC
    except OSError:
        return False


def _blocks(stream: object) -> Iterator[bytes]:
    """Whole-line blocks of about :data:`BLOCK` bytes from a binary stream."""
    rest = b""
    while True:
        buf = stream.read(BLOCK)  # type: ignore[attr-defined]
        if not buf:
            break
        buf = rest + buf
        cut = buf.rfind(b"\n") + 1
        rest = buf[cut:]
        if cut:
            yield buf[:cut]
    if rest.strip():
        yield rest


def _parse_block(block: bytes, out: FlowBuilder, path: Path) -> None:
    if block.strip() == b"No matching flows":
        return
    tok = block.split()
    if len(tok) % NCOLS:
        line = block.split(b"\n", 1)[0].decode(errors="replace")
        raise SwellError(path, f"unexpected nfdump output line: {line[:120]!r}")
    a = np.array(tok, dtype=np.bytes_).reshape(-1, NCOLS)
    n = len(a)
    start_ms = np.round(a[:, 0].astype(np.float64) * 1e3).astype(np.int64)
    dur_s = a[:, 1].astype(np.float64)
    wrapped = ~(dur_s < 1e12)  # a record without end time: nfdump prints -start as uint64
    if wrapped.any():
        out.notes["nfdump: no end time (negative duration), end = start"] += int(wrapped.sum())
        dur_s[wrapped] = 0.0
    dur_ms = np.round(dur_s * 1e3).astype(np.int64)
    src_hi, src_lo = parse_addresses(a[:, 2])
    dst_hi, dst_lo = parse_addresses(a[:, 3])
    flg = np.frombuffer(a[:, 7].astype("S8").tobytes(), dtype=np.uint8).reshape(n, 8)
    flags = ((flg != ord(".")) & (flg != 0)).astype(np.uint8) @ FLAG_BITS
    ra = a[:, 10]
    uniq, inv = np.unique(ra, return_inverse=True)
    ids = np.array([out.exporter(u.decode()) for u in uniq], dtype=np.int32)
    out.add_block(
        {
            "start_ns": start_ms * 1_000_000,
            "end_ns": (start_ms + dur_ms) * 1_000_000,
            "src_hi": src_hi,
            "src_lo": src_lo,
            "dst_hi": dst_hi,
            "dst_lo": dst_lo,
            "sport": _port(a[:, 4]),
            "dport": _port(a[:, 5]),
            "proto": a[:, 6].astype(np.uint8),
            "tcp_flags": flags.astype(np.uint8),
            "packets": a[:, 8].astype(np.uint64),
            "bytes": a[:, 9].astype(np.uint64),
            "exporter": ids[inv],
            "domain": a[:, 11].astype(np.uint32),
            "sampling": np.ones(n, dtype=np.uint32),
        }
    )


def _port(col: np.ndarray) -> np.ndarray:
    """Port column; nfdump prints ICMP type and code as ``type.code`` (kept as
    ``type * 256 + code``, the NetFlow convention)."""
    dotted = np.char.find(col, b".") >= 0
    if not dotted.any():
        return col.astype(np.uint16)
    out = np.zeros(len(col), dtype=np.uint16)
    out[~dotted] = col[~dotted].astype(np.uint16)
    parts = np.char.partition(col[dotted], b".")
    out[dotted] = parts[:, 0].astype(np.uint16) * 256 + parts[:, 2].astype(np.uint16)
    return out


def read_nfcapd(paths: list[Path], kind: str = "nfcapd") -> FlowTable:
    """Every flow record of the given nfcapd files (or directories of them)."""
    nfdump = need("nfdump")
    out = FlowBuilder()
    for path in paths:
        if not path.exists():
            raise SwellError(path, "no such file")
        if path.is_file() and not is_nfcapd(path):
            raise SwellError(path, "not an nfcapd file (no nfdump file magic)")
        opt = "-R" if path.is_dir() else "-r"
        cmd = [nfdump, opt, str(path), "-q", "-N", "-6", "-o", FMT]
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            try:
                for block in _blocks(proc.stdout):
                    _parse_block(block, out, path)
            except BaseException:
                proc.kill()
                raise
            err = proc.stderr.read().decode(errors="replace").strip()
            rc = proc.wait()
        if rc != 0 or err:  # nfdump 1.7.1 exits 0 after "appendix offset error" and the like
            first = err.splitlines()[0] if err else f"nfdump exited with status {rc}"
            raise SwellError(path, f"nfdump cannot read it: {first}")
    return out.table(kind)


def pcap_to_nfcapd(pcap: Path, out_dir: Path, extra: list[str] | None = None) -> list[Path]:
    """``nfpcapd -r PCAP -w OUT_DIR``; returns the nfcapd files it wrote."""
    nfpcapd = need("nfpcapd")
    if not pcap.is_file():
        raise SwellError(pcap, "no such file")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [nfpcapd, "-r", str(pcap), "-w", str(out_dir), *(extra or [])]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    files = sorted(p for p in out_dir.rglob("nfcapd.*") if p.is_file() and is_nfcapd(p))
    if res.returncode != 0 or not files:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise SwellError(pcap, f"nfpcapd made no flows: {msg[-1] if msg else res.returncode}")
    return files


def read_pcap_via_nfpcapd(pcap: Path) -> FlowTable:
    """A pcap's flows as nfpcapd builds them (its cache and timeouts), read back."""
    with tempfile.TemporaryDirectory(prefix="swell-nfpcapd-") as tmp:
        files = pcap_to_nfcapd(pcap, Path(tmp))
        return read_nfcapd(files, kind="pcap-flows (nfpcapd)")


def nfdump_version() -> str:
    res = subprocess.run([need("nfdump"), "-V"], capture_output=True, text=True, timeout=30)
    return (res.stdout or res.stderr).strip()
