"""Flow records as numpy columns: the one shape every flow input produces.

A :class:`FlowTable` holds one row per unidirectional flow record, whatever it
came from (an nfcapd file, NetFlow v5/v9/IPFIX export packets, a pcap turned
into flows). The columns (:data:`COLUMNS`) follow the trace reader's
conventions (``docs/architecture.md`` section 1): addresses are 128 bits split
in two ``uint64`` columns with IPv4 stored as ``::ffff:a.b.c.d``, times are
absolute nanoseconds since the epoch.

* ``packets`` and ``bytes`` are the counts *after* the sampling rescale:
  ``sampling`` is the rate that was applied (1 = unsampled or unknown; for
  nfcapd files nfcapd has already applied what it knew, so 1).
* ``exporter`` indexes :attr:`FlowTable.exporters` (an address, or for raw
  datagram files the file group's name); ``domain`` is the observation domain
  (IPFIX), source id (v9) or ``engine_type << 8 | engine_id`` (v5).
* Bookkeeping travels with the rows: templates seen, undecodable reasons with
  counts (what could not become a flow and why), notes (what was decoded with
  an assumption), and for export packets one :class:`DatagramResult` each.

Rows are accumulated by :class:`FlowBuilder` in plain Python lists (decoders
append one record at a time) or whole numpy blocks (nfdump output, the
connection tracker), and turned into arrays once. Output files are written
atomically (:mod:`swell.fsutil`): ``.npz`` (columns plus the exporter list) or
``.csv`` (addresses as text).
"""

from __future__ import annotations

import ipaddress
import json
import os
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from swell.errors import SwellError
from swell.fsutil import atomic_path

COLUMNS: dict[str, type[np.generic]] = {
    "start_ns": np.int64,
    "end_ns": np.int64,
    "src_hi": np.uint64,
    "src_lo": np.uint64,
    "dst_hi": np.uint64,
    "dst_lo": np.uint64,
    "sport": np.uint16,
    "dport": np.uint16,
    "proto": np.uint8,
    "tcp_flags": np.uint8,
    "packets": np.uint64,
    "bytes": np.uint64,
    "exporter": np.int32,
    "domain": np.uint32,
    "sampling": np.uint32,
}
V4_MAPPED = 0xFFFF00000000
FORMAT_VERSION = 1


def addr_pair(packed: bytes) -> tuple[int, int]:
    """(hi, lo) of a 4- or 16-byte address (IPv4 as ``::ffff:a.b.c.d``)."""
    if len(packed) == 4:
        return 0, V4_MAPPED | int.from_bytes(packed, "big")
    v = int.from_bytes(packed, "big")
    return v >> 64, v & 0xFFFFFFFFFFFFFFFF


def addr_text(hi: int, lo: int) -> str:
    if hi == 0 and (lo >> 32) == 0xFFFF:
        return str(ipaddress.IPv4Address(lo & 0xFFFFFFFF))
    return str(ipaddress.IPv6Address((hi << 64) | lo))


def parse_addresses(texts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) columns for an array of address texts (each distinct text parsed once)."""
    uniq, inv = np.unique(texts, return_inverse=True)
    hi = np.zeros(len(uniq), dtype=np.uint64)
    lo = np.zeros(len(uniq), dtype=np.uint64)
    for i, t in enumerate(uniq):
        s = t.decode() if isinstance(t, bytes) else str(t)
        a = ipaddress.ip_address(s.strip())
        hi[i], lo[i] = addr_pair(a.packed)
    return hi[inv], lo[inv]


def format_addresses(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Address texts for (hi, lo) columns (each distinct address formatted once)."""
    pair = np.stack([hi, lo], axis=1) if len(hi) else np.zeros((0, 2), dtype=np.uint64)
    uniq, inv = np.unique(pair, axis=0, return_inverse=True)
    texts = np.array([addr_text(int(h), int(x)) for h, x in uniq] or [""], dtype=object)
    return texts[inv.reshape(-1)] if len(hi) else np.zeros(0, dtype=object)


@dataclass
class DatagramResult:
    """What became of one export datagram: flows decoded, or why not (one line each)."""

    source: str  # file, or file#packet, or address:port#n for the collector
    exporter: str
    version: int = 0
    flows: int = 0
    templates: int = 0
    option_records: int = 0  # options data (sampling, system init time), not flows
    pending_sets: int = 0  # data sets waiting for their template
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.reasons and not self.pending_sets

    def one_line(self) -> str:
        counts = Counter(self.reasons)
        what = "; ".join(r if k == 1 else f"{r} (x{k})" for r, k in counts.items()) or "decoded"
        return (
            f"{self.source}: v{self.version}: {self.flows} flows, {self.templates} templates, "
            f"{self.option_records} options records: {what}"
        )


@dataclass
class FlowTable:
    """Flow records (one row each) and what the reading found on the way."""

    cols: dict[str, np.ndarray]
    exporters: list[str]
    kind: str = ""
    templates: int = 0
    undecodable: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)
    datagrams: list[DatagramResult] = field(default_factory=list)
    # input path -> damage the capture reader met in it (swell.extract.reader.Damage:
    # "reasons", "skipped_packets", "first_offset", and "line" for the screen)
    damage: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cols["start_ns"])

    @property
    def packets(self) -> int:
        return int(self.cols["packets"].sum())

    @property
    def bytes(self) -> int:
        return int(self.cols["bytes"].sum())

    def src_text(self) -> np.ndarray:
        return format_addresses(self.cols["src_hi"], self.cols["src_lo"])

    def dst_text(self) -> np.ndarray:
        return format_addresses(self.cols["dst_hi"], self.cols["dst_lo"])

    def summary(self) -> dict[str, Any]:
        c = self.cols
        return {
            "kind": self.kind,
            "flows": len(self),
            "packets": self.packets,
            "bytes": self.bytes,
            "exporters": len(self.exporters),
            "templates": self.templates,
            "datagrams": len(self.datagrams),
            "first_ns": int(c["start_ns"].min()) if len(self) else None,
            "last_ns": int(c["end_ns"].max()) if len(self) else None,
            "sampled_flows": int((c["sampling"] > 1).sum()),
            "undecodable": dict(self.undecodable),
            "notes": dict(self.notes),
            "damage": dict(self.damage),
        }

    def save(self, dest: str | os.PathLike[str]) -> None:
        """Write ``.npz`` (columns, exporters, bookkeeping) or ``.csv``, atomically."""
        dest = Path(dest)
        suffix = dest.suffix.lower()
        if suffix not in (".npz", ".csv"):
            raise SwellError(dest, "output must end in .npz or .csv")
        with atomic_path(dest, suffix=suffix) as tmp:
            if suffix == ".npz":
                meta = {k: v for k, v in self.summary().items() if k not in ("first_ns", "last_ns")}
                meta["format_version"] = FORMAT_VERSION
                with open(tmp, "wb") as fh:
                    np.savez_compressed(
                        fh,
                        exporters=np.array(self.exporters, dtype=str),
                        meta=np.array(json.dumps(meta)),
                        **self.cols,
                    )
            else:
                self._write_csv(tmp)

    def _write_csv(self, path: Path) -> None:
        c = self.cols
        exp = np.array(self.exporters + [""], dtype=object)[c["exporter"]]
        src, dst = self.src_text(), self.dst_text()
        names = [k for k in COLUMNS if k not in ("src_hi", "src_lo", "dst_hi", "dst_lo")]
        with open(path, "w") as fh:
            fh.write(CSV_HEADER + "\n")
            for i in range(len(self)):
                row = [str(c["start_ns"][i]), str(c["end_ns"][i]), src[i], dst[i]]
                row += [str(c[k][i]) if k != "exporter" else exp[i] for k in names[2:]]
                fh.write(",".join(row) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FlowTable:
        """A ``.npz`` written by :meth:`save` (``swell flows read|collect -o``)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                cols = {k: z[k].astype(t, copy=False) for k, t in COLUMNS.items()}
                exporters = [str(x) for x in z["exporters"]]
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise SwellError(path, f"not a swell flow file ({str(exc)[:80]})") from None
        if not isinstance(meta, dict) or len({len(v) for v in cols.values()}) > 1:
            raise SwellError(path, "not a swell flow file (columns of different lengths)")
        if int(meta.get("format_version", 0)) > FORMAT_VERSION:
            raise SwellError(path, f"flow file format {meta.get('format_version')} is newer "
                                   f"than this swell reads ({FORMAT_VERSION})")
        if len(cols["exporter"]) and (int(cols["exporter"].min()) < 0
                                      or int(cols["exporter"].max()) >= len(exporters)):
            raise SwellError(path, "not a swell flow file (exporter index out of range)")
        return cls(
            cols=cols,
            exporters=exporters,
            kind=meta.get("kind", ""),
            templates=int(meta.get("templates", 0)),
            undecodable=meta.get("undecodable", {}),
            notes=meta.get("notes", {}),
            damage=meta.get("damage", {}),
        )


CSV_HEADER = "start_ns,end_ns,src,dst," + ",".join(
    k for k in list(COLUMNS)[2:] if k not in ("src_hi", "src_lo", "dst_hi", "dst_lo"))


def is_flow_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a previous output of ``swell flows read|collect -o`` (a flow
    ``.npz`` with swell's ``meta`` member, or a CSV starting with swell's header)."""
    p = Path(path)
    try:
        if p.suffix.lower() == ".csv":
            with open(p) as fh:
                return fh.readline().rstrip("\n") == CSV_HEADER
        with zipfile.ZipFile(p) as z:
            names = set(z.namelist())
    except (OSError, UnicodeDecodeError, zipfile.BadZipFile):
        return False
    return {"meta.npy", "exporters.npy", "start_ns.npy"} <= names


def empty_columns(n: int = 0) -> dict[str, np.ndarray]:
    return {k: np.zeros(n, dtype=t) for k, t in COLUMNS.items()}


class FlowBuilder:
    """Accumulates flow rows (one at a time, or as column blocks) and exporter names."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.blocks: list[dict[str, np.ndarray]] = []
        self.exporter_ids: dict[str, int] = {}
        self.undecodable: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()

    def exporter(self, name: str) -> int:
        if name not in self.exporter_ids:
            self.exporter_ids[name] = len(self.exporter_ids)
        return self.exporter_ids[name]

    def add_row(self, row: tuple[int, ...]) -> None:
        """``row`` holds the :data:`COLUMNS` values in order."""
        self.rows.append(row)

    def add_block(self, cols: dict[str, np.ndarray]) -> None:
        self.blocks.append({k: np.asarray(cols[k], dtype=t) for k, t in COLUMNS.items()})

    def _flush_rows(self) -> None:
        if not self.rows:
            return
        arr = list(zip(*self.rows, strict=True))
        block = {}
        for (k, t), vals in zip(COLUMNS.items(), arr, strict=True):
            block[k] = (
                np.array(vals, dtype=np.object_).astype(t)
                if t is np.uint64
                else np.array(vals, dtype=t)
            )
        self.blocks.append(block)
        self.rows = []

    def table(self, kind: str, **kwargs: Any) -> FlowTable:
        self._flush_rows()
        if self.blocks:
            cols = {k: np.concatenate([b[k] for b in self.blocks]) for k in COLUMNS}
        else:
            cols = empty_columns()
        return FlowTable(
            cols=cols,
            exporters=list(self.exporter_ids),
            kind=kind,
            undecodable=dict(self.undecodable),
            notes=dict(self.notes),
            **kwargs,
        )
