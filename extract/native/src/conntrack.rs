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
//! of a key or direction, the SYN/ACK position) carries an epoch number that
//! invalidates it at the next chunk.
//!
//! Connection ids are numbered as numpy numbers them (new connections of a
//! chunk sorted by key, then file order), host ids likewise (new addresses of
//! a chunk sorted by address hash, sources first), so the exported state can
//! be fed to the same `finish` code. Nothing is stored per packet beyond one
//! chunk of scratch. Request/response pairs are computed natively at the end
//! (`conntrack_pairs.rs`); packet-pair estimates that fall within 1e-7 of a
//! histogram bin edge are handed to Python for numpy's `log10`. The C ABI is in
//! `lib.rs` (`swell_ct_*`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

#[path = "conntrack_pairs.rs"]
mod pairs;
#[cfg(test)]
#[path = "conntrack_tests.rs"]
mod tests;

pub use pairs::{PairCols, Pairs};

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
const FIN: u8 = 1;
const SYN: u8 = 2;
const RST: u8 = 4;
const ACK: u8 = 16;
const PAIR_MIN_PAYLOAD: i64 = 500;
const DUP_NS: i64 = 200_000;
pub const CAP_BINS_PER_DECADE: f64 = 40.0;
pub const CAP_LOG_MIN: f64 = 4.0;
pub const CAP_NBINS: i64 = 280;
const NEG: i64 = -(1 << 62);
/// Bin positions this close to an integer are left to numpy (its log10 may round
/// differently from libm's by an ulp).
const AMBIGUOUS: f64 = 1e-7;

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

/// The open request/response run of a stream (real data or ack-inferred).
#[derive(Clone, Copy, Default)]
pub struct Run {
    pub open: bool,
    pub dir: i64,
    pub bytes: i64,
    pub t0: i64,
    pub t1: i64,
    pub seq: i64,
    pub pkts: i64,
}

/// A finished run, compact (its packet count and sequence number are not kept).
#[derive(Clone, Copy)]
pub struct DoneRun {
    cid_dir: u64,
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

/// Per-direction state (numpy's `gdir` row).
#[derive(Clone, Copy)]
pub struct Dir {
    pub pkts: i64,
    pub wire: i64,
    pub data_pkts: i64,
    pub retx: i64,
    pub new_bytes: i64,
    pub base: i64,
    pub has_base: bool,
    pub max_end: i64,
    pub fin: bool,
    pub max_pl: i64,
    pub prev_ts: i64,
    pub prev_pl: i64,
    pub ack_base: i64,
    pub has_ack_base: bool,
    pub max_ack: i64,
    pub ack_adv: i64,
    last_epoch: u32,
    last_pkt: u32,
}

impl Default for Dir {
    fn default() -> Self {
        Dir {
            pkts: 0,
            wire: 0,
            data_pkts: 0,
            retx: 0,
            new_bytes: 0,
            base: 0,
            has_base: false,
            max_end: NEG,
            fin: false,
            max_pl: 0,
            prev_ts: -1,
            prev_pl: 0,
            ack_base: 0,
            has_ack_base: false,
            max_ack: 0,
            ack_adv: 0,
            last_epoch: 0,
            last_pkt: 0,
        }
    }
}

/// Per-connection state (numpy's `conn` row plus its two directions).
#[derive(Clone, Copy)]
pub struct Conn {
    pub proto: u8,
    pub ep_lo: i64,
    pub ep_hi: i64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub syn_ns: i64,
    pub synack_ns: i64,
    pub ack_ns: i64,
    pub syn_dir: i64,
    pub synack_dir: i64,
    pub first_dir: i64,
    pub client_isn: i64,
    pub rst: bool,
    pub h_lo: i64,
    pub ports: i64,
    pub run: Run,
    pub vrun: Run,
    pub dirs: [Dir; 2],
    sa_epoch: u32,
    sa_pos: u32,
}

/// A 5-tuple key's current connection, and where its per-chunk state is.
#[derive(Clone, Copy)]
struct KeyEntry {
    cur: i64,
    epoch: u32,
    local: u32,
}

/// Per-chunk state of a key (numpy's per-group values in `_assign`).
#[derive(Clone, Copy)]
struct KeyLocal {
    start_cur: i64,
    live: i64,
    prev_ts: i64,
    isn_now: i64,
    isn_set: bool,
}

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

#[derive(Clone, Copy, Default)]
struct Pkt {
    raw: u32,
    ts: i64,
    d: u8,
    proto: u8,
    flags: u8,
    hlo: u64,
    ports: i64,
    key: u64,
    seq: i64,
    ack: i64,
    pl: i64,
    iplen: i64,
    wire: i64,
    cid: i64,
}

/// A chunk's packets selected for tracking (TCP/UDP with a transport header, no
/// fragments), with the skipped counts. Needs no tracker state, so the reader's thread
/// can fill it while the tracker works on the previous chunk.
#[derive(Default)]
pub struct Prepared {
    pkts: Vec<Pkt>,
    skipped: [i64; 4],
    n: usize,
}

impl Prepared {
    pub fn fill(&mut self, ch: &Chunk) {
        self.pkts.clear();
        self.skipped = [0; 4];
        self.n = ch.ts_ns.len();
        for i in 0..self.n {
            let p = ch.proto[i];
            if ch.ipver[i] == 0 {
                self.skipped[0] += 1;
            } else if p != TCP && p != UDP {
                self.skipped[1] += 1;
            } else if ch.frag[i] & 4 != 0 {
                self.skipped[3] += 1;
            } else if ch.l4_ok[i] == 0 {
                self.skipped[2] += 1;
            } else {
                self.pkts.push(packet(ch, i));
            }
        }
    }
}

/// The tracker: state of every connection so far, finished runs, histogram.
pub struct Tracker {
    udp_idle_ns: i64,
    tcp_idle_ns: i64,
    pub conns: Vec<Conn>,
    keys: Map<u64, KeyEntry>,
    host_of: Map<u64, i64>,
    pub host_addr: Vec<(u64, u64)>,
    pub runs: Vec<DoneRun>,
    pub vruns: Vec<DoneRun>,
    run_counter: i64,
    pub hist: Map<i64, i64>,
    /// Packet-pair estimates whose bin numpy decides: (host, bits per second).
    pub ambiguous: Vec<(i64, f64)>,
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
}

fn hash_addr(hi: u64, lo: u64) -> u64 {
    hi.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lo
}

fn wrap32(x: i64) -> i64 {
    ((x + (1 << 31)) & 0xFFFF_FFFF) - (1 << 31)
}

fn cut(r: &mut Run, cid: i64, dir: i64, ts: i64, nb: i64, sink: &mut Vec<DoneRun>, ctr: &mut i64) {
    if r.open && r.dir == dir {
        r.bytes += nb;
        r.pkts += 1;
        r.t1 = ts;
        return;
    }
    if r.open {
        let cid_dir = (cid as u64) << 1 | (r.dir & 1) as u64;
        sink.push(DoneRun {
            cid_dir,
            bytes: r.bytes,
            t0: r.t0,
            t1: r.t1,
        });
    }
    *r = Run {
        open: true,
        dir,
        bytes: nb,
        t0: ts,
        t1: ts,
        seq: *ctr,
        pkts: 1,
    };
    *ctr += 1;
}

impl Tracker {
    pub fn new(udp_idle_ns: i64, tcp_idle_ns: i64) -> Self {
        Tracker {
            udp_idle_ns,
            tcp_idle_ns,
            conns: Vec::new(),
            keys: Map::default(),
            host_of: Map::default(),
            host_addr: Vec::new(),
            runs: Vec::new(),
            vruns: Vec::new(),
            run_counter: 0,
            hist: Map::default(),
            ambiguous: Vec::new(),
            t0_ns: None,
            packets: 0,
            duplicates: 0,
            skipped: [0; 4],
            epoch: 0,
            pkts: Vec::new(),
            locals: Vec::new(),
            pending_pairs: None,
        }
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
        let n = ch.ts_ns.len();
        if n == 0 {
            return Ok(());
        }
        if prep.n != n {
            return Err("prepared packets are not this chunk's".into());
        }
        self.packets += n as i64;
        self.epoch = self.epoch.wrapping_add(1).max(1);
        for (s, k) in self.skipped.iter_mut().zip(prep.skipped) {
            *s += k;
        }
        if prep.pkts.is_empty() {
            return Ok(());
        }
        self.process(ch, &mut prep.pkts)
    }

    fn process(&mut self, ch: &Chunk, pkts: &mut [Pkt]) -> Result<(), String> {
        if self.t0_ns.is_none() {
            self.t0_ns = Some(pkts[0].ts);
        }
        self.assign(ch, pkts)?;
        self.counters_and_syn(pkts)?;
        self.data(pkts);
        Ok(())
    }

    /// Connection id per packet: numpy's `_assign` (splits on idle gaps and new ISNs).
    fn assign(&mut self, ch: &Chunk, pkts: &mut [Pkt]) -> Result<(), String> {
        let epoch = self.epoch;
        let mut starts: Vec<(i64, usize)> = Vec::new();
        let mut locals = std::mem::take(&mut self.locals);
        locals.clear();
        for (j, p) in pkts.iter_mut().enumerate() {
            let k = self.keys.entry(p.key).or_insert(KeyEntry {
                cur: -1,
                epoch: 0,
                local: 0,
            });
            let gstart = k.epoch != epoch;
            if gstart {
                k.epoch = epoch;
                k.local = locals.len() as u32;
                locals.push(KeyLocal {
                    start_cur: k.cur,
                    live: k.cur,
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
                if !e.isn_set {
                    e.isn_now = if e.start_cur >= 0 {
                        self.conns[e.start_cur as usize].client_isn
                    } else {
                        -1
                    };
                    e.isn_set = true;
                }
                if !st && (!gstart || e.start_cur >= 0) && e.isn_now != p.seq {
                    st = true;
                }
                e.isn_now = p.seq;
            }
            e.prev_ts = p.ts;
            if st {
                e.live = -1 - starts.len() as i64;
                starts.push((p.key as i64, j));
            }
            p.cid = e.live;
        }
        self.locals = locals;
        if starts.is_empty() {
            return Ok(());
        }
        let finals = self.new_conns(ch, pkts, &starts)?;
        for p in pkts.iter_mut() {
            if p.cid < 0 {
                p.cid = finals[(-1 - p.cid) as usize];
            }
        }
        for (j, &(key, _)) in starts.iter().enumerate() {
            if let Some(e) = self.keys.get_mut(&(key as u64)) {
                e.cur = finals[j];
            }
        }
        Ok(())
    }

    /// Create the connections started in a chunk, numbered in (key, file order) order.
    fn new_conns(
        &mut self,
        ch: &Chunk,
        pkts: &[Pkt],
        starts: &[(i64, usize)],
    ) -> Result<Vec<i64>, String> {
        let mut order: Vec<usize> = (0..starts.len()).collect();
        order.sort_by_key(|&j| starts[j].0);
        let base = self.conns.len() as i64;
        let mut finals = vec![0i64; starts.len()];
        for (r, &j) in order.iter().enumerate() {
            finals[j] = base + r as i64;
        }
        let sorted: Vec<&Pkt> = order.iter().map(|&j| &pkts[starts[j].1]).collect();
        let src: Vec<(u64, u64)> = sorted
            .iter()
            .map(|p| (ch.saddr_hi[p.raw as usize], ch.saddr_lo[p.raw as usize]))
            .collect();
        let dst: Vec<(u64, u64)> = sorted
            .iter()
            .map(|p| (ch.daddr_hi[p.raw as usize], ch.daddr_lo[p.raw as usize]))
            .collect();
        let sid = self.host_ids(&src)?;
        let did = self.host_ids(&dst)?;
        for (r, p) in sorted.iter().enumerate() {
            let (a, b) = if p.d == 0 {
                (sid[r], did[r])
            } else {
                (did[r], sid[r])
            };
            self.conns.push(Conn {
                proto: p.proto,
                ep_lo: a << 16 | (p.ports >> 16),
                ep_hi: b << 16 | (p.ports & 0xFFFF),
                first_ns: p.ts,
                last_ns: 0,
                syn_ns: -1,
                synack_ns: -1,
                ack_ns: -1,
                syn_dir: -1,
                synack_dir: -1,
                first_dir: p.d as i64,
                client_isn: -1,
                rst: false,
                h_lo: p.hlo as i64,
                ports: p.ports,
                run: Run::default(),
                vrun: Run::default(),
                dirs: [Dir::default(), Dir::default()],
                sa_epoch: 0,
                sa_pos: 0,
            });
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

    /// Hash-collision check, counters, first SYN and SYN/ACK (before anything else, as
    /// numpy: the chunk's state is left half-updated after an error).
    fn counters_and_syn(&mut self, pkts: &[Pkt]) -> Result<(), String> {
        let epoch = self.epoch;
        for p in pkts.iter() {
            let c = &self.conns[p.cid as usize];
            if c.h_lo != p.hlo as i64 || c.ports != p.ports {
                return Err("connection key hash collision".into());
            }
        }
        for (j, p) in pkts.iter().enumerate() {
            let c = &mut self.conns[p.cid as usize];
            let dr = &mut c.dirs[p.d as usize];
            dr.pkts += 1;
            dr.wire += p.wire;
            if p.flags & FIN != 0 {
                dr.fin = true;
            }
            if p.pl > 0 && p.pl > dr.max_pl {
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
                c.syn_dir = p.d as i64;
                c.client_isn = p.seq;
            } else if sa == SYN | ACK && c.synack_ns < 0 {
                c.synack_ns = p.ts;
                c.synack_dir = p.d as i64;
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
            let tcp = p.proto == TCP;
            let c = &mut self.conns[p.cid as usize];
            if tcp && p.flags & (SYN | ACK) == ACK && c.ack_ns < 0 {
                handshake_ack(c, p, j, epoch);
            }
            let other_pkts = c.dirs[1 - p.d as usize].pkts;
            let (ep_lo, ep_hi) = (c.ep_lo, c.ep_hi);
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
            if !dr.has_base {
                dr.base = p.seq + (p.flags & SYN != 0) as i64;
                dr.has_base = true;
            }
            let (mut nb, mut retx) = (0i64, false);
            if !tcp {
                if p.pl > 0 {
                    nb = p.pl;
                    dr.data_pkts += 1;
                    dr.new_bytes += p.pl;
                }
            } else if p.pl > 0 && !dup {
                let rel = wrap32(p.seq - dr.base);
                let end = rel + p.pl;
                let prev = dr.max_end;
                let keepalive = p.pl == 1 && end == prev;
                retx = end <= prev && !keepalive;
                nb = if end <= prev { 0 } else { end - rel.max(prev) };
                dr.max_end = prev.max(end);
                dr.data_pkts += !keepalive as i64;
                dr.retx += retx as i64;
                dr.new_bytes += nb;
            }
            let (cid, d) = (p.cid, p.d as i64);
            if nb > 0 {
                cut(
                    &mut c.run,
                    cid,
                    d,
                    p.ts,
                    nb,
                    &mut self.runs,
                    &mut self.run_counter,
                );
            }
            let dr = &mut c.dirs[p.d as usize];
            if tcp && other_pkts == 0 {
                let mut vb = 0;
                if p.flags & (SYN | ACK) == ACK {
                    if !dr.has_ack_base {
                        dr.ack_base = p.ack;
                        dr.has_ack_base = true;
                    }
                    let rel = wrap32(p.ack - dr.ack_base);
                    let mut adv = (rel - dr.max_ack).max(0);
                    if adv == 1 && (p.flags & FIN != 0 || dr.fin) {
                        adv = 0;
                    }
                    dr.max_ack = dr.max_ack.max(rel);
                    dr.ack_adv += adv;
                    vb = adv;
                }
                let (sink, ctr) = (&mut self.vruns, &mut self.run_counter);
                if vb > 0 {
                    cut(&mut c.vrun, cid, 1 - d, p.ts, vb, sink, ctr);
                }
                if nb > 0 {
                    cut(&mut c.vrun, cid, d, p.ts, nb, sink, ctr);
                }
            }
            let dr = &mut c.dirs[p.d as usize];
            if tcp && p.pl > 0 && !dup {
                let (prev_ts, prev_pl) = (dr.prev_ts, dr.prev_pl);
                dr.prev_ts = p.ts;
                dr.prev_pl = p.pl;
                let gap = p.ts.wrapping_sub(prev_ts);
                if prev_ts >= 0
                    && gap > 0
                    && p.pl == prev_pl
                    && p.pl == dr.max_pl
                    && p.pl >= PAIR_MIN_PAYLOAD
                    && !retx
                {
                    let host = (if d == 0 { ep_lo } else { ep_hi }) >> 16;
                    self.pair(host, p.iplen as f64 * 8e9 / gap as f64);
                }
            }
        }
    }

    /// Drop the per-connection state and finished runs (after export and pairs).
    pub fn release(&mut self) {
        self.conns = Vec::new();
        self.runs = Vec::new();
        self.vruns = Vec::new();
        self.keys = Map::default();
        self.host_of = Map::default();
    }

    fn pair(&mut self, host: i64, bps: f64) {
        let x = (bps.log10() - CAP_LOG_MIN) * CAP_BINS_PER_DECADE;
        if (x - x.round()).abs() < AMBIGUOUS {
            self.ambiguous.push((host, bps));
            return;
        }
        let b = (x as i64).clamp(0, CAP_NBINS - 1);
        *self.hist.entry(host * CAP_NBINS + b).or_insert(0) += 1;
    }
}

/// The client's first ACK of the handshake (numpy's `_handshake`, ACK part): after the
/// chunk's SYN/ACK if there is one, else (one direction seen) the ACK with seq ISN + 1.
fn handshake_ack(c: &mut Conn, p: &Pkt, j: usize, epoch: u32) {
    let d = p.d as i64;
    let after = if c.sa_epoch == epoch {
        c.sa_pos as i64
    } else {
        -1
    };
    let ok_sa = c.synack_dir >= 0 && d != c.synack_dir && j as i64 > after;
    let isn1 = (c.client_isn + 1) & 0xFFFF_FFFF;
    let ok_one = c.synack_dir < 0 && c.syn_dir >= 0 && d == c.syn_dir && p.seq == isn1;
    if ok_sa || ok_one {
        c.ack_ns = p.ts;
    }
}

fn packet(ch: &Chunk, i: usize) -> Pkt {
    let hs = hash_addr(ch.saddr_hi[i], ch.saddr_lo[i]);
    let hd = hash_addr(ch.daddr_hi[i], ch.daddr_lo[i]);
    let (sp, dp) = (ch.sport[i] as i64, ch.dport[i] as i64);
    let d = (hs > hd || (hs == hd && sp > dp)) as u8;
    let (hlo, hhi) = if d == 0 { (hs, hd) } else { (hd, hs) };
    let ports = if d == 0 { sp << 16 | dp } else { dp << 16 | sp };
    let proto = ch.proto[i];
    let key = hlo
        .wrapping_mul(0xBF58_476D_1CE4_E5B9)
        .wrapping_add(hhi.wrapping_mul(0x94D0_49BB_1331_11EB))
        .wrapping_add((ports as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
        .wrapping_add(proto as u64);
    Pkt {
        raw: i as u32,
        ts: ch.ts_ns[i],
        d,
        proto,
        flags: if proto == TCP { ch.tcp_flags[i] } else { 0 },
        hlo,
        ports,
        key,
        seq: ch.seq[i] as i64,
        ack: ch.ack[i] as i64,
        pl: ch.payload_len[i] as i64,
        iplen: ch.ip_len[i] as i64,
        wire: ch.wirelen[i] as i64,
        cid: 0,
    }
}
