//! The session schedule swell-gen executes (written by swell.generators.schedule).
//!
//! JSON lines: a header line, then one line per session, in start-time order.
//!   {"format":"swell-schedule","version":1,"seed":1,"sessions":N,"duration_s":60.0,"meta":{..}}
//!   {"id":0,"t":0.25,"client":"10.0.1.2","rres":[{"gap":0.0,"conns":[
//!       {"server":"10.0.2.1:8080","proto":"tcp","app":"tcp/80","offset":0.0,
//!        "pairs":[[req_bytes, rsp_bytes, think_after_s(, server_wait_s)], ...]}]}]}
//! IPv6 addresses are written as text too (`"client":"fd00::1:2"`,
//! `"server":"[fd00::2:1]:8080"`); a session's client and its servers share one family.
//! `gap` is the idle time between the end of the previous RRE and this one;
//! `offset` is a connection's start relative to its RRE's start; a pair's
//! optional fourth number is the server's wait between the request's end and
//! its response (absent: 0). A connection's optional `at` (one number per pair,
//! negative for none) anchors a request: it leaves at that time from the
//! connection's start, or as soon as the previous response is in if that is
//! later, instead of the previous pair's think time after it. A UDP
//! connection's optional `pace` (one `[datagrams, span_s]` per pair) sends a
//! request as that many datagrams, the first at once and the rest evenly over
//! the span (`client.rs`). A TCP connection's optional `early` (one boolean per
//! pair) lets a request leave without waiting for the responses still
//! outstanding (at its `at`, or right after the previous request): the server
//! answers requests in order, so such responses follow each other as the trace's
//! did when both sides streamed at once. Unknown fields are errors, so a misspelt
//! key never goes unnoticed.

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;

use crate::util::{TCP_HDR, TCP_HDR_WAIT, TCP_WAIT_FLAG, UDP_HDR};

pub const FORMAT: &str = "swell-schedule";
pub const VERSION: u32 = 1;

/// Header fields are validated here; `run` itself needs only the sessions.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct Header {
    pub format: String,
    pub version: u32,
    pub seed: u64,
    pub sessions: u64,
    pub duration_s: f64,
    #[serde(default)]
    pub meta: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub id: u64,
    pub t: f64,
    pub client: IpAddr,
    pub rres: Vec<Rre>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rre {
    pub gap: f64,
    pub conns: Vec<ConnSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnSpec {
    pub server: SocketAddr,
    pub proto: Proto,
    pub app: String,
    pub offset: f64,
    pub pairs: Vec<Pair>,
    /// per pair (empty: none): the request's earliest time from the connection's
    /// start, s; negative: after the previous response and its think time
    #[serde(default)]
    pub at: Vec<f64>,
    /// per pair (empty: none; UDP only): its request's datagrams and their span, s
    #[serde(default)]
    pub pace: Vec<(u32, f64)>,
    /// per pair (empty: none; TCP only): the request leaves without waiting for the
    /// responses still outstanding (a connection's first has none to wait for)
    #[serde(default)]
    pub early: Vec<bool>,
}

impl ConnSpec {
    /// Pair `i`'s request pacing: (datagrams, span in s); (1, 0) when it has none.
    pub fn pace(&self, i: usize) -> (u32, f64) {
        self.pace.get(i).copied().unwrap_or((1, 0.0))
    }

    /// Whether pair `i`'s request leaves without waiting for outstanding responses.
    pub fn early(&self, i: usize) -> bool {
        self.early.get(i).copied().unwrap_or(false)
    }

    /// Pair `i`'s anchor (s from the connection's start), if it has one.
    pub fn anchor(&self, i: usize) -> Option<f64> {
        self.at.get(i).copied().filter(|a| *a >= 0.0)
    }
}

/// One request/response exchange: `[req, rsp, think]` or `[req, rsp, think, wait]`.
#[derive(Deserialize, Clone, Copy)]
#[serde(from = "PairWire")]
pub struct Pair {
    pub req: u32,
    pub rsp: u32,
    /// client think time after the response, s
    pub think: f64,
    /// the server's wait between the request's end and its response, s
    pub wait: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PairWire {
    Wait(u32, u32, f64, f64),
    Plain(u32, u32, f64),
}

impl From<PairWire> for Pair {
    fn from(w: PairWire) -> Pair {
        match w {
            PairWire::Wait(req, rsp, think, wait) => Pair {
                req,
                rsp,
                think,
                wait,
            },
            PairWire::Plain(req, rsp, think) => Pair {
                req,
                rsp,
                think,
                wait: 0.0,
            },
        }
    }
}

/// Longest server wait a request header can carry (u32 microseconds).
pub const MAX_WAIT_S: f64 = u32::MAX as f64 / 1e6;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    Tcp,
    Udp,
}

pub struct Schedule {
    #[allow(dead_code)]
    pub header: Header,
    pub sessions: Vec<Session>,
}

fn check_session(s: &Session, line: usize) -> Result<(), String> {
    let bad = |what: String| Err(format!("line {line}: session {}: {what}", s.id));
    if !(s.t.is_finite() && s.t >= 0.0) {
        return bad(format!("start time {} is not a time >= 0", s.t));
    }
    if s.rres.is_empty() {
        return bad("has no RREs".into());
    }
    for r in &s.rres {
        if !(r.gap >= 0.0) || r.conns.is_empty() {
            return bad("an RRE has a negative gap or no connections".into());
        }
        for c in &r.conns {
            if c.server.is_ipv4() != s.client.is_ipv4() {
                return bad(format!(
                    "client {} and server {} are different address families",
                    s.client, c.server
                ));
            }
            let min = if c.proto == Proto::Tcp {
                TCP_HDR
            } else {
                UDP_HDR
            } as u32;
            if !(c.offset >= 0.0) || c.pairs.is_empty() {
                return bad("a connection has a negative offset or no pairs".into());
            }
            let bad_at = c.at.len() != c.pairs.len() || !c.at.iter().all(|a| a.is_finite());
            if !c.at.is_empty() && bad_at {
                return bad(format!(
                    "{} request times (at) for {} pairs, or one not finite",
                    c.at.len(),
                    c.pairs.len()
                ));
            }
            let bad_pace = c.pace.len() != c.pairs.len()
                || c.proto != Proto::Udp
                || !c
                    .pace
                    .iter()
                    .all(|&(n, t)| n >= 1 && t >= 0.0 && t <= MAX_WAIT_S);
            if !c.pace.is_empty() && bad_pace {
                return bad(format!(
                    "pace needs one [datagrams >= 1, span >= 0 s] per pair, UDP only ({} for {} pairs)",
                    c.pace.len(),
                    c.pairs.len()
                ));
            }
            if !c.early.is_empty() && (c.early.len() != c.pairs.len() || c.proto != Proto::Tcp) {
                return bad(format!(
                    "early needs one boolean per pair, TCP only ({} for {} pairs)",
                    c.early.len(),
                    c.pairs.len()
                ));
            }
            for p in &c.pairs {
                let min = if p.wait > 0.0 && c.proto == Proto::Tcp {
                    TCP_HDR_WAIT as u32
                } else {
                    min
                };
                if p.req < min || !(p.think >= 0.0) {
                    return bad(format!(
                        "request of {} bytes (< {min}) or negative think",
                        p.req
                    ));
                }
                if !(p.wait >= 0.0 && p.wait <= MAX_WAIT_S) || p.rsp & TCP_WAIT_FLAG != 0 {
                    return bad(format!(
                        "server wait {} s outside 0..{MAX_WAIT_S:.0} s or response of {} bytes \
                         (at most {})",
                        p.wait,
                        p.rsp,
                        TCP_WAIT_FLAG - 1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Read and validate a schedule file; errors are one readable line.
pub fn load(path: &str) -> Result<Schedule, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = std::io::BufReader::new(f).lines();
    let first = lines
        .next()
        .ok_or(format!("{path}: empty file"))?
        .map_err(|e| format!("{path}: {e}"))?;
    let header: Header =
        serde_json::from_str(&first).map_err(|e| format!("{path}: line 1 (header): {e}"))?;
    if header.format != FORMAT || header.version != VERSION {
        return Err(format!(
            "{path}: not a {FORMAT} v{VERSION} file (format {:?} version {})",
            header.format, header.version
        ));
    }
    let mut sessions = Vec::with_capacity(header.sessions as usize);
    let mut last_t = 0.0f64;
    for (i, line) in lines.enumerate() {
        let line = line.map_err(|e| format!("{path}: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let s: Session =
            serde_json::from_str(&line).map_err(|e| format!("{path}: line {}: {e}", i + 2))?;
        check_session(&s, i + 2).map_err(|e| format!("{path}: {e}"))?;
        if s.t < last_t {
            return Err(format!(
                "{path}: line {}: sessions are not in start-time order",
                i + 2
            ));
        }
        last_t = s.t;
        sessions.push(s);
    }
    if sessions.is_empty() {
        return Err(format!("{path}: the schedule has zero sessions"));
    }
    if sessions.len() as u64 != header.sessions {
        return Err(format!(
            "{path}: header says {} sessions, file has {}",
            header.sessions,
            sessions.len()
        ));
    }
    Ok(Schedule { header, sessions })
}
