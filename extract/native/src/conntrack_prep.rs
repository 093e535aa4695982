//! A chunk's packets selected for the tracker: the input columns (`Chunk`), the
//! selection (`Prepared`, filled from the columns or straight from the reader by
//! `PrepSink`) and where the selected packets' addresses are (`Addrs`). None of it
//! needs tracker state, so the reader's thread fills it while the tracker works on
//! the previous chunk.

use crate::columns::{Meta, Sink};
use crate::dissect::{Row, FRAG_LATER};

use super::state::{Pkt, PktFields};
use super::{TCP, UDP};

/// One chunk's input columns (borrowed from the reader's numpy arrays).
pub struct Chunk<'a> {
    pub ts_ns: &'a [i64],
    pub wirelen: &'a [u32],
    pub ipver: &'a [u8],
    pub proto: &'a [u8],
    pub frag: &'a [u8],
    pub saddr_hi: &'a [u64],
    pub saddr_lo: &'a [u64],
    pub daddr_hi: &'a [u64],
    pub daddr_lo: &'a [u64],
    pub sport: &'a [u16],
    pub dport: &'a [u16],
    pub tcp_flags: &'a [u8],
    pub seq: &'a [u32],
    pub ack: &'a [u32],
    pub ip_len: &'a [u32],
    pub payload_len: &'a [u32],
    pub l4_ok: &'a [u8],
}

/// A chunk's packets selected for tracking (TCP/UDP with a transport header, no
/// fragments), with the skipped counts. Needs no tracker state, so the reader's thread
/// can fill it while the tracker works on the previous chunk: from the reader's
/// columns (`fill`), or straight from the reader (`PrepSink`), which then also keeps
/// the selected packets' addresses (`addrs`, what new connections need).
#[derive(Default)]
pub struct Prepared {
    pub(super) pkts: Vec<Pkt>,
    pub(super) addrs: Vec<[u64; 4]>,
    pub(super) skipped: [i64; 4],
    pub(super) n: usize,
}

/// Why a packet is not tracked (an index into `skipped`: non_ip, not_tcp_udp, no_l4,
/// fragment), or None.
#[inline]
fn skip_reason(ipver: u8, proto: u8, frag: u8, l4_ok: bool) -> Option<usize> {
    if ipver == 0 {
        Some(0)
    } else if proto != TCP && proto != UDP {
        Some(1)
    } else if frag & FRAG_LATER != 0 {
        Some(3)
    } else if !l4_ok {
        Some(2)
    } else {
        None
    }
}

impl Prepared {
    pub fn fill(&mut self, ch: &Chunk) {
        self.pkts.clear();
        self.addrs.clear();
        self.skipped = [0; 4];
        self.n = ch.ts_ns.len();
        for i in 0..self.n {
            match skip_reason(ch.ipver[i], ch.proto[i], ch.frag[i], ch.l4_ok[i] != 0) {
                Some(k) => self.skipped[k] += 1,
                None => self.pkts.push(packet(ch, i)),
            }
        }
    }

    /// The number of packets read into it (selected or not).
    pub fn packets(&self) -> usize {
        self.n
    }
}

/// The reader's sink that selects packets into a `Prepared` as they are read: the
/// same selection and `Pkt` rows as `Prepared::fill` on the reader's columns, with
/// no columns in between (`swell extract` reads this way).
pub struct PrepSink<'a> {
    prep: &'a mut Prepared,
    cap: usize,
}

impl<'a> PrepSink<'a> {
    /// Empty `prep` for a read of at most `cap` packets.
    pub fn new(prep: &'a mut Prepared, cap: usize) -> Self {
        prep.pkts.clear();
        prep.addrs.clear();
        prep.skipped = [0; 4];
        prep.n = 0;
        PrepSink { prep, cap }
    }
}

impl Sink for PrepSink<'_> {
    fn capacity(&self) -> usize {
        self.cap
    }

    #[inline]
    fn put(&mut self, i: usize, m: &Meta, r: &Row) {
        let p = &mut *self.prep;
        p.n = i + 1;
        if let Some(k) = skip_reason(r.ipver, r.proto, r.frag, r.l4_ok) {
            p.skipped[k] += 1;
            return;
        }
        let raw = p.addrs.len() as u32;
        p.addrs
            .push([r.saddr_hi, r.saddr_lo, r.daddr_hi, r.daddr_lo]);
        p.pkts.push(Pkt::new(
            PktFields {
                ts: m.ts_ns,
                src: (r.saddr_hi, r.saddr_lo),
                dst: (r.daddr_hi, r.daddr_lo),
                sport: r.sport,
                dport: r.dport,
                proto: r.proto,
                flags: r.tcp_flags,
                seq: r.seq,
                ack: r.ack,
                pl: r.payload_len,
                iplen: r.ip_len,
                wire: m.wirelen,
            },
            raw,
        ));
    }
}

/// Where the addresses of a chunk's selected packets are (`Pkt::raw` indexes them):
/// the reader's columns, or the selection's own copy.
#[derive(Clone, Copy)]
pub(super) enum Addrs<'a> {
    Cols(&'a Chunk<'a>),
    Own(&'a [[u64; 4]]),
}

impl Addrs<'_> {
    pub(super) fn src(&self, raw: u32) -> (u64, u64) {
        let i = raw as usize;
        match self {
            Addrs::Cols(ch) => (ch.saddr_hi[i], ch.saddr_lo[i]),
            Addrs::Own(a) => (a[i][0], a[i][1]),
        }
    }

    pub(super) fn dst(&self, raw: u32) -> (u64, u64) {
        let i = raw as usize;
        match self {
            Addrs::Cols(ch) => (ch.daddr_hi[i], ch.daddr_lo[i]),
            Addrs::Own(a) => (a[i][2], a[i][3]),
        }
    }
}

pub(super) fn packet(ch: &Chunk, i: usize) -> Pkt {
    Pkt::new(
        PktFields {
            ts: ch.ts_ns[i],
            src: (ch.saddr_hi[i], ch.saddr_lo[i]),
            dst: (ch.daddr_hi[i], ch.daddr_lo[i]),
            sport: ch.sport[i],
            dport: ch.dport[i],
            proto: ch.proto[i],
            flags: ch.tcp_flags[i],
            seq: ch.seq[i],
            ack: ch.ack[i],
            pl: ch.payload_len[i],
            iplen: ch.ip_len[i],
            wire: ch.wirelen[i],
        },
        i as u32,
    )
}
