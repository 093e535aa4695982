//! C ABI of the native connection tracker (`conntrack.rs`) for Python's ctypes
//! (`extract/conntrack.py`): create, add chunks by pointer, write the connection table, pairs, free.

use crate::conntrack::{Chunk, PairCols, PrepSink, Prepared, Spares, TableCols, Tracker};

use std::sync::Arc;

use std::ffi::c_char;
use std::slice::from_raw_parts;

/// Input columns of one chunk, all of length `n` (numpy arrays, by pointer).
#[repr(C)]
pub struct CtChunk {
    pub ts_ns: *const i64,
    pub wirelen: *const u32,
    pub ipver: *const u8,
    pub proto: *const u8,
    pub frag: *const u8,
    pub saddr_hi: *const u64,
    pub saddr_lo: *const u64,
    pub daddr_hi: *const u64,
    pub daddr_lo: *const u64,
    pub sport: *const u16,
    pub dport: *const u16,
    pub tcp_flags: *const u8,
    pub seq: *const u32,
    pub ack: *const u32,
    pub ip_len: *const u32,
    pub payload_len: *const u32,
    pub l4_ok: *const u8,
}

/// Columns of `swell_ct_table`: the client's direction, then `TABLE_COLS`.
const N_TABLE_COLS: usize = 31;

/// A new tracker (idle limits in nanoseconds).
#[no_mangle]
pub extern "C" fn swell_ct_new(udp_idle_ns: i64, tcp_idle_ns: i64) -> *mut Tracker {
    Box::into_raw(Box::new(Tracker::new(udp_idle_ns, tcp_idle_ns)))
}

/// Free a tracker (NULL is ignored).
///
/// # Safety
/// `h` comes from `swell_ct_new` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_free(h: *mut Tracker) {
    if !h.is_null() {
        drop(Box::from_raw(h));
    }
}

/// The chunk the column pointers describe.
///
/// # Safety
/// Every column pointer is valid for `n` elements.
unsafe fn chunk_of<'a>(c: &CtChunk, n: usize) -> Chunk<'a> {
    Chunk {
        ts_ns: from_raw_parts(c.ts_ns, n),
        wirelen: from_raw_parts(c.wirelen, n),
        ipver: from_raw_parts(c.ipver, n),
        proto: from_raw_parts(c.proto, n),
        frag: from_raw_parts(c.frag, n),
        saddr_hi: from_raw_parts(c.saddr_hi, n),
        saddr_lo: from_raw_parts(c.saddr_lo, n),
        daddr_hi: from_raw_parts(c.daddr_hi, n),
        daddr_lo: from_raw_parts(c.daddr_lo, n),
        sport: from_raw_parts(c.sport, n),
        dport: from_raw_parts(c.dport, n),
        tcp_flags: from_raw_parts(c.tcp_flags, n),
        seq: from_raw_parts(c.seq, n),
        ack: from_raw_parts(c.ack, n),
        ip_len: from_raw_parts(c.ip_len, n),
        payload_len: from_raw_parts(c.payload_len, n),
        l4_ok: from_raw_parts(c.l4_ok, n),
    }
}

unsafe fn result(r: Result<(), String>, err: *mut c_char, errlen: usize) -> i32 {
    match r {
        Ok(()) => 0,
        Err(msg) => {
            if !err.is_null() && errlen > 0 {
                let b = msg.as_bytes();
                let k = b.len().min(errlen - 1);
                std::ptr::copy_nonoverlapping(b.as_ptr(), err as *mut u8, k);
                *err.add(k) = 0;
            }
            -1
        }
    }
}

/// Add a chunk of `n` packets; 0 on success, -1 with a message in `err`.
///
/// # Safety
/// Every column pointer is valid for `n` elements; `err` is writable for `errlen`.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_add(
    h: *mut Tracker,
    c: *const CtChunk,
    n: usize,
    err: *mut c_char,
    errlen: usize,
) -> i32 {
    let (Some(t), Some(c)) = (h.as_mut(), c.as_ref()) else {
        return -1;
    };
    result(t.add(&chunk_of(c, n)), err, errlen)
}

/// A buffer for a chunk's selected packets (`Prepared`): the caller's thread fills
/// it with `swell_ct_prepare` while the tracker works on the previous chunk, then
/// hands it to `swell_ct_add_prepared` (same chunk). Free with `swell_ct_prep_free`.
#[no_mangle]
pub extern "C" fn swell_ct_prep_new() -> *mut Prepared {
    Box::into_raw(Box::default())
}

/// # Safety
/// `p` comes from `swell_ct_prep_new` and is not used afterwards (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn swell_ct_prep_free(p: *mut Prepared) {
    if !p.is_null() {
        drop(Box::from_raw(p));
    }
}

/// Select a chunk's packets into `p`; 0, or -1 on a null pointer.
///
/// # Safety
/// `p` comes from `swell_ct_prep_new`; every column pointer is valid for `n` elements.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_prepare(p: *mut Prepared, c: *const CtChunk, n: usize) -> i32 {
    let (Some(p), Some(c)) = (p.as_mut(), c.as_ref()) else {
        return -1;
    };
    p.fill(&chunk_of(c, n));
    0
}

/// Read up to `cap` packets of trace `h` straight into the selection `p` (no
/// columns; `swell_ct_add_read` then tracks them): the number of packets read, 0 at
/// the end of the trace, -1 on an error (its message: `swell_pcap_error`).
///
/// # Safety
/// `h` comes from a trace open call, `p` from `swell_ct_prep_new`.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_read_prepare(
    h: *mut super::Handle,
    p: *mut Prepared,
    cap: usize,
) -> i64 {
    let (Some(h), Some(p)) = (h.as_mut(), p.as_mut()) else {
        return -1;
    };
    match h.reader.read(&mut PrepSink::new(p, cap)) {
        Ok(n) => n as i64,
        Err(e) => {
            h.error = format!("read error: {e}");
            -1
        }
    }
}

/// The tracker's pools of spare blocks, to stock from another thread with
/// `swell_ct_spares_fill` (see `conntrack_spare.rs`); free with `swell_ct_spares_free`.
///
/// # Safety
/// `h` comes from `swell_ct_new` and is not being used by another thread.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_spares(h: *const Tracker) -> *mut Arc<Spares> {
    match h.as_ref() {
        Some(t) => Box::into_raw(Box::new(t.spares())),
        None => std::ptr::null_mut(),
    }
}

/// Page in spare blocks for the tracker (safe while the tracker works).
///
/// # Safety
/// `s` comes from `swell_ct_spares` and is not freed.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_spares_fill(s: *const Arc<Spares>) -> i32 {
    match s.as_ref() {
        Some(s) => {
            s.fill();
            0
        }
        None => -1,
    }
}

/// # Safety
/// `s` comes from `swell_ct_spares` and is not used afterwards (NULL is ignored).
#[no_mangle]
pub unsafe extern "C" fn swell_ct_spares_free(s: *mut Arc<Spares>) {
    if !s.is_null() {
        drop(Box::from_raw(s));
    }
}

/// Track the packets `swell_ct_read_prepare` read into `p`.
///
/// # Safety
/// `h` comes from `swell_ct_new`, `p` from `swell_ct_prep_new`; `err` is writable
/// for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_add_read(
    h: *mut Tracker,
    p: *mut Prepared,
    err: *mut c_char,
    errlen: usize,
) -> i32 {
    let (Some(t), Some(p)) = (h.as_mut(), p.as_mut()) else {
        return -1;
    };
    result(t.add_read(p), err, errlen)
}

/// `swell_ct_add` for a chunk already selected into `p` by `swell_ct_prepare`.
///
/// # Safety
/// As `swell_ct_add`; `p` was filled from this same chunk.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_add_prepared(
    h: *mut Tracker,
    c: *const CtChunk,
    n: usize,
    p: *mut Prepared,
    err: *mut c_char,
    errlen: usize,
) -> i32 {
    let (Some(t), Some(c), Some(p)) = (h.as_mut(), c.as_ref(), p.as_mut()) else {
        return -1;
    };
    result(t.add_prepared(&chunk_of(c, n), p), err, errlen)
}

/// Sizes and totals: connections, finished runs, finished ack-inferred runs, hosts,
/// histogram cells, ambiguous pairs, packets, duplicates, the four skip counts,
/// whether t0 is set, t0.
///
/// # Safety
/// `h` comes from `swell_ct_new`; `out` is writable for 14 elements.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_sizes(h: *const Tracker, out: *mut i64) -> i32 {
    let Some(t) = h.as_ref() else { return -1 };
    let v = [
        t.n_conns() as i64,
        t.runs.len() as i64,
        t.vruns.len() as i64,
        t.host_addr.len() as i64,
        t.hist.len() as i64,
        t.ambiguous.len() as i64,
        t.packets,
        t.duplicates,
        t.skipped[0],
        t.skipped[1],
        t.skipped[2],
        t.skipped[3],
        t.t0_ns.is_some() as i64,
        t.t0_ns.unwrap_or(0),
    ];
    std::ptr::copy_nonoverlapping(v.as_ptr(), out, v.len());
    0
}

/// The connection table (`Tracker::table`) into `ncols` (31) columns of `n` elements
/// each (the number of connections, `swell_ct_sizes`): the client's direction
/// (int64), then `TABLE_COLS` of `extract/conntrack.py` (int64, float64, or bool as
/// one byte, as `TableCols` has them); `known`: 256 * 65536 bytes, the well-known
/// port table. After the last chunk; also keeps what `swell_ct_pairs` needs of the
/// connections. 0, or -1 on bad arguments.
///
/// # Safety
/// `h` comes from `swell_ct_new`; `known` is readable for 256 * 65536 bytes; `out`
/// holds `ncols` pointers, each writable for `n` elements of its column's type.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_table(
    h: *mut Tracker,
    known: *const u8,
    t0: i64,
    out: *const *mut u8,
    ncols: usize,
    n: usize,
) -> i32 {
    let Some(t) = h.as_mut() else { return -1 };
    if ncols != N_TABLE_COLS || known.is_null() || out.is_null() || n != t.conns.len() {
        return -1;
    }
    let o = from_raw_parts(out, ncols);
    if n > 0 && o.iter().any(|p| p.is_null()) {
        return -1;
    }
    let known = from_raw_parts(known, 256 << 16);
    let i = |k: usize| {
        if n == 0 {
            &mut [][..]
        } else {
            std::slice::from_raw_parts_mut(o[k] as *mut i64, n)
        }
    };
    let f = |k: usize| {
        if n == 0 {
            &mut [][..]
        } else {
            std::slice::from_raw_parts_mut(o[k] as *mut f64, n)
        }
    };
    let b = |k: usize| {
        if n == 0 {
            &mut [][..]
        } else {
            std::slice::from_raw_parts_mut(o[k], n)
        }
    };
    let cols = TableCols {
        cdir: i(0),
        proto: i(1),
        client: i(2),
        server: i(3),
        cport: i(4),
        sport: i(5),
        start: f(6),
        end: f(7),
        client_inferred: b(8),
        open_at_start: b(9),
        open_at_end: b(10),
        rst: b(11),
        fin_c2s: b(12),
        fin_s2c: b(13),
        server_leg: f(14),
        client_leg: f(15),
        one_sided_rtt: f(16),
        counters: [
            i(17),
            i(18),
            i(19),
            i(20),
            i(21),
            i(22),
            i(23),
            i(24),
            i(25),
            i(26),
        ],
        one_way: b(27),
        acked_c2s: i(28),
        acked_s2c: i(29),
        lower_bound: b(30),
    };
    if t.table(known, t0, cols) {
        0
    } else {
        -1
    }
}

/// Count the request/response pairs (see `Tracker::pairs`; `cdir`: the client's
/// direction for each of the `n` connections) for `swell_ct_pairs_copy`; returns
/// the number of pairs, -1 on bad arguments. After `swell_ct_table` this first
/// frees the connection state (the table's pass kept what the pairs need of it).
///
/// # Safety
/// `h` comes from `swell_ct_new`; `cdir` is readable for `n` elements.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_pairs(
    h: *mut Tracker,
    cdir: *const i64,
    n: usize,
    t0: i64,
) -> i64 {
    let Some(t) = h.as_mut() else { return -1 };
    t.drop_conn_state();
    if n != t.n_conns() || (n > 0 && cdir.is_null()) {
        return -1;
    }
    let cdir = if n > 0 { from_raw_parts(cdir, n) } else { &[] };
    if cdir.iter().any(|&d| d != 0 && d != 1) {
        return -1;
    }
    let slots = t.pair_slots(cdir);
    let len = slots[n] as i64;
    t.pending_pairs = Some((cdir.to_vec(), t0, slots));
    len
}

/// Write the pairs counted by the last `swell_ct_pairs` straight into eight columns
/// (conn, req_size, rsp_size as int64; req_t0, req_t1, rsp_t0, rsp_t1,
/// think_before as float64). The last step: the connection state and runs are
/// released (write the table first).
///
/// # Safety
/// Each of the eight pointers is writable for the number of pairs.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_pairs_copy(h: *mut Tracker, out: *const *mut u8) -> i32 {
    let Some(t) = h.as_mut() else { return -1 };
    let Some(p) = t.pending_pairs.take() else {
        return -1;
    };
    let o = from_raw_parts(out, 8);
    let (cdir, t0, slots) = p;
    let n = slots[slots.len() - 1];
    if n > 0 && o.iter().any(|q| q.is_null()) {
        return -1;
    }
    let (i, f) = (
        |k: usize| std::slice::from_raw_parts_mut(o[k] as *mut i64, n),
        |k: usize| std::slice::from_raw_parts_mut(o[k] as *mut f64, n),
    );
    let cols = if n == 0 {
        None
    } else {
        Some(PairCols {
            conn: i(0),
            req_size: i(1),
            rsp_size: i(2),
            req_t0: f(3),
            req_t1: f(4),
            rsp_t0: f(5),
            rsp_t1: f(6),
            think: f(7),
        })
    };
    if let Some(cols) = cols {
        t.fill_pairs(&cdir, t0, slots, cols);
    }
    t.release();
    0
}

/// Host addresses (hi, lo) in host-id order, histogram cells (key, count), and the
/// ambiguous packet pairs (host, bits per second).
///
/// # Safety
/// Every pointer is writable for the matching size of `swell_ct_sizes`.
#[no_mangle]
pub unsafe extern "C" fn swell_ct_tables(
    h: *const Tracker,
    hi: *mut u64,
    lo: *mut u64,
    hkey: *mut i64,
    hcount: *mut i64,
    ahost: *mut i64,
    abps: *mut f64,
) -> i32 {
    let Some(t) = h.as_ref() else { return -1 };
    for (i, &(a, b)) in t.host_addr.iter().enumerate() {
        *hi.add(i) = a;
        *lo.add(i) = b;
    }
    for (i, (&k, &v)) in t.hist.iter().enumerate() {
        *hkey.add(i) = k;
        *hcount.add(i) = v;
    }
    for (i, &(a, b)) in t.ambiguous.iter().enumerate() {
        *ahost.add(i) = a;
        *abps.add(i) = b;
    }
    0
}
