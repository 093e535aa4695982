//! Many packet-level flows from a departure plan (`psend`) and a receiver that
//! tells them apart (`precv`).
//!
//! The plan is written by swell (Python draws inter-departure times and sizes
//! from any fitted family, as D-ITG's `-Ft`/`-Fs` files do), so the pacer
//! needs no distribution code: records of `(t_ns u64, flow u32, size u32)`,
//! little-endian, sorted by `t_ns` (offset from the start). One socket per
//! flow (UDP: its own source port; TCP: its own connection), so flows are
//! distinct 5-tuples at the bottleneck. Departures are absolute
//! (start + t_ns), with the same sleep-then-busy-poll as `send`.
//!
//! Every message starts with `seq` (u64: flow << 48 | per-flow sequence) and
//! its departure time (u64 ns, CLOCK_MONOTONIC), big-endian; TCP messages
//! also carry their length (u32 at byte 16), so the receiver can frame them
//! (UDP messages: at least 16 bytes, TCP: at least 20). `precv` logs
//! (seq, tx_ns, rx_ns, size) as four little-endian u64 per message, like
//! `recv`; TCP connections are served one thread each.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::*;

const FLOW_SHIFT: u32 = 48;

fn read_plan(path: &str) -> Result<Vec<(u64, u32, u32)>, String> {
    let raw = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    if raw.len() % 16 != 0 {
        return Err(format!(
            "{path}: {} bytes, not whole 16-byte records",
            raw.len()
        ));
    }
    let mut out = Vec::with_capacity(raw.len() / 16);
    let mut last = 0u64;
    for r in raw.chunks_exact(16) {
        let t = u64::from_le_bytes(r[0..8].try_into().unwrap());
        let flow = u32::from_le_bytes(r[8..12].try_into().unwrap());
        let size = u32::from_le_bytes(r[12..16].try_into().unwrap());
        if t < last {
            return Err(format!("{path}: departure times not sorted"));
        }
        if flow >= 1 << 15 {
            return Err(format!("{path}: flow {flow} out of range (at most 32767)"));
        }
        last = t;
        out.push((t, flow, size));
    }
    Ok(out)
}

fn realtime() -> Result<(), String> {
    let param = libc::sched_param { sched_priority: 10 };
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(format!(
            "--rt: sched_setscheduler: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

enum Sock {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

fn open(proto: &str, dst: SocketAddr, src: Option<SocketAddr>) -> Result<Sock, String> {
    let udp = proto == "udp";
    let s = new_socket(&dst, src, udp).map_err(|e| format!("socket: {e}"))?;
    if udp {
        s.connect(&dst.into())
            .map_err(|e| format!("connect {dst}: {e}"))?;
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        let _ = s.set_send_buffer_size(1 << 20);
        return Ok(Sock::Udp(s.into()));
    }
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.connect_timeout(&dst.into(), Duration::from_secs(5))
        .map_err(|e| format!("connect {dst}: {e}"))?;
    Ok(Sock::Tcp(s.into()))
}

pub fn psend(args: &Args) -> Result<(), String> {
    args.check_known(&[
        "dst",
        "src",
        "proto",
        "plan",
        "spin-us",
        "interval-ms",
        "rt",
    ])?;
    let dst = parse_addr(args.req("dst")?)?;
    let src = match args.get("src") {
        Some(a) => Some(parse_src(a, &dst)?),
        None => None,
    };
    let proto = args.get("proto").unwrap_or("udp");
    if proto != "udp" && proto != "tcp" {
        return Err(format!("--proto {proto:?}: udp or tcp"));
    }
    let plan = read_plan(args.req("plan")?)?;
    let min = if proto == "tcp" { 20 } else { 16 };
    if let Some(bad) = plan.iter().find(|r| (r.2 as usize) < min || r.2 > 65507) {
        return Err(format!("plan size {} out of range {min}..65507", bad.2));
    }
    let flows = plan.iter().map(|r| r.1 as usize + 1).max().unwrap_or(0);
    let mut pacer =
        Pacer::new(args.num::<u64>("spin-us", if args.flag("rt") { 40 } else { 1000 })? * 1000);
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let interval = args.num::<u64>("interval-ms", 1000)?.max(10) * 1_000_000;
    if args.flag("rt") {
        realtime()?;
    }
    let mut socks = Vec::with_capacity(flows);
    for _ in 0..flows {
        socks.push(open(proto, dst, src)?);
    }
    let mut seqs = vec![0u64; flows];
    let mut buf = vec![0u8; 65536];
    let start = mono_ns() + 1_000_000;
    let (mut sent, mut errors, mut bytes, mut late_sum, mut late_max) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut report = start + interval;
    for &(t, flow, size) in &plan {
        if stopped() {
            break;
        }
        let next = start + t;
        while next >= report {
            println!(
                "{{\"t\":{:.3},\"sent\":{sent},\"tx_bytes\":{bytes}}}",
                (report - start) as f64 / 1e9
            );
            let _ = std::io::stdout().flush();
            report += interval;
        }
        let now = pacer.wait_until(next);
        let f = flow as usize;
        let msg = &mut buf[..size as usize];
        msg[0..8].copy_from_slice(&(((flow as u64) << FLOW_SHIFT) | seqs[f]).to_be_bytes());
        msg[8..16].copy_from_slice(&now.to_be_bytes());
        let ok = match &mut socks[f] {
            Sock::Udp(u) => u.send(msg).is_ok(),
            Sock::Tcp(s) => {
                put_u32(msg, 16, size);
                s.write_all(msg).is_ok()
            }
        };
        seqs[f] += 1;
        if ok {
            sent += 1;
            bytes += size as u64;
        } else {
            errors += 1;
        }
        late_sum += now - next;
        late_max = late_max.max(now - next);
    }
    let elapsed = (mono_ns() - start) as f64 / 1e9;
    let n = (sent + errors).max(1);
    println!(
        "{{\"sent\":{sent},\"errors\":{errors},\"bytes\":{bytes},\"flows\":{flows},\"elapsed_s\":{elapsed:.6},\"late_mean_ns\":{},\"late_max_ns\":{late_max}}}",
        late_sum / n
    );
    Ok(())
}

type Rows = Arc<Mutex<Vec<[u64; 4]>>>;

fn row(msg: &[u8], rx: u64) -> [u64; 4] {
    let seq = u64::from_be_bytes(msg[0..8].try_into().unwrap());
    let tx = u64::from_be_bytes(msg[8..16].try_into().unwrap());
    [seq, tx, rx, msg.len() as u64]
}

fn write_rows(rows: &Rows, path: &str) -> Result<(), String> {
    let rows = rows.lock().unwrap();
    let mut out = Vec::with_capacity(rows.len() * 32);
    for r in rows.iter() {
        for v in r {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(path, out).map_err(|e| format!("{path}: {e}"))
}

/// One TCP connection: framed messages (length at byte 16) until EOF, or
/// until the stop has drained (see [`Drain`]).
fn serve_conn(mut s: TcpStream, rows: Rows, drain: Arc<Drain>, end: u64) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 65536];
    let mut got = 0usize;
    let mut last = 0u64;
    while mono_ns() < end && !drain.done(last) {
        match s.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                let rx = mono_ns();
                last = rx;
                let mut off = 0usize;
                while got - off >= 20 {
                    let len = u32_at(&buf, off + 16) as usize;
                    if len < 20 || got - off < len {
                        break;
                    }
                    let r = row(&buf[off..off + len], rx);
                    drain.saw(r[1], r[2]);
                    rows.lock().unwrap().push(r);
                    off += len;
                }
                buf.copy_within(off..got, 0);
                got -= off;
            }
            Err(_) => continue,
        }
    }
}

pub fn precv(args: &Args) -> Result<(), String> {
    args.check_known(&["listen", "proto", "log", "duration"])?;
    let addr = parse_addr(args.req("listen")?)?;
    let proto = args.get("proto").unwrap_or("udp");
    let path = args.req("log")?;
    let end = mono_ns() + (args.num::<f64>("duration", 3600.0)? * 1e9) as u64;
    let rows: Rows = Arc::new(Mutex::new(Vec::new()));
    let drain = Arc::new(Drain::new());
    let tick = Some(Duration::from_millis(50));
    if proto == "udp" {
        let s = new_socket(&addr, Some(addr), true).map_err(|e| format!("bind {addr}: {e}"))?;
        let _ = s.set_recv_buffer_size(8 << 20);
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        let u: UdpSocket = s.into();
        u.set_read_timeout(tick).map_err(|e| e.to_string())?;
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut buf = vec![0u8; 65536];
        // after a stop, what is still in flight is logged before exit (Drain)
        let mut last = 0u64;
        loop {
            match u.recv(&mut buf) {
                Ok(n) if n >= 16 => {
                    let r = row(&buf[..n], mono_ns());
                    drain.saw(r[1], r[2]);
                    last = r[2];
                    rows.lock().unwrap().push(r);
                }
                Ok(_) => {}
                Err(_) => {}
            }
            if drain.done(last) || mono_ns() > end {
                break;
            }
        }
    } else if proto == "tcp" {
        let s = new_socket(&addr, Some(addr), false).map_err(|e| format!("bind {addr}: {e}"))?;
        s.listen(1024).map_err(|e| e.to_string())?;
        let l: TcpListener = s.into();
        println!("READY");
        let _ = std::io::stdout().flush();
        let mut threads = Vec::new();
        while !stopped() && mono_ns() < end {
            match l.accept() {
                Ok((st, _)) => {
                    let _ = st.set_nonblocking(false);
                    let (r, d) = (rows.clone(), drain.clone());
                    threads.push(std::thread::spawn(move || serve_conn(st, r, d, end)));
                }
                Err(_) => sleep_until_ns(mono_ns() + 5_000_000),
            }
        }
        for t in threads {
            let _ = t.join();
        }
    } else {
        return Err(format!("--proto {proto:?}: udp or tcp"));
    }
    write_rows(&rows, path)
}
