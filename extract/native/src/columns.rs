//! The column buffers a read fills, one slot per packet.
//!
//! `CColumns` is the C view (one pointer per column, all of the same
//! capacity, allocated by the caller, numpy in swell); `Columns` is the safe
//! slice view the reader writes through; `OwnedColumns` backs tests and the
//! fuzz harness. The field order of `CColumns` is the ABI: Python's ctypes
//! structure lists the same names in the same order.

use crate::dissect::Row;

macro_rules! columns {
    ($($name:ident: $ty:ty),* $(,)?) => {
        #[repr(C)]
        pub struct CColumns { $(pub $name: *mut $ty,)* }

        pub struct Columns<'a> { $(pub $name: &'a mut [$ty],)* }

        #[derive(Default)]
        pub struct OwnedColumns { $(pub $name: Vec<$ty>,)* }

        impl CColumns {
            /// # Safety
            /// Every pointer must be valid for `cap` writable elements, and
            /// no other reference to those buffers may be alive meanwhile.
            pub unsafe fn as_slices<'a>(&self, cap: usize) -> Option<Columns<'a>> {
                $(if self.$name.is_null() { return None; })*
                Some(Columns { $($name: std::slice::from_raw_parts_mut(self.$name, cap),)* })
            }
        }

        impl OwnedColumns {
            pub fn with_capacity(cap: usize) -> Self {
                OwnedColumns { $($name: vec![<$ty>::default(); cap],)* }
            }
            pub fn view(&mut self) -> Columns<'_> {
                Columns { $($name: &mut self.$name[..],)* }
            }
        }
    };
}

columns! {
    ts_ns: i64,
    caplen: u32,
    wirelen: u32,
    iface: u16,
    linktype: u16,
    ipver: u8,
    proto: u8,
    frag: u8,
    saddr_hi: u64,
    saddr_lo: u64,
    daddr_hi: u64,
    daddr_lo: u64,
    sport: u16,
    dport: u16,
    tcp_flags: u8,
    seq: u32,
    ack: u32,
    win: u16,
    ip_len: u32,
    payload_len: u32,
    vlan: u16,
    l4_ok: u8,
}

/// The record-level fields that come from the capture file, not the packet.
pub struct Meta {
    pub ts_ns: i64,
    pub caplen: u32,
    pub wirelen: u32,
    pub iface: u16,
    pub linktype: u16,
}

/// Where the reader puts packets: row `i` (0, 1, ... within one read) of at most
/// `capacity()` rows. `Columns` is the reader's own (one column per field); the
/// connection tracker's selection is another (`conntrack::PrepSink`: it keeps only
/// what the tracker needs, with no columns in between).
pub trait Sink {
    fn capacity(&self) -> usize;
    fn put(&mut self, i: usize, m: &Meta, r: &Row);
}

impl Sink for Columns<'_> {
    fn capacity(&self) -> usize {
        self.ts_ns.len()
    }

    #[inline]
    fn put(&mut self, i: usize, m: &Meta, r: &Row) {
        self.ts_ns[i] = m.ts_ns;
        self.caplen[i] = m.caplen;
        self.wirelen[i] = m.wirelen;
        self.iface[i] = m.iface;
        self.linktype[i] = m.linktype;
        self.ipver[i] = r.ipver;
        self.proto[i] = r.proto;
        self.frag[i] = r.frag;
        self.saddr_hi[i] = r.saddr_hi;
        self.saddr_lo[i] = r.saddr_lo;
        self.daddr_hi[i] = r.daddr_hi;
        self.daddr_lo[i] = r.daddr_lo;
        self.sport[i] = r.sport;
        self.dport[i] = r.dport;
        self.tcp_flags[i] = r.tcp_flags;
        self.seq[i] = r.seq;
        self.ack[i] = r.ack;
        self.win[i] = r.win;
        self.ip_len[i] = r.ip_len;
        self.payload_len[i] = r.payload_len;
        self.vlan[i] = r.vlan;
        self.l4_ok[i] = r.l4_ok as u8;
    }
}
