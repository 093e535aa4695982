//! The forwarding engine: ports, pipes, routes, the timer heap and the loop.
//!
//! An IPv4 or IPv6 frame arriving on port `in` is routed (longest prefix match
//! on the destination; both families share one 128-bit key space, IPv4
//! addresses mapped as `::ffff:a.b.c.d`) to port `out` and walks up to three pipes: the `up` pipe of its
//! source host, the port pipe `(in, out)`, the `down` pipe of its destination
//! host (each only if configured). A min-heap holds one entry per non-empty
//! pipe (its head's departure time). The loop: read a batch from every port
//! (each frame enters its first pipe at its kernel receive stamp, the frames of
//! all ports in time order, each after the departures due before it), run every
//! departure due by the horizon up to which all frames have been read (moving
//! packets to their next pipe at the scheduled time, or queueing them for
//! transmission with MACs rewritten), flush the transmit queues, and when idle
//! sleep on epoll with a timerfd armed a little before the next departure,
//! spinning the last stretch for microsecond accuracy. Reading before running
//! departures keeps every pipe's entries in time order however late a frame is
//! read, so loss, queue and serialiser decisions are those at its arrival.
//!
//! Lazy receive: when every frame crosses a port pipe with a delay (the bench's
//! and most bottleneck setups), a frame read late still departs on time. A
//! sleep shorter than `lazy_ns` then waits on the timer alone: the frames that
//! arrive meanwhile are read at the next departure, one wake-up per departure
//! instead of one per arrival and one per departure. At 50k pkt/s on the 2-core
//! VM this removed stalls of up to 50 ms in which (most likely) the kernel's
//! fair server ran normal tasks in place of the SCHED_FIFO engine
//! (docs/linkemu.md, "Wake-up lateness").

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::config::{parse_ip, parse_prefix, prefix_mask, v4_mapped, Config};
use crate::pcap::Capture;
use crate::pipe::Pipe;
use crate::port::{Port, BATCH};

pub static STOP: AtomicBool = AtomicBool::new(false);

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn real_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// A frame in flight: its bytes, where it leaves, and the pipes it still crosses.
pub struct Pkt {
    buf: Vec<u8>,
    /// IP packet length (what a pipe's serialiser and byte queue count)
    len: u32,
    out: u16,
    path: [u32; 3],
    n: u8,
    next: u8,
}

const NO_PIPE: u32 = u32::MAX;

/// Whether the engine routes a packet: not IPv6 multicast (ff00::/8: the
/// routers' own MLD reports; a router never forwards link-scope multicast).
/// Such frames count as `rx_other`.
fn routable(f: &IpFields) -> bool {
    !(f.v6 && f.dst >> 120 == 0xff)
}

/// Longest prefix match of `dst` in `routes` (sorted longest prefix first).
fn route_lookup(routes: &[(u128, u8, u16)], dst: u128) -> Option<u16> {
    routes
        .iter()
        .find(|&&(net, len, _)| dst & prefix_mask(len) == net)
        .map(|r| r.2)
}

/// What the engine reads of an IP header: addresses as 128-bit keys (IPv4
/// mapped) and the IP packet's length.
#[derive(Debug, PartialEq, Eq)]
pub struct IpFields {
    pub src: u128,
    pub dst: u128,
    pub len: u32,
    pub v6: bool,
}

/// The IP fields of an Ethernet frame carrying IPv4 (0x0800) or IPv6 (0x86dd),
/// or None (another ethertype, or too short for the header). The length is
/// IPv4's total length, or IPv6's payload length plus its 40-byte header
/// (extension headers are part of the payload), as Mahimahi counts a packet.
pub fn ip_fields(frame: &[u8]) -> Option<IpFields> {
    let word = |i: usize| u32::from_be_bytes([frame[i], frame[i + 1], frame[i + 2], frame[i + 3]]);
    if frame.len() < 14 {
        return None;
    }
    match [frame[12], frame[13]] {
        [0x08, 0x00] if frame.len() >= 34 => Some(IpFields {
            src: v4_mapped(word(26)),
            dst: v4_mapped(word(30)),
            len: u32::from(u16::from_be_bytes([frame[16], frame[17]]).max(20)),
            v6: false,
        }),
        [0x86, 0xdd] if frame.len() >= 54 => {
            let addr = |i: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&frame[i..i + 16]);
                u128::from_be_bytes(b)
            };
            Some(IpFields {
                src: addr(22),
                dst: addr(38),
                len: u32::from(u16::from_be_bytes([frame[18], frame[19]])) + 40,
                v6: true,
            })
        }
        _ => None,
    }
}

pub struct Engine {
    pub ports: Vec<Port>,
    pipes: Vec<Pipe<Pkt>>,
    /// (network, prefix length, port) in the 128-bit key space, longest prefix first
    routes: Vec<(u128, u8, u16)>,
    /// host address (128-bit key) -> (up pipe, down pipe)
    hosts: HashMap<u128, (u32, u32)>,
    /// port_pipe[in * nports + out]
    port_pipe: Vec<u32>,
    /// capture index per pipe (port pipes only)
    capture_of: HashMap<u32, usize>,
    captures: Vec<Capture>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    pool: Vec<Vec<u8>>,
    /// one read's frames of every port, (entry time, port, frame), entered in time order
    arrivals: Vec<(u64, u16, Vec<u8>)>,
    spin_ns: u64,
    /// Longest sleep that ignores the ports (0: always wake on arrivals).
    lazy_ns: u64,
    start_ns: u64,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, refreshed with every stats record
    real_offset: i128,
}

impl Engine {
    /// The engine for `cfg`; with `rx_port` Some(i) it is one shard of a
    /// threaded engine (see `shard.rs`): it receives on port i only, transmits
    /// on every port, and writes only the captures of pipes leaving port i.
    /// `peers` holds one shared peer-MAC cell per port (see `Port`).
    pub fn new(
        cfg: &Config,
        spin_us: u64,
        rx_port: Option<usize>,
        peers: &[Arc<AtomicU64>],
    ) -> Result<Engine, String> {
        let ports = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| Port::open(p, rx_port.is_none_or(|r| r == i), peers[i].clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let port_idx = |name: &str| cfg.ports.iter().position(|p| p.name == name).unwrap() as u16;
        let mut routes = Vec::new();
        for r in &cfg.routes {
            let (net, len) = parse_prefix(&r.prefix)?;
            routes.push((net, len, port_idx(&r.port)));
        }
        routes.sort_by_key(|r| Reverse(r.1));
        let mut pipes = Vec::new();
        let mut hosts = HashMap::with_capacity(cfg.hosts.len());
        for h in &cfg.hosts {
            let ip = parse_ip(&h.ip)?;
            let up = pipes.len() as u32;
            pipes.push(Pipe::new(format!("up:{}", h.ip), &h.up, cfg.seed));
            pipes.push(Pipe::new(format!("down:{}", h.ip), &h.down, cfg.seed));
            if hosts.insert(ip, (up, up + 1)).is_some() {
                return Err(format!("host {} listed twice", h.ip));
            }
        }
        let np = ports.len();
        let mut port_pipe = vec![NO_PIPE; np * np];
        for (a, b, spec) in &cfg.port_pipes {
            let slot = port_idx(a) as usize * np + port_idx(b) as usize;
            port_pipe[slot] = pipes.len() as u32;
            pipes.push(Pipe::new(format!("port:{a}>{b}"), spec, cfg.seed));
        }
        let offset = real_ns() - mono_ns() as i128;
        let mut captures = Vec::new();
        let mut capture_of = HashMap::new();
        for (a, b, path) in &cfg.captures {
            if rx_port.is_some_and(|r| r != port_idx(a) as usize) {
                continue;
            }
            let pipe = port_pipe[port_idx(a) as usize * np + port_idx(b) as usize];
            capture_of.insert(pipe, captures.len());
            captures.push(Capture::create(path, offset)?);
        }
        Ok(Engine {
            ports,
            pipes,
            routes,
            hosts,
            port_pipe,
            capture_of,
            captures,
            heap: BinaryHeap::new(),
            pool: Vec::new(),
            arrivals: Vec::with_capacity(BATCH * np),
            spin_ns: spin_us * 1000,
            lazy_ns: lazy_bound_ns(cfg),
            start_ns: mono_ns(),
            real_offset: offset,
        })
    }

    fn route(&self, dst: u128) -> Option<u16> {
        route_lookup(&self.routes, dst)
    }

    /// Handles one received frame at time `now`.
    fn ingress(&mut self, pi: usize, frame: Vec<u8>, now: u64) {
        let port = &mut self.ports[pi];
        if port.learn_peer && frame.len() >= 12 {
            let mut src = [0u8; 6];
            src.copy_from_slice(&frame[6..12]);
            if src[0] & 1 == 0 {
                port.learn_peer_mac(src);
            }
        }
        let ethertype = if frame.len() >= 14 {
            [frame[12], frame[13]]
        } else {
            [0, 0]
        };
        if ethertype == [8, 6] {
            port.counters.rx_arp += 1;
            if let Some(reply) = port.arp_reply(&frame) {
                port.counters.arp_replies += 1;
                port.txq.push(reply);
            }
            self.pool.push(frame);
            return;
        }
        let Some(IpFields { src, dst, len, v6 }) = ip_fields(&frame).filter(routable) else {
            port.counters.rx_other += 1;
            self.pool.push(frame);
            return;
        };
        if v6 {
            port.counters.rx_ipv6 += 1;
        } else {
            port.counters.rx_ipv4 += 1;
        }
        let Some(out) = self.route(dst) else {
            self.ports[pi].counters.no_route += 1;
            self.pool.push(frame);
            return;
        };
        let mut path = [NO_PIPE; 3];
        let mut n = 0;
        let np = self.ports.len();
        let candidates = [
            self.hosts.get(&src).map_or(NO_PIPE, |h| h.0),
            self.port_pipe[pi * np + out as usize],
            self.hosts.get(&dst).map_or(NO_PIPE, |h| h.1),
        ];
        for c in candidates {
            if c != NO_PIPE {
                path[n] = c;
                n += 1;
            }
        }
        self.advance(
            Pkt {
                buf: frame,
                len,
                out,
                path,
                n: n as u8,
                next: 0,
            },
            now,
        );
    }

    /// Moves a packet into its next pipe at time `t`, or to its port's transmit queue.
    fn advance(&mut self, mut pkt: Pkt, t: u64) {
        if pkt.next == pkt.n {
            let port = &mut self.ports[pkt.out as usize];
            pkt.buf[6..12].copy_from_slice(&port.mac);
            if let Some(mac) = port.peer_mac() {
                pkt.buf[0..6].copy_from_slice(&mac);
            } else {
                // unknown host side: ask (IPv4: ARP, at most every 50 ms) and
                // broadcast meanwhile; IPv6 layouts always configure the peer
                port.counters.tx_unknown_peer += 1;
                let now = mono_ns();
                let v4 = pkt.buf[12..14] == [8, 0];
                if v4 && now.saturating_sub(port.last_arp_request) > 50_000_000 {
                    port.last_arp_request = now;
                    port.counters.arp_requests += 1;
                    let dst =
                        u32::from_be_bytes([pkt.buf[30], pkt.buf[31], pkt.buf[32], pkt.buf[33]]);
                    let req = port.arp_request(dst);
                    port.txq.push(req);
                }
                pkt.buf[0..6].copy_from_slice(&[0xff; 6]);
            }
            port.txq.push(pkt.buf);
            port.txq_due.push(t);
            return;
        }
        let pi = pkt.path[pkt.next as usize];
        pkt.next += 1;
        // serialisation counts the IP packet (see `ip_fields`), as Mahimahi does
        let len = pkt.len;
        match self.pipes[pi as usize].enter(t, len, pkt) {
            Ok((depart, was_empty)) => {
                if was_empty {
                    self.heap.push(Reverse((depart, pi)));
                }
            }
            Err((_, pkt)) => self.pool.push(pkt.buf),
        }
    }

    /// Runs every departure due by `now`, in time order.
    fn run_due(&mut self, now: u64) {
        while let Some(&Reverse((t, pi))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            let pipe = &mut self.pipes[pi as usize];
            let (depart, pkt) = pipe.pop().expect("scheduled pipe is empty");
            if let Some(next) = pipe.head() {
                self.heap.push(Reverse((next, pi)));
            }
            if let Some(&c) = self.capture_of.get(&pi) {
                self.captures[c].write(depart, &pkt.buf);
            }
            self.advance(pkt, depart);
        }
    }

    fn flush(&mut self) {
        for port in &mut self.ports {
            if !port.txq.is_empty() {
                port.flush(&mut self.pool);
            }
        }
        if self.pool.len() > 65536 {
            self.pool.truncate(65536);
        }
    }

    /// Reads one batch from every port; returns whether any port had frames
    /// and the horizon: the time up to which every frame has been read.
    ///
    /// A frame enters its first pipe at the kernel's receive time (so the
    /// engine's wake-up latency is not added to the emulated delay), mapped to
    /// the monotonic clock (never in the future, and at most 1 s back). Frames
    /// still in a ring arrived after the read began (a drained ring) or after
    /// the last frame read (a full batch: ring order is arrival order), so the
    /// caller may run the departures up to the horizon without any unread
    /// frame having to enter a pipe before one of them.
    ///
    /// The frames read are entered in the order of their times, across ports,
    /// and interleaved with the departures due before each (up to the
    /// horizon): a packet leaving a host's access pipe at time t enters the
    /// bottleneck before a frame stamped after t that entered it directly (a
    /// host without an access pipe, such as a foreground host) and was read in
    /// the same pass. Entering a whole read first put such packets behind
    /// frames sent up to a read's lag (~100 us) after them: cross traffic
    /// queued behind a chirp's dense end, which read about 5% high under CBR
    /// (docs/bwest.md, "Why the chirp read CBR about 10% high").
    fn receive(&mut self, frames: &mut Vec<(Vec<u8>, i128)>) -> (bool, u64) {
        let mut horizon = u64::MAX;
        let mut arrivals = std::mem::take(&mut self.arrivals);
        for pi in 0..self.ports.len() {
            if !self.ports[pi].rx {
                continue;
            }
            let before = mono_ns();
            let n = self.ports[pi].recv_batch(&mut self.pool, frames);
            let mut last = before;
            if n > 0 {
                let now = mono_ns();
                for (buf, stamp) in frames.drain(..) {
                    let t =
                        (stamp - self.real_offset).clamp(now as i128 - 1_000_000_000, now as i128);
                    let t = if stamp == 0 { now } else { t as u64 };
                    last = t;
                    arrivals.push((t, pi as u16, buf));
                }
            }
            horizon = horizon.min(if n == BATCH { last } else { before });
        }
        let horizon = horizon.min(mono_ns());
        let any = !arrivals.is_empty();
        arrivals.sort_by_key(|a| a.0); // stable: a ring's order among equal times
        for (t, pi, buf) in arrivals.drain(..) {
            self.run_due(t.min(horizon));
            self.ingress(pi as usize, buf, t);
        }
        self.arrivals = arrivals;
        (any, horizon)
    }

    /// The main loop; returns when STOP is set.
    ///
    /// Spinning (instead of sleeping) in the last `spin_ns` before a departure (or
    /// longer: 1.5x the measured wake-up lateness, at most 250 us)
    /// is limited to a quarter of each 10 ms window, so a busy engine does not
    /// burn its CPU share (under SCHED_FIFO the kernel would throttle it for
    /// 50 ms per second past 95%) and an idle one is still exact.
    /// `wake_fd` (if any) is one more fd to wake up on (a shard's stop signal).
    pub fn run(
        &mut self,
        stats: &mut Option<StatsWriter>,
        wake_fd: Option<i32>,
    ) -> Result<(), String> {
        const WINDOW: u64 = 10_000_000;
        let waiter = Waiter::new(&self.ports, wake_fd)?;
        let interval = stats.as_ref().map_or(u64::MAX, |s| s.interval_ns);
        let mut next_stats = mono_ns().saturating_add(interval);
        let mut frames = Vec::with_capacity(BATCH);
        let (mut window_start, mut spin_used, mut spin_from) = (0u64, 0u64, None::<u64>);
        // How late a wake-up comes after its deadline (an idle vCPU of a VM can take
        // 50-100 us to run again): a moving average (1/8 per late wake-up, so one
        // preemption does not move it much). Before every sleep the spin window grows to
        // 1.5x of it (at most MAX_SPIN), so the departure after it is not missed by the
        // time the thread needs to wake up. Short sleeps count too: a sparse train (a
        // chirp's 100-1000 us gaps) is served from such sleeps, and with `spin_ns` alone
        // 3-8% of an idle chirp's frames left 50 us or more late on a 2-vCPU KVM guest
        // (0.6-1.6% with this). The spin budget (a quarter of each WINDOW) still bounds the
        // CPU a busy engine takes from the hosts.
        const MAX_SPIN: u64 = 250_000;
        let mut late_est = 0u64;
        while !STOP.load(Ordering::Relaxed) {
            let now = mono_ns();
            if let Some(from) = spin_from.take() {
                spin_used += now - from;
            }
            if now - window_start > WINDOW {
                window_start = now;
                spin_used = 0;
            }
            // Arrivals first: a departure is run only once every frame that
            // arrived before it has entered its pipe, and `receive` runs those
            // due before each frame it enters, so reading late (lazy sleeps, a
            // preempted engine) never reorders a pipe's entries.
            let (got, horizon) = self.receive(&mut frames);
            self.run_due(horizon);
            self.flush();
            if now >= next_stats {
                self.real_offset = real_ns() - mono_ns() as i128;
                if let Some(s) = stats.as_mut() {
                    s.write(self, now, false)?;
                }
                next_stats = now + interval;
            }
            if got {
                continue;
            }
            let now = mono_ns();
            let next = self
                .heap
                .peek()
                .map_or(u64::MAX, |r| r.0 .0)
                .min(next_stats);
            if next <= now {
                continue;
            }
            let may_spin = spin_used < WINDOW / 4;
            let spin = self.spin_ns.max((late_est * 3 / 2).min(MAX_SPIN));
            if next - now <= spin && may_spin {
                spin_from = Some(now);
                continue;
            }
            let target = if may_spin { next - spin } else { next };
            waiter.wait(target, next - now > self.lazy_ns);
            let woke = mono_ns();
            if woke > target {
                late_est = (late_est * 7 + (woke - target).min(MAX_SPIN)) / 8;
            }
        }
        self.run_due(mono_ns());
        self.flush();
        if let Some(s) = stats.as_mut() {
            s.write(self, mono_ns(), true)?;
        }
        Ok(())
    }

    fn pipe_json(&mut self, i: usize, now: u64) -> Value {
        let p = &mut self.pipes[i];
        let (qb, qp) = p.queue_at(now);
        let in_flight = p.in_flight();
        let c = &mut p.counters;
        let v = json!({
            "packets": c.packets, "bytes": c.bytes,
            "drops": {"queue": c.drop_queue, "loss": c.drop_loss},
            "drop_bytes": {"queue": c.drop_queue_bytes, "loss": c.drop_loss_bytes},
            "queue_bytes": qb, "queue_packets": qp,
            "peak_queue_bytes": c.peak_queue_bytes, "peak_queue_packets": c.peak_queue_packets,
            "in_flight": in_flight,
        });
        c.peak_queue_bytes = qb;
        c.peak_queue_packets = qp;
        p.dirty = qp > 0 || in_flight > 0;
        v
    }

    /// One stats record: every port and capture, the port pipes, and the host
    /// pipes that changed since the last record (all of them when `full`).
    fn stats_json(&mut self, now: u64, full: bool) -> Value {
        let mut pipes = Map::new();
        for i in 0..self.pipes.len() {
            let port_pipe = self.pipes[i].name.starts_with("port:");
            if full || port_pipe || self.pipes[i].dirty {
                let name = self.pipes[i].name.clone();
                pipes.insert(name, self.pipe_json(i, now));
            }
        }
        let mut ports = Map::new();
        for p in &mut self.ports {
            p.poll_kernel_drops();
            let c = &p.counters;
            ports.insert(p.name.clone(), json!({
                "rx_frames": c.rx_frames, "rx_ipv4": c.rx_ipv4, "rx_ipv6": c.rx_ipv6,
                "rx_arp": c.rx_arp,
                "rx_other": c.rx_other, "rx_truncated": c.rx_truncated,
                "rx_csum_fixed": c.rx_csum_fixed, "arp_requests": c.arp_requests,
                "tx_unknown_peer": c.tx_unknown_peer,
                "arp_replies": c.arp_replies, "tx_frames": c.tx_frames, "tx_errors": c.tx_errors,
                "no_route": c.no_route, "kernel_drops": c.kernel_drops,
                "tx_late_us": c.tx_late.iter().enumerate()
                    .map(|(i, n)| (crate::port::late_bucket_name(i), json!(n)))
                    .collect::<Map<String, Value>>(),
                "mac": p.mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
            }));
        }
        let mut caps = Map::new();
        for c in &mut self.captures {
            c.flush();
            caps.insert(
                c.path.clone(),
                json!({"written": c.written, "lost": c.lost,
                                               "error": c.error}),
            );
        }
        json!({"t": (now - self.start_ns) as f64 / 1e9, "final": full, "pipes": pipes,
               "ports": ports, "captures": caps})
    }
}

/// Where stats records go: the JSON-lines file, or (a shard's) to the thread
/// that merges the shards' records into the file.
enum StatsOut {
    File(std::io::BufWriter<std::fs::File>),
    Shard(usize, Sender<ShardRecord>),
}

/// (shard index, final, record)
pub type ShardRecord = (usize, bool, Value);

pub struct StatsWriter {
    out: StatsOut,
    interval_ns: u64,
}

impl StatsWriter {
    pub fn create(path: &str, interval_ms: u64) -> Result<StatsWriter, String> {
        let f = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(StatsWriter {
            out: StatsOut::File(std::io::BufWriter::new(f)),
            interval_ns: interval_ms.max(1) * 1_000_000,
        })
    }

    pub fn shard(index: usize, to: Sender<ShardRecord>, interval_ms: u64) -> StatsWriter {
        StatsWriter {
            out: StatsOut::Shard(index, to),
            interval_ns: interval_ms.max(1) * 1_000_000,
        }
    }

    fn write(&mut self, eng: &mut Engine, now: u64, full: bool) -> Result<(), String> {
        let v = eng.stats_json(now, full);
        match &mut self.out {
            StatsOut::File(out) => writeln!(out, "{v}")
                .and_then(|_| out.flush())
                .map_err(|e| format!("stats: {e}")),
            StatsOut::Shard(i, to) => to
                .send((*i, full, v))
                .map_err(|_| "stats: merger gone".into()),
        }
    }
}

/// How long frames may wait unread: half the smallest port-pipe delay between
/// two different ports (a pair without a pipe counts 0), at most 1 ms; 0 for
/// fewer than two ports. Host pipes only add delay, so they do not lower the
/// bound. A frame routed back out of its own port would wait as well: hosts
/// reach on-link peers directly, so such frames do not occur in swell's
/// layouts.
fn lazy_bound_ns(cfg: &Config) -> u64 {
    let mut min_us = u64::MAX;
    for a in &cfg.ports {
        for b in cfg.ports.iter().filter(|b| b.name != a.name) {
            let pipe = cfg
                .port_pipes
                .iter()
                .find(|(x, y, _)| *x == a.name && *y == b.name);
            min_us = min_us.min(pipe.map_or(0, |p| p.2.delay_us));
        }
    }
    if min_us == u64::MAX {
        0
    } else {
        (min_us * 1000 / 2).min(1_000_000)
    }
}

/// epoll over the port sockets plus a timerfd for the next departure; a
/// second epoll set holds the timer (and `wake_fd`) alone, for lazy sleeps.
struct Waiter {
    ep: i32,
    ep_timer: i32,
    timer: i32,
}

impl Waiter {
    fn new(ports: &[Port], wake_fd: Option<i32>) -> Result<Waiter, String> {
        // SAFETY: plain fd syscalls on fds this process owns.
        unsafe {
            let ep = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let ep_timer = libc::epoll_create1(libc::EPOLL_CLOEXEC);
            let timer = libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            );
            if ep < 0 || ep_timer < 0 || timer < 0 {
                return Err("epoll/timerfd".into());
            }
            let rx_fds = ports.iter().filter(|p| p.rx).map(|p| p.fd);
            let sets = rx_fds
                .map(|fd| (ep, fd))
                .chain([(ep, timer), (ep_timer, timer)])
                .chain(
                    wake_fd
                        .into_iter()
                        .flat_map(|fd| [(ep, fd), (ep_timer, fd)]),
                );
            for (set, fd) in sets {
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: fd as u64,
                };
                libc::epoll_ctl(set, libc::EPOLL_CTL_ADD, fd, &mut ev);
            }
            Ok(Waiter {
                ep,
                ep_timer,
                timer,
            })
        }
    }

    /// Sleeps until `deadline` (monotonic ns) passes, a signal, or (with
    /// `ports`) a port is readable.
    fn wait(&self, deadline: u64, ports: bool) {
        // SAFETY: itimerspec/epoll_event buffers are valid for the calls.
        unsafe {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: (deadline / 1_000_000_000) as i64,
                    tv_nsec: (deadline % 1_000_000_000) as i64,
                },
            };
            libc::timerfd_settime(
                self.timer,
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            );
            let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
            let set = if ports { self.ep } else { self.ep_timer };
            let n = libc::epoll_wait(set, evs.as_mut_ptr(), 8, -1);
            for e in evs.iter().take(n.max(0) as usize) {
                if e.u64 == self.timer as u64 {
                    let mut buf = [0u8; 8];
                    libc::read(self.timer, buf.as_mut_ptr().cast(), 8);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pipes: serde_json::Value) -> Config {
        let port = |n: &str| json!({"name": n, "netns": "/x", "ifname": n});
        serde_json::from_value(json!({"name": "t", "ports": [port("a"), port("b")],
                                      "routes": [], "port_pipes": pipes}))
        .unwrap()
    }

    fn frame(ethertype: [u8; 2], ip: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype);
        f.extend_from_slice(ip);
        f
    }

    #[test]
    fn reads_ipv4_and_ipv6_headers() {
        let mut v4 = vec![0x45, 0, 0x05, 0xdc, 0, 0, 0, 0, 64, 6, 0, 0];
        v4.extend_from_slice(&[10, 1, 0, 2, 10, 1, 128, 3]);
        let f = ip_fields(&frame([8, 0], &v4)).unwrap();
        assert_eq!(
            f,
            IpFields {
                src: v4_mapped(0x0a01_0002),
                dst: v4_mapped(0x0a01_8003),
                len: 1500,
                v6: false
            }
        );
        // IPv6: version/class/flow, payload length 1460, next header TCP, hop limit
        let mut v6 = vec![0x60, 0, 0, 0, 0x05, 0xb4, 6, 64];
        let src: u128 = "fd00:5e11::2".parse::<std::net::Ipv6Addr>().unwrap().into();
        let dst: u128 = "fd00:5e11:0:8000::3"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .into();
        v6.extend_from_slice(&src.to_be_bytes());
        v6.extend_from_slice(&dst.to_be_bytes());
        let f = ip_fields(&frame([0x86, 0xdd], &v6)).unwrap();
        assert_eq!(
            f,
            IpFields {
                src,
                dst,
                len: 1500,
                v6: true
            }
        );
        // a cut header, ARP, and the wrong ethertype for the header are not IP
        assert!(ip_fields(&frame([0x86, 0xdd], &v6[..39])).is_none());
        assert!(ip_fields(&frame([8, 6], &v6)).is_none());
        assert!(ip_fields(&frame([8, 0], &v4[..19])).is_none());
        // an MLD report (:: -> ff02::16) is not routed; unicast of both families is
        let mld = IpFields {
            src: 0,
            dst: 0xff02_u128 << 112 | 0x16,
            len: 76,
            v6: true,
        };
        assert!(!routable(&mld) && routable(&f));
        assert!(routable(&IpFields {
            src: 0,
            dst: v4_mapped(0xe000_0001),
            len: 20,
            v6: false
        }));
    }

    #[test]
    fn routes_of_both_families_share_one_key_space() {
        let mut routes = Vec::new();
        for (i, p) in [
            "fd00:5e11::/49",
            "fd00:5e11:0:8000::/49",
            "10.1.0.0/17",
            "fd00:5e11::7",
        ]
        .iter()
        .enumerate()
        {
            let (net, len) = parse_prefix(p).unwrap();
            routes.push((net, len, i as u16));
        }
        routes.sort_by_key(|r| Reverse(r.1));
        let lookup = |s: &str| route_lookup(&routes, parse_ip(s).unwrap());
        assert_eq!(lookup("fd00:5e11::2"), Some(0));
        assert_eq!(lookup("fd00:5e11::7"), Some(3)); // the longest prefix wins
        assert_eq!(lookup("fd00:5e11:0:8001::2"), Some(1));
        assert_eq!(lookup("10.1.0.9"), Some(2));
        // an IPv4 address never matches an IPv6 prefix nor the other way round
        assert_eq!(lookup("10.1.128.9"), None);
        assert_eq!(lookup("::a01:9"), None);
    }

    #[test]
    fn lazy_bound_is_half_the_smallest_port_delay_capped() {
        let both = |da: u64, db: u64| {
            config(json!([["a", "b", {"delay_us": da}],
                                                   ["b", "a", {"delay_us": db}]]))
        };
        assert_eq!(lazy_bound_ns(&both(5_000, 800)), 400_000);
        assert_eq!(lazy_bound_ns(&both(20_000, 20_000)), 1_000_000);
        assert_eq!(lazy_bound_ns(&both(0, 5_000)), 0);
        // a direction without a port pipe has no delay to hide late reads in
        assert_eq!(
            lazy_bound_ns(&config(json!([["a", "b", {"delay_us": 5_000}]]))),
            0
        );
        assert_eq!(lazy_bound_ns(&config(json!([]))), 0);
    }
}
