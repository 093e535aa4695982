//! Bounded mutation fuzzing of the whole reader (framing + dissection).
//!
//! cargo-fuzz needs a nightly toolchain, so this runs as an ordinary test:
//! real captures from `data/pcap` are mutated with a seeded PRNG (bit flips,
//! interesting values in length fields, truncation, splices) and read to the
//! end with a tiny chunk capacity. Debug builds check integer overflow, so
//! any panic or overflow fails the test. `SWELL_FUZZ_SECS` sets the time
//! budget (default 3 s); `SWELL_FUZZ_SEED` the seed.

use std::io::Cursor;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use swell_pcap::columns::OwnedColumns;
use swell_pcap::reader::Reader;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/pcap");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read(e.path()).ok())
                .map(|mut b| {
                    b.truncate(48 * 1024);
                    b
                })
                .collect()
        })
        .unwrap_or_default();
    // A tiny pcapng with an IDB carrying if_tsresol and one EPB, for the pcapng paths.
    let mut ng = Vec::new();
    for w in [
        0x0A0D_0D0Au32,
        28,
        0x1A2B_3C4D,
        1,
        0xffff_ffff,
        0xffff_ffff,
        28,
    ] {
        ng.extend_from_slice(&w.to_le_bytes());
    }
    for w in [1u32, 32, 0x0000_0065, 0, 0x0001_0009, 0x0000_0009, 0, 32] {
        ng.extend_from_slice(&w.to_le_bytes());
    }
    let pkt: [u8; 28] = [
        0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 53, 0, 53, 0, 8, 0, 0,
    ];
    for w in [6u32, 60, 0, 0, 1, 28, 28] {
        ng.extend_from_slice(&w.to_le_bytes());
    }
    ng.extend_from_slice(&pkt);
    ng.extend_from_slice(&60u32.to_le_bytes());
    out.push(ng);
    out
}

fn mutate(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    const INTERESTING: [u32; 9] = [0, 1, 4, 12, 16, 24, 0x7fff_ffff, 0xffff_ffff, 0x8000_0000];
    for _ in 0..1 + rng.below(8) {
        let len = data.len();
        match rng.below(6) {
            0 if len > 0 => data[rng.below(len)] ^= 1 << rng.below(8),
            1 if len > 0 => data[rng.below(len)] = rng.next() as u8,
            2 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = INTERESTING[rng.below(INTERESTING.len())];
                let b = if rng.below(2) == 0 {
                    v.to_le_bytes()
                } else {
                    v.to_be_bytes()
                };
                data[at..at + 4].copy_from_slice(&b);
            }
            3 => data.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let n = rng.below(other.len() - from + 1).min(4096);
                let at = rng.below(len);
                data.splice(at..at, other[from..from + n].iter().copied());
            }
            _ if len > 0 => {
                let at = rng.below(len);
                let n = rng.below(len - at + 1).min(512);
                data.drain(at..at + n);
            }
            _ => {}
        }
    }
}

fn read_to_end(data: Vec<u8>, cap: usize) -> u64 {
    let Ok(mut r) = Reader::open(Box::new(Cursor::new(data))) else {
        return 0;
    };
    let mut cols = OwnedColumns::with_capacity(cap);
    let mut total = 0u64;
    loop {
        let n = r
            .read(&mut cols.view())
            .expect("in-memory reads cannot fail");
        if n == 0 {
            break;
        }
        for i in 0..n {
            assert!(matches!(cols.ipver[i], 0 | 4 | 6));
            if cols.ipver[i] != 0 {
                assert!(cols.payload_len[i] <= cols.ip_len[i]);
            }
        }
        total += n as u64;
    }
    assert_eq!(total, r.stats.packets);
    total
}

#[test]
fn mutated_captures_never_panic() {
    let secs = std::env::var("SWELL_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let seed = std::env::var("SWELL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let mut rng = Rng(seed | 1);
    let seeds = seeds();
    assert!(seeds.len() >= 2, "no seed captures found in data/pcap");
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut runs, mut packets) = (0u64, 0u64);
    while Instant::now() < deadline {
        let mut data = seeds[rng.below(seeds.len())].clone();
        mutate(&mut rng, &mut data, &seeds);
        packets += read_to_end(data, 1 + rng.below(64));
        runs += 1;
    }
    eprintln!("fuzz: {runs} mutated inputs, {packets} packets, seed {seed}");
    assert!(runs > 10);
}

#[test]
fn random_bytes_after_valid_headers() {
    let mut rng = Rng(99);
    let heads: [&[u8]; 3] = [
        &[
            0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0,
        ],
        &[
            0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 0, 113,
        ],
        &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a],
    ];
    for i in 0..3000 {
        let mut data = heads[i % 3].to_vec();
        let n = rng.below(2048);
        data.extend((0..n).map(|_| rng.next() as u8));
        read_to_end(data, 1 + rng.below(16));
    }
}
