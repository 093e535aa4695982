"""Trace in, Swing model out: the extraction pipeline as one function.

:func:`extract_model` reads a pcap/pcapng trace once, streaming it through the
reader (:func:`swell.extract.reader.open_trace`) into the connection builder
(:class:`swell.extract.connections.ConnectionBuilder`) with a progress bar over
the file's bytes, then fits the Swing model (:func:`swell.extract.model.fit_model`)
with the trace's provenance (path, the reader's content hash, format, snap length,
link types, warnings). It writes nothing; ``save_model`` does.

This is library code: ``swell extract`` (:mod:`swell.extract.cli`), the fidelity
re-extraction (:mod:`swell.analysis.fidelity`), the experiment runner's model cache
and the benches all call it from here, so none of them imports a CLI module.
"""

from __future__ import annotations

import os
from typing import Any

from swell.errors import SwellError
from swell.extract.connections import ConnectionBuilder
from swell.extract.model import HASH_ALGORITHM, SwingModel, fit_model
from swell.extract.network import Evidence
from swell.extract.reader import DEFAULT_CHUNK, open_trace
from swell.extract.sessions import Thresholds, sensitivity
from swell.progress import Progress

HEADER_ONLY_SNAPLEN = 128


def _reader_notes(info: Any, warnings: dict[str, int]) -> list[str]:
    notes = []
    if 0 < info.snaplen <= HEADER_ONLY_SNAPLEN:
        notes.append(
            f"payload cut by snap length {info.snaplen}: sizes taken from IP/TCP/UDP "
            "header lengths and sequence numbers"
        )
    if warnings.get("ts_jump") or warnings.get("ts_backwards"):
        notes.append(
            f"timestamps jump ({warnings.get('ts_jump', 0)} gaps over a day, "
            f"{warnings.get('ts_backwards', 0)} steps backwards): times kept as "
            "recorded, so the session rate spreads over the whole span"
        )
    return notes


def read_connections(trace: str | os.PathLike[str], chunk: int | None = None
                     ) -> tuple[Any, dict[int, int]]:
    """The connection table of ``trace`` and its packet-pair histogram, read once
    without progress or provenance (what the benches that look inside a trace need;
    :func:`extract_model` reads with both)."""
    builder = ConnectionBuilder()
    with open_trace(trace) as tr:
        while builder.add_trace(tr, chunk or DEFAULT_CHUNK):
            pass
    return builder.finish(), builder.pair_hist


def extract_model(
    trace: str | os.PathLike[str],
    th: Thresholds | None = None,
    with_sensitivity: bool = False,
    chunk: int | None = None,
    label: str = "extract",
) -> SwingModel:
    """Read ``trace`` once and fit its Swing model (no file written); ``chunk``:
    packets per read (default ``reader.DEFAULT_CHUNK``)."""
    th = th or Thresholds()
    if th.rre_gap_s <= 0 or th.session_timeout_s < th.rre_gap_s:
        raise SwellError("thresholds", "need 0 < --rre-gap <= --session-timeout")
    builder = ConnectionBuilder()
    with open_trace(trace) as tr, Progress(label, total=os.path.getsize(trace), unit="B") as prog:
        while builder.add_trace(tr, chunk or DEFAULT_CHUNK):
            prog.update(done=tr.offset, status=f"{builder.packets:,} pkts")
        info, warnings = tr.info, tr.warnings
        # the provenance hash: XXH3-128 over the bytes the reader read (no second pass)
        digest, size = tr.digest() if os.path.isfile(trace) else (None, os.path.getsize(trace))
    if builder.packets == 0:
        raise SwellError(trace, "no packets in the trace")
    table = builder.finish()
    if len(table) == 0:
        raise SwellError(
            trace, f"no TCP or UDP packets among {builder.packets:,} packets; nothing to model"
        )
    prov = {
        "source": os.path.abspath(trace),
        "content_hash": digest,
        "hash_algorithm": HASH_ALGORITHM,
        "size_bytes": size,
        "reader": {
            "format": info.format,
            "snaplen": info.snaplen,
            "linktypes": {str(k): v for k, v in info.linktypes.items()},
            "packets": info.packets,
            "warnings": warnings,
        },
    }
    rows = sensitivity(table, th) if with_sensitivity else None
    model = fit_model(table, builder.pair_hist, th, prov, Evidence(), rows)
    model.meta["assumed"] = _reader_notes(info, warnings) + model.meta["assumed"]
    return model
