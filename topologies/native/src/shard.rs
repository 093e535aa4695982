//! The threaded engine: one shard (a full `Engine`) per port, each on its own
//! thread, receiving on its port only and transmitting on every port through
//! transmit-only sockets of its own.
//!
//! Why: a veth delivers a frame in the sender's context, so the thread that
//! transmits towards a host runs that host's whole receive path (for bulk TCP:
//! the receiver's `tcp_v4_rcv` for data, the sender's ACK processing and its
//! next transmissions for ACKs). One thread per direction lets the two
//! directions' kernel work run on two cores instead of serialising.
//!
//! Exactness: with two ports every frame entering on port i uses the up pipes
//! of the hosts behind port i, the port pipe (i, j) and the down pipes of the
//! hosts behind j, so each pipe is used by one shard only and behaves as in
//! the single-threaded engine (same seeds, same loss draws). (A frame with a
//! spoofed source or one routed back out of its own port would use its own
//! shard's copy of the pipe; counters still add up.) A port's peer MAC (when
//! learnt) is shared between the shards through one atomic cell.
//!
//! Stats: every shard sends its records to the main thread, which adds them
//! up field by field (the idle copy of a pipe is all zeros) and writes one
//! merged record per round, then the merged final record.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::config::{Config, PipeConf};
use crate::engine::{Engine, ShardRecord, StatsWriter, STOP};

/// Whether `cfg` can run as one shard per port (see the module doc).
pub fn shardable(cfg: &Config) -> bool {
    cfg.ports.len() == 2
}

/// Whether the engine picks the threaded mode by itself: a shardable config
/// whose pipes have neither delay nor rate (pure forwarding, loss allowed).
/// A timed config stays on one thread: it then spins on one core only (the
/// CPU bound of the 20 ms bench row) and, measured on this 2-core host, keeps
/// a one-way delay p99 of 30-60 us where two real-time threads measured
/// 53 us to 12 ms (bench OWD row, 3 runs each).
pub fn auto_threads(cfg: &Config) -> bool {
    let untimed = |p: &PipeConf| p.delay_us == 0 && p.rate_bps.is_none();
    shardable(cfg)
        && cfg.hosts.iter().all(|h| untimed(&h.up) && untimed(&h.down))
        && cfg.port_pipes.iter().all(|(_, _, p)| untimed(p))
}

/// Adds `b` into `a`: numbers add, objects merge key by key, anything else
/// keeps `a` (or takes `b` when `a` is null).
fn add_into(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in y {
                match x.get_mut(k) {
                    Some(slot) => add_into(slot, v),
                    None => {
                        x.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Number(x), Value::Number(y)) => {
            *x = match (x.as_u64(), y.as_u64()) {
                (Some(p), Some(q)) => (p + q).into(),
                _ => {
                    let sum = x.as_f64().unwrap_or(0.0) + y.as_f64().unwrap_or(0.0);
                    serde_json::Number::from_f64(sum).unwrap_or_else(|| 0.into())
                }
            };
        }
        (a @ Value::Null, b) => *a = b.clone(),
        _ => {}
    }
}

/// One stats record from the shards' records of the same round.
pub fn merge(records: &[Value]) -> Value {
    let mut out = Map::new();
    let t = records
        .iter()
        .filter_map(|r| r["t"].as_f64())
        .fold(0.0, f64::max);
    out.insert("t".into(), t.into());
    out.insert(
        "final".into(),
        records
            .iter()
            .any(|r| r["final"] == Value::Bool(true))
            .into(),
    );
    for key in ["pipes", "ports", "captures"] {
        let mut sum = Value::Object(Map::new());
        for r in records {
            add_into(&mut sum, &r[key]);
        }
        out.insert(key.into(), sum);
    }
    Value::Object(out)
}

/// Makes the (level-triggered, never read) eventfd readable: every shard's
/// `epoll_wait` returns at once from now on, and the shard sees STOP.
fn wake_all(wake_fd: i32) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd this process owns.
    unsafe { libc::write(wake_fd, (&one as *const u64).cast(), 8) };
}

/// Writes merged records: one per round once every shard sent it, then the final one.
fn merge_loop(
    rx: Receiver<ShardRecord>,
    n: usize,
    mut out: Option<BufWriter<File>>,
    wake_fd: i32,
) -> Result<(), String> {
    let mut rounds: Vec<VecDeque<Value>> = vec![VecDeque::new(); n];
    let mut finals: Vec<Option<Value>> = vec![None; n];
    let mut poked = false;
    loop {
        if STOP.load(Ordering::Relaxed) && !poked {
            // a signal may have reached this thread or either shard: wake them all
            wake_all(wake_fd);
            poked = true;
        }
        let (i, last, v) = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        if last {
            finals[i] = Some(v);
        } else {
            rounds[i].push_back(v);
        }
        let record = if finals.iter().all(Option::is_some) {
            Some(merge(&finals.iter().flatten().cloned().collect::<Vec<_>>()))
        } else if rounds.iter().all(|q| !q.is_empty()) {
            Some(merge(
                &rounds
                    .iter_mut()
                    .filter_map(VecDeque::pop_front)
                    .collect::<Vec<_>>(),
            ))
        } else {
            None
        };
        if let (Some(r), Some(f)) = (record, out.as_mut()) {
            writeln!(f, "{r}")
                .and_then(|_| f.flush())
                .map_err(|e| format!("stats: {e}"))?;
        }
    }
    Ok(())
}

/// One (initially unknown) peer-MAC cell per port.
pub fn peer_cells(cfg: &Config) -> Vec<Arc<AtomicU64>> {
    cfg.ports
        .iter()
        .map(|_| Arc::new(AtomicU64::new(0)))
        .collect()
}

/// One shard per port, sockets opened by `new` (before READY); `run` runs
/// them until STOP.
pub struct Shards {
    engines: Vec<Engine>,
    /// the merged stats file, created before READY as in the one-thread engine
    stats: Option<BufWriter<File>>,
}

impl Shards {
    pub fn new(cfg: &Config, spin_us: u64) -> Result<Shards, String> {
        let peers = peer_cells(cfg);
        let engines = (0..cfg.ports.len())
            .map(|i| Engine::new(cfg, spin_us, Some(i), &peers))
            .collect::<Result<Vec<_>, _>>()?;
        let stats = match &cfg.stats_path {
            Some(p) => Some(BufWriter::new(
                File::create(p).map_err(|e| format!("{p}: {e}"))?,
            )),
            None => None,
        };
        Ok(Shards { engines, stats })
    }

    /// Runs every shard on its own thread (inheriting this thread's
    /// scheduling policy) and merges their stats here; returns on STOP.
    pub fn run(self, cfg: &Config) -> Result<(), String> {
        // SAFETY: plain eventfd creation.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err("eventfd".into());
        }
        let n = self.engines.len();
        let (tx, rx) = channel();
        let mut threads = Vec::new();
        for (i, mut eng) in self.engines.into_iter().enumerate() {
            let mut stats = Some(StatsWriter::shard(i, tx.clone(), cfg.stats_interval_ms));
            threads.push(
                std::thread::Builder::new()
                    .name(format!("shard{i}"))
                    .spawn(move || {
                        let r = eng.run(&mut stats, Some(wake));
                        STOP.store(true, Ordering::Relaxed); // one shard failing stops all
                        r
                    })
                    .map_err(|e| format!("thread: {e}"))?,
            );
        }
        drop(tx);
        let merged = merge_loop(rx, n, self.stats, wake);
        STOP.store(true, Ordering::Relaxed);
        wake_all(wake);
        let mut result = merged;
        for t in threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err("shard thread panicked".into()));
            if result.is_ok() {
                result = r;
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_adds_counters_and_keeps_strings() {
        let a = json!({"t": 1.0, "final": false,
                       "pipes": {"port:a>b": {"packets": 3, "drops": {"queue": 1}},
                                 "up:10.0.0.1": {"packets": 2}},
                       "ports": {"a": {"rx_frames": 5, "mac": "02:00:00:00:00:01"}},
                       "captures": {"/x.pcap": {"written": 3, "lost": 0, "error": null}}});
        let b = json!({"t": 1.5, "final": false,
                       "pipes": {"port:a>b": {"packets": 0, "drops": {"queue": 0}},
                                 "down:10.0.0.1": {"packets": 7}},
                       "ports": {"a": {"rx_frames": 0, "mac": "02:00:00:00:00:01"}},
                       "captures": {}});
        let m = merge(&[a, b]);
        assert_eq!(m["t"], json!(1.5));
        assert_eq!(m["pipes"]["port:a>b"]["packets"], json!(3));
        assert_eq!(m["pipes"]["port:a>b"]["drops"]["queue"], json!(1));
        assert_eq!(m["pipes"]["down:10.0.0.1"]["packets"], json!(7));
        assert_eq!(m["ports"]["a"]["rx_frames"], json!(5));
        assert_eq!(m["ports"]["a"]["mac"], json!("02:00:00:00:00:01"));
        assert_eq!(m["captures"]["/x.pcap"]["written"], json!(3));
    }
}
