//! One emulated link direction: a serialiser of rate R (no burst allowance), a
//! drop-tail queue in front of it, random loss at the entrance and a constant
//! propagation delay after it.
//!
//! Everything about a packet is decided when it enters, from the pipe's state
//! and the entry time `t` (nanoseconds on the engine's monotonic clock):
//!
//! * loss: Bernoulli or Gilbert-Elliott, drawn from the pipe's own seeded PRNG;
//! * queue: the packets accepted earlier whose serialisation has not started by
//!   `t` are the backlog; if the packet would push it over the limit (bytes or
//!   packets) it is dropped (tail drop);
//! * serialisation starts at `max(t, end of the previous packet)` and lasts
//!   `8 * len / R` seconds, so packets leave spaced by size/R exactly;
//! * departure = end of serialisation + delay.
//!
//! * pairing (optional, `pairing` = p): a packet whose serialisation starts the
//!   moment the one before it ends (queued right behind it) is, with probability p,
//!   delivered together with that one: its departure is the other's, and the
//!   serialiser still counts its bytes, so the packet after it comes two packet
//!   times later and the rate is kept. Never three in a row. This is what a
//!   monitor behind a last hop that aggregates frames (DSL, DOCSIS, Wi-Fi) or a
//!   host that coalesces receive interrupts records: a sixth of the full-sized
//!   data packets of the bundled traces' clients arrived so (docs/fidelity.md).
//!
//! Departures are therefore non-decreasing and the pipe is a plain FIFO of
//! `(departure, item)`; the engine keeps one timer entry per non-empty pipe.
//! The engine passes the scheduled departure (not the wall-clock time it got
//! around to it) as the entry time of the next pipe, so loop latency never
//! accumulates along a path.

use std::collections::VecDeque;

use crate::config::{LossSpec, PipeConf};

/// Queue limit used when the configuration gives none (packets).
pub const DEFAULT_QUEUE_PACKETS: u64 = 1000;

/// splitmix64: seeds one xoshiro state per pipe from (seed, pipe name).
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256++: small, fast, good enough for loss draws.
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64, name: &str) -> Rng {
        // FNV-1a of the name so each pipe's stream depends only on (seed, name).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        let mut x = seed ^ h;
        Rng {
            s: [
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Loss process state.
pub enum Loss {
    None,
    Bernoulli(f64),
    Gilbert {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
        bad: bool,
    },
}

impl Loss {
    pub fn from_spec(spec: &LossSpec) -> Loss {
        match spec.kind.as_str() {
            "bernoulli" if spec.p > 0.0 => Loss::Bernoulli(spec.p),
            "gilbert" => Loss::Gilbert {
                p_gb: spec.p_gb,
                p_bg: spec.p_bg,
                loss_good: spec.loss_good,
                loss_bad: spec.loss_bad,
                bad: false,
            },
            _ => Loss::None,
        }
    }

    /// Whether this packet is lost; advances the Gilbert-Elliott chain after the draw.
    pub fn drop(&mut self, rng: &mut Rng) -> bool {
        match self {
            Loss::None => false,
            Loss::Bernoulli(p) => rng.uniform() < *p,
            Loss::Gilbert {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
                bad,
            } => {
                let p = if *bad { *loss_bad } else { *loss_good };
                let lost = p > 0.0 && rng.uniform() < p;
                let flip = if *bad { *p_bg } else { *p_gb };
                if rng.uniform() < flip {
                    *bad = !*bad;
                }
                lost
            }
        }
    }
}

/// Counters of one pipe (cumulative) plus the queue's peak since the last sample.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct Counters {
    pub packets: u64,
    pub bytes: u64,
    pub drop_queue: u64,
    pub drop_loss: u64,
    pub drop_queue_bytes: u64,
    pub drop_loss_bytes: u64,
    pub peak_queue_bytes: u64,
    pub peak_queue_packets: u64,
}

/// Why `Pipe::enter` refused a packet.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Refused {
    Loss,
    Queue,
}

pub struct Pipe<T> {
    pub name: String,
    /// Picoseconds per byte of serialisation (0 = no rate limit).
    ps_per_byte: f64,
    delay_ns: u64,
    limit_bytes: Option<u64>,
    limit_packets: Option<u64>,
    loss: Loss,
    rng: Rng,
    /// End of the last accepted packet's serialisation, in picoseconds.
    tx_end_ps: f64,
    last_depart: u64,
    /// Probability that a packet queued right behind another departs with it.
    pairing: f64,
    /// The last accepted packet departs with the one before it (no third).
    last_paired: bool,
    /// (serialisation start ns, length) of accepted packets, for the backlog.
    backlog: VecDeque<(u64, u32)>,
    backlog_bytes: u64,
    /// Packets waiting for their departure time.
    fifo: VecDeque<(u64, T)>,
    pub counters: Counters,
    /// Set when counters changed since the last stats line.
    pub dirty: bool,
}

impl<T> Pipe<T> {
    pub fn new(name: String, conf: &PipeConf, seed: u64) -> Pipe<T> {
        let ps_per_byte = match conf.rate_bps {
            Some(r) if r > 0.0 => 8.0e12 / r,
            _ => 0.0,
        };
        let limit_packets = match (conf.queue_bytes, conf.queue_packets) {
            (None, None) => Some(DEFAULT_QUEUE_PACKETS),
            (_, p) => p,
        };
        Pipe {
            rng: Rng::new(seed, &name),
            name,
            ps_per_byte,
            delay_ns: conf.delay_us * 1000,
            limit_bytes: conf.queue_bytes,
            limit_packets,
            loss: Loss::from_spec(&conf.loss),
            tx_end_ps: 0.0,
            last_depart: 0,
            pairing: conf.pairing,
            last_paired: false,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            fifo: VecDeque::new(),
            counters: Counters::default(),
            dirty: false,
        }
    }

    /// Packets accepted whose serialisation has not started by `t`.
    fn trim_backlog(&mut self, t: u64) {
        while let Some(&(start, len)) = self.backlog.front() {
            if start > t {
                break;
            }
            self.backlog_bytes -= u64::from(len);
            self.backlog.pop_front();
        }
    }

    /// Queue occupancy (bytes, packets) at time `t`. Read-only: a packet may
    /// still enter at an earlier time (the engine samples its stats at the
    /// loop's clock, arrivals enter at their receive stamps), and its drop
    /// decision must count the backlog as it was then.
    pub fn queue_at(&self, t: u64) -> (u64, u64) {
        let started = self.backlog.partition_point(|&(start, _)| start <= t);
        let gone: u64 = self
            .backlog
            .iter()
            .take(started)
            .map(|&(_, len)| u64::from(len))
            .sum();
        (
            self.backlog_bytes - gone,
            (self.backlog.len() - started) as u64,
        )
    }

    /// Offers a packet of `len` bytes at time `t`. On success returns its
    /// departure time and whether the pipe was empty before (so the caller
    /// schedules it); the item is kept until `pop`.
    pub fn enter(&mut self, t: u64, len: u32, item: T) -> Result<(u64, bool), (Refused, T)> {
        self.dirty = true;
        if self.loss.drop(&mut self.rng) {
            self.counters.drop_loss += 1;
            self.counters.drop_loss_bytes += u64::from(len);
            return Err((Refused::Loss, item));
        }
        self.trim_backlog(t);
        let over_bytes = self
            .limit_bytes
            .is_some_and(|b| self.backlog_bytes + u64::from(len) > b);
        let over_pkts = self
            .limit_packets
            .is_some_and(|p| self.backlog.len() as u64 + 1 > p);
        if self.ps_per_byte > 0.0 && (over_bytes || over_pkts) {
            self.counters.drop_queue += 1;
            self.counters.drop_queue_bytes += u64::from(len);
            return Err((Refused::Queue, item));
        }
        let t_ps = t as f64 * 1000.0;
        let start_ps = if self.tx_end_ps > t_ps {
            self.tx_end_ps
        } else {
            t_ps
        };
        self.tx_end_ps = start_ps + self.ps_per_byte * f64::from(len);
        if self.ps_per_byte > 0.0 {
            let start_ns = (start_ps / 1000.0) as u64;
            if start_ns > t {
                self.backlog.push_back((start_ns, len));
                self.backlog_bytes += u64::from(len);
                let c = &mut self.counters;
                c.peak_queue_bytes = c.peak_queue_bytes.max(self.backlog_bytes);
                c.peak_queue_packets = c.peak_queue_packets.max(self.backlog.len() as u64);
            }
        }
        let behind = self.ps_per_byte > 0.0 && start_ps > t_ps && !self.fifo.is_empty();
        let paired =
            behind && self.pairing > 0.0 && !self.last_paired && self.rng.uniform() < self.pairing;
        self.last_paired = paired;
        let depart = if paired {
            self.last_depart
        } else {
            ((self.tx_end_ps / 1000.0).ceil() as u64 + self.delay_ns).max(self.last_depart)
        };
        self.last_depart = depart;
        self.counters.packets += 1;
        self.counters.bytes += u64::from(len);
        let was_empty = self.fifo.is_empty();
        self.fifo.push_back((depart, item));
        Ok((depart, was_empty))
    }

    /// Departure time of the head packet.
    pub fn head(&self) -> Option<u64> {
        self.fifo.front().map(|(d, _)| *d)
    }

    pub fn pop(&mut self) -> Option<(u64, T)> {
        self.fifo.pop_front()
    }

    pub fn in_flight(&self) -> usize {
        self.fifo.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(rate: Option<f64>, delay_us: u64, qb: Option<u64>, qp: Option<u64>) -> PipeConf {
        PipeConf {
            rate_bps: rate,
            delay_us,
            queue_bytes: qb,
            queue_packets: qp,
            loss: LossSpec::default(),
            pairing: 0.0,
        }
    }

    #[test]
    fn serialisation_spaces_packets_by_size_over_rate() {
        // 10 Mbit/s: 1250 bytes take exactly 1 ms.
        let mut p: Pipe<u32> = Pipe::new("x".into(), &conf(Some(10e6), 500, None, None), 1);
        let mut departs = Vec::new();
        for i in 0..20 {
            let (d, _) = p.enter(1_000_000, 1250, i).unwrap();
            departs.push(d);
        }
        assert_eq!(departs[0], 1_000_000 + 1_000_000 + 500_000);
        for w in departs.windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000, "no burst allowance: exact spacing");
        }
        // An idle link does not bank credit: a packet arriving later starts at its arrival.
        let (d, _) = p.enter(100_000_000, 1250, 99).unwrap();
        assert_eq!(d, 100_000_000 + 1_000_000 + 500_000);
    }

    fn paired(pairing: f64) -> Pipe<u32> {
        let mut c = conf(Some(10e6), 500, None, Some(100_000));
        c.pairing = pairing;
        Pipe::new("x".into(), &c, 7)
    }

    #[test]
    fn pairing_one_delivers_queued_packets_two_at_a_time_at_the_same_rate() {
        let mut p = paired(1.0);
        let departs: Vec<u64> = (0..20)
            .map(|i| p.enter(1_000_000, 1250, i).unwrap().0)
            .collect();
        // the first starts at once; each odd one was queued right behind an even one
        // and departs with it; each even one leaves when a serialiser would send it
        // (its own end of serialisation), so the pairs keep the rate
        let base = 1_000_000 + 500_000;
        let want: Vec<u64> = (0..20u64)
            .map(|i| base + (i - i % 2 + 1) * 1_000_000)
            .collect();
        assert_eq!(departs, want);
        assert!(departs.windows(2).all(|w| w[1] >= w[0]), "FIFO order kept");
    }

    #[test]
    fn pairing_leaves_a_packet_on_an_idle_link_alone() {
        let mut p = paired(1.0);
        let (d1, _) = p.enter(0, 1250, 1).unwrap();
        let (d2, _) = p.enter(5_000_000, 1250, 2).unwrap(); // link idle since 1 ms
        assert_eq!((d1, d2), (1_500_000, 6_500_000));
    }

    #[test]
    fn pairing_share_is_drawn_per_queued_packet() {
        let mut p = paired(0.2);
        let (mut together, mut queued, mut last) = (0u32, 0u32, None);
        for i in 0..20_000u32 {
            let (d, _) = p.enter(0, 1250, i).unwrap();
            if i > 0 {
                queued += 1;
                together += u32::from(Some(d) == last);
            }
            last = Some(d);
        }
        // p over the packets not right after a pair: 0.2 / 1.2 of all queued ones
        let share = f64::from(together) / f64::from(queued);
        assert!((share - 0.2 / 1.2).abs() < 0.01, "share {share}");
        let mut none = paired(0.0);
        let d: Vec<u64> = (0..5).map(|i| none.enter(0, 1250, i).unwrap().0).collect();
        assert!(
            d.windows(2).all(|w| w[1] - w[0] == 1_000_000),
            "pairing 0: a serialiser"
        );
    }

    #[test]
    fn no_rate_is_pure_delay_and_fifo() {
        let mut p: Pipe<u32> = Pipe::new("x".into(), &conf(None, 2000, None, None), 1);
        let (d1, first) = p.enter(10, 1500, 1).unwrap();
        let (d2, second) = p.enter(20, 1500, 2).unwrap();
        assert_eq!((d1, d2, first, second), (2_000_010, 2_000_020, true, false));
        assert_eq!(p.pop(), Some((2_000_010, 1)));
        assert_eq!(p.head(), Some(2_000_020));
    }

    #[test]
    fn queue_limit_in_packets_and_bytes_is_drop_tail() {
        let mut p: Pipe<u32> = Pipe::new("x".into(), &conf(Some(1e6), 0, None, Some(10)), 1);
        let ok = (0..50).filter(|i| p.enter(0, 1000, *i).is_ok()).count();
        // the first starts at once (not queued), then 10 wait.
        assert_eq!(ok, 11);
        assert_eq!(p.counters.drop_queue, 39);
        assert_eq!(p.queue_at(0), (10_000, 10));
        let mut q: Pipe<u32> = Pipe::new("y".into(), &conf(Some(1e6), 0, Some(5000), None), 1);
        let ok = (0..50).filter(|i| q.enter(0, 1000, *i).is_ok()).count();
        assert_eq!(ok, 6);
        // after 2 packet times (8 ms each at 1 Mbit/s) two slots are free again
        assert_eq!(q.queue_at(16_000_000).1, 3);
        assert!(q.enter(16_000_000, 1000, 7).is_ok());
        assert!(q.enter(16_000_000, 1000, 8).is_ok());
        assert!(q.enter(16_000_000, 1000, 9).is_err());
    }

    #[test]
    fn sampling_the_queue_later_does_not_change_an_earlier_arrival() {
        // 1 Mbit/s, 1000 B = 8 ms per packet, room for 2 waiting packets.
        let run = |sample_at: Option<u64>| {
            let mut p: Pipe<u32> = Pipe::new("x".into(), &conf(Some(1e6), 0, None, Some(2)), 1);
            for i in 0..3 {
                p.enter(0, 1000, i).unwrap(); // one in service, two waiting
            }
            if let Some(t) = sample_at {
                assert_eq!(p.queue_at(t), (0, 0)); // all started by 30 ms
            }
            // at 7 ms the second packet has not started (it starts at 8 ms): full
            p.enter(7_000_000, 1000, 3).is_ok()
        };
        assert!(!run(None));
        assert!(
            !run(Some(30_000_000)),
            "a stats sample at 30 ms freed the queue at 7 ms"
        );
    }

    #[test]
    fn queueing_delay_is_bounded_by_the_limit() {
        let mut p: Pipe<u32> = Pipe::new("x".into(), &conf(Some(8e6), 0, Some(10_000), None), 1);
        let mut worst = 0;
        for i in 0..10_000u64 {
            let t = i * 500_000; // 3000 bytes per ms offered into 1000 bytes per ms
            if let Ok((d, _)) = p.enter(t, 1500, 0) {
                worst = worst.max(d - t);
            }
        }
        // at most 10 kB waiting at 1 byte/us = 10 ms, plus the packet's own 1.5 ms;
        // a full queue holds at least limit - one packet.
        assert!(worst <= 11_500_000 + 1, "worst {worst}");
        assert!(worst >= 8_500_000, "worst {worst}");
    }

    #[test]
    fn bernoulli_loss_rate() {
        let mut c = conf(None, 0, None, None);
        c.loss = LossSpec {
            kind: "bernoulli".into(),
            p: 0.05,
            ..LossSpec::default()
        };
        let mut p: Pipe<u32> = Pipe::new("x".into(), &c, 7);
        let n = 400_000;
        let lost = (0..n).filter(|_| p.enter(0, 100, 0).is_err()).count();
        let rate = lost as f64 / n as f64;
        assert!((rate - 0.05).abs() < 0.05 * 0.05, "rate {rate}");
    }

    #[test]
    fn gilbert_burst_length() {
        let mut c = conf(None, 0, None, None);
        c.loss = LossSpec {
            kind: "gilbert".into(),
            p_gb: 0.01,
            p_bg: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
            p: 0.0,
        };
        let mut p: Pipe<u32> = Pipe::new("x".into(), &c, 3);
        let (mut bursts, mut lost, mut run) = (0u64, 0u64, 0u64);
        for _ in 0..1_000_000 {
            if p.enter(0, 100, 0).is_err() {
                lost += 1;
                run += 1;
            } else if run > 0 {
                bursts += 1;
                run = 0;
            }
        }
        let mean = lost as f64 / bursts as f64;
        assert!((mean - 4.0).abs() < 0.2, "mean burst {mean}");
        // stationary loss = p_gb / (p_gb + p_bg)
        let rate = lost as f64 / 1e6;
        assert!((rate - 0.01 / 0.26).abs() < 0.004, "rate {rate}");
    }

    #[test]
    fn same_seed_same_losses() {
        let mut c = conf(None, 0, None, None);
        c.loss = LossSpec {
            kind: "bernoulli".into(),
            p: 0.3,
            ..LossSpec::default()
        };
        let draw = |seed| {
            let mut p: Pipe<u32> = Pipe::new("x".into(), &c, seed);
            (0..200)
                .map(|_| p.enter(0, 1, 0).is_ok())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }
}
