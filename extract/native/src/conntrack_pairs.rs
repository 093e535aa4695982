//! The request/response pairs of the native tracker (part of `conntrack`): which
//! runs a connection's pairs come from (real data, or acknowledgement-inferred for a
//! TCP connection seen in one direction only), ordered by connection with a counting
//! sort, then cut into pairs with the arithmetic of `pairs_from_runs` in
//! `extract/sessions.py`.

use super::{Conn, DoneRun, Tracker, TCP};

/// One request/response pair (a row of `pairs_from_runs`' columns): 64 bytes, one
/// cache line, so filling a pair touches one line instead of eight columns.
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Pair {
    pub conn: i64,
    pub req_size: i64,
    pub rsp_size: i64,
    pub req_t0: f64,
    pub req_t1: f64,
    pub rsp_t0: f64,
    pub rsp_t1: f64,
    pub think: f64,
}

/// The pairs in connection order.
#[derive(Default)]
pub struct Pairs {
    pub rows: Vec<Pair>,
}

impl Tracker {
    /// Per connection: whether it takes its runs from the ack-inferred stream (a TCP
    /// connection seen in one direction only).
    fn inferred_runs(&self) -> Vec<bool> {
        let f = |c: &Conn| c.proto == TCP && (c.dirs[0].pkts == 0 || c.dirs[1].pkts == 0);
        self.conns.iter().map(f).collect()
    }

    /// Every run the pairs come from (see `pairs`), in stream order, with a
    /// handle (source << 62 | index: 0 runs, 1 ack-inferred runs, 2 open run of a
    /// connection).
    fn for_final_runs(&self, inferred: &[bool], mut f: impl FnMut(i64, u64)) {
        for (k, r) in self.runs.iter().enumerate() {
            if !inferred[r.cid() as usize] {
                f(r.cid(), k as u64);
            }
        }
        for (k, r) in self.vruns.iter().enumerate() {
            if inferred[r.cid() as usize] {
                f(r.cid(), 1 << 62 | k as u64);
            }
        }
        for (i, c) in self.conns.iter().enumerate() {
            if (if inferred[i] { &c.vrun } else { &c.run }).open {
                f(i as i64, 2 << 62 | i as u64);
            }
        }
    }

    /// (cid, dir, bytes, t0, t1) of a run handle.
    fn run_at(&self, handle: u64) -> (i64, i64, i64, i64, i64) {
        let k = (handle & ((1 << 62) - 1)) as usize;
        let done = |r: &DoneRun| (r.cid(), r.dir(), r.bytes, r.t0, r.t1);
        match handle >> 62 {
            0 => done(&self.runs[k]),
            1 => done(&self.vruns[k]),
            _ => {
                let c = &self.conns[k];
                let one_way = c.proto == TCP && (c.dirs[0].pkts == 0 || c.dirs[1].pkts == 0);
                let r = if one_way { &c.vrun } else { &c.run };
                (k as i64, r.dir, r.bytes, r.t0, r.t1)
            }
        }
    }

    /// Request/response pairs from the final runs, exactly as `pairs_from_runs` of
    /// `extract/sessions.py` computes them: a client run opens a pair, the server run
    /// after it closes it, a server run first in its connection makes a pair with an
    /// empty request; times in seconds since `t0`. `cdir` is the client's direction
    /// per connection. Returns the pairs in connection order.
    ///
    /// A connection's final runs come in stream order (`for_final_runs`), which is
    /// its order in the numpy reference's stable sort by connection. So instead of
    /// sorting the runs (a gather all over memory), two sequential passes over the
    /// stream: one counts each connection's pairs (their prefix sums give its first
    /// pair slot), the second fills the pairs in place with a cursor per connection.
    pub fn pairs(&self, cdir: &[i64], t0: i64) -> Pairs {
        let sec = |t: i64| (t.wrapping_sub(t0)) as f64 * 1e-9;
        let inferred = self.inferred_runs();
        let n = self.conns.len();
        // pass 1: pairs per connection (a pair opens at a request or a first run)
        let mut first_pair = vec![0usize; n + 1];
        let mut seen = vec![false; n];
        self.for_final_runs(&inferred, |cid, h| {
            let c = cid as usize;
            let is_req = self.run_at(h).1 == cdir[c];
            first_pair[c + 1] += (is_req || !seen[c]) as usize;
            seen[c] = true;
        });
        for i in 0..n {
            first_pair[i + 1] += first_pair[i];
        }
        let nan = f64::NAN;
        let empty = Pair {
            conn: -1,
            req_size: 0,
            rsp_size: 0,
            req_t0: nan,
            req_t1: nan,
            rsp_t0: nan,
            rsp_t1: nan,
            think: nan,
        };
        let mut rows = vec![empty; first_pair[n]];
        // pass 2: the cursor of a connection is its next free slot
        let mut cursor = first_pair;
        seen.iter_mut().for_each(|x| *x = false);
        self.for_final_runs(&inferred, |cid, h| {
            let c = cid as usize;
            let (_, dir, bytes, t0r, t1r) = self.run_at(h);
            let is_req = dir == cdir[c];
            if is_req || !seen[c] {
                rows[cursor[c]].conn = cid;
                cursor[c] += 1;
            }
            seen[c] = true;
            let p = &mut rows[cursor[c] - 1];
            if is_req {
                p.req_size += bytes;
                (p.req_t0, p.req_t1) = (sec(t0r), sec(t1r));
            } else {
                p.rsp_size += bytes;
                (p.rsp_t0, p.rsp_t1) = (sec(t0r), sec(t1r));
            }
        });
        for k in 1..rows.len() {
            if rows[k].conn == rows[k - 1].conn {
                rows[k].think = rows[k].req_t0 - rows[k - 1].rsp_t1;
            }
        }
        Pairs { rows }
    }
}
