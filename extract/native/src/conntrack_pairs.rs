//! The request/response pairs of the native tracker (part of `conntrack`): which
//! runs a connection's pairs come from (real data, or acknowledgement-inferred for a
//! TCP connection seen in one direction only), cut into pairs with the arithmetic of
//! `pairs_from_runs` in `extract/sessions.py`, in connection order, by two sequential
//! passes over the runs (count, then fill) instead of a sort.

use super::{DoneRun, Tracker, TCP};

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
    /// connection seen in one direction only); and the still-open run of each
    /// connection that has one, compact, in connection order (one scan of `conns`).
    fn final_state(&self) -> (Vec<bool>, Vec<DoneRun>) {
        let mut inferred = Vec::with_capacity(self.conns.len());
        let mut open = Vec::new();
        for (i, c) in self.conns.iter().enumerate() {
            let inf = c.proto == TCP && (c.dirs[0].pkts == 0 || c.dirs[1].pkts == 0);
            inferred.push(inf);
            let r = if inf { &c.vrun } else { &c.run };
            if r.open {
                open.push(DoneRun {
                    cid_dir: (i as u64) << 1 | (r.dir & 1) as u64,
                    bytes: r.bytes,
                    t0: r.t0,
                    t1: r.t1,
                });
            }
        }
        (inferred, open)
    }

    /// Every run the pairs come from (see `pairs`), in stream order: the finished
    /// real-data runs of connections not `inferred`, the finished ack-inferred runs of
    /// the others, then the open runs.
    fn for_final_runs(&self, inferred: &[bool], open: &[DoneRun], mut f: impl FnMut(&DoneRun)) {
        for r in &self.runs {
            if !inferred[r.cid() as usize] {
                f(r);
            }
        }
        for r in &self.vruns {
            if inferred[r.cid() as usize] {
                f(r);
            }
        }
        open.iter().for_each(f);
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
        let (inferred, open) = self.final_state();
        let n = self.conns.len();
        // pass 1: pairs per connection (a pair opens at a request or a first run)
        let mut first_pair = vec![0usize; n + 1];
        let mut seen = vec![false; n];
        self.for_final_runs(&inferred, &open, |r| {
            let c = r.cid() as usize;
            let is_req = r.dir() == cdir[c];
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
        self.for_final_runs(&inferred, &open, |r| {
            let c = r.cid() as usize;
            let (bytes, t0r, t1r) = (r.bytes, r.t0, r.t1);
            let is_req = r.dir() == cdir[c];
            if is_req || !seen[c] {
                rows[cursor[c]].conn = c as i64;
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
