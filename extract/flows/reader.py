"""One entry point for every flow input: :func:`read_flows`.

Formats (``fmt``; ``auto`` decides per input from its first bytes):

* ``nfcapd``: nfcapd files or directories of them (nfdump's file magic
  ``0xA50C``), read through ``nfdump`` (:mod:`.nfcapd`).
* ``pcap-export``: pcap/pcapng captures of NetFlow/IPFIX export traffic
  (:func:`.sources.feed_pcap`). ``auto`` picks it when a capture's first UDP
  packets carry plausible v5/v9/IPFIX headers.
* ``datagrams``: raw datagram files, or directories of them
  (:func:`.sources.feed_datagram_files`); ``auto`` picks it for a directory
  without nfcapd files and for a file starting with version 5, 9 or 10.
* ``pcap-flows``: any other capture, turned into flows by swell's connection
  tracker (``engine="tracker"``, the default) or by nfpcapd
  (``engine="nfpcapd"``).
* ``npz``: a flow table swell wrote (``swell flows read|collect -o FILE.npz``),
  read back as it was; ``auto`` picks it for a zip file with swell's members.

Damaged captures (a cut last record, a corrupt record length: what swell's
trace reader skips and resyncs over) are read, and what was lost is put in
:attr:`FlowTable.damage` per file for the caller to report (``swell flows
read`` and ``swell harpoon extract`` print it, as ``swell extract`` does).
Export captures and the nfpcapd engine do not go through swell's reader, so
the capture is scanned once with it for that; nfpcapd (libpcap) stops at a
corrupt record, and the packets it did not turn into flows are reported too.

Export inputs (``pcap-export``, ``datagrams``) share one decoder, so templates
from one file serve data in the next; everything else is read per input and
the tables are concatenated. ``strict`` (the CLI's default) turns a malformed
export datagram into a one-line :class:`~swell.errors.SwellError` naming it;
without it, it becomes an "undecodable" reason and reading goes on.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.extract.flows.decoder import ExportDecoder
from swell.extract.flows.nfcapd import is_nfcapd, read_nfcapd, read_pcap_via_nfpcapd
from swell.extract.flows.sources import feed_datagram_files, feed_pcap, looks_like_export_pcap
from swell.extract.flows.table import (
    COLUMNS,
    CSV_HEADER,
    FlowTable,
    empty_columns,
    is_flow_file,
)
from swell.extract.flows.tracker import read_pcap_via_tracker
from swell.extract.reader import last_damage, open_trace

FORMATS = ("auto", "nfcapd", "pcap-export", "datagrams", "pcap-flows", "npz")
ENGINES = ("tracker", "nfpcapd")
PCAP_MAGICS = (b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1")
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


def detect_format(path: Path) -> str:
    """The format of one input (see the module docstring)."""
    if not path.exists():
        raise SwellError(path, "no such file or directory")
    if path.is_dir():
        files = [p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")]
        if not files:
            raise SwellError(path, "empty directory")
        return "nfcapd" if any(is_nfcapd(p) for p in files) else "datagrams"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise SwellError(path, f"cannot read ({exc.strerror})") from None
    if head[:2] == b"\x0c\xa5":
        return "nfcapd"
    if head == b"PK\x03\x04":
        if is_flow_file(path):
            return "npz"
        raise SwellError(path, "a zip/.npz file but not a swell flow file (swell flows read -o)")
    if head == CSV_HEADER[:4].encode() and _first_line(path) == CSV_HEADER:
        raise SwellError(path, "a swell flow CSV: give the .npz instead (swell flows read "
                               "INPUT -o FILE.npz), CSV is for other tools")
    if head in PCAP_MAGICS or head == PCAPNG_MAGIC:
        return "pcap-export" if looks_like_export_pcap(path) else "pcap-flows"
    if len(head) >= 2 and int.from_bytes(head[:2], "big") in (5, 9, 10):
        return "datagrams"
    raise SwellError(path, "not an nfcapd file, a capture or a NetFlow/IPFIX datagram")


def _first_line(path: Path) -> str:
    try:
        with open(path, errors="replace") as fh:
            return fh.readline(len(CSV_HEADER) + 2).rstrip("\n")
    except OSError:
        return ""


def read_flows(
    inputs: Sequence[str | os.PathLike[str]],
    fmt: str = "auto",
    strict: bool = True,
    engine: str = "tracker",
) -> FlowTable:
    """Read every input into one :class:`FlowTable` (see the module docstring)."""
    if fmt not in FORMATS:
        raise SwellError(fmt, f"unknown flow format (one of {', '.join(FORMATS)})")
    if engine not in ENGINES:
        raise SwellError(engine, f"unknown pcap-flows engine (one of {', '.join(ENGINES)})")
    paths = [Path(p) for p in inputs]
    if not paths:
        raise SwellError("flows", "no input given")
    kinds = [detect_format(p) if fmt == "auto" else fmt for p in paths]
    tables: list[FlowTable] = []
    damage: dict[str, dict[str, Any]] = {}
    dec: ExportDecoder | None = None
    for path, kind in zip(paths, kinds, strict=True):
        if not path.exists():
            raise SwellError(path, "no such file or directory")
        if kind in ("pcap-export", "datagrams"):
            dec = dec or ExportDecoder(strict=strict)
            if kind == "pcap-export":
                feed_pcap(dec, path)
                damage.update(_scan_damage(path))
            else:
                feed_datagram_files(dec, [path])
        elif kind == "nfcapd":
            tables.append(read_nfcapd([path]))
        elif kind == "npz":
            tables.append(FlowTable.load(path))
        elif engine == "nfpcapd":
            tables.append(read_pcap_via_nfpcapd(path))
            tables[-1].damage.update(_scan_damage(path, tables[-1].packets))
        else:
            tables.append(read_pcap_via_tracker(path))
            tables[-1].damage.update(_damage_of(path))
    if dec is not None:
        tables.insert(
            0,
            dec.finish(
                kind="/".join(sorted({k for k in kinds if k in ("pcap-export", "datagrams")}))
            ),
        )
        tables[0].damage.update(damage)
    return concat(tables)


def _damage_of(path: Path, extra: str = "") -> dict[str, dict[str, Any]]:
    """The damage swell's reader met when it last read ``path`` (empty if none)."""
    d = last_damage(path)
    if not d and not extra:
        return {}
    out: dict[str, Any] = d.to_json() if d else {"reasons": {}, "skipped_packets": 0,
                                                  "first_offset": None}
    line = d.one_line() if d else f"{path}:"
    out["line"] = line + (f"; {extra}" if extra else "")
    return {str(path): out}


def _scan_damage(path: Path, tool_packets: int | None = None) -> dict[str, dict[str, Any]]:
    """Read a capture once with swell's reader for its damage; with ``tool_packets``
    (what nfpcapd turned into flows), also say how many IP packets the tool missed."""
    ip = 0
    with open_trace(path) as tr:
        for ch in tr.chunks():
            ip += int((ch.ipver > 0).sum())
    extra = ""
    if tool_packets is not None and tool_packets < ip and last_damage(path):
        extra = (f"nfpcapd turned {tool_packets:,} of its {ip:,} IP packets into flows "
                 f"(libpcap stops at a damaged record)")
    return _damage_of(path, extra)


def concat(tables: list[FlowTable]) -> FlowTable:
    """One table from several (exporter indices renumbered, counters added up)."""
    if len(tables) == 1:
        return tables[0]
    exporters: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in COLUMNS}
    undecodable: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    damage: dict[str, dict[str, Any]] = {}
    for t in tables:
        damage.update(t.damage)
        remap = np.array(
            [exporters.setdefault(e, len(exporters)) for e in t.exporters] or [0], dtype=np.int32
        )
        for k in COLUMNS:
            cols[k].append(remap[t.cols[k]] if k == "exporter" and len(t) else t.cols[k])
        undecodable.update(t.undecodable)
        notes.update(t.notes)
    out = empty_columns()
    return FlowTable(
        cols={k: np.concatenate(v).astype(out[k].dtype) if v else out[k] for k, v in cols.items()},
        exporters=list(exporters),
        kind="+".join(dict.fromkeys(t.kind for t in tables)),
        templates=sum(t.templates for t in tables),
        undecodable=dict(undecodable),
        notes=dict(notes),
        datagrams=[d for t in tables for d in t.datagrams],
        damage=damage,
    )
