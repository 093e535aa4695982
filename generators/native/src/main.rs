//! swell-gen: swell's traffic engine, one small program with several roles.
//!
//!   swell-gen serve --listen ADDR:PORT [--listen ...] [--proto tcp|udp|both]
//!   swell-gen run --schedule FILE --records FILE [--interval-ms 1000] [--duration S (hard stop)]
//!   swell-gen send --dst ADDR:PORT [--src ADDR] --proto udp|tcp --pps N --size B
//!                  --dist const|exp --duration S [--seed N] [--spin-us 1000] [--rt]
//!                  [--catchup-ms 1000] [--lowat 65536]
//!   swell-gen recv --listen ADDR:PORT --proto udp|tcp --size B --log FILE [--idle S]
//!   swell-gen psend --dst ADDR:PORT [--src ADDR] --proto udp|tcp --plan FILE [--rt]
//!   swell-gen precv --listen ADDR:PORT --proto udp|tcp --log FILE [--duration S]
//!   swell-gen probe --addr ADDR:PORT [--src ADDR] [--timeout S] [--attempt-ms 500] [--connect-only]
//!
//! Errors print one line `swell-gen: ...` on stderr and exit 2. SIGTERM and
//! SIGINT stop every role cleanly (records and logs are flushed).

mod alarm;
mod client;
mod client_io;
mod pace;
mod plan;
mod schedule;
mod server;
mod util;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    util::install_stop_handlers();
    util::raise_nofile();
    let Some(role) = argv.first() else {
        eprintln!("usage: swell-gen serve|run|send|recv|probe [--options]");
        std::process::exit(2);
    };
    let result =
        util::Args::parse(&argv[1..], &["connect-only", "rt"]).and_then(|a| match role.as_str() {
            "serve" => server::serve(&a),
            "run" => client::run(&a),
            "send" => pace::send(&a),
            "recv" => pace::recv(&a),
            "probe" => pace::probe(&a),
            "psend" => plan::psend(&a),
            "precv" => plan::precv(&a),
            other => Err(format!(
                "unknown role {other:?} (serve, run, send, recv, psend, precv, probe)"
            )),
        });
    if let Err(e) = result {
        eprintln!("swell-gen: {e}");
        std::process::exit(2);
    }
}
