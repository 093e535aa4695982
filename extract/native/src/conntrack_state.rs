//! The native tracker's state records (part of `conntrack`): per-connection and
//! per-direction state laid out by cache line, the selected packets of a chunk, runs,
//! and `Blocks`, the store of connections and runs.
//!
//! The state is kept small because a large part of the cost of extraction is the
//! first touch of fresh memory (see docs/extract-speed.md): 320 bytes per connection
//! (was 488) plus 24 bytes of `Cold`, 64 per selected packet (was 104). Connections
//! and finished runs are kept in fixed blocks (`Blocks`) rather than growing vectors,
//! so that growing never copies (a cache-line-aligned vector's reallocation, or one
//! inside a thread's malloc arena, is a copy into fresh memory) and only the pages in
//! use are touched.

use std::sync::Arc;

use super::spare::Pool;
use super::{hash_addr, NEG, TCP};

/// Ask the CPU to fetch the cache line at `p` (a hint: any address is fine).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory architecturally; it never faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(p as *const i8, _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The open request/response run of a stream (real data or ack-inferred).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Run {
    pub bytes: i64,
    pub t0: i64,
    pub t1: i64,
    pub open: bool,
    pub dir: u8,
}

/// A finished run, compact (its packet count and sequence number are not kept).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DoneRun {
    pub(super) cid_dir: u64,
    pub bytes: i64,
    pub t0: i64,
    pub t1: i64,
}

impl DoneRun {
    pub fn cid(&self) -> i64 {
        (self.cid_dir >> 1) as i64
    }
    pub fn dir(&self) -> i64 {
        (self.cid_dir & 1) as i64
    }
}

/// `Dir::flags` bits.
pub const FIN_SEEN: u8 = 1;
pub const HAS_BASE: u8 = 2;
pub const HAS_ACK_BASE: u8 = 4;
/// The other direction sent a packet since this direction's last data segment: the
/// next segment is no back-to-back pair with it (packet-pair capacity).
pub const INTERRUPTED: u8 = 8;

/// Per-direction state (numpy's `gdir` row), 96 bytes. Sequence and acknowledgement
/// bases are kept modulo 2^32 (all that the wrapped differences use) and the largest
/// relative acknowledgement fits 32 bits (it is in [0, 2^31)).
#[derive(Clone, Copy, Default)]
#[repr(C)]
pub struct Dir {
    pub pkts: i64,
    pub wire: i64,
    pub new_bytes: i64,
    pub max_end: i64,
    pub prev_ts: i64,
    pub data_pkts: i64,
    pub retx: i64,
    pub ack_adv: i64,
    pub base: u32,
    pub max_pl: u32,
    pub prev_pl: u32,
    pub ack_base: u32,
    pub max_ack: u32,
    pub(super) last_epoch: u32,
    pub(super) last_pkt: u32,
    pub flags: u8,
}

impl Dir {
    pub fn fin(&self) -> bool {
        self.flags & FIN_SEEN != 0
    }

    fn new() -> Self {
        Dir {
            max_end: NEG,
            prev_ts: -1,
            ..Dir::default()
        }
    }
}

/// Per-connection state (numpy's `conn` row plus its two directions), 320 bytes laid
/// out by cache line: line 0 is read by every packet (counters, handshake, key check),
/// line 1 holds the two open runs, lines 2-4 the directions. What only the export and
/// the packet-pair histogram read is apart, in `Cold`. The loops prefetch the lines
/// a packet will touch a few packets ahead. `client_isn` means something once
/// `syn_ns` is set (`isn()`).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Conn {
    pub last_ns: i64,
    pub ack_ns: i64,
    pub syn_ns: i64,
    pub synack_ns: i64,
    pub h_lo: u64,
    pub client_isn: u32,
    pub ports: u32,
    pub(super) sa_epoch: u32,
    pub(super) sa_pos: u32,
    pub syn_dir: i8,
    pub synack_dir: i8,
    pub proto: u8,
    pub rst: bool,
    // line 1
    pub run: Run,
    pub vrun: Run,
    // lines 2-4
    pub dirs: [Dir; 2],
}

impl Conn {
    /// A new connection's state (`proto`, key check values).
    pub fn new(proto: u8, h_lo: u64, ports: u32) -> Self {
        Conn {
            last_ns: 0,
            ack_ns: -1,
            syn_ns: -1,
            synack_ns: -1,
            h_lo,
            client_isn: 0,
            ports,
            sa_epoch: 0,
            sa_pos: 0,
            syn_dir: -1,
            synack_dir: -1,
            proto,
            rst: false,
            run: Run::default(),
            vrun: Run::default(),
            dirs: [Dir::new(), Dir::new()],
        }
    }

    /// The client's ISN (numpy's `client_isn`: -1 without a SYN).
    pub fn isn(&self) -> i64 {
        if self.syn_ns < 0 {
            -1
        } else {
            self.client_isn as i64
        }
    }
}

/// What is fixed when a connection starts and read only at the end (and by the rare
/// packet-pair estimate): host ids of the lower and upper endpoint, first packet.
#[derive(Clone, Copy)]
pub struct Cold {
    pub first_ns: i64,
    pub host: [u32; 2],
    pub first_dir: u8,
}

impl Cold {
    /// numpy's `ep_lo` / `ep_hi`: host id << 16 | port, `ports` the connection's.
    pub fn endpoints(&self, ports: u32) -> (i64, i64) {
        let (a, b) = (self.host[0] as i64, self.host[1] as i64);
        (
            a << 16 | (ports >> 16) as i64,
            b << 16 | (ports & 0xFFFF) as i64,
        )
    }
}

/// A selected packet: 64 bytes, the chunk's scratch streamed by every phase.
#[derive(Clone, Copy, Default)]
pub(super) struct Pkt {
    pub(super) ts: i64,
    pub(super) key: u64,
    pub(super) hlo: u64,
    /// The connection (negative while pending: -1 - its index among the chunk's starts).
    pub(super) cid: i64,
    pub(super) seq: u32,
    pub(super) ack: u32,
    pub(super) pl: u32,
    pub(super) iplen: u32,
    pub(super) wire: u32,
    pub(super) ports: u32,
    pub(super) raw: u32,
    pub(super) d: u8,
    pub(super) proto: u8,
    pub(super) flags: u8,
}

/// What a `Pkt` is made of: one packet's fields as the reader decoded them.
pub(super) struct PktFields {
    pub ts: i64,
    pub src: (u64, u64),
    pub dst: (u64, u64),
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub pl: u32,
    pub iplen: u32,
    pub wire: u32,
}

impl Pkt {
    /// The row of a selected packet (`raw`: where its addresses are). Direction 0 is
    /// sent by the endpoint with the lower (address hash, port); the key mixes both
    /// endpoints and the protocol.
    #[inline]
    pub(super) fn new(f: PktFields, raw: u32) -> Pkt {
        let hs = hash_addr(f.src.0, f.src.1);
        let hd = hash_addr(f.dst.0, f.dst.1);
        let (sp, dp) = (f.sport as u32, f.dport as u32);
        let d = (hs > hd || (hs == hd && sp > dp)) as u8;
        let (hlo, hhi) = if d == 0 { (hs, hd) } else { (hd, hs) };
        let ports = if d == 0 { sp << 16 | dp } else { dp << 16 | sp };
        let key = hlo
            .wrapping_mul(0xBF58_476D_1CE4_E5B9)
            .wrapping_add(hhi.wrapping_mul(0x94D0_49BB_1331_11EB))
            .wrapping_add((ports as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
            .wrapping_add(f.proto as u64);
        Pkt {
            ts: f.ts,
            key,
            hlo,
            cid: 0,
            seq: f.seq,
            ack: f.ack,
            pl: f.pl,
            iplen: f.iplen,
            wire: f.wire,
            ports,
            raw,
            d,
            proto: f.proto,
            flags: if f.proto == TCP { f.flags } else { 0 },
        }
    }

    /// The state lines of its connection this packet's counters and data steps touch.
    #[inline(always)]
    pub(super) fn prefetch(&self, conns: &Conns, data: bool) {
        let base = conns.ptr(self.cid as usize) as *const u8;
        let dirs = base.wrapping_add(std::mem::offset_of!(Conn, dirs));
        let dir = |d: usize| dirs.wrapping_add(d * std::mem::size_of::<Dir>());
        let d = self.d as usize;
        prefetch(base);
        prefetch(dir(d));
        if data {
            prefetch(base.wrapping_add(64));
            prefetch(dir(d).wrapping_add(64));
            prefetch(dir(1 - d));
        }
    }
}

/// A growing sequence in fixed blocks of `1 << BITS` elements: growing never copies
/// (a reallocation of a long vector copies it into fresh memory unless the allocator
/// can move its pages) and only the pages in use are touched.
pub struct Blocks<T, const BITS: u32> {
    blocks: Vec<Vec<T>>,
    len: usize,
    /// Where new blocks come from when it has one ready (`conntrack_spare.rs`).
    pool: Option<Arc<Pool<T>>>,
}

impl<T, const BITS: u32> Default for Blocks<T, BITS> {
    fn default() -> Self {
        Blocks {
            blocks: Vec::new(),
            len: 0,
            pool: None,
        }
    }
}

impl<T, const BITS: u32> Blocks<T, BITS> {
    /// Empty, taking new blocks from `pool` when it has one.
    pub fn with_pool(pool: Arc<Pool<T>>) -> Self {
        Blocks {
            pool: Some(pool),
            ..Self::default()
        }
    }

    /// A pool of blocks of this store's size.
    pub fn new_pool() -> Arc<Pool<T>> {
        Arc::new(Pool::new(1 << BITS))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, x: T) {
        if self.len.is_multiple_of(1 << BITS) {
            let spare = self.pool.as_ref().and_then(|p| p.take());
            self.blocks
                .push(spare.unwrap_or_else(|| Vec::with_capacity(1 << BITS)));
        }
        self.blocks.last_mut().expect("a block").push(x);
        self.len += 1;
    }

    /// The address of element `i` (for prefetching; any `i` is fine).
    #[inline(always)]
    pub fn ptr(&self, i: usize) -> *const T {
        match self.blocks.get(i >> BITS) {
            Some(b) => b.as_ptr().wrapping_add(i & ((1 << BITS) - 1)),
            None => std::ptr::null(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.blocks.iter().flatten()
    }
}

impl<T, const BITS: u32> std::ops::Index<usize> for Blocks<T, BITS> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        &self.blocks[i >> BITS][i & ((1 << BITS) - 1)]
    }
}

impl<T, const BITS: u32> std::ops::IndexMut<usize> for Blocks<T, BITS> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.blocks[i >> BITS][i & ((1 << BITS) - 1)]
    }
}

/// Finished runs, in the order they finished (blocks of 2 MB).
pub type RunList = Blocks<DoneRun, 16>;

/// The connections, in id order: their state in blocks of about 2.6 MB, and apart
/// their `Cold` part.
pub type Conns = Blocks<Conn, 13>;
pub type ColdList = Blocks<Cold, 16>;
