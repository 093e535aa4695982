//! Paced packet sources (`send`), a logging receiver (`recv`) and a readiness
//! probe (`probe`).
//!
//! `send` emits fixed-size messages at a constant or exponential
//! (Poisson-process) inter-departure time, over UDP or as paced writes on one
//! TCP connection. Departure times are absolute (start + sum of gaps), so
//! error never accumulates; the sender sleeps until `--spin-us` (default 1000;
//! 40 with `--rt`, widened to what this host's wake-ups need: `util::Pacer`)
//! before a departure and busy-polls the clock for the rest, so gaps under
//! 1 ms are pure busy-polling (like D-ITG's `-poll`); timer slack is 1 ns.
//! Each message starts with its sequence number and departure time (u64 ns,
//! CLOCK_MONOTONIC, big-endian).
//!
//! Catching up. A sender that was blocked (a TCP window closed by congestion,
//! a preempted process) finds messages overdue; it sends them back to back as
//! soon as the socket accepts them, so the asked rate is kept whenever the
//! path has room. The backlog is bounded by `--catchup-ms` (default 1000): a
//! message due longer ago than that is skipped (its sequence number is not
//! used; counted as `skipped`), so a long stall never turns into a flood of
//! more than one second's worth of the schedule. For TCP the kernel's share of
//! the backlog is bounded too: `TCP_NOTSENT_LOWAT` (`--lowat`, default 64 KiB)
//! keeps at most that many unsent bytes in the socket (the send buffer still
//! grows for in-flight data), so the backlog waits in the schedule, where it is
//! counted and bounded, not in an autotuned kernel buffer of megabytes; writes
//! time out every 100 ms so a stop is honoured while blocked. The summary line
//! counts `skipped` and `unsent` (still owed when the duration ended).
//!
//! `recv` logs (seq, tx_ns, rx_ns, size) as four little-endian u64 per message
//! into `--log`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use crate::util::*;

fn stamp(buf: &mut [u8], seq: u64, now: u64) {
    buf[0..8].copy_from_slice(&seq.to_be_bytes());
    buf[8..16].copy_from_slice(&now.to_be_bytes());
}

enum Out {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

fn open_out(proto: &str, dst: SocketAddr, src: Option<SocketAddr>) -> Result<Out, String> {
    let udp = proto == "udp";
    let s = new_socket(&dst, src, udp).map_err(|e| format!("socket: {e}"))?;
    if udp {
        s.connect(&dst.into())
            .map_err(|e| format!("connect {dst}: {e}"))?;
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        let _ = s.set_send_buffer_size(4 << 20);
        return Ok(Out::Udp(s.into()));
    }
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.connect_timeout(&dst.into(), Duration::from_secs(5))
        .map_err(|e| format!("connect {dst}: {e}"))?;
    let t: TcpStream = s.into();
    t.set_write_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let _ = t.set_nodelay(true);
    Ok(Out::Tcp(t))
}

/// At most `lowat` unsent bytes stay in the kernel (TCP_NOTSENT_LOWAT).
fn set_notsent_lowat(t: &TcpStream, lowat: u32) {
    use std::os::fd::AsRawFd;
    let v = lowat as libc::c_int;
    unsafe {
        libc::setsockopt(
            t.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Write one whole message, waiting while the socket does not accept it; false on an
/// error or when stopped (a message cut by a stop is not counted as sent).
fn write_msg(t: &mut TcpStream, msg: &[u8]) -> bool {
    let mut off = 0;
    while off < msg.len() {
        match t.write(&msg[off..]) {
            Ok(0) => return false,
            Ok(n) => off += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                if stopped() {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}

pub fn send(args: &Args) -> Result<(), String> {
    args.check_known(&[
        "dst",
        "src",
        "proto",
        "pps",
        "size",
        "dist",
        "duration",
        "seed",
        "spin-us",
        "interval-ms",
        "rt",
        "catchup-ms",
        "lowat",
    ])?;
    let dst = parse_addr(args.req("dst")?)?;
    let src = match args.get("src") {
        Some(a) => Some(parse_src(a, &dst)?),
        None => None,
    };
    let proto = args.get("proto").unwrap_or("udp");
    let pps: f64 = args.num("pps", 0.0)?;
    let size: usize = args.num("size", 512)?;
    let dist = args.get("dist").unwrap_or("const");
    let duration: f64 = args.num("duration", 0.0)?;
    // Under SCHED_FIFO a shorter base window spares the CPU; the pacer widens it to
    // this host's measured wake-up lateness.
    let mut pacer =
        Pacer::new(args.num::<u64>("spin-us", if args.flag("rt") { 40 } else { 1000 })? * 1000);
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if !(pps > 0.0) || duration <= 0.0 {
        return Err("--pps and --duration must be positive".into());
    }
    if !(16..=65507).contains(&size) || (proto == "udp" && size > 65507) {
        return Err(format!("--size {size}: must be 16..65507 bytes"));
    }
    if proto != "udp" && proto != "tcp" {
        return Err(format!("--proto {proto:?}: udp or tcp"));
    }
    if dist != "const" && dist != "exp" {
        return Err(format!("--dist {dist:?}: const or exp"));
    }
    let mut rng = Rng::new(args.num("seed", 1u64)?);
    let interval = args.num::<u64>("interval-ms", 1000)?.max(10) * 1_000_000;
    if args.flag("rt") {
        set_realtime()?;
    }
    let catchup = args.num::<u64>("catchup-ms", 1000)? * 1_000_000;
    let mut out = open_out(proto, dst, src)?;
    if let Out::Tcp(t) = &out {
        set_notsent_lowat(t, args.num::<u32>("lowat", 64 << 10)?);
    }
    let mean = 1e9 / pps;
    let mut buf = vec![0u8; size];
    let start = mono_ns() + 1_000_000;
    let end = start + (duration * 1e9) as u64;
    let (mut next, mut acc) = (start, 0.0f64);
    let (mut sent, mut errors, mut late_sum, mut late_max) = (0u64, 0u64, 0u64, 0u64);
    let (mut seq, mut skipped) = (0u64, 0u64);
    let mut report = start + interval;
    let draw = |rng: &mut Rng| if dist == "exp" { rng.exp(mean) } else { mean };
    while next < end && !stopped() {
        // the bound on catching up: messages due over `catchup` ago are skipped
        let now = mono_ns();
        while next < end && now > next + catchup {
            skipped += 1;
            acc += draw(&mut rng);
            next = start + acc as u64;
        }
        if next >= end {
            break;
        }
        if next >= report {
            println!(
                "{{\"t\":{:.3},\"sent\":{sent},\"tx_bytes\":{}}}",
                (report - start) as f64 / 1e9,
                sent * size as u64
            );
            let _ = std::io::stdout().flush();
            report += interval;
        }
        let now = pacer.wait_until(next);
        stamp(&mut buf, seq, now);
        seq += 1;
        let ok = match &mut out {
            Out::Udp(u) => u.send(&buf).is_ok(),
            Out::Tcp(t) => write_msg(t, &buf),
        };
        if ok {
            sent += 1;
        } else if !stopped() {
            errors += 1;
        }
        late_sum += now - next;
        late_max = late_max.max(now - next);
        acc += draw(&mut rng);
        next = start + acc as u64;
    }
    // what the schedule still owed when the duration ended (the backlog left unsent)
    let mut unsent = 0u64;
    while next < end && !stopped() {
        unsent += 1;
        acc += draw(&mut rng);
        next = start + acc as u64;
    }
    let elapsed = (mono_ns() - start) as f64 / 1e9;
    let n = (sent + errors).max(1);
    println!(
        "{{\"sent\":{sent},\"errors\":{errors},\"skipped\":{skipped},\"unsent\":{unsent},\"bytes\":{},\"elapsed_s\":{elapsed:.6},\"late_mean_ns\":{},\"late_max_ns\":{late_max}}}",
        sent * size as u64, late_sum / n
    );
    Ok(())
}

struct Log {
    rows: Vec<[u64; 4]>,
}

impl Log {
    /// Log one message; its departure time.
    fn add(&mut self, msg: &[u8], rx: u64) -> u64 {
        let seq = u64::from_be_bytes(msg[0..8].try_into().unwrap());
        let tx = u64::from_be_bytes(msg[8..16].try_into().unwrap());
        self.rows.push([seq, tx, rx, msg.len() as u64]);
        tx
    }
    fn write(&self, path: &str) -> Result<(), String> {
        let mut out = Vec::with_capacity(self.rows.len() * 32);
        for r in &self.rows {
            for v in r {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        std::fs::write(path, out).map_err(|e| format!("{path}: {e}"))
    }
}

/// SCHED_FIFO for the sender (root only): fewer preemptions in the busy-poll.
fn set_realtime() -> Result<(), String> {
    let param = libc::sched_param { sched_priority: 10 };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(format!(
            "--rt: sched_setscheduler: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

pub fn recv(args: &Args) -> Result<(), String> {
    args.check_known(&["listen", "proto", "size", "log", "duration", "idle"])?;
    let addr = parse_addr(args.req("listen")?)?;
    let proto = args.get("proto").unwrap_or("udp");
    let size: usize = args.num("size", 512)?;
    let path = args.req("log")?;
    let duration: f64 = args.num("duration", 3600.0)?;
    let idle = (args.num::<f64>("idle", 0.0)? * 1e9) as u64;
    let mut log = Log { rows: Vec::new() };
    let end = mono_ns() + (duration * 1e9) as u64;
    let tick = Some(Duration::from_millis(50));
    let mut last = 0u64;
    // after a stop, what is still in flight is logged before exit (Drain)
    let drain = Drain::new();
    let done = |last: u64| {
        drain.done(last) || mono_ns() > end || (idle > 0 && last > 0 && mono_ns() > last + idle)
    };
    if proto == "udp" {
        let s = new_socket(&addr, Some(addr), true).map_err(|e| format!("bind {addr}: {e}"))?;
        let _ = s.set_recv_buffer_size(8 << 20);
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        let u: UdpSocket = s.into();
        u.set_read_timeout(tick).map_err(|e| e.to_string())?;
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut buf = vec![0u8; 65536];
        // The stop conditions are checked when the socket is idle (or every
        // 4096 datagrams), so what is already queued is logged before exit.
        let mut since = 0u32;
        loop {
            match u.recv(&mut buf) {
                Ok(n) => {
                    last = mono_ns();
                    if n >= 16 {
                        drain.saw(log.add(&buf[..n], last), last);
                    }
                    since += 1;
                    if since >= 4096 && done(last) {
                        break;
                    }
                }
                Err(_) if done(last) => break,
                Err(_) => {}
            }
            if since >= 4096 {
                since = 0;
            }
        }
    } else {
        let s = new_socket(&addr, Some(addr), false).map_err(|e| format!("bind {addr}: {e}"))?;
        s.listen(16).map_err(|e| e.to_string())?;
        let l: TcpListener = s.into();
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut stream = loop {
            if done(0) {
                return log.write(path);
            }
            match l.accept() {
                Ok((st, _)) => break st,
                Err(_) => sleep_until_ns(mono_ns() + 5_000_000),
            }
        };
        stream.set_nonblocking(false).map_err(|e| e.to_string())?;
        stream.set_read_timeout(tick).map_err(|e| e.to_string())?;
        let mut msg = vec![0u8; size];
        let mut got = 0usize;
        while !done(last) {
            match stream.read(&mut msg[got..]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    last = mono_ns();
                    if got == size {
                        drain.saw(log.add(&msg, last), last);
                        got = 0;
                    }
                }
                Err(_) => continue,
            }
        }
    }
    log.write(path)
}

/// Exchange one 8-byte request/response with a swell-gen server (or only
/// connect, for other servers), retrying until `--timeout` seconds pass.
pub fn probe(args: &Args) -> Result<(), String> {
    args.check_known(&["addr", "src", "timeout", "attempt-ms", "connect-only"])?;
    let addr = parse_addr(args.req("addr")?)?;
    let src = match args.get("src") {
        Some(a) => Some(parse_src(a, &addr)?),
        None => None,
    };
    let deadline = mono_ns() + (args.num::<f64>("timeout", 10.0)? * 1e9) as u64;
    let only = args.flag("connect-only");
    // one attempt's connect and answer timeout: the caller fits it to the path's
    // round trip and loss (a long path must not be declared dead after 500 ms)
    let attempt = Duration::from_millis(args.num::<u64>("attempt-ms", 500)?.max(1));
    let mut last_err = String::new();
    while mono_ns() < deadline && !stopped() {
        match probe_once(addr, src, only, attempt) {
            Ok(()) => {
                println!("OK {addr}");
                return Ok(());
            }
            Err(e) => last_err = e,
        }
        sleep_until_ns(mono_ns() + 20_000_000);
    }
    Err(format!("{addr} not answering: {last_err}"))
}

fn probe_once(
    addr: SocketAddr,
    src: Option<SocketAddr>,
    only: bool,
    attempt: Duration,
) -> Result<(), String> {
    let s = new_socket(&addr, src, false).map_err(|e| e.to_string())?;
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.connect_timeout(&addr.into(), attempt)
        .map_err(|e| e.to_string())?;
    if only {
        return Ok(());
    }
    let mut t: TcpStream = s.into();
    t.set_read_timeout(Some(attempt))
        .map_err(|e| e.to_string())?;
    let mut hdr = [0u8; TCP_HDR];
    put_u32(&mut hdr, 0, TCP_HDR as u32);
    put_u32(&mut hdr, 4, 8);
    t.write_all(&hdr).map_err(|e| e.to_string())?;
    let mut back = [0u8; 8];
    t.read_exact(&mut back)
        .map_err(|e| format!("no answer: {e}"))
}
