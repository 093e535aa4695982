//! Unit tests of the capture-file framing (`reader.rs`) and its resync.

use super::*;
use crate::columns::OwnedColumns;
use std::io::Cursor;

fn open(data: Vec<u8>) -> Result<Reader, String> {
    Reader::open(Box::new(Cursor::new(data)))
}

fn open_err(data: Vec<u8>) -> String {
    open(data).err().unwrap_or_default()
}

fn pcap(nano: bool, records: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let magic: u32 = if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    let mut out = Vec::new();
    for w in [magic, 0x0004_0002, 0, 0, 65535, 101] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for (sec, frac, data) in records {
        for w in [*sec, *frac, data.len() as u32, data.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(data);
    }
    out
}

#[test]
fn timestamp_resolutions() {
    assert_eq!(TsRes::Pow10(6).to_ns(1_500_000), 1_500_000_000);
    assert_eq!(TsRes::Pow10(9).to_ns(7), 7);
    assert_eq!(TsRes::Pow10(12).to_ns(5_000), 5);
    assert_eq!(TsRes::Pow2(10).to_ns(1024), 1_000_000_000);
    assert_eq!(TsRes::Pow10(120).to_ns(u64::MAX), 0);
    assert_eq!(TsRes::from_option(0x89), TsRes::Pow2(9));
}

#[test]
fn pcap_records_chunks_and_truncation() {
    let ip = [
        0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 99, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
    ];
    let mut data = pcap(true, &[(1, 5, &ip), (2, 6, &ip), (3, 7, &ip)]);
    data.truncate(data.len() - 1);
    let Ok(mut r) = open(data) else {
        panic!("valid pcap")
    };
    let mut cols = OwnedColumns::with_capacity(1);
    assert_eq!(r.read(&mut cols.view()).unwrap(), 1);
    assert_eq!(cols.ts_ns[0], 1_000_000_005);
    assert_eq!(r.read(&mut cols.view()).unwrap(), 1);
    assert_eq!(
        (cols.ts_ns[0], cols.proto[0], cols.payload_len[0]),
        (2_000_000_006, 99, 0)
    );
    assert_eq!(r.read(&mut cols.view()).unwrap(), 0);
    assert_eq!(r.stats.warnings.get(Warn::TruncatedLastRecord), 1);
    assert_eq!(r.stats.packets, 2);
}

#[test]
fn unusable_headers() {
    assert!(open_err(vec![]).contains("empty"));
    assert!(open_err(b"GIF89a..................".to_vec()).contains("magic"));
    assert!(open_err(pcap(false, &[])[..20].to_vec()).contains("truncated"));
    assert_eq!(
        open(pcap(false, &[])).ok().map(|r| r.ifaces[0].linktype),
        Some(101)
    );
}

/// One damaged length field costs one packet: the reader resyncs at the next
/// real record, not at a plausible-looking header inside a payload.
#[test]
fn corrupt_length_costs_one_packet() {
    // Payloads that hold one plausible record header each (a trap for a
    // resync that trusts a single header).
    let mut payload = vec![0u8; 60];
    for (k, w) in [1u32, 0, 20, 20].iter().enumerate() {
        payload[8 + 4 * k..12 + 4 * k].copy_from_slice(&w.to_le_bytes());
    }
    let recs: Vec<(u32, u32, &[u8])> = (0..20).map(|i| (1 + i, 0, &payload[..])).collect();
    let mut data = pcap(false, &recs);
    let bad = 24 + 5 * (16 + payload.len());
    data[bad + 8..bad + 12].copy_from_slice(&200_000u32.to_le_bytes());
    let Ok(mut r) = open(data.clone()) else {
        panic!("valid pcap")
    };
    let mut cols = OwnedColumns::with_capacity(64);
    assert_eq!(r.read(&mut cols.view()).unwrap(), 19);
    assert_eq!(r.stats.warnings.get(Warn::CorruptRecord), 1);
    assert_eq!(r.stats.warnings.get(Warn::ResyncSkippedBytes), 76);
    assert_eq!(r.first_damage, Some(bad as u64));
    // Wire length damaged too: found by scanning, still one packet lost.
    data[bad + 12..bad + 16].copy_from_slice(&300_000u32.to_le_bytes());
    let Ok(mut r) = open(data) else {
        panic!("valid pcap")
    };
    assert_eq!(r.read(&mut cols.view()).unwrap(), 19);
    assert_eq!(r.stats.warnings.get(Warn::ResyncSkippedBytes), 76);
}

/// A little-endian pcapng: section header, one Ethernet interface, and one
/// enhanced packet block per payload (second `i + 1`); returns the file and
/// each packet block's offset.
fn pcapng(payloads: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    for w in [SHB, 28, 0x1A2B_3C4D, 1, u32::MAX, u32::MAX, 28] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for w in [1u32, 20, 1, 65535, 20] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let mut at = Vec::new();
    for (i, p) in payloads.iter().enumerate() {
        at.push(out.len());
        let pad = (4 - p.len() % 4) % 4;
        let blen = (32 + p.len() + pad) as u32;
        let ts = (i as u64 + 1) * 1_000_000;
        for w in [
            6u32,
            blen,
            0,
            (ts >> 32) as u32,
            ts as u32,
            p.len() as u32,
            p.len() as u32,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(p);
        out.extend(std::iter::repeat_n(0u8, pad));
        out.extend_from_slice(&blen.to_le_bytes());
    }
    (out, at)
}

fn read_all(data: Vec<u8>) -> (Reader, u64) {
    let Ok(mut r) = open(data) else {
        panic!("valid capture")
    };
    r.offsets = Some(Vec::new());
    let mut cols = OwnedColumns::with_capacity(7);
    let mut n = 0;
    loop {
        let k = r.read(&mut cols.view()).unwrap();
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    (r, n)
}

/// Payloads that hold a plausible block header (a trap for a resync that trusts
/// one header): type 6, a length of 40 and a trailer 40 bytes on.
fn trap_payloads() -> Vec<Vec<u8>> {
    (0..20)
        .map(|i| {
            let mut p = vec![i as u8; 90 + i % 3];
            p[4..8].copy_from_slice(&6u32.to_le_bytes());
            p[8..12].copy_from_slice(&40u32.to_le_bytes());
            p[40..44].copy_from_slice(&40u32.to_le_bytes());
            p
        })
        .collect()
}

/// The pcapng case: one block length set to 200000 cost 2,629 of 4,631
/// packets (the reader stopped). It now resyncs at the next block: one packet.
#[test]
fn pcapng_damaged_length_costs_one_block() {
    let pl = trap_payloads();
    let refs: Vec<&[u8]> = pl.iter().map(|p| &p[..]).collect();
    let (data, at) = pcapng(&refs);
    let bad = at[5];
    let blen = at[6] - at[5];
    for len in [200_000u32, 64, 7, 0x7fff_fff0, 3 * blen as u32] {
        let mut d = data.clone();
        d[bad + 4..bad + 8].copy_from_slice(&len.to_le_bytes());
        let (r, n) = read_all(d);
        assert_eq!(n, 19, "length {len}");
        assert_eq!(r.stats.warnings.get(Warn::CorruptRecord), 1);
        assert_eq!(r.stats.warnings.get(Warn::CorruptBlock), 1);
        assert_eq!(r.stats.warnings.get(Warn::ResyncSkippedBytes), blen as u64);
        assert_eq!(r.first_damage, Some(bad as u64));
        assert!(r.is_done() && r.offset() == data.len() as u64);
    }
}

/// A damaged trailing length alone loses nothing; a cut last block is a cut end
/// (not damage inside the file); damage followed by more than the window of
/// bytes that hold no block ends the read there.
#[test]
fn pcapng_trailer_cut_end_and_no_resync_point() {
    let pl = trap_payloads();
    let refs: Vec<&[u8]> = pl.iter().map(|p| &p[..]).collect();
    let (data, at) = pcapng(&refs);
    let mut d = data.clone();
    d[at[6] - 4] ^= 0x10;
    let (r, n) = read_all(d);
    assert_eq!((n, r.stats.warnings.get(Warn::CorruptBlock)), (20, 1));
    assert_eq!(r.stats.warnings.get(Warn::CorruptRecord), 0);
    let (r, n) = read_all(data[..data.len() - 10].to_vec());
    assert_eq!(n, 19);
    assert_eq!(r.stats.warnings.get(Warn::TruncatedLastRecord), 1);
    assert_eq!(r.stats.warnings.get(Warn::CorruptRecord), 0);
    let mut d = data[..at[6]].to_vec();
    d[at[5] + 4..at[5] + 8].copy_from_slice(&200_000u32.to_le_bytes());
    d.extend(std::iter::repeat_n(0u8, RESYNC_WINDOW + 64));
    d.extend_from_slice(&data[at[10]..]);
    let (r, n) = read_all(d);
    assert_eq!(n, 5);
    assert_eq!(r.stats.warnings.get(Warn::CorruptRecord), 1);
    assert!(r.is_done() && r.offset() == at[5] as u64);
}

/// Kept offsets point at each packet's captured bytes, in both formats.
#[test]
fn offsets_point_at_packet_bytes() {
    let pl = trap_payloads();
    let refs: Vec<&[u8]> = pl.iter().map(|p| &p[..]).collect();
    let (data, at) = pcapng(&refs);
    let Ok(mut r) = open(data.clone()) else {
        panic!("valid pcapng")
    };
    r.offsets = Some(Vec::new());
    let mut cols = OwnedColumns::with_capacity(64);
    assert_eq!(r.read(&mut cols.view()).unwrap(), 20);
    let offs = r.offsets.clone().unwrap_or_default();
    let want: Vec<u64> = at.iter().map(|&a| a as u64 + 28).collect();
    assert_eq!(offs, want);
    let recs: Vec<(u32, u32, &[u8])> = refs.iter().map(|p| (1, 0, *p)).collect();
    let data = pcap(false, &recs);
    let Ok(mut r) = open(data.clone()) else {
        panic!("valid pcap")
    };
    r.offsets = Some(Vec::new());
    assert_eq!(r.read(&mut cols.view()).unwrap(), 20);
    let offs = r.offsets.clone().unwrap_or_default();
    for (o, p) in offs.iter().zip(&refs) {
        assert_eq!(&data[*o as usize..*o as usize + p.len()], *p);
    }
}

/// A candidate block cut by the end of the buffer is "beyond", never read past it
/// (the Python fuzz found an enhanced packet header cut at 16 bytes).
#[test]
fn plausible_block_never_reads_past_the_buffer() {
    use crate::resync::{plausible_block, Block};
    let mut b = Vec::new();
    for w in [6u32, 40, 0, 0] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    assert_eq!(plausible_block(false, &b, 1 << 20), Block::Beyond);
    assert_eq!(plausible_block(false, &b[..8], 1 << 20), Block::Beyond);
    b.extend_from_slice(&[0u8; 20]);
    b.extend_from_slice(&40u32.to_le_bytes());
    assert_eq!(plausible_block(false, &b, 1 << 20), Block::Ok(40, false));
    b[20] = 9; // captured length 9 in a 40-byte block: more than its 8 bytes of room
    assert_eq!(plausible_block(false, &b, 1 << 20), Block::No);
}
