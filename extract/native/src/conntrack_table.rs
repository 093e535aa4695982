//! The end of the native tracker (part of `conntrack`): the connection table straight
//! from the tracker's state, one pass in connection order, written into the caller's
//! columns (numpy arrays).
//!
//! It is `client_dir` and `_table` of `extract/conntable.py` (the reference, which the
//! numpy tracker goes through) with the same arithmetic: every connection is oriented
//! (client = SYN sender, else SYN/ACK receiver, else the side off a well-known port,
//! else the higher port, UDP: else the first sender) and its per-direction counters
//! become client->server and server->client columns. Going through an export of the
//! raw state first cost as much again: ~75 MB of fresh columns for 360,000
//! connections, then numpy's gathers and temporaries over them. The same pass keeps
//! what the pairs need of the connections (`FinalRuns`).

use super::pairs::FinalRuns;
use super::{ColdList, Conns, Tracker, TCP, UDP};

/// The table's columns, each of the number of connections: the client's direction
/// (`cdir`), then the columns of `_table` in `TABLE_COLS` order of
/// `extract/conntrack.py` (bools as bytes 0/1, times in seconds from `t0`, NaN when
/// unknown).
pub struct TableCols<'a> {
    pub cdir: &'a mut [i64],
    pub proto: &'a mut [i64],
    pub client: &'a mut [i64],
    pub server: &'a mut [i64],
    pub cport: &'a mut [i64],
    pub sport: &'a mut [i64],
    pub start: &'a mut [f64],
    pub end: &'a mut [f64],
    pub client_inferred: &'a mut [u8],
    pub open_at_start: &'a mut [u8],
    pub open_at_end: &'a mut [u8],
    pub rst: &'a mut [u8],
    pub fin_c2s: &'a mut [u8],
    pub fin_s2c: &'a mut [u8],
    pub server_leg: &'a mut [f64],
    pub client_leg: &'a mut [f64],
    pub one_sided_rtt: &'a mut [f64],
    /// pkts, wire, data_pkts, retx, new_bytes; each c2s then s2c.
    pub counters: [&'a mut [i64]; 10],
    pub one_way: &'a mut [u8],
    pub acked_c2s: &'a mut [i64],
    pub acked_s2c: &'a mut [i64],
    pub lower_bound: &'a mut [u8],
}

const SEC: f64 = 1e-9;

/// Seconds from `t0`, NaN for an unset time (negative), as numpy computes it.
#[inline]
fn tsec(x: i64, t0: i64) -> f64 {
    if x >= 0 {
        (x.wrapping_sub(t0)) as f64 * SEC
    } else {
        f64::NAN
    }
}

/// `(b - a)` in seconds when `ok`, else NaN.
#[inline]
fn leg(ok: bool, a: i64, b: i64) -> f64 {
    if ok {
        (b.wrapping_sub(a)) as f64 * SEC
    } else {
        f64::NAN
    }
}

impl<'a> TableCols<'a> {
    /// Every column's length.
    fn lens(&self) -> Vec<usize> {
        let mut v = vec![
            self.cdir.len(),
            self.proto.len(),
            self.client.len(),
            self.server.len(),
            self.cport.len(),
            self.sport.len(),
            self.start.len(),
            self.end.len(),
            self.client_inferred.len(),
            self.open_at_start.len(),
            self.open_at_end.len(),
            self.rst.len(),
            self.fin_c2s.len(),
            self.fin_s2c.len(),
            self.server_leg.len(),
            self.client_leg.len(),
            self.one_sided_rtt.len(),
            self.one_way.len(),
            self.acked_c2s.len(),
            self.acked_s2c.len(),
            self.lower_bound.len(),
        ];
        v.extend(self.counters.iter().map(|c| c.len()));
        v
    }

    /// Rows `..at` and `at..`.
    fn split_at(self, at: usize) -> (TableCols<'a>, TableCols<'a>) {
        let (cdir, cdir_b) = self.cdir.split_at_mut(at);
        let (proto, proto_b) = self.proto.split_at_mut(at);
        let (client, client_b) = self.client.split_at_mut(at);
        let (server, server_b) = self.server.split_at_mut(at);
        let (cport, cport_b) = self.cport.split_at_mut(at);
        let (sport, sport_b) = self.sport.split_at_mut(at);
        let (start, start_b) = self.start.split_at_mut(at);
        let (end, end_b) = self.end.split_at_mut(at);
        let (client_inferred, client_inferred_b) = self.client_inferred.split_at_mut(at);
        let (open_at_start, open_at_start_b) = self.open_at_start.split_at_mut(at);
        let (open_at_end, open_at_end_b) = self.open_at_end.split_at_mut(at);
        let (rst, rst_b) = self.rst.split_at_mut(at);
        let (fin_c2s, fin_c2s_b) = self.fin_c2s.split_at_mut(at);
        let (fin_s2c, fin_s2c_b) = self.fin_s2c.split_at_mut(at);
        let (server_leg, server_leg_b) = self.server_leg.split_at_mut(at);
        let (client_leg, client_leg_b) = self.client_leg.split_at_mut(at);
        let (one_sided_rtt, one_sided_rtt_b) = self.one_sided_rtt.split_at_mut(at);
        let (one_way, one_way_b) = self.one_way.split_at_mut(at);
        let (acked_c2s, acked_c2s_b) = self.acked_c2s.split_at_mut(at);
        let (acked_s2c, acked_s2c_b) = self.acked_s2c.split_at_mut(at);
        let (lower_bound, lower_bound_b) = self.lower_bound.split_at_mut(at);
        let [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9] = self.counters.map(|c| c.split_at_mut(at));
        (
            TableCols {
                cdir: cdir,
                proto: proto,
                client: client,
                server: server,
                cport: cport,
                sport: sport,
                start: start,
                end: end,
                client_inferred: client_inferred,
                open_at_start: open_at_start,
                open_at_end: open_at_end,
                rst: rst,
                fin_c2s: fin_c2s,
                fin_s2c: fin_s2c,
                server_leg: server_leg,
                client_leg: client_leg,
                one_sided_rtt: one_sided_rtt,
                one_way: one_way,
                acked_c2s: acked_c2s,
                acked_s2c: acked_s2c,
                lower_bound: lower_bound,
                counters: [c0.0, c1.0, c2.0, c3.0, c4.0, c5.0, c6.0, c7.0, c8.0, c9.0],
            },
            TableCols {
                cdir: cdir_b,
                proto: proto_b,
                client: client_b,
                server: server_b,
                cport: cport_b,
                sport: sport_b,
                start: start_b,
                end: end_b,
                client_inferred: client_inferred_b,
                open_at_start: open_at_start_b,
                open_at_end: open_at_end_b,
                rst: rst_b,
                fin_c2s: fin_c2s_b,
                fin_s2c: fin_s2c_b,
                server_leg: server_leg_b,
                client_leg: client_leg_b,
                one_sided_rtt: one_sided_rtt_b,
                one_way: one_way_b,
                acked_c2s: acked_c2s_b,
                acked_s2c: acked_s2c_b,
                lower_bound: lower_bound_b,
                counters: [c0.1, c1.1, c2.1, c3.1, c4.1, c5.1, c6.1, c7.1, c8.1, c9.1],
            },
        )
    }
}

/// Below this many connections the table is written by one thread.
const PARALLEL_MIN: usize = 1 << 16;

impl Tracker {
    /// Write the table of every connection into `out` (`known`: the well-known port
    /// table, `proto << 16 | port` -> 0/1); false if a column is not of the number of
    /// connections or `known` is not 256 * 65536 long. Two threads each write half of
    /// the rows: the columns are fresh memory, whose first touch costs more than the
    /// arithmetic (on a virtual machine ~1-2 ms per MB), and the two cores take their
    /// page faults side by side.
    pub fn table(&mut self, known: &[u8], t0: i64, out: TableCols) -> bool {
        let n = self.conns.len();
        if out.lens().iter().any(|&l| l != n) || known.len() != 256 << 16 {
            return false;
        }
        let (conns, cold) = (&self.conns, &self.cold);
        let fr = if n < PARALLEL_MIN {
            fill(conns, cold, known, t0, 0, out)
        } else {
            let half = n / 2;
            let (a, b) = out.split_at(half);
            std::thread::scope(|s| {
                let second = s.spawn(|| fill(conns, cold, known, t0, half, b));
                let mut fr = fill(conns, cold, known, t0, 0, a);
                fr.append(second.join().expect("table thread"));
                fr
            })
        };
        self.final_runs = Some(fr);
        true
    }
}

/// Rows `base..` of the table (as many as `out` holds), and what the pairs need of
/// those connections.
fn fill(
    conns: &Conns,
    cold_list: &ColdList,
    known: &[u8],
    t0: i64,
    base: usize,
    out: TableCols,
) -> FinalRuns {
    let mut fr = FinalRuns::default();
    for r in 0..out.cdir.len() {
        let i = base + r;
        let (c, cold) = (&conns[i], &cold_list[i]);
        fr.add(i, c);
        let (ep_lo, ep_hi) = cold.endpoints(c.ports);
        let (p_lo, p_hi) = (ep_lo & 0xFFFF, ep_hi & 0xFFFF);
        let row = (c.proto as usize) << 16;
        let (k_lo, k_hi) = (
            known[row | p_lo as usize] != 0,
            known[row | p_hi as usize] != 0,
        );
        // the side on a well-known port is the server; else the higher port is the
        // client; UDP without a well-known port: the first sender
        let by_port = if k_lo != k_hi { k_lo } else { p_lo < p_hi } as i64;
        let guess = if c.proto == UDP && k_lo == k_hi {
            cold.first_dir as i64
        } else {
            by_port
        };
        let cd = if c.syn_dir >= 0 {
            c.syn_dir as i64
        } else if c.synack_dir >= 0 {
            1 - c.synack_dir as i64
        } else {
            guess
        };
        let cd = (cd & 1) as usize;
        let (dc, ds) = (&c.dirs[cd], &c.dirs[1 - cd]);
        let (ep_c, ep_s) = if cd == 0 {
            (ep_lo, ep_hi)
        } else {
            (ep_hi, ep_lo)
        };
        let is_tcp = c.proto == TCP;
        let (syn, sa, ack) = (c.syn_ns, c.synack_ns, c.ack_ns);
        let closed = c.rst || (dc.fin() && ds.fin());
        let at_start = is_tcp && syn < 0;
        let at_end = is_tcp && !closed;
        let ow = dc.pkts == 0 || ds.pkts == 0;
        out.cdir[r] = cd as i64;
        out.proto[r] = c.proto as i64;
        out.client[r] = ep_c >> 16;
        out.server[r] = ep_s >> 16;
        out.cport[r] = ep_c & 0xFFFF;
        out.sport[r] = ep_s & 0xFFFF;
        out.start[r] = tsec(cold.first_ns, t0);
        out.end[r] = tsec(c.last_ns, t0);
        out.client_inferred[r] = (c.syn_dir < 0 && c.synack_dir < 0) as u8;
        out.open_at_start[r] = at_start as u8;
        out.open_at_end[r] = at_end as u8;
        out.rst[r] = c.rst as u8;
        out.fin_c2s[r] = dc.fin() as u8;
        out.fin_s2c[r] = ds.fin() as u8;
        out.server_leg[r] = leg(syn >= 0 && sa >= syn, syn, sa);
        out.client_leg[r] = leg(sa >= 0 && ack >= sa, sa, ack);
        out.one_sided_rtt[r] = leg(sa < 0 && syn >= 0 && ack >= syn, syn, ack);
        let pairs = [
            (dc.pkts, ds.pkts),
            (dc.wire, ds.wire),
            (dc.data_pkts, ds.data_pkts),
            (dc.retx, ds.retx),
            (dc.new_bytes, ds.new_bytes),
        ];
        for (k, (a, b)) in pairs.into_iter().enumerate() {
            out.counters[2 * k][r] = a;
            out.counters[2 * k + 1][r] = b;
        }
        out.one_way[r] = ow as u8;
        // the unseen direction of a one-directional TCP connection: bytes it acknowledged
        out.acked_c2s[r] = if ow && is_tcp { ds.ack_adv } else { 0 };
        out.acked_s2c[r] = if ow && is_tcp { dc.ack_adv } else { 0 };
        out.lower_bound[r] = ((at_start || at_end) && is_tcp) as u8;
    }
    fr
}

#[cfg(test)]
mod tests {
    use super::super::{Chunk, Tracker, TCP, UDP};
    use super::{fill, TableCols, PARALLEL_MIN};

    /// Owned columns to write a table into.
    struct Owned {
        i: [Vec<i64>; 18],
        f: [Vec<f64>; 5],
        b: [Vec<u8>; 8],
    }

    impl Owned {
        fn new(n: usize) -> Self {
            Owned {
                i: std::array::from_fn(|_| vec![-7; n]),
                f: std::array::from_fn(|_| vec![-7.0; n]),
                b: std::array::from_fn(|_| vec![7; n]),
            }
        }

        fn view(&mut self) -> TableCols<'_> {
            let [cdir, proto, client, server, cport, sport, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, acked_c2s, acked_s2c] =
                self.i.each_mut().map(|v| v.as_mut_slice());
            let [start, end, server_leg, client_leg, one_sided_rtt] =
                self.f.each_mut().map(|v| v.as_mut_slice());
            let [client_inferred, open_at_start, open_at_end, rst, fin_c2s, fin_s2c, one_way, lower_bound] =
                self.b.each_mut().map(|v| v.as_mut_slice());
            TableCols {
                cdir,
                proto,
                client,
                server,
                cport,
                sport,
                start,
                end,
                client_inferred,
                open_at_start,
                open_at_end,
                rst,
                fin_c2s,
                fin_s2c,
                server_leg,
                client_leg,
                one_sided_rtt,
                counters: [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9],
                one_way,
                acked_c2s,
                acked_s2c,
                lower_bound,
            }
        }

        fn same(&self, o: &Owned) -> bool {
            let bits = |v: &[Vec<f64>; 5]| -> Vec<Vec<u64>> {
                v.iter()
                    .map(|c| c.iter().map(|x| x.to_bits()).collect())
                    .collect()
            };
            self.i == o.i && self.b == o.b && bits(&self.f) == bits(&o.f)
        }
    }

    /// Connections of every kind (handshakes, mid-stream, one-way, UDP, well-known
    /// and unknown ports), more than one thread writes.
    fn tracker(nconn: usize) -> Tracker {
        let (mut ts, mut src, mut dst, mut sp, mut dp) = (vec![], vec![], vec![], vec![], vec![]);
        let (mut proto, mut flags, mut seq, mut pl) = (vec![], vec![], vec![], vec![]);
        for k in 0..nconn {
            let (c, s) = (
                0xFFFF_0A00_0000u64 + (k % 50_000) as u64,
                0xFFFF_0B00_0001u64 + (k % 7) as u64,
            );
            let (cport, sport) = (
                1024 + (k / 50_000) as u16,
                [80, 443, 53, 5000, 40001][k % 5],
            );
            let udp = k % 11 == 0;
            let mut pkt = |t: i64, fwd: bool, f: u8, sq: u32, p: u32| {
                ts.push(t);
                src.push(if fwd { c } else { s });
                dst.push(if fwd { s } else { c });
                sp.push(if fwd { cport } else { sport });
                dp.push(if fwd { sport } else { cport });
                proto.push(if udp { UDP } else { TCP });
                flags.push(if udp { 0 } else { f });
                seq.push(sq);
                pl.push(p);
            };
            let t = 1_000_000 * k as i64;
            match k % 4 {
                0 => {
                    pkt(t, true, 2, 100, 0);
                    pkt(t + 10, false, 18, 900, 0);
                    pkt(t + 20, true, 16, 101, 0);
                    pkt(t + 30, true, 16, 101, 200);
                    pkt(t + 40, false, 17, 901, 1400);
                }
                1 => pkt(t, false, 16, 900, 1400), // mid-stream, one way
                2 => {
                    pkt(t, true, 2, 5, 0);
                    pkt(t + 5, true, 17, 6, 50); // FIN with data
                }
                _ => {
                    pkt(t, false, 16, 1, 10);
                    pkt(t + 3, true, 20, 2, 0);
                }
            }
        }
        let n = ts.len();
        let iplen: Vec<u32> = pl.iter().map(|x| x + 40).collect();
        let (ver, zero8, ok, zero64) = (vec![4u8; n], vec![0u8; n], vec![1u8; n], vec![0u64; n]);
        let mut t = Tracker::new(60_000_000_000, 600_000_000_000);
        t.add(&Chunk {
            ts_ns: &ts,
            wirelen: &iplen,
            ipver: &ver,
            proto: &proto,
            frag: &zero8,
            saddr_hi: &zero64,
            saddr_lo: &src,
            daddr_hi: &zero64,
            daddr_lo: &dst,
            sport: &sp,
            dport: &dp,
            tcp_flags: &flags,
            seq: &seq,
            ack: &seq,
            ip_len: &iplen,
            payload_len: &pl,
            l4_ok: &ok,
        })
        .unwrap();
        t
    }

    #[test]
    fn two_threads_write_the_table_of_one() {
        let mut t = tracker(PARALLEL_MIN + 12_345);
        let n = t.conns.len();
        assert!(n >= PARALLEL_MIN);
        let mut known = vec![0u8; 256 << 16];
        for (p, port) in [(TCP, 80), (TCP, 443), (UDP, 53)] {
            known[(p as usize) << 16 | port] = 1;
        }
        let mut one = Owned::new(n);
        let fr_one = fill(&t.conns, &t.cold, &known, 5, 0, one.view());
        let mut two = Owned::new(n);
        assert!(t.table(&known, 5, two.view()));
        assert!(one.same(&two));
        assert_eq!(t.final_runs.as_ref(), Some(&fr_one));
        // every row written, both orientations and the flags seen
        assert!(one.i[0].iter().all(|&d| d == 0 || d == 1));
        assert!(one.i[0].contains(&0) && one.i[0].contains(&1));
        assert!(one.b.iter().all(|c| c.iter().all(|&x| x <= 1)));
        for (k, c) in one.b.iter().enumerate() {
            assert!(c.contains(&1), "bool column {k} never set");
        }
        // a column of the wrong length is refused
        let mut short = Owned::new(n - 1);
        assert!(!t.table(&known, 5, short.view()));
    }
}
