//! `swell-gen serve`: the server side of every emulated server host.
//!
//! Listens for TCP and UDP on each `--listen ADDR:PORT` (IP_FREEBIND, so an
//! address may be bound before it is configured). TCP: each request starts
//! with an 8-byte header (u32 total request bytes, u32 response bytes); once
//! the whole request is read the server writes exactly that many response
//! bytes. Requests are parsed as a byte stream, so back-to-back requests work.
//! A request whose response word has `TCP_WAIT_FLAG` set carries the server's
//! wait (u32 microseconds) in its next 4 bytes: its response is queued until
//! the request's end plus the wait (the trace's server-side latency), in order
//! behind any response still waiting; a heap of due times wakes the loop (at the
//! microsecond, through an `alarm::Alarm`).
//! UDP: a request datagram carries a 24-byte header; the datagram that
//! completes the request (offset + length == total) triggers the response,
//! sent as datagrams of at most 1472 bytes (1452 over IPv6). Prints `READY` once every socket
//! is bound; SIGTERM stops it and prints a JSON summary line.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{Read, Write};
use std::net::SocketAddr;

use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};

use crate::alarm::{Alarm, ALARM};
use crate::util::*;

struct SrvConn {
    stream: TcpStream,
    hdr: [u8; TCP_HDR],
    hdr_got: usize,
    body_left: u64,
    rsp: u64,
    pending: u64,
    /// the request being read carries a wait: its first body bytes are the wait
    wait_flag: bool,
    wait_got: usize,
    wait_buf: [u8; 4],
    /// responses waiting for their due time (monotonic ns), in request order
    waiting: VecDeque<(u64, u64)>,
}

/// Due times of waiting responses: (due ns, connection slot).
type Wakeups = BinaryHeap<Reverse<(u64, usize)>>;

enum Listener {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

#[derive(Default)]
struct Stats {
    accepted: u64,
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
    udp_requests: u64,
    udp_send_drops: u64,
    accept_errors: u64,
}

const CONN_BASE: usize = 1 << 20;

pub fn serve(args: &Args) -> Result<(), String> {
    args.check_known(&["listen", "proto"])?;
    let addrs: Vec<SocketAddr> = args
        .all("listen")
        .iter()
        .map(|a| parse_addr(a))
        .collect::<Result<_, _>>()?;
    if addrs.is_empty() {
        return Err("serve needs at least one --listen ADDR:PORT".into());
    }
    let proto = args.get("proto").unwrap_or("both");
    let mut poll = Poll::new().map_err(|e| e.to_string())?;
    let mut listeners = Vec::new();
    for a in &addrs {
        if proto != "udp" {
            let s = new_socket(a, Some(*a), false).map_err(|e| format!("listen tcp {a}: {e}"))?;
            s.listen(4096).map_err(|e| format!("listen tcp {a}: {e}"))?;
            let mut l = TcpListener::from_std(s.into());
            poll.registry()
                .register(&mut l, Token(listeners.len()), Interest::READABLE)
                .map_err(|e| e.to_string())?;
            listeners.push(Listener::Tcp(l));
        }
        if proto != "tcp" {
            let s = new_socket(a, Some(*a), true).map_err(|e| format!("bind udp {a}: {e}"))?;
            let _ = s.set_send_buffer_size(4 << 20);
            let _ = s.set_recv_buffer_size(4 << 20);
            let mut u = UdpSocket::from_std(s.into());
            poll.registry()
                .register(&mut u, Token(listeners.len()), Interest::READABLE)
                .map_err(|e| e.to_string())?;
            listeners.push(Listener::Udp(u));
        }
    }
    println!("READY");
    std::io::stdout().flush().ok();
    let stats = event_loop(&mut poll, &mut listeners)?;
    println!(
        "{{\"accepted\":{},\"requests\":{},\"bytes_in\":{},\"bytes_out\":{},\"udp_requests\":{},\"udp_send_drops\":{},\"accept_errors\":{}}}",
        stats.accepted, stats.requests, stats.bytes_in, stats.bytes_out, stats.udp_requests,
        stats.udp_send_drops, stats.accept_errors
    );
    Ok(())
}

fn event_loop(poll: &mut Poll, listeners: &mut [Listener]) -> Result<Stats, String> {
    let mut events = Events::with_capacity(1024);
    let mut conns: Vec<Option<SrvConn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut stats = Stats::default();
    let mut buf = vec![0u8; 65536];
    let mut wake: Wakeups = BinaryHeap::new();
    let mut alarm = Alarm::new(poll.registry(), ALARM)?;
    while !stopped() {
        let mut timeout = std::time::Duration::from_millis(100);
        if let Some(Reverse((due, _))) = wake.peek() {
            let now = mono_ns();
            timeout = timeout.min(std::time::Duration::from_nanos(due.saturating_sub(now)));
            alarm.set(*due); // the poll's own timeout is whole milliseconds
        }
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.to_string());
        }
        let now = mono_ns();
        while let Some(&Reverse((due, slot))) = wake.peek() {
            if due > now {
                break;
            }
            wake.pop();
            // a stale entry (the slot closed or reused) releases nothing not yet due
            let alive = match conns.get_mut(slot).and_then(|c| c.as_mut()) {
                Some(c) => {
                    release_due(c, now);
                    drive(c, &mut buf, &mut stats, slot, &mut wake)
                }
                None => continue,
            };
            if !alive {
                if let Some(mut c) = conns[slot].take() {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
                free.push(slot);
            }
        }
        for ev in events.iter() {
            if ev.token() == ALARM {
                alarm.fired();
                continue;
            }
            let t = ev.token().0;
            if t < CONN_BASE {
                match &mut listeners[t] {
                    Listener::Tcp(l) => accept_all(poll, l, &mut conns, &mut free, &mut stats),
                    Listener::Udp(u) => udp_serve(u, &mut buf, &mut stats),
                }
                continue;
            }
            let slot = t - CONN_BASE;
            let alive = match conns[slot].as_mut() {
                Some(c) => drive(c, &mut buf, &mut stats, slot, &mut wake),
                None => continue,
            };
            if !alive {
                if let Some(mut c) = conns[slot].take() {
                    let _ = poll.registry().deregister(&mut c.stream);
                }
                free.push(slot);
            }
        }
    }
    Ok(stats)
}

fn accept_all(
    poll: &Poll,
    l: &TcpListener,
    conns: &mut Vec<Option<SrvConn>>,
    free: &mut Vec<usize>,
    stats: &mut Stats,
) {
    loop {
        match l.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nodelay(true);
                delay_acks(&stream);
                let slot = free.pop().unwrap_or_else(|| {
                    conns.push(None);
                    conns.len() - 1
                });
                let interest = Interest::READABLE | Interest::WRITABLE;
                if poll
                    .registry()
                    .register(&mut stream, Token(CONN_BASE + slot), interest)
                    .is_err()
                {
                    free.push(slot);
                    continue;
                }
                stats.accepted += 1;
                conns[slot] = Some(SrvConn {
                    stream,
                    hdr: [0; TCP_HDR],
                    hdr_got: 0,
                    body_left: 0,
                    rsp: 0,
                    pending: 0,
                    wait_flag: false,
                    wait_got: 0,
                    wait_buf: [0; 4],
                    waiting: VecDeque::new(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                stats.accept_errors += 1;
                return; // out of descriptors: retried on the next event
            }
            Err(_) => continue, // ECONNABORTED, EINTR, ...: the next one may be fine
        }
    }
}

/// Consume request bytes; each completed request adds its response to `pending`,
/// or, when it carries a wait, queues it until its due time (`wake` gets the time).
fn consume(c: &mut SrvConn, mut data: &[u8], stats: &mut Stats, slot: usize, wake: &mut Wakeups) {
    while !data.is_empty() {
        if c.body_left == 0 {
            let take = (TCP_HDR - c.hdr_got).min(data.len());
            c.hdr[c.hdr_got..c.hdr_got + take].copy_from_slice(&data[..take]);
            c.hdr_got += take;
            data = &data[take..];
            if c.hdr_got < TCP_HDR {
                return;
            }
            c.hdr_got = 0;
            let total = u32_at(&c.hdr, 0) as u64;
            let word = u32_at(&c.hdr, 4);
            c.wait_flag = word & TCP_WAIT_FLAG != 0;
            c.wait_got = 0;
            c.rsp = (word & !TCP_WAIT_FLAG) as u64;
            c.body_left = total.saturating_sub(TCP_HDR as u64);
            if c.body_left == 0 {
                c.wait_flag = false; // a wait with no room for it: answered at once
                request_done(c, stats, slot, wake);
            }
        } else {
            let take = (c.body_left as usize).min(data.len());
            if c.wait_flag && c.wait_got < 4 {
                let k = take.min(4 - c.wait_got);
                c.wait_buf[c.wait_got..c.wait_got + k].copy_from_slice(&data[..k]);
                c.wait_got += k;
            }
            c.body_left -= take as u64;
            data = &data[take..];
            if c.body_left == 0 {
                request_done(c, stats, slot, wake);
            }
        }
    }
}

/// A whole request was read: owe its response now or after its wait.
fn request_done(c: &mut SrvConn, stats: &mut Stats, slot: usize, wake: &mut Wakeups) {
    stats.requests += 1;
    let wait_us = if c.wait_flag && c.wait_got == 4 {
        u32_at(&c.wait_buf, 0) as u64
    } else {
        0
    };
    c.wait_flag = false;
    if wait_us == 0 && c.waiting.is_empty() {
        c.pending += c.rsp;
        return;
    }
    let due = mono_ns() + wait_us * 1000;
    // in order behind a response still waiting (a later due never overtakes it)
    let due = c.waiting.back().map_or(due, |&(d, _)| due.max(d));
    c.waiting.push_back((due, c.rsp));
    wake.push(Reverse((due, slot)));
}

/// Move the responses whose time has come to `pending`.
fn release_due(c: &mut SrvConn, now: u64) {
    while let Some(&(due, rsp)) = c.waiting.front() {
        if due > now {
            break;
        }
        c.pending += rsp;
        c.waiting.pop_front();
    }
}

/// Read what is there, write what is owed; false when the connection is finished.
fn drive(
    c: &mut SrvConn,
    buf: &mut [u8],
    stats: &mut Stats,
    slot: usize,
    wake: &mut Wakeups,
) -> bool {
    let mut eof = false;
    let mut got = false;
    loop {
        match c.stream.read(buf) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                got = true;
                stats.bytes_in += n as u64;
                consume(c, &buf[..n], stats, slot, wake);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    if got && !eof {
        delay_acks(&c.stream); // see util::delay_acks: re-armed after each read
    }
    while c.pending > 0 {
        let n = (c.pending as usize).min(ZEROS.len());
        match c.stream.write(&ZEROS[..n]) {
            Ok(w) => {
                c.pending -= w as u64;
                stats.bytes_out += w as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    !eof
}

fn udp_serve(u: &UdpSocket, buf: &mut [u8], stats: &mut Stats) {
    loop {
        let (n, src) = match u.recv_from(buf) {
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        stats.bytes_in += n as u64;
        if n < UDP_HDR || u32_at(buf, 0) != UDP_MAGIC {
            continue;
        }
        let (total, offset, rsp) = (u32_at(buf, 12), u32_at(buf, 16), u32_at(buf, 20));
        if offset as u64 + n as u64 != total as u64 {
            continue;
        }
        stats.udp_requests += 1;
        let mut left = rsp as usize;
        while left > 0 {
            let k = left.min(udp_max(&src));
            match u.send_to(&ZEROS[..k], src) {
                Ok(w) => stats.bytes_out += w as u64,
                Err(_) => stats.udp_send_drops += 1,
            }
            left -= k;
        }
    }
}
