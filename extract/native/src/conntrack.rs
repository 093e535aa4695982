//! Native connection tracker: the exact semantics of Python's `ConnectionBuilder`
//! (`extract/connections.py`, the reference), one sequential pass per chunk.
//!
//! The numpy builder processes a chunk in phases (key assignment, counters,
//! handshake, then sequence space / runs / acknowledgement-inferred runs /
//! packet pairs), and a few of its rules read state as it stands at the *end*
//! of a phase over the whole chunk (for example the largest payload of a
//! direction, or whether the other direction has any packet yet). This module
//! keeps that phase structure, each phase a plain loop in file order, so the
//! results are identical for every chunking: per-chunk state (previous packet
//! of a direction, the SYN/ACK position) carries an epoch number that
//! invalidates it at the next chunk (a key's per-chunk entry is valid while the
//! chunk's scratch entry it points to names the key).
//!
//! Speed: the loops are bound by cache misses on per-connection state and on the
//! key table, so the state is compact and laid out by cache line
//! (`conntrack_state.rs`), the key table is an open-addressing table whose slot
//! is known from the key (`conntrack_keys.rs`), and every loop prefetches the
//! state of the packet `AHEAD` places on. The counters pass also resolves the
//! connection ids of new connections and checks the key hash.
//!
//! Connection ids are numbered as numpy numbers them (new connections of a
//! chunk sorted by key, then file order), host ids likewise (new addresses of
//! a chunk sorted by address hash, sources first), so the exported state can
//! be fed to the same `finish` code. Nothing is stored per packet beyond one
//! chunk of scratch. Request/response pairs are computed natively at the end
//! (`conntrack_pairs.rs`); packet-pair estimates within a relative 1e-7 of a
//! histogram bin edge are handed to Python for numpy's `log10`. The C ABI is in
//! `lib.rs` (`swell_ct_*`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

#[path = "conntrack_keys.rs"]
mod keys;
#[path = "conntrack_pairs.rs"]
mod pairs;
#[path = "conntrack_prep.rs"]
mod prep;
#[path = "conntrack_spare.rs"]
mod spare;
#[path = "conntrack_state.rs"]
mod state;
#[path = "conntrack_table.rs"]
mod table;
#[cfg(test)]
#[path = "conntrack_tests.rs"]
mod tests;

use keys::{KeyTable, NONE};
pub use pairs::{FinalRuns, PairCols, Pairs};
use prep::Addrs;
pub use prep::{Chunk, PrepSink, Prepared};
pub use spare::Spares;
use state::{prefetch, Pkt};
pub use state::{Cold, ColdList, Conn, Conns, Dir, DoneRun, Run, RunList};
use state::{FIN_SEEN, HAS_ACK_BASE, HAS_BASE, INTERRUPTED};
pub use table::TableCols;

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
const FIN: u8 = 1;
const SYN: u8 = 2;
const RST: u8 = 4;
const ACK: u8 = 16;
const PAIR_MIN_PAYLOAD: u32 = 500;
const DUP_NS: i64 = 200_000;
pub const CAP_BINS_PER_DECADE: f64 = 40.0;
pub const CAP_LOG_MIN: f64 = 4.0;
pub const CAP_NBINS: i64 = 280;
const NEG: i64 = -(1 << 62);
/// Capacity estimates this close (relative) to a histogram bin edge are left to
/// numpy, whose log10 decides their bin (`cap_bin`).
const AMBIGUOUS: f64 = 1e-7;
/// How many packets ahead the loops prefetch the state a packet will touch.
const AHEAD: usize = 10;

/// Hasher for keys that are already hashes: one multiply-xorshift.
#[derive(Default)]
pub struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
    fn write_i64(&mut self, x: i64) {
        self.write_u64(x as u64);
    }
}

type Map<K, V> = HashMap<K, V, BuildHasherDefault<MixHasher>>;

/// Per-chunk state of a key (numpy's per-group values in `_assign`); the key table's
/// slot points here while `key` matches.
#[derive(Clone, Copy)]
struct KeyLocal {
    key: u64,
    start_cur: i64,
    live: i64,
    prev_ts: i64,
    isn_now: i64,
    isn_set: bool,
}

/// The tracker: state of every connection so far, finished runs, histogram.
pub struct Tracker {
    udp_idle_ns: i64,
    tcp_idle_ns: i64,
    pub conns: Conns,
    pub cold: ColdList,
    keys: KeyTable,
    host_of: Map<u64, i64>,
    pub host_addr: Vec<(u64, u64)>,
    pub runs: RunList,
    pub vruns: RunList,
    pub hist: Map<i64, i64>,
    /// Packet-pair estimates whose bin numpy decides: (host, bits per second).
    pub ambiguous: Vec<(i64, f64)>,
    /// The histogram's bin edges (`cap_edges`).
    edges: Vec<f64>,
    pub t0_ns: Option<i64>,
    pub packets: i64,
    pub duplicates: i64,
    /// non_ip, not_tcp_udp, no_l4, fragment.
    pub skipped: [i64; 4],
    epoch: u32,
    pkts: Vec<Pkt>,
    locals: Vec<KeyLocal>,
    /// Pairs computed by `swell_ct_pairs`, waiting to be copied out.
    pub pending_pairs: Option<(Vec<i64>, i64, Vec<usize>)>,
    /// What the pairs need of the connections, kept by the export.
    final_runs: Option<FinalRuns>,
    /// The pools new blocks of `conns`, `cold`, `runs` and `vruns` come from, which
    /// another thread may stock (`spares()`).
    spares: Arc<Spares>,
}

fn hash_addr(hi: u64, lo: u64) -> u64 {
    hi.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lo
}

fn wrap32(x: i64) -> i64 {
    ((x + (1 << 31)) & 0xFFFF_FFFF) - (1 << 31)
}

fn cut(r: &mut Run, cid: i64, dir: u8, ts: i64, nb: i64, sink: &mut RunList) {
    if r.open && r.dir == dir {
        r.bytes += nb;
        r.t1 = ts;
        return;
    }
    if r.open {
        sink.push(DoneRun {
            cid_dir: (cid as u64) << 1 | (r.dir & 1) as u64,
            bytes: r.bytes,
            t0: r.t0,
            t1: r.t1,
        });
    }
    *r = Run {
        bytes: nb,
        t0: ts,
        t1: ts,
        open: true,
        dir,
    };
}

impl Tracker {
    pub fn new(udp_idle_ns: i64, tcp_idle_ns: i64) -> Self {
        let spares = Arc::new(Spares {
            conns: Conns::new_pool(),
            cold: ColdList::new_pool(),
            runs: RunList::new_pool(),
        });
        Tracker {
            udp_idle_ns,
            tcp_idle_ns,
            conns: Conns::with_pool(spares.conns.clone()),
            cold: ColdList::with_pool(spares.cold.clone()),
            keys: KeyTable::default(),
            host_of: Map::default(),
            host_addr: Vec::new(),
            runs: RunList::with_pool(spares.runs.clone()),
            vruns: RunList::with_pool(spares.runs.clone()),
            spares,
            hist: Map::default(),
            ambiguous: Vec::new(),
            edges: cap_edges(),
            t0_ns: None,
            packets: 0,
            duplicates: 0,
            skipped: [0; 4],
            epoch: 0,
            pkts: Vec::new(),
            locals: Vec::new(),
            pending_pairs: None,
            final_runs: None,
        }
    }

    /// The tracker's pools of spare blocks, for another thread to stock
    /// (`Spares::fill`) while this one tracks.
    pub fn spares(&self) -> Arc<Spares> {
        self.spares.clone()
    }

    /// Process one chunk (all columns of equal length).
    pub fn add(&mut self, ch: &Chunk) -> Result<(), String> {
        let mut prep = Prepared {
            pkts: std::mem::take(&mut self.pkts),
            ..Prepared::default()
        };
        prep.fill(ch);
        let r = self.add_prepared(ch, &mut prep);
        self.pkts = prep.pkts;
        r
    }

    /// Process one chunk whose packets `prep` selected (`Prepared::fill` on `ch`).
    pub fn add_prepared(&mut self, ch: &Chunk, prep: &mut Prepared) -> Result<(), String> {
        if prep.n != ch.ts_ns.len() {
            return Err("prepared packets are not this chunk's".into());
        }
        let Prepared {
            pkts, skipped, n, ..
        } = prep;
        self.add_selected(*n, *skipped, pkts, Addrs::Cols(ch))
    }

    /// Process the packets a `PrepSink` read into `prep` (the same as `add_prepared`
    /// on the columns of that read).
    pub fn add_read(&mut self, prep: &mut Prepared) -> Result<(), String> {
        let Prepared {
            pkts,
            addrs,
            skipped,
            n,
        } = prep;
        self.add_selected(*n, *skipped, pkts, Addrs::Own(addrs))
    }

    fn add_selected(
        &mut self,
        n: usize,
        skipped: [i64; 4],
        pkts: &mut [Pkt],
        addrs: Addrs,
    ) -> Result<(), String> {
        if n == 0 {
            return Ok(());
        }
        self.packets += n as i64;
        self.epoch = self.epoch.wrapping_add(1).max(1);
        for (s, k) in self.skipped.iter_mut().zip(skipped) {
            *s += k;
        }
        if pkts.is_empty() {
            return Ok(());
        }
        self.process(addrs, pkts)
    }

    fn process(&mut self, addrs: Addrs, pkts: &mut [Pkt]) -> Result<(), String> {
        if self.t0_ns.is_none() {
            self.t0_ns = Some(pkts[0].ts);
        }
        let starts = self.assign(pkts);
        let finals = self.new_conns(addrs, pkts, &starts)?;
        self.counters_and_syn(pkts, &finals)?;
        self.data(pkts);
        Ok(())
    }

    /// Connection per packet: numpy's `_assign` (splits on idle gaps and new ISNs). A
    /// packet that starts a connection, and the packets after it on its key, get the
    /// pending id -1 - (its index in the returned starts: (key, packet index)).
    fn assign(&mut self, pkts: &mut [Pkt]) -> Vec<(i64, usize)> {
        let mut starts: Vec<(i64, usize)> = Vec::new();
        let mut locals = std::mem::take(&mut self.locals);
        locals.clear();
        for j in 0..pkts.len() {
            if let Some(q) = pkts.get(j + AHEAD) {
                self.keys.prefetch(q.key);
            }
            let p = &mut pkts[j];
            let (k, _) = self.keys.entry(p.key);
            let l = k.local as usize;
            let gstart = l >= locals.len() || locals[l].key != p.key;
            if gstart {
                k.local = locals.len() as u32;
                let cur = if k.cur == NONE { -1 } else { k.cur as i64 };
                locals.push(KeyLocal {
                    key: p.key,
                    start_cur: cur,
                    live: cur,
                    prev_ts: 0,
                    isn_now: 0,
                    isn_set: false,
                });
            }
            let e = &mut locals[k.local as usize];
            let new_first = gstart && e.start_cur < 0;
            let mut st = new_first;
            if !new_first {
                let prev = if gstart {
                    self.conns[e.start_cur as usize].last_ns
                } else {
                    e.prev_ts
                };
                let limit = if p.proto == UDP {
                    self.udp_idle_ns
                } else {
                    self.tcp_idle_ns
                };
                st = p.ts.wrapping_sub(prev) > limit;
            }
            if p.flags & (SYN | ACK) == SYN {
                let seq = p.seq as i64;
                if !e.isn_set {
                    e.isn_now = if e.start_cur >= 0 {
                        self.conns[e.start_cur as usize].isn()
                    } else {
                        -1
                    };
                    e.isn_set = true;
                }
                if !st && (!gstart || e.start_cur >= 0) && e.isn_now != seq {
                    st = true;
                }
                e.isn_now = seq;
            }
            e.prev_ts = p.ts;
            if st {
                e.live = -1 - starts.len() as i64;
                starts.push((p.key as i64, j));
            }
            p.cid = e.live;
        }
        self.locals = locals;
        starts
    }

    /// Create the connections started in a chunk, numbered in (key, file order) order,
    /// and make each the current connection of its key; returns the id per start.
    fn new_conns(
        &mut self,
        addrs: Addrs,
        pkts: &[Pkt],
        starts: &[(i64, usize)],
    ) -> Result<Vec<i64>, String> {
        if starts.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..starts.len()).collect();
        order.sort_by_key(|&j| starts[j].0);
        let base = self.conns.len() as i64;
        if base + starts.len() as i64 >= NONE as i64 {
            return Err("too many connections".into());
        }
        let mut finals = vec![0i64; starts.len()];
        for (r, &j) in order.iter().enumerate() {
            finals[j] = base + r as i64;
        }
        let sorted: Vec<&Pkt> = order.iter().map(|&j| &pkts[starts[j].1]).collect();
        let src: Vec<(u64, u64)> = sorted.iter().map(|p| addrs.src(p.raw)).collect();
        let dst: Vec<(u64, u64)> = sorted.iter().map(|p| addrs.dst(p.raw)).collect();
        let sid = self.host_ids(&src)?;
        let did = self.host_ids(&dst)?;
        for (r, p) in sorted.iter().enumerate() {
            let (a, b) = if p.d == 0 {
                (sid[r], did[r])
            } else {
                (did[r], sid[r])
            };
            let cold = Cold {
                first_ns: p.ts,
                host: [a as u32, b as u32],
                first_dir: p.d,
            };
            self.conns.push(Conn::new(p.proto, p.hlo, p.ports));
            self.cold.push(cold);
        }
        // file order: a key's last start is its current connection
        for (j, &(key, _)) in starts.iter().enumerate() {
            if let Some(e) = self.keys.get_mut(key as u64) {
                e.cur = finals[j] as u32;
            }
        }
        Ok(finals)
    }

    /// Host id per address; new addresses numbered in address-hash order.
    fn host_ids(&mut self, addrs: &[(u64, u64)]) -> Result<Vec<i64>, String> {
        let mut hs: Vec<(u64, usize)> = addrs
            .iter()
            .enumerate()
            .map(|(i, &(hi, lo))| (hash_addr(hi, lo), i))
            .collect();
        hs.sort_unstable();
        let mut ids = vec![0i64; addrs.len()];
        let mut k = 0;
        while k < hs.len() {
            let (h, first) = hs[k];
            let id = match self.host_of.get(&h) {
                Some(&id) => {
                    if self.host_addr[id as usize] != addrs[first] {
                        return Err("host address hash collision".into());
                    }
                    id
                }
                None => {
                    let id = self.host_addr.len() as i64;
                    if id >= u32::MAX as i64 {
                        return Err("too many hosts".into());
                    }
                    self.host_of.insert(h, id);
                    self.host_addr.push(addrs[first]);
                    id
                }
            };
            while k < hs.len() && hs[k].0 == h {
                ids[hs[k].1] = id;
                k += 1;
            }
        }
        Ok(ids)
    }

    /// Final connection ids (`finals`: per start of the chunk), the key hash-collision
    /// check, counters, first SYN and SYN/ACK. (After a collision error the chunk's
    /// state is left half-updated, as numpy leaves it; the error ends the extraction.)
    fn counters_and_syn(&mut self, pkts: &mut [Pkt], finals: &[i64]) -> Result<(), String> {
        let epoch = self.epoch;
        let fin = |cid: i64| {
            if cid < 0 {
                finals[(-1 - cid) as usize]
            } else {
                cid
            }
        };
        for p in pkts.iter_mut().take(AHEAD) {
            p.cid = fin(p.cid);
        }
        for j in 0..pkts.len() {
            if let Some(q) = pkts.get_mut(j + AHEAD) {
                q.cid = fin(q.cid);
                q.prefetch(&self.conns, false);
            }
            let p = &pkts[j];
            let c = &mut self.conns[p.cid as usize];
            if c.h_lo != p.hlo || c.ports != p.ports {
                return Err("connection key hash collision".into());
            }
            let dr = &mut c.dirs[p.d as usize];
            dr.pkts += 1;
            dr.wire += p.wire as i64;
            if p.flags & FIN != 0 {
                dr.flags |= FIN_SEEN;
            }
            if p.pl > dr.max_pl {
                dr.max_pl = p.pl;
            }
            c.last_ns = c.last_ns.max(p.ts);
            if p.flags & RST != 0 {
                c.rst = true;
            }
            if p.proto != TCP {
                continue;
            }
            let sa = p.flags & (SYN | ACK);
            if sa == SYN && c.syn_ns < 0 {
                c.syn_ns = p.ts;
                c.syn_dir = p.d as i8;
                c.client_isn = p.seq;
            } else if sa == SYN | ACK && c.synack_ns < 0 {
                c.synack_ns = p.ts;
                c.synack_dir = p.d as i8;
                c.sa_epoch = epoch;
                c.sa_pos = j as u32;
            }
        }
        Ok(())
    }

    /// Duplicates, sequence space, runs, acknowledgement-inferred runs, packet pairs.
    fn data(&mut self, pkts: &[Pkt]) {
        let epoch = self.epoch;
        for (j, p) in pkts.iter().enumerate() {
            if let Some(q) = pkts.get(j + AHEAD) {
                q.prefetch(&self.conns, true);
            }
            let tcp = p.proto == TCP;
            let c = &mut self.conns[p.cid as usize];
            if tcp && p.flags & (SYN | ACK) == ACK && c.ack_ns < 0 {
                handshake_ack(c, p, j, epoch);
            }
            let other = &mut c.dirs[1 - p.d as usize];
            let other_pkts = other.pkts;
            other.flags |= INTERRUPTED;
            let dr = &mut c.dirs[p.d as usize];
            let dup = dr.last_epoch == epoch && {
                let q = &pkts[dr.last_pkt as usize];
                q.seq == p.seq
                    && q.ack == p.ack
                    && q.pl == p.pl
                    && (p.ts.wrapping_sub(q.ts)).abs() <= DUP_NS
                    && q.flags == p.flags
            };
            dr.last_epoch = epoch;
            dr.last_pkt = j as u32;
            if dup {
                self.duplicates += 1;
            }
            if dr.flags & HAS_BASE == 0 {
                dr.base = p.seq.wrapping_add((p.flags & SYN != 0) as u32);
                dr.flags |= HAS_BASE;
            }
            let pl = p.pl as i64;
            let (mut nb, mut retx) = (0i64, false);
            if !tcp {
                if pl > 0 {
                    nb = pl;
                    dr.data_pkts += 1;
                    dr.new_bytes += pl;
                }
            } else if pl > 0 && !dup {
                let rel = wrap32(p.seq as i64 - dr.base as i64);
                let end = rel + pl;
                let prev = dr.max_end;
                let keepalive = pl == 1 && end == prev;
                retx = end <= prev && !keepalive;
                nb = if end <= prev { 0 } else { end - rel.max(prev) };
                dr.max_end = prev.max(end);
                dr.data_pkts += !keepalive as i64;
                dr.retx += retx as i64;
                dr.new_bytes += nb;
            }
            let (cid, d) = (p.cid, p.d);
            if nb > 0 {
                cut(&mut c.run, cid, d, p.ts, nb, &mut self.runs);
            }
            let dr = &mut c.dirs[d as usize];
            if tcp && other_pkts == 0 {
                let mut vb = 0;
                if p.flags & (SYN | ACK) == ACK {
                    if dr.flags & HAS_ACK_BASE == 0 {
                        dr.ack_base = p.ack;
                        dr.flags |= HAS_ACK_BASE;
                    }
                    let rel = wrap32(p.ack as i64 - dr.ack_base as i64);
                    let max_ack = dr.max_ack as i64;
                    let mut adv = (rel - max_ack).max(0);
                    if adv == 1 && (p.flags & FIN != 0 || dr.fin()) {
                        adv = 0;
                    }
                    // in [0, 2^31): fits
                    dr.max_ack = max_ack.max(rel) as u32;
                    dr.ack_adv += adv;
                    vb = adv;
                }
                if vb > 0 {
                    cut(&mut c.vrun, cid, 1 - d, p.ts, vb, &mut self.vruns);
                }
                if nb > 0 {
                    cut(&mut c.vrun, cid, d, p.ts, nb, &mut self.vruns);
                }
            }
            let dr = &mut c.dirs[d as usize];
            if tcp && pl > 0 && !dup {
                let (prev_ts, prev_pl) = (dr.prev_ts, dr.prev_pl);
                dr.prev_ts = p.ts;
                dr.prev_pl = p.pl;
                let gap = p.ts.wrapping_sub(prev_ts);
                let back_to_back = dr.flags & INTERRUPTED == 0;
                dr.flags &= !INTERRUPTED;
                if prev_ts >= 0
                    && back_to_back
                    && gap > 0
                    && p.pl == prev_pl
                    && p.pl == dr.max_pl
                    && p.pl >= PAIR_MIN_PAYLOAD
                    && !retx
                {
                    let host = self.cold[cid as usize].host[d as usize] as i64;
                    self.pair(host, p.iplen as f64 * 8e9 / gap as f64);
                }
            }
        }
    }

    /// Drop the per-connection state and finished runs (after export and pairs).
    pub fn release(&mut self) {
        self.conns = Conns::default();
        self.final_runs = None;
        self.cold = ColdList::default();
        self.runs = RunList::default();
        self.vruns = RunList::default();
        self.keys = KeyTable::default();
        self.host_of = Map::default();
    }

    fn pair(&mut self, host: i64, bps: f64) {
        let b = match cap_bin(&self.edges, bps) {
            Some(b) => b,
            None => {
                self.ambiguous.push((host, bps));
                return;
            }
        };
        *self.hist.entry(host * CAP_NBINS + b).or_insert(0) += 1;
    }
}

/// The packet-pair histogram's bin edges in bit/s: `10^(CAP_LOG_MIN + k / 40)`,
/// k = 0..=CAP_NBINS (each within an ulp).
fn cap_edges() -> Vec<f64> {
    (0..=CAP_NBINS)
        .map(|k| 10f64.powf(CAP_LOG_MIN + k as f64 / CAP_BINS_PER_DECADE))
        .collect()
}

/// The histogram bin of a capacity estimate, numpy's
/// `clip(int((log10(bps) - CAP_LOG_MIN) * 40), 0, CAP_NBINS - 1)`, without a
/// logarithm: an estimate of the bin from the float's exponent and mantissa (within
/// two bins), then comparisons with the edges. None when `bps` is within a relative
/// `AMBIGUOUS` of an inner edge (or not a positive finite number): numpy's `log10`
/// then decides (`extract/conntrack.py`). Elsewhere the comparison is exact while
/// numpy's value is off by ~1e-13 bins, so both give the same bin.
#[inline]
fn cap_bin(edges: &[f64], bps: f64) -> Option<i64> {
    if !(bps > 0.0 && bps.is_finite()) {
        return None;
    }
    let bits = bps.to_bits();
    let exp = ((bits >> 52) & 0x7FF) as i64 - 1023;
    let mant = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52)) - 1.0;
    // log2(bps) ~ exp + mant (error < 0.09, i.e. < 1.1 bins)
    let approx =
        ((exp as f64 + mant) * std::f64::consts::LOG10_2 - CAP_LOG_MIN) * CAP_BINS_PER_DECADE;
    let n = CAP_NBINS as usize;
    // k: the number of inner edges (1..n-1) at or below bps, i.e. the clipped bin
    let mut k = (approx.max(-1.0).min(n as f64) as i64).clamp(0, n as i64 - 1) as usize;
    while k > 0 && bps < edges[k] {
        k -= 1;
    }
    while k + 1 < n && bps >= edges[k + 1] {
        k += 1;
    }
    for e in [k, k + 1] {
        if (1..n).contains(&e) && (bps / edges[e] - 1.0).abs() < AMBIGUOUS {
            return None;
        }
    }
    Some(k as i64)
}

/// The client's first ACK of the handshake (numpy's `_handshake`, ACK part): after the
/// chunk's SYN/ACK if there is one, else (one direction seen) the ACK with seq ISN + 1.
fn handshake_ack(c: &mut Conn, p: &Pkt, j: usize, epoch: u32) {
    let d = p.d as i8;
    let after = if c.sa_epoch == epoch {
        c.sa_pos as i64
    } else {
        -1
    };
    let ok_sa = c.synack_dir >= 0 && d != c.synack_dir && j as i64 > after;
    let isn1 = (c.client_isn as i64 + 1) & 0xFFFF_FFFF;
    let ok_one = c.synack_dir < 0 && c.syn_dir >= 0 && d == c.syn_dir && p.seq as i64 == isn1;
    if ok_sa || ok_one {
        c.ack_ns = p.ts;
    }
}
