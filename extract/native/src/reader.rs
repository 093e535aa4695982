//! Capture-file framing: classic pcap (micro/nanosecond, either byte order,
//! the "modified" Kuznetzov variant) and pcapng (several sections and
//! interfaces, per-interface link type, `if_tsresol` and `if_tsoffset`;
//! EPB, SPB and the obsolete PB).
//!
//! `Reader::read` fills up to `cap` rows of caller-owned columns and returns
//! how many it wrote; 0 means the end. A damaged file never panics: framing
//! problems end the read with a counted reason (`truncated_last_record`,
//! `corrupt_record`, `corrupt_block`, ...), packet problems are counted and the
//! packet is still returned.

use std::io::{self, Read};

use crate::columns::{Meta, Sink};
use crate::dissect::{dissect, linktype_known, Row};
use crate::resync::{
    block_chain, header_chain, plausible_header, rd16, rd32, RESYNC_CHAIN, RESYNC_WINDOW, SHB,
};
use crate::source::Source;
use crate::warn::{Warn, Warnings};

const BUF_SIZE: usize = 4 << 20;
/// Larger records are taken as corruption (libpcap's own limit is 256 KiB).
const MAX_RECORD: usize = 16 << 20;
const MAX_BLOCK: usize = 64 << 20;
/// libpcap's largest snap length; longer records are corrupt unless the
/// file's snap length allows them.
const RESYNC_MAX_CAPLEN: usize = 262_144;
const DAY_NS: i64 = 86_400 * 1_000_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsRes {
    Pow10(u8),
    Pow2(u8),
}

impl TsRes {
    fn from_option(b: u8) -> TsRes {
        if b & 0x80 != 0 {
            TsRes::Pow2(b & 0x7f)
        } else {
            TsRes::Pow10(b)
        }
    }

    pub fn seconds(self) -> f64 {
        match self {
            TsRes::Pow10(n) => 10f64.powi(-(n as i32)),
            TsRes::Pow2(n) => 2f64.powi(-(n as i32)),
        }
    }

    fn to_ns(self, units: u64) -> i128 {
        let u = units as i128;
        match self {
            TsRes::Pow10(n) if n <= 9 => u * 10i128.pow(9 - n as u32),
            TsRes::Pow10(n) if n <= 47 => u / 10i128.pow(n as u32 - 9),
            TsRes::Pow10(_) => 0,
            TsRes::Pow2(n) => (u * 1_000_000_000) >> n,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Iface {
    pub linktype: u16,
    pub snaplen: u32,
    pub tsres: TsRes,
    pub ts_offset_s: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Pcap { nano: bool, modified: bool },
    Pcapng,
}

/// Running totals over the packets returned so far.
#[derive(Debug, Default)]
pub struct Stats {
    pub warnings: Warnings,
    pub packets: u64,
    pub bytes_wire: u64,
    pub bytes_cap: u64,
    pub min_ts: i64,
    pub max_ts: i64,
    prev_ts: Option<i64>,
}

pub struct Reader {
    src: Source,
    pub format: Format,
    be: bool,
    pub ifaces: Vec<Iface>,
    section_base: usize,
    pub snaplen: u32,
    pub stats: Stats,
    done: bool,
    /// File offset of the first damage (a record or block not returned, a
    /// truncated end): what the commands report beside the counts.
    pub first_damage: Option<u64>,
    /// When kept (`Some`): the file offset of each packet's captured bytes among
    /// the rows of the last `read`, in row order (replay copies them from the file).
    pub offsets: Option<Vec<u64>>,
}

fn rd64(be: bool, d: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[o..o + 8]);
    if be {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

fn clamp_ns(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Decode one packet and store it in row `i`; update the totals.
fn store(st: &mut Stats, cols: &mut impl Sink, i: usize, m: &Meta, data: &[u8]) {
    let mut row = Row::default();
    if let Some(w) = dissect(data, m.linktype, m.wirelen, &mut row) {
        st.warnings.add(w);
    }
    if m.caplen > m.wirelen {
        st.warnings.add(Warn::CaplenExceedsWirelen);
    }
    match st.prev_ts {
        None => {
            st.min_ts = m.ts_ns;
            st.max_ts = m.ts_ns;
        }
        Some(p) => {
            if m.ts_ns < p {
                st.warnings.add(Warn::TsBackwards);
            }
            if m.ts_ns.saturating_sub(p).saturating_abs() > DAY_NS {
                st.warnings.add(Warn::TsJump);
            }
            st.min_ts = st.min_ts.min(m.ts_ns);
            st.max_ts = st.max_ts.max(m.ts_ns);
        }
    }
    st.prev_ts = Some(m.ts_ns);
    st.packets += 1;
    st.bytes_wire += m.wirelen as u64;
    st.bytes_cap += m.caplen as u64;
    cols.put(i, m, &row);
}

impl Reader {
    /// Check the file header; `Err` is a one-line reason the file is unusable.
    pub fn open(inner: Box<dyn Read + Send>) -> Result<Reader, String> {
        let mut src = Source::new(inner, BUF_SIZE);
        let full = src.fill(24).map_err(|e| format!("read error: {e}"))?;
        let have = src.available();
        if have == 0 {
            return Err("empty file (0 bytes)".into());
        }
        if have < 4 {
            return Err(format!("too short for a capture file ({have} bytes)"));
        }
        let mut hdr = [0u8; 24];
        hdr[..have.min(24)].copy_from_slice(src.peek(have.min(24)));
        let h = &hdr[..];
        let magic = [h[0], h[1], h[2], h[3]];
        let mut r = Reader {
            src,
            format: Format::Pcapng,
            be: false,
            ifaces: Vec::new(),
            section_base: 0,
            first_damage: None,
            offsets: None,
            snaplen: 0,
            stats: Stats::default(),
            done: false,
        };
        if u32::from_le_bytes(magic) == SHB {
            if have < 12 {
                return Err("truncated pcapng section header".into());
            }
            if !matches!(
                &h[8..12],
                [0x1a, 0x2b, 0x3c, 0x4d] | [0x4d, 0x3c, 0x2b, 0x1a]
            ) {
                return Err("pcapng section header with a bad byte-order magic".into());
            }
        } else {
            let (be, nano, modified) = match magic {
                [0xd4, 0xc3, 0xb2, 0xa1] => (false, false, false),
                [0xa1, 0xb2, 0xc3, 0xd4] => (true, false, false),
                [0x4d, 0x3c, 0xb2, 0xa1] => (false, true, false),
                [0xa1, 0xb2, 0x3c, 0x4d] => (true, true, false),
                [0x34, 0xcd, 0xb2, 0xa1] => (false, false, true),
                [0xa1, 0xb2, 0xcd, 0x34] => (true, false, true),
                [0x1f, 0x8b, ..] => return Err("gzip-compressed file: gunzip it first".into()),
                [0x28, 0xb5, 0x2f, 0xfd] => {
                    return Err("zstd-compressed file: unzstd it first".into())
                }
                [0xfd, 0x37, 0x7a, 0x58] => return Err("xz-compressed file: unxz it first".into()),
                _ => {
                    let m = u32::from_be_bytes(magic);
                    return Err(format!("not a pcap or pcapng file (magic 0x{m:08x})"));
                }
            };
            if !full {
                return Err(format!("truncated pcap file header ({have} of 24 bytes)"));
            }
            r.format = Format::Pcap { nano, modified };
            r.be = be;
            r.snaplen = rd32(be, h, 16);
            let tsres = TsRes::Pow10(if nano { 9 } else { 6 });
            let linktype = rd32(be, h, 20) as u16;
            r.ifaces.push(Iface {
                linktype,
                snaplen: r.snaplen,
                tsres,
                ts_offset_s: 0,
            });
            r.src.consume(24);
        }
        // Process leading pcapng blocks (interfaces) so they are known before any packet.
        let mut none = crate::columns::OwnedColumns::default();
        r.read(&mut none.view())
            .map_err(|e| format!("read error: {e}"))?;
        Ok(r)
    }

    /// Fill up to the sink's capacity (the columns a Python read fills, or a native
    /// consumer such as the connection tracker's selection); 0 rows means the end of
    /// the file.
    pub fn read(&mut self, cols: &mut impl Sink) -> io::Result<usize> {
        if let Some(v) = self.offsets.as_mut() {
            v.clear();
        }
        if self.done {
            return Ok(0);
        }
        match self.format {
            Format::Pcap { nano, modified } => self.read_pcap(cols, nano, modified),
            Format::Pcapng => self.read_pcapng(cols),
        }
    }

    fn finish(&mut self, w: Option<Warn>) {
        if let Some(w) = w {
            self.damage(w);
        }
        self.done = true;
    }

    /// Count a damage warning and remember where the first one was.
    fn damage(&mut self, w: Warn) {
        damage_at(&mut self.stats, &mut self.first_damage, self.src.offset, w);
    }

    fn read_pcap(&mut self, cols: &mut impl Sink, nano: bool, modified: bool) -> io::Result<usize> {
        let hl = if modified { 24 } else { 16 };
        let be = self.be;
        let linktype = self.ifaces[0].linktype;
        let mut n = 0;
        while n < cols.capacity() {
            if !self.src.fill(hl)? {
                let tail = self.src.available() > 0;
                self.finish(tail.then_some(Warn::TruncatedLastRecord));
                break;
            }
            let h = self.src.peek(hl);
            let caplen = rd32(be, h, 8) as usize;
            // Longer than its wire length or the snap length: either alone happens
            // (odd writers), so the record must be followed by plausible headers;
            // both at once is a damaged length.
            let over_wire = caplen > rd32(be, h, 12) as usize;
            let over_snap = self.snaplen > 0 && caplen > self.snaplen as usize;
            let corrupt = caplen > self.max_caplen()
                || (over_wire && over_snap)
                || ((over_wire || over_snap) && !self.record_follows(hl, nano, caplen)?);
            if corrupt {
                self.damage(Warn::CorruptRecord);
                if !self.resync(hl, nano)? {
                    self.finish(None);
                    break;
                }
                continue;
            }
            if !self.src.fill(hl + caplen)? {
                self.finish(Some(Warn::TruncatedLastRecord));
                break;
            }
            let rec = self.src.peek(hl + caplen);
            let frac = rd32(be, rec, 4) as i64 * if nano { 1 } else { 1000 };
            let m = Meta {
                ts_ns: rd32(be, rec, 0) as i64 * 1_000_000_000 + frac,
                caplen: caplen as u32,
                wirelen: rd32(be, rec, 12),
                iface: 0,
                linktype,
            };
            store(&mut self.stats, cols, n, &m, &rec[hl..]);
            let at = self.src.offset + hl as u64;
            if let Some(v) = self.offsets.as_mut() {
                v.push(at);
            }
            self.src.consume(hl + caplen);
            n += 1;
        }
        Ok(n)
    }

    /// libpcap's rule: a record longer than max(snaplen, 256 KiB) is corrupt.
    fn max_caplen(&self) -> usize {
        (self.snaplen as usize).clamp(RESYNC_MAX_CAPLEN, MAX_RECORD)
    }

    /// After a corrupt record header, skip to the next offset (within
    /// `RESYNC_WINDOW` bytes) where a chain of `RESYNC_CHAIN` consecutive record
    /// headers looks valid (or a shorter chain that ends exactly at the end of
    /// the file). The first candidate is where the record would end if its wire
    /// length were its captured length (a record whose length field alone was
    /// damaged then costs exactly one packet); then every offset in order. One
    /// plausible header inside a payload is common; a chain of them is not.
    /// Skipped bytes are counted; false when no such offset is found.
    fn resync(&mut self, hl: usize, nano: bool) -> io::Result<bool> {
        let whole = !self.src.fill(RESYNC_WINDOW)?;
        let avail = self.src.available();
        let buf = self.src.peek(avail);
        let prev_sec = self.stats.prev_ts.map(|t| t.div_euclid(1_000_000_000));
        let limit = self.max_caplen();
        let ok = |h: &[u8]| plausible_header(self.be, nano, limit, MAX_RECORD, prev_sec, h);
        let chain = |p: usize| header_chain(buf, whole, hl, p, &ok);
        let wirelen = rd32(self.be, buf, 12) as usize;
        let hint = (wirelen <= limit).then_some(hl + wirelen);
        // the window bounds the search whatever the source happens to hold
        let end = avail.min(RESYNC_WINDOW).saturating_sub(hl);
        let found = hint
            .filter(|&p| p < avail.min(RESYNC_WINDOW) && chain(p))
            .or_else(|| (1..end).find(|&p| chain(p)));
        let skip = found.unwrap_or(0);
        self.stats.warnings.counts[Warn::ResyncSkippedBytes as usize] += skip as u64;
        self.src.consume(skip);
        Ok(found.is_some())
    }

    /// Whether a record whose captured length exceeds its wire length or the
    /// file's snap length (allowed, but also what a damaged length looks like) is
    /// followed by a chain of plausible headers, or ends the file exactly.
    fn record_follows(&mut self, hl: usize, nano: bool, caplen: usize) -> io::Result<bool> {
        let want = hl + caplen + RESYNC_CHAIN * (hl + self.snaplen.max(1) as usize);
        let whole = !self
            .src
            .fill(want.min(RESYNC_WINDOW.max(hl + caplen + hl)))?;
        let avail = self.src.available();
        let buf = self.src.peek(avail);
        let prev_sec = self.stats.prev_ts.map(|t| t.div_euclid(1_000_000_000));
        let limit = self.max_caplen();
        let ok = |h: &[u8]| plausible_header(self.be, nano, limit, MAX_RECORD, prev_sec, h);
        let next = hl + caplen;
        Ok((whole && next == avail) || (next < avail && header_chain(buf, whole, hl, next, &ok)))
    }

    /// pcapng blocks. A block whose leading length is impossible, whose trailing
    /// length differs with no plausible block where the leading one says the next
    /// starts, or which runs past the end of the file while a real block follows
    /// inside it, is damage: counted (`corrupt_block`, plus `corrupt_record` for a
    /// packet block) and skipped by resyncing at the next plausible chain of blocks
    /// (`resync.rs`), so one bad length costs one block. A trailing length alone
    /// damaged costs nothing (the block is read, `corrupt_block` counted).
    fn read_pcapng(&mut self, cols: &mut impl Sink) -> io::Result<usize> {
        let mut n = 0;
        loop {
            if !self.src.fill(8)? {
                let tail = self.src.available() > 0;
                self.finish(tail.then_some(Warn::TruncatedBlock));
                break;
            }
            let h = self.src.peek(8);
            let btype = rd32(self.be, h, 0);
            let is_packet = matches!(btype, 2 | 3 | 6);
            if is_packet && n >= cols.capacity() {
                break;
            }
            let mut sane = true;
            if btype == SHB {
                if !self.src.fill(12)? {
                    self.finish(Some(Warn::TruncatedBlock));
                    break;
                }
                match self.src.peek(12)[8..12] {
                    [0x1a, 0x2b, 0x3c, 0x4d] => self.be = true,
                    [0x4d, 0x3c, 0x2b, 0x1a] => self.be = false,
                    _ => sane = false,
                }
            }
            let blen = rd32(self.be, self.src.peek(8), 4) as usize;
            sane &= blen >= 12 && blen.is_multiple_of(4) && blen <= MAX_BLOCK;
            let filled = sane && self.src.fill(blen)?;
            if sane && !filled && !self.resync_found()? {
                self.finish(Some(if is_packet {
                    Warn::TruncatedLastRecord
                } else {
                    Warn::TruncatedBlock
                }));
                break;
            }
            if !filled || !self.trailer_ok(blen)? {
                if self.skip_damaged_block(is_packet)? {
                    continue;
                }
                break;
            }
            if btype == SHB {
                self.section_base = self.ifaces.len();
            }
            if self.block(btype, blen, cols, n) {
                n += 1;
            }
            self.src.consume(blen);
        }
        Ok(n)
    }

    /// Whether the complete block at the read position (`blen` bytes) can be
    /// trusted: its trailing length matches; or it does not, and the block does not
    /// end earlier (no offset `p` inside it holds `p` as a trailing length with a
    /// chain of plausible blocks after it: a damaged leading length that lands on a
    /// later block boundary) while a chain starts where its leading length ends it
    /// (then only the trailer was damaged).
    fn trailer_ok(&mut self, blen: usize) -> io::Result<bool> {
        let be = self.be;
        if rd32(be, self.src.peek(blen), blen - 4) as usize == blen {
            return Ok(true);
        }
        let whole = !self.src.fill(blen + RESYNC_WINDOW)?;
        let buf = self.src.peek(self.src.available());
        let ends_earlier = (12..blen).step_by(4).any(|p| {
            rd32(be, buf, p - 4) as usize == p && block_chain(buf, whole, p, be, MAX_BLOCK)
        });
        Ok(!ends_earlier
            && ((whole && buf.len() == blen) || block_chain(buf, whole, blen, be, MAX_BLOCK)))
    }

    /// A damaged block at the read position: count it, then resync; false (and the
    /// read ends) when no plausible block follows within the window.
    fn skip_damaged_block(&mut self, is_packet: bool) -> io::Result<bool> {
        self.damage(Warn::CorruptBlock);
        if is_packet {
            self.stats.warnings.add(Warn::CorruptRecord);
        }
        let found = self.resync_block()?;
        if !found {
            self.finish(None);
        }
        Ok(found)
    }

    /// The offset (after the read position, within `RESYNC_WINDOW`) of the first
    /// chain of plausible pcapng blocks, if any.
    fn next_block(&mut self) -> io::Result<Option<usize>> {
        let whole = !self.src.fill(RESYNC_WINDOW)?;
        let avail = self.src.available();
        let buf = self.src.peek(avail);
        let end = avail.min(RESYNC_WINDOW).saturating_sub(11);
        Ok((1..end).find(|&p| block_chain(buf, whole, p, self.be, MAX_BLOCK)))
    }

    /// Whether a real block starts inside the one at the read position (whose
    /// length runs past the end of the file): then that length is damaged.
    fn resync_found(&mut self) -> io::Result<bool> {
        Ok(self.next_block()?.is_some())
    }

    /// Skip to the next plausible block; skipped bytes are counted. False when
    /// there is none within the window.
    fn resync_block(&mut self) -> io::Result<bool> {
        let found = self.next_block()?;
        let skip = found.unwrap_or(0);
        self.stats.warnings.counts[Warn::ResyncSkippedBytes as usize] += skip as u64;
        self.src.consume(skip);
        Ok(found.is_some())
    }

    /// Handle one complete block at the read position; true if a row was stored.
    fn block(&mut self, btype: u32, blen: usize, cols: &mut impl Sink, i: usize) -> bool {
        let be = self.be;
        let b = self.src.peek(blen);
        if rd32(be, b, blen - 4) as usize != blen {
            damage_at(
                &mut self.stats,
                &mut self.first_damage,
                self.src.offset,
                Warn::CorruptBlock,
            );
        }
        let (local, ts_units, caplen, wirelen, data_off) = match btype {
            1 => {
                if blen >= 20 {
                    let iface = parse_idb(be, b);
                    self.snaplen = self.snaplen.max(iface.snaplen);
                    self.ifaces.push(iface);
                } else {
                    damage_at(
                        &mut self.stats,
                        &mut self.first_damage,
                        self.src.offset,
                        Warn::CorruptBlock,
                    );
                }
                return false;
            }
            6 | 2 if blen < 32 => {
                damage_at(
                    &mut self.stats,
                    &mut self.first_damage,
                    self.src.offset,
                    Warn::CorruptRecord,
                );
                return false;
            }
            6 | 2 => {
                let local = if btype == 6 {
                    rd32(be, b, 8) as usize
                } else {
                    rd16(be, b, 8) as usize
                };
                let ts = ((rd32(be, b, 12) as u64) << 32) | rd32(be, b, 16) as u64;
                (
                    local,
                    Some(ts),
                    rd32(be, b, 20) as usize,
                    rd32(be, b, 24),
                    28,
                )
            }
            3 if blen >= 16 => {
                let wirelen = rd32(be, b, 8);
                let mut caplen = (wirelen as usize).min(blen - 16);
                if let Some(f) = self.ifaces.get(self.section_base) {
                    if f.snaplen > 0 {
                        caplen = caplen.min(f.snaplen as usize);
                    }
                }
                (0, None, caplen, wirelen, 12)
            }
            3 => {
                damage_at(
                    &mut self.stats,
                    &mut self.first_damage,
                    self.src.offset,
                    Warn::CorruptRecord,
                );
                return false;
            }
            _ => return false,
        };
        if caplen > blen - data_off - 4 {
            damage_at(
                &mut self.stats,
                &mut self.first_damage,
                self.src.offset,
                Warn::CorruptRecord,
            );
            return false;
        }
        let gi = self.section_base + local;
        let Some(iface) = self.ifaces.get(gi).filter(|_| gi <= u16::MAX as usize) else {
            damage_at(
                &mut self.stats,
                &mut self.first_damage,
                self.src.offset,
                Warn::BadInterfaceId,
            );
            return false;
        };
        let ts_ns = match ts_units {
            Some(u) => clamp_ns(iface.tsres.to_ns(u) + iface.ts_offset_s as i128 * 1_000_000_000),
            None => {
                self.stats.warnings.add(Warn::NoTimestamp);
                self.stats.prev_ts.unwrap_or(0)
            }
        };
        let m = Meta {
            ts_ns,
            caplen: caplen as u32,
            wirelen,
            iface: gi as u16,
            linktype: iface.linktype,
        };
        store(
            &mut self.stats,
            cols,
            i,
            &m,
            &b[data_off..data_off + caplen],
        );
        let at = self.src.offset + data_off as u64;
        if let Some(v) = self.offsets.as_mut() {
            v.push(at);
        }
        true
    }

    pub fn offset(&self) -> u64 {
        self.src.offset
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether every interface's link type is one the dissector knows.
    pub fn unknown_linktypes(&self) -> Vec<u16> {
        self.ifaces
            .iter()
            .map(|f| f.linktype)
            .filter(|&l| !linktype_known(l))
            .collect()
    }
}

/// Count a damage warning; the first one's file offset is kept.
fn damage_at(stats: &mut Stats, first: &mut Option<u64>, offset: u64, w: Warn) {
    stats.warnings.add(w);
    first.get_or_insert(offset);
}

fn parse_idb(be: bool, b: &[u8]) -> Iface {
    let mut iface = Iface {
        linktype: rd16(be, b, 8),
        snaplen: rd32(be, b, 12),
        tsres: TsRes::Pow10(6),
        ts_offset_s: 0,
    };
    let end = b.len() - 4;
    let mut o = 16;
    while o + 4 <= end {
        let code = rd16(be, b, o);
        let len = rd16(be, b, o + 2) as usize;
        let v = o + 4;
        if code == 0 || v + len > end {
            break;
        }
        match code {
            9 if len >= 1 => iface.tsres = TsRes::from_option(b[v]),
            14 if len >= 8 => iface.ts_offset_s = rd64(be, b, v) as i64,
            _ => {}
        }
        o = v + ((len + 3) & !3);
    }
    iface
}

impl Stats {
    pub fn has_packets(&self) -> bool {
        self.prev_ts.is_some()
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
