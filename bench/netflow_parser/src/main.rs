//! netflow_parser 1.0.6 (crates.io) over export datagrams, for swell's decoder
//! comparison (`python -m swell.extract.flows.compare --netflow-parser BIN`,
//! extract/flows/compare.py; the table in docs/flows.md).
//!
//! Input on stdin, one line each: `G <group>` starts a fresh parser (one per
//! exporter group, so templates never leak between groups); `D <hex>` is one
//! datagram, answered by one JSON line on stdout: `{"error": <text or null>,
//! "packets": [...]}`, the crate's own serde output. The parser caches data
//! that arrives before its template and replays it when the template comes
//! (`with_pending_flows`). Bad input (not hex, unreadable stdin) is one line on
//! stderr and exit 2.

use std::io::{self, BufRead, BufWriter, Write};
use std::process::exit;

use netflow_parser::{NetflowParser, PendingFlowsConfig};

fn fresh() -> NetflowParser {
    NetflowParser::builder()
        .with_pending_flows(PendingFlowsConfig::default())
        .build()
        .unwrap_or_else(|e| fail(&format!("parser configuration: {e}")))
}

fn fail(why: &str) -> ! {
    eprintln!("netflow-parser-harness: {why}");
    exit(2)
}

fn main() {
    let stdin = io::stdin();
    let mut out = BufWriter::new(io::stdout().lock());
    let mut parser = fresh();
    for (no, line) in stdin.lock().lines().enumerate() {
        let line = line.unwrap_or_else(|e| fail(&format!("stdin: {e}")));
        if line.starts_with("G ") {
            parser = fresh();
            continue;
        }
        let Some(text) = line.strip_prefix("D ") else { continue };
        let data = hex::decode(text.trim())
            .unwrap_or_else(|e| fail(&format!("line {}: not hex: {e}", no + 1)));
        let res = parser.parse_bytes(&data);
        let err = res.error.map(|e| format!("{e}"));
        let row = serde_json::json!({"error": err, "packets": res.packets});
        writeln!(out, "{row}").unwrap_or_else(|e| fail(&format!("stdout: {e}")));
    }
    out.flush().unwrap_or_else(|e| fail(&format!("stdout: {e}")));
}
