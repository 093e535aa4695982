//! `swell-gen run`: execute a session schedule on one core, event driven.
//!
//! Sessions start at their scheduled times (relative to the run start). A
//! session runs its RREs one after another: an RRE starts `gap` seconds after
//! the previous one ended, and opens its connections at their `offset`s. Every
//! socket is bound to the session's client address (port 0) before connect,
//! so it leaves through that emulated host's link. A connection sends each
//! request (8-byte header for TCP, 24-byte header per UDP datagram; a paced UDP
//! request as its `pace` count of datagrams, the first at once and the rest
//! evenly over its span, `dgram_count`), waits for
//! exactly the response size, waits `think`, and goes on; then it closes and a
//! record line is written. An `early` request (TCP) does not wait for the
//! responses outstanding: it leaves at its anchor or once the previous request
//! is out, and the responses, answered in order by the server, are read off one
//! stream (`client_io::take_responses`); a request that is not early waits for
//! all of them. Timers live in one binary heap; sockets in one mio
//! poll, woken at the next timer's due time by an `alarm::Alarm` (epoll's own
//! timeout is whole milliseconds). Counters go to stdout as JSON lines every `--interval-ms`.
//!
//! On the wire a TCP request's header and body leave in one write, and both
//! ends acknowledge with delayed ACKs (`util::delay_acks`, re-armed after each
//! read) as the traces' receivers did, not with Linux's per-segment quick ACKs:
//! the ACKs are most of the client -> server packets (issue 19, docs/scale.md).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, IoSlice, Read, Write};
use std::net::{IpAddr, SocketAddr};

use mio::{Events, Interest, Poll, Token};

use crate::alarm::{Alarm, ALARM};
use crate::client_io::{dgram_count, open_sock, take_responses, OpenError, Sock, Step};
use crate::schedule::{self, ConnSpec, Proto, Schedule};
use crate::util::*;

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Timer {
    RreStart { s: u32 },
    ConnStart { s: u32, c: u32 },
    PairNext { slot: u32, gen: u32 },
    UdpTimeout { slot: u32, gen: u32, pair: u32 },
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Phase {
    Connecting,
    /// writing request `pair`
    Sending,
    /// request `pair` waits for the responses still outstanding
    Receiving,
    /// request `pair` waits for its time (a timer)
    Thinking,
    /// every request written; the last responses outstanding
    Done,
}

struct Conn {
    s: u32,
    r: u32,
    c: u32,
    gen: u32,
    sock: Option<Sock>,
    phase: Phase,
    /// the request being written or next (the send side's pair)
    pair: usize,
    sent: u64,
    /// responses outstanding in request order (pair, bytes): more than one only when
    /// a request left before the previous response was in (`early`); `recvd` is the
    /// front's
    rq: VecDeque<(usize, u64)>,
    recvd: u64,
    /// pairs complete (request written, response in)
    done: usize,
    tx: u64,
    rx: u64,
    start: u64,
    local: Option<SocketAddr>,
    /// datagrams of the current UDP request sent, and when its first left (ns)
    dgrams: u64,
    req_t0: u64,
}

#[derive(Default, Clone)]
struct SessState {
    rre: u32,
    started: u32,
    open: u32,
}

#[derive(Default)]
struct Counters {
    sessions_started: u64,
    sessions_done: u64,
    conns_started: u64,
    conns_ok: u64,
    conns_failed: u64,
    conns_deferred: u64,
    tx_bytes: u64,
    rx_bytes: u64,
}

struct Runner {
    sched: Schedule,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    gen: u32,
    sess: Vec<SessState>,
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    alarm: Alarm,
    seq: u64,
    base: u64,
    udp_timeout: u64,
    records: BufWriter<File>,
    k: Counters,
    buf: Vec<u8>,
}

fn to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

pub fn run(args: &Args) -> Result<(), String> {
    args.check_known(&[
        "schedule",
        "records",
        "interval-ms",
        "duration",
        "udp-timeout-ms",
    ])?;
    let sched = schedule::load(args.req("schedule")?)?;
    let rec_path = args.req("records")?;
    let records = File::create(rec_path).map_err(|e| format!("{rec_path}: {e}"))?;
    let interval = args.num::<u64>("interval-ms", 1000)?.max(10) * 1_000_000;
    let duration = args.num::<f64>("duration", 0.0)?; // 0: until every session ends
    let n = sched.sessions.len();
    let poll = Poll::new().map_err(|e| e.to_string())?;
    let alarm = Alarm::new(poll.registry(), ALARM)?;
    let mut r = Runner {
        sched,
        poll,
        alarm,
        conns: Vec::new(),
        free: Vec::new(),
        gen: 0,
        sess: vec![SessState::default(); n],
        timers: BinaryHeap::new(),
        seq: 0,
        base: mono_ns(),
        udp_timeout: args.num::<u64>("udp-timeout-ms", 2000)? * 1_000_000,
        records: BufWriter::with_capacity(1 << 20, records),
        k: Counters::default(),
        buf: vec![0u8; 65536],
    };
    let end = if duration > 0.0 {
        r.base + to_ns(duration)
    } else {
        u64::MAX
    };
    r.main_loop(end, interval)?;
    r.records.flush().map_err(|e| format!("{rec_path}: {e}"))?;
    Ok(())
}

impl Runner {
    fn push(&mut self, at: u64, t: Timer) {
        self.seq += 1;
        self.timers.push(Reverse((at, self.seq, t)));
    }

    fn main_loop(&mut self, end: u64, interval: u64) -> Result<(), String> {
        let mut events = Events::with_capacity(4096);
        let mut cursor = 0usize;
        let mut next_report = self.base + interval;
        let n = self.sched.sessions.len();
        loop {
            let now = mono_ns();
            while cursor < n && self.base + to_ns(self.sched.sessions[cursor].t) <= now {
                let at = self.base + to_ns(self.sched.sessions[cursor].t);
                let gap = to_ns(self.sched.sessions[cursor].rres[0].gap);
                self.push(at + gap, Timer::RreStart { s: cursor as u32 });
                self.k.sessions_started += 1;
                cursor += 1;
            }
            self.fire_timers(now);
            if now >= next_report {
                self.report(now, false);
                next_report += interval;
            }
            let active = self.k.sessions_started - self.k.sessions_done;
            if stopped() || now >= end || (cursor == n && active == 0) {
                break;
            }
            let mut wake = next_report.min(end);
            if cursor < n {
                wake = wake.min(self.base + to_ns(self.sched.sessions[cursor].t));
            }
            if let Some(Reverse((at, _, _))) = self.timers.peek() {
                wake = wake.min(*at);
            }
            self.alarm.set(wake); // the poll's own timeout is whole milliseconds
            let wait = wake.saturating_sub(mono_ns()).min(100_000_000);
            match self
                .poll
                .poll(&mut events, Some(std::time::Duration::from_nanos(wait)))
            {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            }
            for ev in events.iter() {
                if ev.token() == ALARM {
                    self.alarm.fired();
                    continue;
                }
                self.on_event(ev.token().0, ev.is_error());
            }
        }
        for slot in 0..self.conns.len() {
            if self.conns[slot].is_some() {
                self.finish(slot, Some("cut"));
            }
        }
        self.report(mono_ns(), true);
        Ok(())
    }

    fn report(&mut self, now: u64, last: bool) {
        let k = &self.k;
        let open = self.conns.len() - self.free.len();
        println!(
            "{{\"t\":{:.3},\"sessions_started\":{},\"sessions_active\":{},\"sessions_done\":{},\"conns_started\":{},\"conns_active\":{},\"conns_ok\":{},\"conns_failed\":{},\"conns_deferred\":{},\"tx_bytes\":{},\"rx_bytes\":{},\"final\":{}}}",
            (now - self.base) as f64 / 1e9, k.sessions_started, k.sessions_started - k.sessions_done,
            k.sessions_done, k.conns_started, open, k.conns_ok, k.conns_failed, k.conns_deferred,
            k.tx_bytes, k.rx_bytes, last
        );
        let _ = std::io::stdout().flush();
    }

    fn fire_timers(&mut self, now: u64) {
        while let Some(Reverse((at, _, t))) = self.timers.peek().copied() {
            if at > now {
                return;
            }
            self.timers.pop();
            match t {
                Timer::RreStart { s } => self.rre_start(s, now),
                Timer::ConnStart { s, c } => self.conn_start(s, c, now),
                Timer::PairNext { slot, gen } => {
                    if self.live(slot as usize, gen) {
                        self.conns[slot as usize].as_mut().unwrap().phase = Phase::Sending;
                        self.progress(slot as usize);
                    }
                }
                Timer::UdpTimeout { slot, gen, pair } => {
                    let sl = slot as usize;
                    if self.live(sl, gen) {
                        let c = self.conns[sl].as_ref().unwrap();
                        if c.rq.front().is_some_and(|f| f.0 == pair as usize) {
                            self.finish(sl, Some("udp-timeout"));
                        }
                    }
                }
            }
        }
    }

    fn live(&self, slot: usize, gen: u32) -> bool {
        matches!(self.conns.get(slot), Some(Some(c)) if c.gen == gen)
    }

    fn rre_start(&mut self, s: u32, now: u64) {
        let st = &mut self.sess[s as usize];
        st.started = 0;
        st.open = 0;
        let r = st.rre as usize;
        let n = self.sched.sessions[s as usize].rres[r].conns.len();
        for c in 0..n {
            let off = to_ns(self.sched.sessions[s as usize].rres[r].conns[c].offset);
            self.push(now + off, Timer::ConnStart { s, c: c as u32 });
        }
    }

    fn spec(&self, s: u32, r: u32, c: u32) -> &ConnSpec {
        &self.sched.sessions[s as usize].rres[r as usize].conns[c as usize]
    }

    fn conn_start(&mut self, s: u32, c: u32, now: u64) {
        let r = self.sess[s as usize].rre;
        let client: IpAddr = self.sched.sessions[s as usize].client;
        let (server, proto) = {
            let sp = self.spec(s, r, c);
            (sp.server, sp.proto)
        };
        let opened = match open_sock(server, SocketAddr::new(client, 0), proto) {
            Err(OpenError::NoFds) => {
                // Out of file descriptors: start it as soon as one is free (its
                // record shows the late start) instead of failing it.
                self.k.conns_deferred += 1;
                self.push(now + 1_000_000, Timer::ConnStart { s, c });
                return;
            }
            Err(OpenError::Other(e)) => Err(e),
            Ok(sock) => Ok(sock),
        };
        self.sess[s as usize].started += 1;
        self.sess[s as usize].open += 1;
        self.k.conns_started += 1;
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        self.gen = self.gen.wrapping_add(1);
        let (sock, err) = match opened {
            Ok(sock) => (Some(sock), None),
            Err(e) => (None, Some(e)),
        };
        let phase = if proto == Proto::Tcp {
            Phase::Connecting
        } else {
            Phase::Sending
        };
        let mut conn = Conn {
            s,
            r,
            c,
            gen: self.gen,
            sock,
            phase,
            pair: 0,
            sent: 0,
            rq: VecDeque::new(),
            recvd: 0,
            done: 0,
            tx: 0,
            rx: 0,
            start: now,
            local: None,
            dgrams: 0,
            req_t0: now,
        };
        let interest = Interest::READABLE | Interest::WRITABLE;
        let reg = match &mut conn.sock {
            Some(Sock::Tcp(t)) => self.poll.registry().register(t, Token(slot), interest),
            Some(Sock::Udp(u)) => self.poll.registry().register(u, Token(slot), interest),
            None => Ok(()),
        };
        if let Some(Sock::Udp(u)) = &conn.sock {
            conn.local = u.local_addr().ok();
        }
        self.conns[slot] = Some(conn);
        if let Some(e) = err {
            self.finish_msg(slot, &e);
        } else if let Err(e) = reg {
            self.finish_msg(slot, &format!("register: {e}"));
        } else if proto == Proto::Udp {
            self.progress(slot);
        }
    }

    fn on_event(&mut self, slot: usize, is_error: bool) {
        let Some(Some(c)) = self.conns.get_mut(slot) else {
            return;
        };
        if c.phase == Phase::Connecting {
            let Some(Sock::Tcp(t)) = &c.sock else { return };
            if let Ok(Some(e)) | Err(e) = t.take_error() {
                let msg = format!("connect: {e}");
                self.finish_msg(slot, &msg);
                return;
            }
            match t.peer_addr() {
                Ok(_) => {
                    c.local = t.local_addr().ok();
                    c.phase = Phase::Sending;
                    delay_acks(t);
                }
                Err(_) if is_error => return self.finish(slot, Some("connect failed")),
                Err(_) => return,
            }
        }
        self.progress(slot);
    }

    /// Move a connection as far as its socket allows: read what responses are
    /// outstanding, write the request that is due.
    fn progress(&mut self, slot: usize) {
        loop {
            let Some(Some(c)) = self.conns.get(slot) else {
                return;
            };
            let mut moved = false;
            if c.phase != Phase::Connecting && !c.rq.is_empty() {
                match self.recv_some(slot) {
                    Step::Blocked => {}
                    Step::Failed(e) => return self.finish_msg(slot, &e),
                    Step::Again => moved = true,
                    Step::Complete => {
                        moved = true;
                        if !self.responses_in(slot) {
                            return;
                        }
                    }
                }
            }
            let c = self.conns[slot].as_ref().unwrap();
            if c.phase == Phase::Sending {
                let p = self.spec(c.s, c.r, c.c).pairs[c.pair];
                match self.send_some(slot, p.req as u64, p.rsp, p.wait) {
                    Step::Blocked => {}
                    Step::Failed(e) => return self.finish_msg(slot, &e),
                    Step::Again => moved = true,
                    Step::Complete => {
                        moved = true;
                        if !self.request_done(slot) {
                            return;
                        }
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn send_some(&mut self, slot: usize, req: u64, rsp: u32, wait: f64) -> Step {
        let now = mono_ns();
        let udp_timeout = self.udp_timeout;
        let (dgram_max, (paced, span)) = {
            let c = self.conns[slot].as_ref().unwrap();
            let sp = self.spec(c.s, c.r, c.c);
            (udp_max(&sp.server), sp.pace(c.pair)) // 1472 over IPv4, 1452 over IPv6
        };
        let c = self.conns[slot].as_mut().unwrap();
        if paced > 1 && matches!(c.sock, Some(Sock::Udp(_))) {
            // a paced request: datagram j of n leaves j * span / (n - 1) after the first
            let n = dgram_count(req, paced, dgram_max);
            if c.sent == 0 {
                c.req_t0 = now;
            } else if n > 1 && span > 0.0 {
                let due = c.req_t0 + to_ns(span * c.dgrams as f64 / (n - 1) as f64);
                if due > now {
                    c.phase = Phase::Thinking;
                    let gen = c.gen;
                    self.push(
                        due,
                        Timer::PairNext {
                            slot: slot as u32,
                            gen,
                        },
                    );
                    return Step::Blocked;
                }
            }
        }
        let c = self.conns[slot].as_mut().unwrap();
        let res = match c.sock.as_mut().unwrap() {
            Sock::Tcp(t) => {
                let mut hdr = [0u8; TCP_HDR_WAIT];
                put_u32(&mut hdr, 0, req as u32);
                let hlen = if wait > 0.0 {
                    // the server's wait rides in the request (see util::TCP_WAIT_FLAG)
                    put_u32(&mut hdr, 4, rsp | TCP_WAIT_FLAG);
                    put_u32(&mut hdr, 8, (wait * 1e6).round() as u32);
                    TCP_HDR_WAIT
                } else {
                    put_u32(&mut hdr, 4, rsp);
                    TCP_HDR
                };
                if c.sent < hlen as u64 {
                    // The header and the start of the body in one write, so a
                    // request goes out as the trace's did: written alone (the
                    // socket has TCP_NODELAY) the header was a segment of its
                    // own, one more packet and server ACK per request.
                    let body = (req - hlen as u64).min(ZEROS.len() as u64) as usize;
                    let parts = [
                        IoSlice::new(&hdr[c.sent as usize..hlen]),
                        IoSlice::new(&ZEROS[..body]),
                    ];
                    t.write_vectored(&parts)
                } else {
                    let n = ((req - c.sent) as usize).min(ZEROS.len());
                    t.write(&ZEROS[..n])
                }
            }
            Sock::Udp(u) => {
                let left = (req - c.sent) as usize;
                let mut k = left.min(dgram_max);
                if paced > 1 {
                    // n datagrams of about equal size (each at least the header)
                    let n = dgram_count(req, paced, dgram_max);
                    let j = c.dgrams.min(n - 1);
                    k = if j + 1 == n {
                        left
                    } else {
                        ((j + 1) * req / n - c.sent) as usize
                    };
                } else if left > k && left - k < UDP_HDR {
                    k = left - UDP_HDR;
                }
                let mut d = [0u8; UDP_MAX];
                put_u32(&mut d, 0, UDP_MAGIC);
                put_u32(&mut d, 4, c.gen);
                put_u32(&mut d, 8, c.pair as u32);
                put_u32(&mut d, 12, req as u32);
                put_u32(&mut d, 16, c.sent as u32);
                put_u32(&mut d, 20, rsp);
                u.send(&d[..k])
            }
        };
        match res {
            Ok(w) => {
                c.sent += w as u64;
                c.dgrams += 1;
                c.tx += w as u64;
                self.k.tx_bytes += w as u64;
                if c.sent == req {
                    if rsp > 0 {
                        c.rq.push_back((c.pair, rsp as u64));
                        if let Some(Sock::Udp(_)) = c.sock {
                            let t = Timer::UdpTimeout {
                                slot: slot as u32,
                                gen: c.gen,
                                pair: c.pair as u32,
                            };
                            self.push(now + udp_timeout, t);
                        }
                    } else {
                        c.done += 1;
                    }
                    return Step::Complete;
                }
                Step::Again
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Step::Blocked,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Step::Again,
            Err(e) => Step::Failed(format!("send: {e}")),
        }
    }

    /// Read into the outstanding responses, front first (one read may end one
    /// response and begin the next); `Complete` when one or more ended.
    fn recv_some(&mut self, slot: usize) -> Step {
        let c = self.conns[slot].as_mut().unwrap();
        let is_tcp = matches!(c.sock, Some(Sock::Tcp(_)));
        let res = match c.sock.as_mut().unwrap() {
            Sock::Tcp(t) => {
                let res = t.read(&mut self.buf);
                if matches!(res, Ok(n) if n > 0) {
                    delay_acks(t); // the delayed-ACK timer may have ended ping-pong mode
                }
                res
            }
            Sock::Udp(u) => u.recv(&mut self.buf),
        };
        match res {
            Ok(0) if is_tcp => Step::Failed("eof before response end".into()),
            Ok(n) => {
                c.rx += n as u64;
                self.k.rx_bytes += n as u64;
                if !is_tcp {
                    // a datagram counts for the one response outstanding; what is
                    // over its size (a duplicate) is dropped
                    let rsp = c.rq.front().map_or(0, |f| f.1);
                    c.recvd += n as u64;
                    if c.recvd < rsp {
                        return Step::Again;
                    }
                    c.rq.pop_front();
                    c.recvd = 0;
                    c.done += 1;
                    return Step::Complete;
                }
                match take_responses(&mut c.rq, &mut c.recvd, n as u64) {
                    Ok(0) => Step::Again,
                    Ok(ended) => {
                        c.done += ended;
                        Step::Complete
                    }
                    Err(()) => Step::Failed("response longer than asked".into()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Step::Blocked,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Step::Again,
            Err(e) => Step::Failed(format!("recv: {e}")),
        }
    }

    /// Responses ended; with none outstanding, the request that waited for them is
    /// due (or the connection is done). True if the connection continues now.
    fn responses_in(&mut self, slot: usize) -> bool {
        let c = self.conns[slot].as_ref().unwrap();
        if !c.rq.is_empty() {
            return true;
        }
        match c.phase {
            Phase::Done => {
                self.finish(slot, None);
                false
            }
            Phase::Receiving => self.next_request(slot, true),
            _ => true,
        }
    }

    /// Request `pair` is written: its response is outstanding (if it has one). The
    /// next request waits for every outstanding response, unless it is `early` (its
    /// trace's response began before the request could have reached the server: the
    /// two sides streamed at once), which leaves at its time without waiting. True if
    /// the connection continues now.
    fn request_done(&mut self, slot: usize) -> bool {
        let c = self.conns[slot].as_ref().unwrap();
        let spec = self.spec(c.s, c.r, c.c);
        let last = c.pair + 1 == spec.pairs.len();
        let early = spec.early(c.pair + 1);
        let c = self.conns[slot].as_mut().unwrap();
        if last {
            if c.rq.is_empty() {
                self.finish(slot, None);
                return false;
            }
            c.phase = Phase::Done;
            return true;
        }
        if c.rq.is_empty() {
            return self.next_request(slot, true);
        }
        if early {
            return self.next_request(slot, false);
        }
        c.phase = Phase::Receiving;
        true
    }

    /// Go on to the next request: an anchored one leaves at its time from the
    /// connection's start (or now, if that has passed), else after the previous
    /// pair's think time (`think`: that pair's response is in) or now. True: the
    /// connection continues (the next request may be waiting for its timer).
    fn next_request(&mut self, slot: usize, think: bool) -> bool {
        let c = self.conns[slot].as_ref().unwrap();
        let spec = self.spec(c.s, c.r, c.c);
        let think = if think { spec.pairs[c.pair].think } else { 0.0 };
        let anchor = spec.anchor(c.pair + 1);
        let gen = c.gen;
        let c = self.conns[slot].as_mut().unwrap();
        c.pair += 1;
        c.sent = 0;
        c.dgrams = 0;
        let now = mono_ns();
        let due = match anchor {
            Some(a) => c.start + to_ns(a),
            None if think > 0.0 => now + to_ns(think),
            None => now,
        };
        if due <= now {
            c.phase = Phase::Sending;
            return true;
        }
        c.phase = Phase::Thinking;
        self.push(
            due,
            Timer::PairNext {
                slot: slot as u32,
                gen,
            },
        );
        true
    }

    fn finish_msg(&mut self, slot: usize, msg: &str) {
        self.finish(slot, Some(msg));
    }

    /// Close a connection, write its record, and advance its session.
    fn finish(&mut self, slot: usize, err: Option<&str>) {
        let Some(mut c) = self.conns[slot].take() else {
            return;
        };
        self.free.push(slot);
        let _ = match &mut c.sock {
            Some(Sock::Tcp(t)) => self.poll.registry().deregister(t),
            Some(Sock::Udp(u)) => self.poll.registry().deregister(u),
            None => Ok(()),
        };
        let now = mono_ns();
        self.write_record(&c, now, err);
        if err.is_none() {
            self.k.conns_ok += 1;
        } else {
            self.k.conns_failed += 1;
        }
        let s = c.s as usize;
        let st = &mut self.sess[s];
        st.open -= 1;
        let rres = &self.sched.sessions[s].rres;
        if st.open == 0 && st.started as usize == rres[st.rre as usize].conns.len() {
            st.rre += 1;
            if (st.rre as usize) < rres.len() {
                let gap = to_ns(rres[st.rre as usize].gap);
                self.push(now + gap, Timer::RreStart { s: c.s });
            } else {
                self.k.sessions_done += 1;
            }
        }
    }

    fn write_record(&mut self, c: &Conn, now: u64, err: Option<&str>) {
        let sp = self.spec(c.s, c.r, c.c);
        let exp_tx: u64 = sp.pairs.iter().map(|p| p.req as u64).sum();
        let exp_rx: u64 = sp.pairs.iter().map(|p| p.rsp as u64).sum();
        let local = c.local.map(|a| a.to_string()).unwrap_or_default();
        let proto = if sp.proto == Proto::Tcp { "tcp" } else { "udp" };
        let app = serde_json::to_string(&sp.app).unwrap_or_default();
        let error = serde_json::to_string(err.unwrap_or("")).unwrap_or_default();
        let line = format!(
            "{{\"session\":{},\"rre\":{},\"conn\":{},\"app\":{},\"proto\":\"{}\",\"client\":\"{}\",\"server\":\"{}\",\"start\":{:.6},\"end\":{:.6},\"tx\":{},\"rx\":{},\"exp_tx\":{},\"exp_rx\":{},\"pairs_done\":{},\"ok\":{},\"error\":{}}}\n",
            self.sched.sessions[c.s as usize].id, c.r, c.c, app, proto, local, sp.server,
            (c.start - self.base) as f64 / 1e9, (now - self.base) as f64 / 1e9, c.tx,
            c.rx, exp_tx, exp_rx, c.done, err.is_none(), error
        );
        let _ = self.records.write_all(line.as_bytes());
    }
}
