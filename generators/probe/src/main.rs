//! `swell-probe`: the sender and receiver of swell's bandwidth estimators.
//!
//! The estimators themselves (SLoPS search, chirp excursions) live in Python
//! (`swell.analysis.bwest`); this program only does what Python cannot do
//! well: send UDP packets at exact microsecond departures and stamp arrivals
//! in the kernel.
//!
//! * `swell-probe recv --bind IP:PORT`: prints `ready`, then one line per
//!   probe packet, `P <train> <seq> <tx_ns> <rx_ns> <udp_bytes>`, where
//!   `rx_ns` is the kernel's receive stamp (`SO_TIMESTAMPNS`, CLOCK_REALTIME)
//!   and `tx_ns` the sender's departure stamp carried in the packet. Output is
//!   flushed whenever the socket is drained, so the stamps never depend on how
//!   fast the lines are read. Ping packets are echoed to their sender.
//! * `swell-probe send --dst IP:PORT --src IP [--spin-us N] [--late-us N]
//!   [--rt-priority N]`: reads commands on stdin, one per line:
//!   - `train <id> <udp_bytes> <gap_ns> <gap_ns> ...`: one packet, then one
//!     more after each gap (a SLoPS stream has equal gaps, a chirp shrinking
//!     ones); departures are absolute (start + sum of gaps), the sender sleeps
//!     until `--spin-us` (default 300) before a departure and busy-polls the
//!     clock for the rest. A departure more than `--late-us` (default 20)
//!     behind its time (the sender was descheduled) re-anchors the rest of
//!     the train on it: the late packet leaves one long gap and the next ones
//!     keep their planned gaps. Catching up instead would send the overdue
//!     packets back to back, a burst that builds a queue no stream below the
//!     available bandwidth would (pathload's sender paces each packet from
//!     the previous one for the same reason). Prints
//!     `sent <id> <packets> <first_tx_ns> <last_tx_ns>`;
//!   - `ping`: one ping to the receiver, prints `pong` or `noreply` (200 ms);
//!   - `quit`.
//!
//!   `--rt-priority` (1-99) runs the sender under SCHED_FIFO, below the link
//!   engine's priority, so ordinary tasks do not deschedule it mid-train (a
//!   warning, not an error, where the kernel refuses).
//!
//! Packet: magic `SWPB`, kind (0 probe, 1 ping), train id (u32), seq (u32),
//! departure stamp (u64 ns, CLOCK_REALTIME), big-endian, then zero padding.

use std::io::{BufRead, BufWriter, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::io::AsRawFd;
use std::time::Duration;

const MAGIC: &[u8; 4] = b"SWPB";
const HEADER: usize = 21;
const KIND_PROBE: u8 = 0;
const KIND_PING: u8 = 1;

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// Sleep until `spin` ns before `target`, then busy-poll the clock until it is reached.
fn wait_until(target: u64, spin: u64) -> u64 {
    let mut now = now_ns();
    if target > now + spin {
        sleep_ns(target - now - spin);
    }
    while now < target {
        std::hint::spin_loop();
        now = now_ns();
    }
    now
}

struct Args(Vec<(String, String)>);

impl Args {
    fn parse(raw: &[String]) -> Result<Args, String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            let key = raw[i]
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {:?}", raw[i]))?;
            let val = raw
                .get(i + 1)
                .ok_or_else(|| format!("--{key} needs a value"))?;
            out.push((key.to_string(), val.clone()));
            i += 2;
        }
        Ok(Args(out))
    }
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    fn req(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or_else(|| format!("--{key} is required"))
    }
    fn known(&self, keys: &[&str]) -> Result<(), String> {
        for (k, _) in &self.0 {
            if !keys.contains(&k.as_str()) {
                return Err(format!("unknown option --{k}"));
            }
        }
        Ok(())
    }
}

fn addr(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("bad address {s:?} (want IP:PORT)"))
}

fn header(buf: &mut [u8], kind: u8, train: u32, seq: u32, tx: u64) {
    buf[0..4].copy_from_slice(MAGIC);
    buf[4] = kind;
    buf[5..9].copy_from_slice(&train.to_be_bytes());
    buf[9..13].copy_from_slice(&seq.to_be_bytes());
    buf[13..21].copy_from_slice(&tx.to_be_bytes());
}

fn set_int(fd: i32, level: i32, opt: i32, val: i32) {
    unsafe {
        libc::setsockopt(fd, level, opt, &val as *const i32 as *const libc::c_void, 4);
    }
}

/// One datagram with its kernel receive stamp (ns, CLOCK_REALTIME) and source.
fn recv_stamped(fd: i32, buf: &mut [u8], block: bool) -> Option<(usize, u64, libc::sockaddr_in)> {
    let mut src: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut cbuf = [0u8; 128];
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &mut src as *mut _ as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as u32;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = cbuf.len();
    let flags = if block { 0 } else { libc::MSG_DONTWAIT };
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
    if n < 0 {
        return None;
    }
    let mut stamp = 0u64;
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if stamp == 0 {
        stamp = now_ns();
    }
    Some((n as usize, stamp, src))
}

/// Asks the kernel for a software stamp of each datagram's transmission (taken in the
/// device's transmit path, after the system call: a sender preempted between its own
/// clock read and the send no longer shifts the stamp), numbered from 0 per socket.
fn enable_tx_stamps(fd: i32) -> bool {
    let flags = (libc::SOF_TIMESTAMPING_TX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_OPT_ID
        | libc::SOF_TIMESTAMPING_OPT_TSONLY) as i32;
    // SAFETY: passes a live i32 of the size given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &flags as *const i32 as *const libc::c_void,
            4,
        ) == 0
    }
}

/// Reads every transmit stamp queued on the socket's error queue: (datagram number,
/// CLOCK_REALTIME ns).
fn read_tx_stamps(fd: i32, out: &mut Vec<(u32, u64)>) {
    loop {
        let mut data = [0u8; 64];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        let mut cbuf = [0u8; 256];
        // SAFETY: a zeroed msghdr is valid; its pointers are set to live buffers below.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = cbuf.len();
        // SAFETY: msg points to live buffers for the duration of the call.
        if unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) } < 0 {
            return;
        }
        let (mut stamp, mut id) = (None, None);
        // SAFETY: walks the control messages the kernel wrote into cbuf.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                    || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                {
                    let e = std::ptr::read_unaligned(
                        libc::CMSG_DATA(c) as *const libc::sock_extended_err
                    );
                    if e.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                        id = Some(e.ee_data);
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if let (Some(s), Some(i)) = (stamp, id) {
            if s > 0 {
                out.push((i, s));
            }
        }
    }
}

/// The kernel's transmit stamps of datagrams `first..first + n` (0 where none came:
/// the kernel refused stamps, or one did not arrive within 20 ms).
fn train_tx_stamps(fd: i32, first: u32, n: usize) -> Vec<u64> {
    let (mut stamps, mut got) = (vec![0u64; n], Vec::new());
    let deadline = now_ns() + 20_000_000;
    loop {
        read_tx_stamps(fd, &mut got);
        for &(i, s) in &got {
            let k = i.wrapping_sub(first) as usize; // an earlier datagram's (a ping's) is far out
            if k < n {
                stamps[k] = s;
            }
        }
        got.clear();
        if stamps.iter().all(|&s| s > 0) || now_ns() > deadline {
            return stamps;
        }
        sleep_ns(200_000);
    }
}

fn recv(args: &Args) -> Result<(), String> {
    args.known(&["bind"])?;
    let bind = addr(args.req("bind")?)?;
    let sock = UdpSocket::bind(bind).map_err(|e| format!("bind {bind}: {e}"))?;
    let fd = sock.as_raw_fd();
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    writeln!(out, "ready")
        .and_then(|_| out.flush())
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65536];
    let mut block = true;
    loop {
        match recv_stamped(fd, &mut buf, block) {
            None => {
                if !block {
                    out.flush().map_err(|e| e.to_string())?;
                    block = true;
                    continue;
                }
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(format!("recv: {err}"));
            }
            Some((n, rx, src)) => {
                block = false;
                if n < HEADER || &buf[0..4] != MAGIC {
                    continue;
                }
                let train = u32::from_be_bytes(buf[5..9].try_into().unwrap());
                let seq = u32::from_be_bytes(buf[9..13].try_into().unwrap());
                let tx = u64::from_be_bytes(buf[13..21].try_into().unwrap());
                if buf[4] == KIND_PING {
                    let to = SocketAddr::from((
                        std::net::Ipv4Addr::from(u32::from_be(src.sin_addr.s_addr)),
                        u16::from_be(src.sin_port),
                    ));
                    let _ = sock.send_to(&buf[..n], to);
                    continue;
                }
                writeln!(out, "P {train} {seq} {tx} {rx} {n}").map_err(|e| e.to_string())?;
            }
        }
    }
}

fn set_realtime(priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on this process with a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "swell-probe: warning: SCHED_FIFO {priority}: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn send(args: &Args) -> Result<(), String> {
    args.known(&["dst", "src", "spin-us", "late-us", "rt-priority"])?;
    let dst = addr(args.req("dst")?)?;
    let src: std::net::IpAddr = args
        .req("src")?
        .parse()
        .map_err(|_| "bad --src (want an IP address)".to_string())?;
    let spin: u64 = args
        .get("spin-us")
        .unwrap_or("300")
        .parse::<u64>()
        .map_err(|_| "bad --spin-us".to_string())?
        * 1000;
    let late: u64 = args
        .get("late-us")
        .unwrap_or("20")
        .parse::<u64>()
        .map_err(|_| "bad --late-us".to_string())?
        * 1000;
    if let Some(p) = args.get("rt-priority") {
        match p.parse::<i32>() {
            Ok(p) if (1..=99).contains(&p) => set_realtime(p),
            _ => return Err("bad --rt-priority (want 1-99)".into()),
        }
    }
    let sock = UdpSocket::bind(SocketAddr::new(src, 0)).map_err(|e| format!("bind {src}: {e}"))?;
    sock.connect(dst)
        .map_err(|e| format!("connect {dst}: {e}"))?;
    set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 8 << 20);
    // the error queue holding the transmit stamps counts against the receive buffer
    set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20);
    let stamped = enable_tx_stamps(sock.as_raw_fd());
    if !stamped {
        eprintln!(
            "swell-probe: warning: no kernel transmit stamps: {}",
            std::io::Error::last_os_error()
        );
    }
    let mut datagrams = 0u32;
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "ready")
        .and_then(|_| out.flush())
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65536];
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let mut f = line.split_whitespace();
        match f.next() {
            Some("train") => {
                let id: u32 = f
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("train: bad id")?;
                let size: usize = f
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("train: bad size")?;
                if !(HEADER..=65507).contains(&size) {
                    return Err(format!("train: size {size} must be {HEADER}..65507 bytes"));
                }
                let gaps: Vec<u64> = f
                    .map(|v| {
                        v.parse::<u64>()
                            .map_err(|_| format!("train: bad gap {v:?}"))
                    })
                    .collect::<Result<_, _>>()?;
                let start = now_ns() + 50_000;
                let first_datagram = datagrams;
                let (mut target, mut first, mut last) = (start, 0u64, 0u64);
                for seq in 0..=gaps.len() {
                    wait_until(target, spin);
                    let tx = now_ns();
                    if tx > target + late {
                        target = tx; // re-anchor: a long gap, never a catch-up burst
                    }
                    header(&mut buf, KIND_PROBE, id, seq as u32, tx);
                    if let Err(e) = sock.send(&buf[..size]) {
                        return Err(format!("send: {e}"));
                    }
                    datagrams = datagrams.wrapping_add(1);
                    if seq == 0 {
                        first = tx;
                    }
                    last = tx;
                    if seq < gaps.len() {
                        target += gaps[seq];
                    }
                }
                let n = gaps.len() + 1;
                let kernel = if stamped {
                    train_tx_stamps(sock.as_raw_fd(), first_datagram, n)
                } else {
                    vec![0; n]
                };
                let kernel: Vec<String> = kernel.iter().map(u64::to_string).collect();
                writeln!(out, "sent {id} {n} {first} {last} {}", kernel.join(" "))
                    .and_then(|_| out.flush())
                    .map_err(|e| e.to_string())?;
            }
            Some("ping") => {
                header(&mut buf, KIND_PING, 0, 0, now_ns());
                if sock.send(&buf[..HEADER]).is_ok() {
                    datagrams = datagrams.wrapping_add(1);
                }
                sock.set_read_timeout(Some(Duration::from_millis(200))).ok();
                let mut rb = [0u8; 64];
                let answer = match sock.recv(&mut rb) {
                    Ok(n) if n >= HEADER && &rb[0..4] == MAGIC && rb[4] == KIND_PING => "pong",
                    _ => "noreply",
                };
                writeln!(out, "{answer}")
                    .and_then(|_| out.flush())
                    .map_err(|e| e.to_string())?;
            }
            Some("quit") | None => break,
            Some(other) => return Err(format!("unknown command {other:?}")),
        }
    }
    Ok(())
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let res = match argv.get(1).map(String::as_str) {
        Some("recv") => Args::parse(&argv[2..]).and_then(|a| recv(&a)),
        Some("send") => Args::parse(&argv[2..]).and_then(|a| send(&a)),
        _ => Err("usage: swell-probe recv --bind IP:PORT | send --dst IP:PORT --src IP".into()),
    };
    if let Err(e) = res {
        eprintln!("swell-probe: {e}");
        std::process::exit(2);
    }
}
