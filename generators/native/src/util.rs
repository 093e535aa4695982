//! Shared helpers: monotonic clock, stop flag (SIGTERM/SIGINT), a seeded RNG,
//! socket creation (bind to an emulated host's address, IP_FREEBIND), and the
//! wire constants both roles agree on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// TCP request header: u32 total request bytes (header included), u32 response bytes.
pub const TCP_HDR: usize = 8;
/// Set in the header's response word when the server is to wait before responding:
/// the request's next 4 bytes (counted in its total) are the wait in microseconds.
pub const TCP_WAIT_FLAG: u32 = 0x8000_0000;
/// The header of a request that carries a server wait: 8 bytes and the u32 wait.
pub const TCP_HDR_WAIT: usize = 12;
/// UDP request datagram header: magic, conn, pair, req_total, offset, rsp_total (u32 each).
pub const UDP_HDR: usize = 24;
pub const UDP_MAGIC: u32 = 0x5357_4c55; // "SWLU"
/// Largest UDP payload we send over IPv4 (1500-byte IP packets); see [`udp_max`].
pub const UDP_MAX: usize = 1472;
/// The same over IPv6 (40-byte IP header: 1452 + 8 + 40 = 1500).
pub const UDP_MAX_V6: usize = 1452;
pub const ZEROS: [u8; 65536] = [0u8; 65536];

static STOP: AtomicBool = AtomicBool::new(false);
/// CLOCK_MONOTONIC ns of the first stop signal (0: none yet).
static STOP_AT: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_signal(_sig: libc::c_int) {
    // clock_gettime is async-signal-safe
    let _ = STOP_AT.compare_exchange(0, mono_ns(), Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Install SIGTERM/SIGINT handlers that only raise the stop flag.
pub fn install_stop_handlers() {
    unsafe {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Raise the open-file limit for tens of thousands of sockets: to the kernel's
/// `nr_open` (up to 2^20) when allowed (root), else to the hard limit.
pub fn raise_nofile() {
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0)
        .min(1 << 20);
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return;
        }
        if nr_open > r.rlim_max as u64 {
            let big = libc::rlimit {
                rlim_cur: nr_open as _,
                rlim_max: nr_open as _,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &big) == 0 {
                return;
            }
        }
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
}

pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The quiet period a stopped receiver waits for, at least and at most.
pub const DRAIN_MIN_NS: u64 = 100_000_000;
pub const DRAIN_MAX_NS: u64 = 2_500_000_000;
/// A stopped receiver exits this long after the stop, whatever keeps arriving
/// (under the 5 s its parent allows before SIGKILL, which would lose the log).
pub const DRAIN_CAP_NS: u64 = 4_000_000_000;
/// One-way delays at least this long are not believed (clocks of two hosts).
const DELAY_PLAUSIBLE_NS: u64 = 5_000_000_000;

/// When a receiver told to stop may exit: once the path has had time to
/// deliver what was still in flight. The senders are stopped first, so what
/// is still to come left them before the stop and arrives within the path's
/// one-way delay: the receiver waits until nothing has arrived for 1.5 times
/// the largest delay it measured (sender and receiver share CLOCK_MONOTONIC;
/// delays that are not plausible, from another host's clock, are ignored)
/// plus 50 ms, within [`DRAIN_MIN_NS`, `DRAIN_MAX_NS`]; never longer than
/// [`DRAIN_CAP_NS`] after the stop, whatever keeps arriving. A stop signal
/// interrupts a receive that has a timeout (EINTR even with SA_RESTART), so
/// the stop flag alone would drop the datagrams still on the wire. Shared by
/// threads (atomics).
pub struct Drain {
    max_delay: AtomicU64,
}

impl Drain {
    pub fn new() -> Self {
        Drain {
            max_delay: AtomicU64::new(0),
        }
    }

    /// A message sent at `tx` arrived at `rx` (both CLOCK_MONOTONIC ns).
    pub fn saw(&self, tx: u64, rx: u64) {
        if rx > tx && rx - tx < DELAY_PLAUSIBLE_NS {
            self.max_delay.fetch_max(rx - tx, Ordering::Relaxed);
        }
    }

    pub fn quiet_ns(&self) -> u64 {
        let d = self.max_delay.load(Ordering::Relaxed);
        (d + d / 2 + 50_000_000).clamp(DRAIN_MIN_NS, DRAIN_MAX_NS)
    }

    /// Stopped, and nothing arrived (last at `last_rx`) for the quiet period.
    pub fn done(&self, last_rx: u64) -> bool {
        let at = STOP_AT.load(Ordering::Relaxed);
        if at == 0 {
            return false;
        }
        let now = mono_ns();
        now >= at.max(last_rx) + self.quiet_ns() || now >= at + DRAIN_CAP_NS
    }
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

/// CLOCK_MONOTONIC in nanoseconds (shared by every network namespace).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until an absolute CLOCK_MONOTONIC time (no drift accumulation).
pub fn sleep_until_ns(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Waits for absolute departure times: sleeps until a spin window before each one,
/// then busy-polls the clock (timer slack 1 ns).
///
/// The window is at least `base_ns` (`--spin-us`) and adapts to how late this
/// host's wake-ups from a sleep come: an estimate that rises fast (a quarter of
/// the way per later wake-up) and decays slowly (1/64 per earlier one), so it
/// follows the high tail, not the mean; the window is twice it, at most
/// `MAX_SPIN_NS`. Under SCHED_FIFO the base window is short (40 us) to spare the
/// CPU, and a VM whose wake-ups are often later than that made every departure
/// late (D-ITG side by side, docs/packet-mmpp.md); the estimate widens the window
/// exactly as far as this host needs.
///
/// But never beyond half of the wait when that is longer than the base window: a
/// window as long as the gap is a sender that never sleeps, and under SCHED_FIFO
/// the kernel's real-time throttling (950 ms of each second) then stops it for
/// 50 ms every second: 500 packets late at 10k/s, an inter-departure standard
/// deviation of about 400 us. On this VM on 2026-11-29 the late estimate grew
/// past 50 us in most 10k/s runs and that happened in 3 of 5 (the CBR test next to
/// D-ITG); a departure a few tens of us late is the better trade. Gaps shorter than
/// the base window are still spun through (50k/s: throttled, docs/bench-gen.md).
pub struct Pacer {
    base_ns: u64,
    late_est_ns: u64,
}

pub const MAX_SPIN_NS: u64 = 2_000_000;

impl Pacer {
    pub fn new(base_ns: u64) -> Pacer {
        Pacer {
            base_ns,
            late_est_ns: 0,
        }
    }

    /// The current spin window (ns).
    pub fn spin_ns(&self) -> u64 {
        self.base_ns.max((2 * self.late_est_ns).min(MAX_SPIN_NS))
    }

    /// Folds one wake-up's lateness (ns after its target) into the estimate.
    pub fn observe(&mut self, late_ns: u64) {
        let late = late_ns.min(MAX_SPIN_NS);
        if late > self.late_est_ns {
            self.late_est_ns += (late - self.late_est_ns) / 4;
        } else {
            self.late_est_ns -= (self.late_est_ns - late) / 64;
        }
    }

    /// Returns once `next` (CLOCK_MONOTONIC ns) has passed: the time it returned.
    pub fn wait_until(&mut self, next: u64) -> u64 {
        let wait = next.saturating_sub(mono_ns());
        let spin = self.spin_ns().min(wait / 2).max(self.base_ns.min(wait));
        if next > mono_ns() + spin {
            let target = next - spin;
            sleep_until_ns(target);
            self.observe(mono_ns().saturating_sub(target));
        }
        let mut now = mono_ns();
        while now < next {
            std::hint::spin_loop();
            now = mono_ns();
        }
        now
    }
}

/// SplitMix64: small, fast, seedable; enough for inter-departure draws.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.unit().ln()
    }
}

/// Largest UDP payload to or from `peer` that fits a 1500-byte IP packet.
pub fn udp_max(peer: &SocketAddr) -> usize {
    if peer.is_ipv4() {
        UDP_MAX
    } else {
        UDP_MAX_V6
    }
}

/// A source address for `--src ADDR` (brackets allowed) in the family of `dst`.
pub fn parse_src(text: &str, dst: &SocketAddr) -> Result<SocketAddr, String> {
    let ip: std::net::IpAddr = text
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| format!("bad --src {text:?}"))?;
    if ip.is_ipv4() != dst.is_ipv4() {
        return Err(format!(
            "--src {ip} and the destination {dst} are different address families"
        ));
    }
    Ok(SocketAddr::new(ip, 0))
}

fn domain_of(addr: &SocketAddr) -> Domain {
    if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// A non-blocking socket, optionally bound to `local` with IP_FREEBIND: a fixed
/// port is a server (SO_REUSEADDR), port 0 a client (IP_BIND_ADDRESS_NO_PORT for TCP).
pub fn new_socket(
    peer_or_local: &SocketAddr,
    local: Option<SocketAddr>,
    udp: bool,
) -> std::io::Result<Socket> {
    let (ty, proto) = if udp {
        (Type::DGRAM, Protocol::UDP)
    } else {
        (Type::STREAM, Protocol::TCP)
    };
    let s = Socket::new(domain_of(peer_or_local), ty, Some(proto))?;
    s.set_nonblocking(true)?;
    if let Some(local) = local {
        if local.port() != 0 {
            s.set_reuse_address(true)?; // a server address: rebind right after a restart
        } else if !udp {
            // Client side: pick the port at connect() time, knowing the 4-tuple, so
            // thousands of connections from one address never collide or run dry.
            let one: libc::c_int = 1;
            let rc = unsafe {
                libc::setsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&s),
                    libc::IPPROTO_IP,
                    libc::IP_BIND_ADDRESS_NO_PORT,
                    &one as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if local.is_ipv4() {
            s.set_freebind(true)?;
        } else {
            s.set_freebind_ipv6(true)?;
        }
        s.bind(&SockAddr::from(local))?;
    }
    if !udp {
        s.set_nodelay(true)?;
    }
    Ok(s)
}

/// Delayed ACKs on a TCP socket (TCP_QUICKACK off): acknowledge every second
/// full segment, or after the delayed-ACK timer, as a receiver does in bulk.
///
/// Linux acknowledges every segment in "quick-ack" mode: for the first up to 16
/// segments of a connection, again after any pause in receiving longer than
/// the RTO (each response after a think time), and after the delayed-ACK timer
/// fires. Web receivers (the traces') acknowledge about every second segment
/// (0.45 ACKs per segment in bulk, example.pcap), so the generator's receivers
/// sent 0.66 per segment against 0.51 (web-lan). Turning TCP_QUICKACK off puts the
/// socket in "ping-pong" (interactive) mode, where the quick-ack count is not
/// used; the kernel leaves that mode when a delayed ACK's timer fires, so
/// callers re-arm it after every read. Best effort: an error is ignored.
pub fn delay_acks<S: std::os::fd::AsRawFd>(s: &S) {
    let zero: libc::c_int = 0;
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            &zero as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Parse "a.b.c.d:port" or "[v6]:port" with a readable error.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>()
        .map_err(|e| format!("bad address {text:?}: {e}"))
}

pub fn u32_at(buf: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]])
}

pub fn put_u32(buf: &mut [u8], i: usize, v: u32) {
    buf[i..i + 4].copy_from_slice(&v.to_be_bytes());
}

/// Minimal "--key value" argument reader shared by the subcommands.
pub struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    pub fn parse(argv: &[String], flags: &[&str]) -> Result<Args, String> {
        let mut pairs = Vec::new();
        let mut i = 0;
        while i < argv.len() {
            let key = argv[i]
                .strip_prefix("--")
                .ok_or(format!("unexpected argument {:?}", argv[i]))?;
            if flags.contains(&key) {
                pairs.push((key.to_string(), "1".to_string()));
                i += 1;
                continue;
            }
            let val = argv.get(i + 1).ok_or(format!("--{key} needs a value"))?;
            pairs.push((key.to_string(), val.clone()));
            i += 2;
        }
        Ok(Args { pairs })
    }
    pub fn check_known(&self, known: &[&str]) -> Result<(), String> {
        for (k, _) in &self.pairs {
            if !known.contains(&k.as_str()) {
                return Err(format!("unknown option --{k}"));
            }
        }
        Ok(())
    }
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
    pub fn req(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or(format!("--{key} is required"))
    }
    pub fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<T>()
                .map_err(|_| format!("--{key}: bad number {v:?}")),
        }
    }
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_widens_its_window_to_late_wake_ups_and_narrows_slowly() {
        let mut p = Pacer::new(40_000);
        assert_eq!(p.spin_ns(), 40_000);
        for _ in 0..20 {
            p.observe(60_000); // wake-ups 60 us late: the 40 us window misses them
        }
        assert!(
            p.spin_ns() >= 110_000 && p.spin_ns() <= 120_000,
            "{}",
            p.spin_ns()
        );
        for _ in 0..20 {
            p.observe(0); // prompt again: the estimate decays by 1/64 a wake-up
        }
        assert!(p.spin_ns() > 70_000, "{}", p.spin_ns());
        for _ in 0..2000 {
            p.observe(0);
        }
        assert_eq!(p.spin_ns(), 40_000); // never below the base
        p.observe(u64::MAX);
        assert!(p.spin_ns() <= MAX_SPIN_NS);
        let next = mono_ns() + 300_000;
        assert!(p.wait_until(next) >= next);
    }

    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    #[test]
    fn pacer_sleeps_at_least_half_of_a_long_wait_however_late_wake_ups_are() {
        let mut p = Pacer::new(40_000);
        for _ in 0..50 {
            p.observe(MAX_SPIN_NS); // an estimate as late as it gets: a 2 ms window
        }
        assert_eq!(p.spin_ns(), MAX_SPIN_NS);
        // 20 waits of 1 ms: the old window spun through all of them (about 20 ms of
        // CPU); now each sleeps its first half
        let (cpu0, t0) = (thread_cpu_ns(), mono_ns());
        for i in 1..=20 {
            let next = t0 + i * 1_000_000;
            assert!(p.wait_until(next) >= next);
        }
        let cpu = thread_cpu_ns() - cpu0;
        assert!(cpu < 15_000_000, "{cpu} ns of CPU over 20 ms of waits");
        // a wait shorter than the base window is spun through, as before
        let next = mono_ns() + 20_000;
        assert!(p.wait_until(next) >= next);
    }

    #[test]
    fn addresses_of_both_families() {
        let v4 = parse_addr("10.0.2.1:8080").unwrap();
        let v6 = parse_addr("[fd00::2:1]:8080").unwrap();
        assert!(v6.is_ipv6() && v6.port() == 8080);
        assert!(parse_addr("fd00::2:1:8080").is_err()); // a v6 port needs brackets
        assert_eq!((udp_max(&v4), udp_max(&v6)), (1472, 1452));
        assert_eq!(
            parse_src("[fd00::1:2]", &v6).unwrap().ip().to_string(),
            "fd00::1:2"
        );
        assert_eq!(
            parse_src("10.0.1.2", &v4).unwrap().ip().to_string(),
            "10.0.1.2"
        );
        let err = parse_src("10.0.1.2", &v6).unwrap_err();
        assert!(err.contains("different address families"), "{err}");
        assert!(parse_src("nonsense", &v4).is_err());
    }

    fn quickack(s: &std::net::TcpStream) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let fd = std::os::fd::AsRawFd::as_raw_fd(s);
        let p = &mut v as *mut libc::c_int as *mut libc::c_void;
        let rc =
            unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, p, &mut len) };
        assert_eq!(rc, 0);
        v
    }

    #[test]
    fn delay_acks_leaves_quickack_mode() {
        // the kernel reports TCP_QUICKACK as "not in ping-pong mode": 1 on a fresh
        // connection, 0 once delayed ACKs are asked for
        let srv = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(srv.local_addr().unwrap()).unwrap();
        let (a, _) = srv.accept().unwrap();
        assert_eq!((quickack(&c), quickack(&a)), (1, 1));
        delay_acks(&c);
        delay_acks(&a);
        assert_eq!((quickack(&c), quickack(&a)), (0, 0));
    }

    #[test]
    fn v6_sockets_bind_and_connect_on_loopback() {
        // a server and a client socket on ::1: AF_INET6, source bound, port picked at connect
        let srv = std::net::TcpListener::bind("[::1]:0");
        let Ok(srv) = srv else {
            eprintln!("skipped: no IPv6 loopback here");
            return;
        };
        let addr = srv.local_addr().unwrap();
        let s = new_socket(&addr, Some(parse_src("::1", &addr).unwrap()), false).unwrap();
        s.set_nonblocking(false).unwrap();
        s.connect(&addr.into()).unwrap();
        let (_, peer) = srv.accept().unwrap();
        assert!(peer.is_ipv6());
    }
}
