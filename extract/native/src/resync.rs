//! Where the next real record starts after damage: the plausibility rules of
//! the reader's resync, for classic pcap records and for pcapng blocks.
//!
//! A damaged length leaves the reader inside a record or block. It then looks
//! for the first offset from which a *chain* of plausible headers follows one
//! another: one plausible-looking header inside a payload is common, a chain of
//! them is not. A chain that ends exactly at the end of the file counts, and so
//! does one that runs past the end of a partial buffer (the rest is not read
//! yet).
//!
//! * classic pcap: a record header is plausible when its sub-second field is in
//!   range, its captured length is at most its wire length and the file's limit,
//!   and (once a packet was seen) its time is within a day of the last packet's;
//!   `RESYNC_CHAIN` (4) of them in a row mark a resync point.
//! * pcapng: a block is plausible when its type is one the format defines
//!   (section header, interface description, enhanced/simple/obsolete packet,
//!   name resolution, statistics, journal export, decryption secrets, custom),
//!   its length is at least 12, a multiple of 4 and below the limit, its
//!   trailing length equals its leading one, an enhanced packet's captured
//!   length fits in it and a section header carries a byte-order magic;
//!   `BLOCK_CHAIN` (3) of them in a row mark a resync point. The trailing
//!   length makes a single block far less likely to be a fake than a pcap
//!   record header, so a shorter chain is enough.

/// How far past a damaged record or block the reader looks for the next real one.
pub const RESYNC_WINDOW: usize = 1 << 20;
/// Consecutive plausible pcap record headers that mark a resync point.
pub const RESYNC_CHAIN: usize = 4;
/// Consecutive plausible pcapng blocks that mark a resync point.
pub const BLOCK_CHAIN: usize = 3;
/// Section header block type (the same in both byte orders).
pub const SHB: u32 = 0x0A0D_0D0A;
/// Block types pcapng defines (draft-ietf-opsawg-pcapng): SHB, IDB, PB, SPB, NRB,
/// ISB, EPB, systemd journal export, decryption secrets, and the two custom types.
const KNOWN_BLOCKS: [u32; 11] = [SHB, 1, 2, 3, 4, 5, 6, 9, 10, 0x0000_0BAD, 0x4000_0BAD];

#[inline]
pub fn rd16(be: bool, d: &[u8], o: usize) -> u16 {
    let b = [d[o], d[o + 1]];
    if be {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    }
}

#[inline]
pub fn rd32(be: bool, d: &[u8], o: usize) -> u32 {
    let b = [d[o], d[o + 1], d[o + 2], d[o + 3]];
    if be {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// Whether `RESYNC_CHAIN` plausible record headers follow one another from `p`
/// in `buf` (fewer when they end exactly at the end of a `whole` file). A chain
/// running past the end of a partial buffer counts as found.
pub fn header_chain(
    buf: &[u8],
    whole: bool,
    hl: usize,
    p: usize,
    ok: &impl Fn(&[u8]) -> Option<usize>,
) -> bool {
    let mut at = p;
    for _ in 0..RESYNC_CHAIN {
        if at + hl > buf.len() {
            return (whole && at == buf.len() && at > p) || (!whole && at > p);
        }
        match ok(&buf[at..at + hl]) {
            Some(caplen) => at += hl + caplen,
            None => return false,
        }
    }
    true
}

/// A record header that could be real: sane lengths, sub-second field in
/// range and, once a packet has been seen, a time within a day of it.
/// Returns its captured length.
pub fn plausible_header(
    be: bool,
    nano: bool,
    limit: usize,
    max_record: usize,
    prev_sec: Option<i64>,
    h: &[u8],
) -> Option<usize> {
    let (sec, frac) = (rd32(be, h, 0) as i64, rd32(be, h, 4));
    let (caplen, wirelen) = (rd32(be, h, 8), rd32(be, h, 12));
    let frac_ok = frac < if nano { 1_000_000_000 } else { 1_000_000 };
    let time_ok = prev_sec.is_none_or(|p| (sec - p).abs() <= 86_400);
    let len_ok = caplen <= wirelen && wirelen > 0 && (wirelen as usize) <= max_record;
    (frac_ok && time_ok && len_ok && (caplen as usize) <= limit).then_some(caplen as usize)
}

/// What the bytes at the start of a buffer say as a pcapng block.
#[derive(Debug, PartialEq, Eq)]
pub enum Block {
    /// A plausible block of this length, and the byte order after it (a section
    /// header sets its own).
    Ok(usize, bool),
    /// A sane header whose block runs past the end of the buffer.
    Beyond,
    No,
}

/// Whether the bytes at the start of `b` look like a real pcapng block in byte
/// order `be` (a section header is read in its own order); `max` bounds lengths.
pub fn plausible_block(be: bool, b: &[u8], max: usize) -> Block {
    if b.len() < 12 {
        return Block::Beyond;
    }
    let btype = rd32(be, b, 0);
    if !KNOWN_BLOCKS.contains(&btype) {
        return Block::No;
    }
    let be = if btype == SHB {
        match b[8..12] {
            [0x1a, 0x2b, 0x3c, 0x4d] => true,
            [0x4d, 0x3c, 0x2b, 0x1a] => false,
            _ => return Block::No,
        }
    } else {
        be
    };
    let len = rd32(be, b, 4) as usize;
    let min = match btype {
        6 | 2 => 32,
        SHB => 28,
        1 => 20,
        3 => 16,
        _ => 12,
    };
    if len < min || !len.is_multiple_of(4) || len > max {
        return Block::No;
    }
    if matches!(btype, 6 | 2) && b.len() >= 24 && rd32(be, b, 20) as usize > len - 32 {
        return Block::No;
    }
    if len > b.len() {
        return Block::Beyond;
    }
    if rd32(be, b, len - 4) as usize != len {
        return Block::No;
    }
    Block::Ok(len, be)
}

/// Whether `BLOCK_CHAIN` plausible blocks follow one another from `p` in `buf`
/// (fewer when they end exactly at the end of a `whole` file; a chain running
/// past the end of a partial buffer counts as found).
pub fn block_chain(buf: &[u8], whole: bool, p: usize, be: bool, max: usize) -> bool {
    let (mut at, mut be) = (p, be);
    for _ in 0..BLOCK_CHAIN {
        if at == buf.len() {
            return whole && at > p;
        }
        match plausible_block(be, &buf[at..], max) {
            Block::Ok(len, order) => {
                at += len;
                be = order;
            }
            Block::Beyond => return !whole && at > p,
            Block::No => return false,
        }
    }
    true
}
