//! swell-link: swell's link-emulation engine for kernels without netem.
//!
//! Usage: `swell-link --name RUN [--spin-us N] [--rt-priority P] [--die-with-parent]
//! [--threads 1|2] CONFIG.json`
//!
//! `--threads`: one forwarding thread per port (direction, needs exactly two
//! ports) or a single one; by default 2 for two ports whose pipes have no
//! delay and no rate, else 1 (see shard.rs).
//! `--spin-us` (default 30): how long before a departure the loop stops
//! sleeping and spins. `--rt-priority` (1-99): run under SCHED_FIFO so a busy
//! host does not delay departures by whole scheduler slices (a failure to get
//! it is reported on stderr and the engine carries on).
//!
//! Opens one AF_PACKET socket per port (each inside its own network
//! namespace), prints `READY` on stdout, then forwards frames between the
//! ports through per-host access pipes and per-direction port (bottleneck)
//! pipes until SIGTERM or SIGINT, writing JSON-lines stats (a final full
//! record on exit). `--name` carries the run prefix so `swell cleanup` can find
//! a leftover engine by its command line. See docs/linkemu.md.

mod config;
mod engine;
mod pcap;
mod pipe;
mod port;
mod ring;
mod shard;

use std::io::Write;
use std::sync::atomic::Ordering;

extern "C" fn on_signal(_: libc::c_int) {
    engine::STOP.store(true, Ordering::Relaxed);
}

fn install_signals(die_with_parent: bool) {
    // SAFETY: the handler only stores to an atomic; sigaction struct is zeroed plain data.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        // wake-up accuracy: the default 50 us timer slack would dominate the error
        libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
        if die_with_parent {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
            if libc::getppid() == 1 {
                engine::STOP.store(true, Ordering::Relaxed);
            }
        }
    }
}

struct Args {
    name: String,
    config: String,
    spin_us: u64,
    rt_priority: Option<i32>,
    die_with_parent: bool,
    threads: Option<usize>,
}

fn set_realtime(priority: i32) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on this process with a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        eprintln!(
            "swell-link: warning: SCHED_FIFO {priority}: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut name, mut config, mut spin_us, mut die) = (None, None, 30u64, false);
    let (mut rt_priority, mut threads) = (None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--name" => name = it.next(),
            "--spin-us" => {
                spin_us = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--spin-us needs a number")?
            }
            "--rt-priority" => {
                let p = it
                    .next()
                    .and_then(|v| v.parse::<i32>().ok())
                    .filter(|p| (1..=99).contains(p));
                rt_priority = Some(p.ok_or("--rt-priority needs a number in 1..99")?)
            }
            "--die-with-parent" => die = true,
            "--threads" => {
                let t = it.next().and_then(|v| v.parse::<usize>().ok());
                let t = t.filter(|t| (1..=2).contains(t));
                threads = Some(t.ok_or("--threads needs 1 or 2")?)
            }
            _ if a.starts_with('-') => return Err(format!("unknown option {a}")),
            _ => config = Some(a),
        }
    }
    let usage = "usage: swell-link --name RUN [--spin-us N] [--rt-priority P] [--die-with-parent] \
                 [--threads 1|2] CONFIG.json";
    Ok(Args {
        name: name.ok_or(usage)?,
        config: config.ok_or(usage)?,
        spin_us,
        rt_priority,
        die_with_parent: die,
        threads,
    })
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    install_signals(args.die_with_parent);
    let cfg = config::Config::load(&args.config)?;
    if cfg.name != args.name {
        return Err(format!(
            "--name {} does not match the config's name {}",
            args.name, cfg.name
        ));
    }
    let sharded = match args.threads {
        Some(2) if !shard::shardable(&cfg) => {
            eprintln!("swell-link: warning: --threads 2 needs exactly two ports; using 1");
            false
        }
        Some(t) => t == 2,
        None => shard::auto_threads(&cfg),
    };
    if sharded {
        let shards = shard::Shards::new(&cfg, args.spin_us)?;
        if let Some(p) = args.rt_priority {
            set_realtime(p);
        }
        ready()?;
        return shards.run(&cfg);
    }
    let mut stats = match &cfg.stats_path {
        Some(p) => Some(engine::StatsWriter::create(p, cfg.stats_interval_ms)?),
        None => None,
    };
    let mut eng = engine::Engine::new(&cfg, args.spin_us, None, &shard::peer_cells(&cfg))?;
    if let Some(p) = args.rt_priority {
        set_realtime(p);
    }
    ready()?;
    eng.run(&mut stats, None)
}

fn ready() -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY")
        .and_then(|_| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("swell-link: {e}");
        std::process::exit(2);
    }
}
