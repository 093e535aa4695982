//! Unit tests of the native connection tracker (`conntrack.rs`).

use super::*;

/// (ts_us, from_client, flags, seq, ack, payload) of one crafted packet.
type P = (i64, bool, u8, u32, u32, u32);

/// One crafted connection.
const PKTS: [P; 8] = [
    (0, true, SYN, 1000, 0, 0),
    (40_000, false, SYN | ACK, 5000, 1001, 0),
    (50_000, true, ACK, 1001, 5001, 0),
    (51_000, true, ACK, 1001, 5001, 300),
    (91_000, false, ACK, 5001, 1301, 1460),
    (92_168, false, ACK, 6461, 1301, 1460),
    (300_000, false, ACK, 6461, 1301, 1460), // retransmission
    (310_000, true, ACK, 1301, 7921, 0),
];

fn run(chunk: usize) -> Tracker {
    let n = PKTS.len();
    let (c, s) = (0xFFFF_0A00_0001u64, 0xFFFF_0A00_0101u64);
    let col = |f: &dyn Fn(&P) -> u64| -> Vec<u64> { PKTS.iter().map(f).collect() };
    let ts: Vec<i64> = PKTS.iter().map(|p| p.0 * 1000).collect();
    let src = col(&|p| if p.1 { c } else { s });
    let dst = col(&|p| if p.1 { s } else { c });
    let sport: Vec<u16> = PKTS.iter().map(|p| if p.1 { 40000 } else { 80 }).collect();
    let dport: Vec<u16> = PKTS.iter().map(|p| if p.1 { 80 } else { 40000 }).collect();
    let flags: Vec<u8> = PKTS.iter().map(|p| p.2).collect();
    let seq: Vec<u32> = PKTS.iter().map(|p| p.3).collect();
    let ack: Vec<u32> = PKTS.iter().map(|p| p.4).collect();
    let pl: Vec<u32> = PKTS.iter().map(|p| p.5).collect();
    let iplen: Vec<u32> = pl.iter().map(|x| x + 40).collect();
    let (ver, proto, zero8, ok) = (vec![4u8; n], vec![TCP; n], vec![0u8; n], vec![1u8; n]);
    let zero64 = vec![0u64; n];
    let mut t = Tracker::new(60_000_000_000, 600_000_000_000);
    let mut i = 0;
    while i < n {
        let r = i..(i + chunk).min(n);
        let ch = Chunk {
            ts_ns: &ts[r.clone()],
            wirelen: &iplen[r.clone()],
            ipver: &ver[r.clone()],
            proto: &proto[r.clone()],
            frag: &zero8[r.clone()],
            saddr_hi: &zero64[r.clone()],
            saddr_lo: &src[r.clone()],
            daddr_hi: &zero64[r.clone()],
            daddr_lo: &dst[r.clone()],
            sport: &sport[r.clone()],
            dport: &dport[r.clone()],
            tcp_flags: &flags[r.clone()],
            seq: &seq[r.clone()],
            ack: &ack[r.clone()],
            ip_len: &iplen[r.clone()],
            payload_len: &pl[r.clone()],
            l4_ok: &ok[r.clone()],
        };
        t.add(&ch).unwrap();
        i += chunk;
    }
    t
}

#[test]
fn handshake_runs_retransmission_pairs() {
    for chunk in [1, 3, 8] {
        let t = run(chunk);
        assert_eq!(t.conns.len(), 1);
        let c = &t.conns[0];
        let (cd, sd) = (c.syn_dir as usize, 1 - c.syn_dir as usize);
        assert_eq!(
            (c.syn_ns, c.synack_ns, c.ack_ns),
            (0, 40_000_000, 50_000_000)
        );
        assert_eq!(c.dirs[cd].new_bytes, 300);
        assert_eq!(c.dirs[sd].new_bytes, 2920);
        assert_eq!((c.dirs[sd].data_pkts, c.dirs[sd].retx), (3, 1));
        // one finished client run (300 bytes), the server run still open
        assert_eq!(t.runs.len(), 1);
        assert_eq!(
            (t.runs[0].bytes, c.run.bytes, c.run.open),
            (300, 2920, true)
        );
        assert_eq!((c.run.t0, c.run.t1), (91_000_000, 92_168_000));
        // the back-to-back pair: 1500 bytes in 1.168 ms; the retransmission adds no run time
        assert_eq!(t.hist.values().sum::<i64>(), 1);
        let p = t.pairs(&[c.syn_dir as i64], 0);
        assert_eq!(
            (p.conn.clone(), p.req_size[0], p.rsp_size[0]),
            (vec![0], 300, 2920)
        );
        assert!((p.rsp_t1[0] - 0.092168).abs() < 1e-12 && p.think[0].is_nan());
    }
}

#[test]
fn key_table_grows_and_finds() {
    let mut t = keys::KeyTable::default();
    // keys sharing low bits and high bits, so that probes run into each other
    let key = |i: u64| i.wrapping_mul(0x1_0000_0001) ^ (i << 40);
    for i in 0..5000u64 {
        let (s, new) = t.entry(key(i));
        assert!(new);
        s.cur = i as u32;
    }
    for i in 0..5000u64 {
        let (s, new) = t.entry(key(i));
        assert!(!new && s.cur == i as u32 && s.key == key(i));
        assert_eq!(t.get_mut(key(i)).map(|s| s.cur), Some(i as u32));
    }
    assert!(t.get_mut(key(5000)).is_none());
}

#[test]
fn state_layout() {
    // the cache-line layout the prefetching assumes (see conntrack_state.rs)
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!((size_of::<Conn>(), align_of::<Conn>()), (320, 64));
    assert_eq!((offset_of!(Conn, run), offset_of!(Conn, dirs)), (64, 128));
    assert_eq!(size_of::<Dir>(), 96);
    assert_eq!(size_of::<state::Pkt>(), 64);
}

#[test]
fn blocks_keep_order_across_blocks() {
    let mut b: state::Blocks<u64, 4> = state::Blocks::default();
    for i in 0..100u64 {
        b.push(i * 3);
    }
    b[37] += 1;
    assert_eq!((b.len(), b[16], b[99], b[37]), (100, 48, 297, 112));
    let v: Vec<u64> = b.iter().copied().collect();
    assert_eq!(v.len(), 100);
    assert!(v
        .iter()
        .enumerate()
        .all(|(i, &x)| x == 3 * i as u64 + (i == 37) as u64));
    assert_eq!(b.ptr(17), &b[17] as *const u64);
}

/// `cap_bin` against the logarithm (numpy's rule) over many magnitudes, edges included.
#[test]
fn cap_bin_matches_the_logarithm() {
    let edges = cap_edges();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut values: Vec<f64> = edges
        .iter()
        .flat_map(|&e| [e, e * (1.0 + 1e-6), e * (1.0 - 1e-6)])
        .collect();
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(10f64.powf(2.0 + 11.0 * (x >> 11) as f64 / (1u64 << 53) as f64));
    }
    values.extend([1.0, 9_999.0, 1e11, 5e12, f64::MAX]);
    let (mut decided, mut left) = (0, 0);
    for bps in values {
        let xl = (bps.log10() - CAP_LOG_MIN) * CAP_BINS_PER_DECADE;
        let want = (xl as i64).clamp(0, CAP_NBINS - 1);
        match cap_bin(&edges, bps) {
            Some(b) => {
                assert_eq!(b, want, "bps {bps}");
                decided += 1;
            }
            None => {
                left += 1;
                assert!(
                    (xl - xl.round()).abs() < 1e-5,
                    "left to numpy far from an edge: {bps}"
                );
            }
        }
    }
    assert!(decided > 200_000 && left >= CAP_NBINS as usize - 1 && left < 1000);
    assert_eq!(cap_bin(&edges, 0.0), None);
    assert_eq!(cap_bin(&edges, f64::INFINITY), None);
}
