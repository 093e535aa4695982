//! swell-pcap: the streaming pcap/pcapng reader at the base of swell's extraction.
//!
//! C ABI for Python's ctypes (no pyo3): open a file to a handle, fill
//! caller-allocated column buffers (numpy arrays) with up to N packets per
//! call, query the interfaces, totals and counted warnings, close. Nothing
//! here panics on any input (the fuzz test checks it); errors travel as
//! return codes plus a one-line message. The `swell_ct_*` functions at the end
//! drive the native connection tracker of `conntrack.rs`.

pub mod columns;
pub mod conntrack;
pub mod ct_abi;
pub mod digest;
pub mod dissect;
pub mod reader;
pub mod resync;
pub mod source;
pub mod warn;

use std::ffi::{c_char, CStr};
use std::fs::File;
use std::io::Cursor;

use columns::CColumns;
use reader::{Format, Reader};
use warn::{NAMES, N_WARN};

/// An open trace plus its last error message and, for a file, its path and the
/// content hash of the bytes read so far (`digest.rs`).
pub struct Handle {
    reader: Reader,
    error: String,
    digest: Option<(String, digest::Shared)>,
}

#[repr(C)]
pub struct CInfo {
    /// 1 = pcap, 2 = pcapng.
    pub format: u32,
    pub snaplen: u32,
    pub n_ifaces: u32,
    pub done: u32,
    pub packets: u64,
    pub bytes_wire: u64,
    pub bytes_cap: u64,
    pub min_ts_ns: i64,
    pub max_ts_ns: i64,
}

#[repr(C)]
pub struct CIface {
    pub linktype: u32,
    pub snaplen: u32,
    pub tsres_s: f64,
    pub ts_offset_s: i64,
}

fn write_msg(msg: &str, buf: *mut c_char, len: usize) {
    if buf.is_null() || len == 0 {
        return;
    }
    let bytes = msg.as_bytes();
    let n = bytes.len().min(len - 1);
    // SAFETY: the caller gives a writable buffer of `len` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
}

fn into_handle(
    r: Result<Reader, String>,
    digest: Option<(String, digest::Shared)>,
    err: *mut c_char,
    errlen: usize,
) -> *mut Handle {
    match r {
        Ok(reader) => Box::into_raw(Box::new(Handle {
            reader,
            error: String::new(),
            digest,
        })),
        Err(msg) => {
            write_msg(&msg, err, errlen);
            std::ptr::null_mut()
        }
    }
}

/// Open a capture file. NULL on failure, with the reason in `err`.
///
/// # Safety
/// `path` is a NUL-terminated string; `err` is writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_open(
    path: *const c_char,
    err: *mut c_char,
    errlen: usize,
) -> *mut Handle {
    if path.is_null() {
        write_msg("no path", err, errlen);
        return std::ptr::null_mut();
    }
    let path = CStr::from_ptr(path).to_string_lossy().into_owned();
    let state = digest::new_shared();
    let r = File::open(&path)
        .map_err(|e| format!("cannot open: {e}"))
        .and_then(|f| Reader::open(Box::new(digest::HashingRead::new(f, state.clone()))));
    into_handle(r, Some((path, state)), err, errlen)
}

/// Open an in-memory capture (copied); used by the fuzz harness.
///
/// # Safety
/// `data` is readable for `len` bytes; `err` is writable for `errlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_open_mem(
    data: *const u8,
    len: usize,
    err: *mut c_char,
    errlen: usize,
) -> *mut Handle {
    let bytes = if data.is_null() {
        Vec::new()
    } else {
        std::slice::from_raw_parts(data, len).to_vec()
    };
    into_handle(
        Reader::open(Box::new(Cursor::new(bytes))),
        None,
        err,
        errlen,
    )
}

/// Fill up to `cap` rows; returns the row count (0 at the end), -1 on an I/O error.
///
/// # Safety
/// `h` comes from an open call; every column pointer is valid for `cap` elements.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_read(h: *mut Handle, cols: *const CColumns, cap: usize) -> i64 {
    let (Some(h), Some(c)) = (h.as_mut(), cols.as_ref()) else {
        return -1;
    };
    let Some(mut cols) = c.as_slices(cap) else {
        h.error = "null column buffer".into();
        return -1;
    };
    match h.reader.read(&mut cols) {
        Ok(n) => n as i64,
        Err(e) => {
            h.error = format!("read error: {e}");
            -1
        }
    }
}

/// Copy the last error message into `buf`.
///
/// # Safety
/// `h` comes from an open call; `buf` is writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_error(h: *const Handle, buf: *mut c_char, len: usize) {
    if let Some(h) = h.as_ref() {
        write_msg(&h.error, buf, len);
    }
}

/// Totals so far (complete once a read has returned 0).
///
/// # Safety
/// `h` comes from an open call; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_info(h: *const Handle, out: *mut CInfo) -> i32 {
    let (Some(h), Some(out)) = (h.as_ref(), out.as_mut()) else {
        return -1;
    };
    let r = &h.reader;
    *out = CInfo {
        format: if r.format == Format::Pcapng { 2 } else { 1 },
        snaplen: r.snaplen,
        n_ifaces: r.ifaces.len() as u32,
        done: r.is_done() as u32,
        packets: r.stats.packets,
        bytes_wire: r.stats.bytes_wire,
        bytes_cap: r.stats.bytes_cap,
        min_ts_ns: r.stats.min_ts,
        max_ts_ns: r.stats.max_ts,
    };
    0
}

/// Interface `i` (global index across pcapng sections); -1 if there is none.
///
/// # Safety
/// `h` comes from an open call; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_iface(h: *const Handle, i: u32, out: *mut CIface) -> i32 {
    let (Some(h), Some(out)) = (h.as_ref(), out.as_mut()) else {
        return -1;
    };
    let Some(f) = h.reader.ifaces.get(i as usize) else {
        return -1;
    };
    *out = CIface {
        linktype: f.linktype as u32,
        snaplen: f.snaplen,
        tsres_s: f.tsres.seconds(),
        ts_offset_s: f.ts_offset_s,
    };
    0
}

/// Number of warning reasons (the length of the arrays below).
#[no_mangle]
pub extern "C" fn swell_pcap_n_warnings() -> u32 {
    N_WARN as u32
}

/// Name of warning reason `i` (a static NUL-terminated string), NULL past the end.
#[no_mangle]
pub extern "C" fn swell_pcap_warning_name(i: u32) -> *const c_char {
    NAMES
        .get(i as usize)
        .map_or(std::ptr::null(), |s| s.as_ptr() as *const c_char)
}

/// Whether reason `i` counts packets that were not returned.
#[no_mangle]
pub extern "C" fn swell_pcap_warning_skips(i: u32) -> i32 {
    let all = [
        warn::Warn::TruncatedLastRecord,
        warn::Warn::CorruptRecord,
        warn::Warn::BadInterfaceId,
    ];
    all.iter().any(|w| *w as u32 == i) as i32
}

/// Copy the warning counts (up to `n` of them) into `out`.
///
/// # Safety
/// `h` comes from an open call; `out` is writable for `n` elements.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_warnings(h: *const Handle, out: *mut u64, n: u32) -> i32 {
    let Some(h) = h.as_ref() else { return -1 };
    if out.is_null() {
        return -1;
    }
    let counts = &h.reader.stats.warnings.counts;
    let n = (n as usize).min(N_WARN);
    std::ptr::copy_nonoverlapping(counts.as_ptr(), out, n);
    0
}

/// XXH3-128 of the whole opened file (`digest.rs`): the bytes read so far plus
/// the rest of the file, read now. `out` receives the 16 digest bytes in
/// canonical (big-endian) order and `size` the file's size. Returns 0, or -1
/// (message in the handle's error) for an in-memory trace or an I/O error.
///
/// # Safety
/// `h` comes from an open call; `out` is writable for 16 bytes, `size` for one u64.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_digest(h: *mut Handle, out: *mut u8, size: *mut u64) -> i32 {
    let Some(h) = h.as_mut() else { return -1 };
    if out.is_null() || size.is_null() {
        return -1;
    }
    let Some((path, state)) = &h.digest else {
        h.error = "no file to hash (in-memory trace)".into();
        return -1;
    };
    match digest::file_digest(path, state) {
        Ok((d, n)) => {
            std::ptr::copy_nonoverlapping(d.to_be_bytes().as_ptr(), out, 16);
            *size = n;
            0
        }
        Err(e) => {
            h.error = format!("cannot hash the file: {e}");
            -1
        }
    }
}

/// Close a handle (NULL is ignored).
///
/// # Safety
/// `h` comes from an open call and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_close(h: *mut Handle) {
    if !h.is_null() {
        drop(Box::from_raw(h));
    }
}

/// Keep (`on` != 0) or stop keeping the file offset of each returned packet's
/// captured bytes (`swell_pcap_offsets`); off by default.
///
/// # Safety
/// `h` comes from an open call.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_keep_offsets(h: *mut Handle, on: i32) -> i32 {
    let Some(h) = h.as_mut() else { return -1 };
    h.reader.offsets = (on != 0).then(Vec::new);
    0
}

/// Copy the offsets kept for the rows of the last read (up to `n`, row order) into
/// `out`; returns how many, -1 when offsets are not kept.
///
/// # Safety
/// `h` comes from an open call; `out` is writable for `n` elements.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_offsets(h: *const Handle, out: *mut u64, n: usize) -> i64 {
    let Some(v) = h.as_ref().and_then(|h| h.reader.offsets.as_ref()) else {
        return -1;
    };
    if out.is_null() {
        return -1;
    }
    let k = v.len().min(n);
    std::ptr::copy_nonoverlapping(v.as_ptr(), out, k);
    k as i64
}

/// File offset of the first damaged record or block, `u64::MAX` when none.
///
/// # Safety
/// `h` comes from an open call.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_first_damage(h: *const Handle) -> u64 {
    h.as_ref()
        .and_then(|h| h.reader.first_damage)
        .unwrap_or(u64::MAX)
}

/// Bytes of the file consumed so far (for progress display).
///
/// # Safety
/// `h` comes from an open call.
#[no_mangle]
pub unsafe extern "C" fn swell_pcap_offset(h: *const Handle) -> u64 {
    h.as_ref().map_or(0, |h| h.reader.offset())
}
