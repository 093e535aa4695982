"""ctypes binding of the native connection tracker (``extract/native/src/conntrack.rs``).

Design: :class:`NativeTracker` owns a Rust ``Tracker``. :meth:`NativeTracker.add`
passes a reader chunk's numpy columns by pointer (no copy when the dtypes are
the reader's, which they always are for real traces), selects the chunk's packets
in the calling thread (``swell_ct_prepare``, while the worker thread still tracks
the previous chunk) and hands them to the worker; the tracker runs the
exact per-chunk semantics of the numpy :class:`~swell.extract.connections.ConnectionBuilder`
(the reference implementation) as sequential loops. ``swell extract`` uses
:meth:`NativeTracker.add_read` instead: the reader selects each packet straight into
the selection buffer as it decodes it (``swell_ct_read_prepare``: no per-packet columns,
which cost a third of a plain read in fresh memory and stores), and while the worker
tracks, the calling thread pages in the spare state blocks the worker will need
next (``conntrack_spare.rs``): on a virtual machine the first touch of memory is
expensive, and the worker is the slower thread. :meth:`NativeTracker.table`
writes the connection table itself, in one pass over the connections
(``conntrack_table.rs``: the arithmetic of ``conntable.client_dir`` and
``conntable._table``, which the numpy builder goes through, so both trackers'
``ConnTable`` can be compared column by column), plus the host table and the
packet-pair histogram; the finished runs stay native, for
:meth:`NativeTracker.pairs`, which frees the connection state first (the table's
pass kept what the pairs need of it).

Packet-pair estimates within a relative 1e-7 of a histogram bin edge are
binned here with numpy's ``log10`` (libm's may differ by an ulp), so the
histogram is identical too.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from swell.native import native_artifact

if TYPE_CHECKING:
    from swell.extract.reader import Trace

# The connection table's columns as ``swell_ct_table`` writes them after the client's
# direction, in the order of ``TableCols`` (conntrack_table.rs): the names and dtypes of
# the columns ``conntable._table`` builds from the numpy tracker's state.
TABLE_COLS: tuple[tuple[str, Any], ...] = (
    ("proto", np.int64), ("client", np.int64), ("server", np.int64), ("cport", np.int64),
    ("sport", np.int64), ("start", np.float64), ("end", np.float64),
    ("client_inferred", np.bool_), ("open_at_start", np.bool_), ("open_at_end", np.bool_),
    ("rst", np.bool_), ("fin_c2s", np.bool_), ("fin_s2c", np.bool_),
    ("server_leg", np.float64), ("client_leg", np.float64), ("one_sided_rtt", np.float64),
    *((f"{k}_{d}", np.int64) for k in ("pkts", "wire", "data_pkts", "retx", "new_bytes")
      for d in ("c2s", "s2c")),
    ("one_way", np.bool_), ("acked_c2s", np.int64), ("acked_s2c", np.int64),
    ("lower_bound", np.bool_),
)  # fmt: skip
PAIR_COLS = (
    "conn", "req_size", "rsp_size", "req_t0", "req_t1", "rsp_t0", "rsp_t1", "think_before",
)  # fmt: skip

# Chunk columns passed to swell_ct_add, in the order of struct CtChunk.
CHUNK_COLS: tuple[tuple[str, Any], ...] = (
    ("ts_ns", np.int64), ("wirelen", np.uint32), ("ipver", np.uint8), ("proto", np.uint8),
    ("frag", np.uint8), ("saddr_hi", np.uint64), ("saddr_lo", np.uint64),
    ("daddr_hi", np.uint64), ("daddr_lo", np.uint64), ("sport", np.uint16),
    ("dport", np.uint16), ("tcp_flags", np.uint8), ("seq", np.uint32), ("ack", np.uint32),
    ("ip_len", np.uint32), ("payload_len", np.uint32), ("l4_ok", np.bool_),
)  # fmt: skip


class _CtChunk(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name, _ in CHUNK_COLS]


_LIB: ctypes.CDLL | None = None


def _lib() -> ctypes.CDLL:
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(str(native_artifact("libswell_pcap.so")))
        vp, i64 = ctypes.c_void_p, ctypes.c_int64
        sigs: dict[str, tuple[list[Any], Any]] = {
            "swell_ct_new": ([i64, i64], vp),
            "swell_ct_free": ([vp], None),
            "swell_ct_add": ([vp, ctypes.POINTER(_CtChunk), ctypes.c_size_t, vp, ctypes.c_size_t],
                             ctypes.c_int32),
            "swell_ct_prep_new": ([], vp),
            "swell_ct_prep_free": ([vp], None),
            "swell_ct_prepare": ([vp, ctypes.POINTER(_CtChunk), ctypes.c_size_t], ctypes.c_int32),
            "swell_ct_add_prepared": ([vp, ctypes.POINTER(_CtChunk), ctypes.c_size_t, vp, vp,
                                       ctypes.c_size_t], ctypes.c_int32),
            "swell_ct_read_prepare": ([vp, vp, ctypes.c_size_t], ctypes.c_int64),
            "swell_ct_spares": ([vp], vp),
            "swell_ct_spares_fill": ([vp], ctypes.c_int32),
            "swell_ct_spares_free": ([vp], None),
            "swell_ct_add_read": ([vp, vp, vp, ctypes.c_size_t], ctypes.c_int32),
            "swell_ct_sizes": ([vp, vp], ctypes.c_int32),
            "swell_ct_table": ([vp, vp, i64, vp, ctypes.c_size_t, ctypes.c_size_t],
                               ctypes.c_int32),
            "swell_ct_pairs": ([vp, vp, ctypes.c_size_t, i64], i64),
            "swell_ct_pairs_copy": ([vp, vp], ctypes.c_int32),
            "swell_ct_tables": ([vp] * 7, ctypes.c_int32),
        }  # fmt: skip
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        _LIB = lib
    return _LIB


def _ptr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


class NativeTracker:
    """One native tracker: ``add`` chunks, then the ``table`` once, then the ``pairs``."""

    def __init__(self, udp_idle_ns: int, tcp_idle_ns: int) -> None:
        self._lib = _lib()
        self._h = self._lib.swell_ct_new(udp_idle_ns, tcp_idle_ns)
        # spare state blocks this thread pages in while the worker tracks
        self._spares = self._lib.swell_ct_spares(self._h)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="swell-ct")
        self._pending: Future[None] | None = None
        # two selection buffers: one is filled here while the worker uses the other
        self._preps = [self._lib.swell_ct_prep_new() for _ in range(2)]
        self._flip = 0

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
        h, self._h = getattr(self, "_h", None), None
        if h:
            self._lib.swell_ct_free(h)
        spares, self._spares = getattr(self, "_spares", None), None
        if spares:
            self._lib.swell_ct_spares_free(spares)
        for p in getattr(self, "_preps", []):
            self._lib.swell_ct_prep_free(p)
        self._preps = []

    def add(self, chunk: Any) -> None:
        """Feed one reader chunk. The calling thread selects the chunk's packets (TCP/UDP,
        endpoint hashes) while the worker thread still tracks the previous chunk; the
        tracking then runs in the worker (ctypes releases the GIL) while the caller reads
        the next chunk, so ``chunk`` must not be modified afterwards. An error
        (RuntimeError on a hash collision, as numpy's) surfaces at the next call."""
        if not len(chunk):
            self.wait()
            return
        cols, cc = _columns(chunk)
        prep = self._preps[self._flip]
        self._flip ^= 1
        self._lib.swell_ct_prepare(prep, ctypes.byref(cc), len(chunk))
        self.wait()
        self._pending = self._pool.submit(self._add_prepared, cols, cc, prep, len(chunk))
        self._lib.swell_ct_spares_fill(self._spares)

    def add_read(self, trace: Trace, max_packets: int) -> int:
        """Read up to ``max_packets`` packets of ``trace`` and track them; the number
        read (0 at the end). The reader selects the packets straight into a selection
        buffer in the calling thread (no columns: ``swell_ct_read_prepare``) while the
        worker still tracks the previous read, then the worker tracks them. The same
        results as ``add`` on the reader's chunks of that size."""
        prep = self._preps[self._flip]
        self._flip ^= 1
        n = trace.read_native(self._lib.swell_ct_read_prepare, prep, max_packets)
        self.wait()
        if n:
            self._pending = self._pool.submit(self._add_read, prep)
            # the worker is the slower thread: page in its next state blocks meanwhile,
            # unless this read was the last (short: the trace ended), as for a small trace
            if n == max_packets:
                self._lib.swell_ct_spares_fill(self._spares)
        return n

    def _add_read(self, prep: int) -> None:
        err = ctypes.create_string_buffer(256)
        if self._lib.swell_ct_add_read(self._h, prep, err, len(err)):
            raise RuntimeError(err.value.decode(errors="replace") or "native tracker failed")

    def _add_prepared(self, cols: list[np.ndarray], cc: _CtChunk, prep: int, n: int) -> None:
        err = ctypes.create_string_buffer(256)
        if self._lib.swell_ct_add_prepared(self._h, ctypes.byref(cc), n, prep, err, len(err)):
            raise RuntimeError(err.value.decode(errors="replace") or "native tracker failed")
        del cols  # the columns lived until here (cc points into them)

    def wait(self) -> None:
        """Finish the chunk in progress (re-raising its error)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def sizes(self) -> np.ndarray:
        self.wait()
        out = np.zeros(14, dtype=np.int64)
        self._lib.swell_ct_sizes(self._h, _ptr(out))
        return out

    def table(self, known: np.ndarray) -> dict[str, Any]:
        """The connection table, written natively in one pass over the connections
        (``swell_ct_table``, see conntrack_table.rs): ``cdir`` (the client's direction
        per connection) and ``cols`` (``TABLE_COLS``, all but ``num_pairs``), with the
        host table, packet-pair histogram and counts; ``known``: the well-known port
        table, 256 x 65536 bools. The connection state then only waits for ``pairs``."""
        lib, h = self._lib, self._h
        sz = self.sizes()
        n, nhosts, nhist, namb = int(sz[0]), int(sz[3]), int(sz[4]), int(sz[5])
        t0 = int(sz[13]) if sz[12] else None
        cdir = np.empty(n, dtype=np.int64)
        cols = {k: np.empty(n, dtype=t) for k, t in TABLE_COLS}
        kn = np.ascontiguousarray(known, dtype=np.bool_)
        if kn.size != 256 << 16:
            raise ValueError("the well-known port table must have 256 x 65536 entries")
        out = _ptrs([cdir, *cols.values()])
        if lib.swell_ct_table(h, _ptr(kn), t0 or 0, out, 1 + len(cols), n):
            raise RuntimeError("native tracker: the table's columns do not match")
        hi, lo = np.empty(nhosts, dtype=np.uint64), np.empty(nhosts, dtype=np.uint64)
        hkey, hcnt = np.empty(nhist, dtype=np.int64), np.empty(nhist, dtype=np.int64)
        ahost, abps = np.empty(namb, dtype=np.int64), np.empty(namb, dtype=np.float64)
        lib.swell_ct_tables(h, *(_ptr(a) for a in (hi, lo, hkey, hcnt, ahost, abps)))
        return {
            "cdir": cdir, "cols": cols,
            "hosts": list(zip(hi.tolist(), lo.tolist(), strict=True)),
            "hist": (hkey, hcnt), "ambiguous": (ahost, abps),
            "packets": int(sz[6]), "duplicates": int(sz[7]),
            "skipped": dict(zip(("non_ip", "not_tcp_udp", "no_l4", "fragment"),
                                (int(x) for x in sz[8:12]), strict=True)),
            "t0_ns": t0,
        }  # fmt: skip

    def pairs(self, cdir: np.ndarray, t0: int) -> dict[str, np.ndarray]:
        """Request/response pairs, exactly as ``sessions.pairs_from_runs`` on the runs
        ``finish`` would collect (``cdir``: the client's direction per connection)."""
        self.wait()
        cd = np.ascontiguousarray(cdir, dtype=np.int64)
        n = int(self._lib.swell_ct_pairs(self._h, _ptr(cd), len(cd), t0))
        if n < 0:
            raise ValueError("client directions do not match the connections")
        out = {k: np.empty(n, dtype=np.int64) for k in PAIR_COLS[:3]}
        out |= {k: np.empty(n, dtype=np.float64) for k in PAIR_COLS[3:]}
        self._lib.swell_ct_pairs_copy(self._h, _ptrs(out.values()))
        return out


def _columns(chunk: Any) -> tuple[list[np.ndarray], _CtChunk]:
    """A chunk's columns in the tracker's dtypes (no copy for the reader's) and the
    C struct of their pointers (valid while the columns live)."""
    cols = [np.ascontiguousarray(getattr(chunk, k), dtype=t) for k, t in CHUNK_COLS]
    return cols, _CtChunk(*(_ptr(a) for a in cols))


def _ptrs(arrays: Iterable[np.ndarray | None]) -> Any:
    """A C array of the arrays' data pointers (None: a null pointer)."""
    ps = [_ptr(a) if a is not None else None for a in arrays]
    return (ctypes.c_void_p * max(len(ps), 1))(*ps)


def pair_histogram(
    hist: tuple[np.ndarray, np.ndarray],
    ambiguous: tuple[np.ndarray, np.ndarray],
    nbins: int,
    log_min: float,
    per_decade: int,
) -> dict[int, int]:
    """The packet-pair histogram dict (sorted by code), binning ambiguous pairs with numpy."""
    codes, counts = hist
    host, bps = ambiguous
    if len(bps):
        b = np.clip(((np.log10(bps) - log_min) * per_decade).astype(np.int64), 0, nbins - 1)
        codes = np.r_[codes, host * nbins + b]
        counts = np.r_[counts, np.ones(len(bps), dtype=np.int64)]
    u, inv = np.unique(codes, return_inverse=True)
    tot = np.bincount(inv, weights=counts, minlength=len(u)).astype(np.int64)
    return dict(zip(u.tolist(), tot.tolist(), strict=True))
