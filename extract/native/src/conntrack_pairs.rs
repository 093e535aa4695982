//! The request/response pairs of the native tracker (part of `conntrack`): which
//! runs a connection's pairs come from (real data, or acknowledgement-inferred for a
//! TCP connection seen in one direction only), cut into pairs with the arithmetic of
//! `pairs_from_runs` in `extract/sessions.py`, in connection order, by two sequential
//! passes over the runs (count, then fill straight into the caller's columns) instead
//! of a sort.

use std::borrow::Cow;

use super::{Conn, DoneRun, Tracker, TCP};

/// What the pairs need of the connection state: per connection, whether it takes its
/// runs from the ack-inferred stream (a TCP connection seen in one direction only);
/// and the still-open run of each connection that has one, compact, in connection
/// order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FinalRuns {
    inferred: Vec<bool>,
    open: Vec<DoneRun>,
}

impl FinalRuns {
    /// Those of the connections after these (`other` starts where these end).
    pub(super) fn append(&mut self, mut other: FinalRuns) {
        self.inferred.append(&mut other.inferred);
        self.open.append(&mut other.open);
    }

    pub(super) fn add(&mut self, i: usize, c: &Conn) {
        let inf = c.proto == TCP && (c.dirs[0].pkts == 0 || c.dirs[1].pkts == 0);
        self.inferred.push(inf);
        let r = if inf { &c.vrun } else { &c.run };
        if r.open {
            self.open.push(DoneRun {
                cid_dir: (i as u64) << 1 | (r.dir & 1) as u64,
                bytes: r.bytes,
                t0: r.t0,
                t1: r.t1,
            });
        }
    }
}

/// The pair columns of `pairs_from_runs`, borrowed (the caller's numpy arrays, or
/// the vectors of `Pairs`), all of the same length.
pub struct PairCols<'a> {
    pub conn: &'a mut [i64],
    pub req_size: &'a mut [i64],
    pub rsp_size: &'a mut [i64],
    pub req_t0: &'a mut [f64],
    pub req_t1: &'a mut [f64],
    pub rsp_t0: &'a mut [f64],
    pub rsp_t1: &'a mut [f64],
    pub think: &'a mut [f64],
}

/// Request/response pairs (owned columns of `pairs_from_runs`).
#[derive(Default)]
pub struct Pairs {
    pub conn: Vec<i64>,
    pub req_size: Vec<i64>,
    pub rsp_size: Vec<i64>,
    pub req_t0: Vec<f64>,
    pub req_t1: Vec<f64>,
    pub rsp_t0: Vec<f64>,
    pub rsp_t1: Vec<f64>,
    pub think: Vec<f64>,
}

impl Tracker {
    /// Free the per-connection state once the table's pass (`Tracker::table`) has kept
    /// what the pairs need of it (the pair columns can then reuse its memory).
    pub fn drop_conn_state(&mut self) {
        if self.final_runs.is_some() {
            self.conns = Default::default();
            self.cold = Default::default();
        }
    }

    /// The number of connections (also after `drop_conn_state`).
    pub fn n_conns(&self) -> usize {
        match &self.final_runs {
            Some(fr) => fr.inferred.len(),
            None => self.conns.len(),
        }
    }

    /// The `FinalRuns` kept by `Tracker::table`, or computed from the connections.
    fn final_state(&self) -> Cow<'_, FinalRuns> {
        match &self.final_runs {
            Some(fr) => Cow::Borrowed(fr),
            None => {
                let mut fr = FinalRuns::default();
                for (i, c) in self.conns.iter().enumerate() {
                    fr.add(i, c);
                }
                Cow::Owned(fr)
            }
        }
    }

    /// Every run the pairs come from (see `pairs`), in stream order: the finished
    /// real-data runs of connections not `inferred`, the finished ack-inferred runs of
    /// the others, then the open runs.
    fn for_final_runs(&self, inferred: &[bool], open: &[DoneRun], mut f: impl FnMut(&DoneRun)) {
        for r in self.runs.iter() {
            if !inferred[r.cid() as usize] {
                f(r);
            }
        }
        for r in self.vruns.iter() {
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
    pub fn pairs(&self, cdir: &[i64], t0: i64) -> Pairs {
        let slots = self.pair_slots(cdir);
        let n = slots[slots.len() - 1];
        let (i, f) = (|| vec![0i64; n], || vec![0f64; n]);
        let mut p = Pairs {
            conn: i(),
            req_size: i(),
            rsp_size: i(),
            req_t0: f(),
            req_t1: f(),
            rsp_t0: f(),
            rsp_t1: f(),
            think: f(),
        };
        let out = PairCols {
            conn: &mut p.conn,
            req_size: &mut p.req_size,
            rsp_size: &mut p.rsp_size,
            req_t0: &mut p.req_t0,
            req_t1: &mut p.req_t1,
            rsp_t0: &mut p.rsp_t0,
            rsp_t1: &mut p.rsp_t1,
            think: &mut p.think,
        };
        self.fill_pairs(cdir, t0, slots, out);
        p
    }

    /// Pass 1 of `pairs`: each connection's first pair slot (prefix sums of its pair
    /// count; the last element is the number of pairs). `cdir.len()` must be the
    /// number of connections.
    ///
    /// A connection's final runs come in stream order (`for_final_runs`), which is
    /// its order in the numpy reference's stable sort by connection. So instead of
    /// sorting the runs (a gather all over memory), two sequential passes over the
    /// stream: this one counts each connection's pairs, `fill_pairs` writes them in
    /// place with a cursor per connection.
    pub fn pair_slots(&self, cdir: &[i64]) -> Vec<usize> {
        let fr = self.final_state();
        let (inferred, open) = (&fr.inferred, &fr.open);
        let n = self.n_conns();
        let mut slots = vec![0usize; n + 1];
        let mut seen = vec![false; n];
        self.for_final_runs(inferred, open, |r| {
            let c = r.cid() as usize;
            let is_req = r.dir() == cdir[c];
            slots[c + 1] += (is_req || !seen[c]) as usize;
            seen[c] = true;
        });
        for i in 0..n {
            slots[i + 1] += slots[i];
        }
        slots
    }

    /// Pass 2 of `pairs`: fill `out` (as long as the last of `slots`) from the runs.
    ///
    /// Every element is written when its pair opens (the request run, or a server run
    /// first in its connection), with the empty side's 0 / NaN, and `think` from the
    /// previous pair of the connection, whose response is final by then (a pair only
    /// gains server runs until the next request opens the next pair); later server runs
    /// of the pair add their bytes and replace the response times (the last one's, as
    /// numpy's fancy assignment keeps). So no column is filled beforehand and there is
    /// no pass for `think`: the output (8 columns, a fresh 64 bytes per pair) is
    /// written once, in the run stream's order.
    pub fn fill_pairs(&self, cdir: &[i64], t0: i64, slots: Vec<usize>, out: PairCols) {
        let sec = |t: i64| (t.wrapping_sub(t0)) as f64 * 1e-9;
        let fr = self.final_state();
        let (inferred, open) = (&fr.inferred, &fr.open);
        // the cursor of a connection: one past its current pair
        let mut cursor = slots;
        let mut seen = vec![false; self.n_conns()];
        self.for_final_runs(inferred, open, |r| {
            let c = r.cid() as usize;
            let is_req = r.dir() == cdir[c];
            let (s0, s1) = (sec(r.t0), sec(r.t1));
            if is_req || !seen[c] {
                let k = cursor[c];
                cursor[c] += 1;
                out.conn[k] = c as i64;
                out.think[k] = if seen[c] {
                    s0 - out.rsp_t1[k - 1]
                } else {
                    f64::NAN
                };
                seen[c] = true;
                if is_req {
                    (out.req_size[k], out.req_t0[k], out.req_t1[k]) = (r.bytes, s0, s1);
                    (out.rsp_size[k], out.rsp_t0[k], out.rsp_t1[k]) = (0, f64::NAN, f64::NAN);
                } else {
                    (out.req_size[k], out.req_t0[k], out.req_t1[k]) = (0, f64::NAN, f64::NAN);
                    (out.rsp_size[k], out.rsp_t0[k], out.rsp_t1[k]) = (r.bytes, s0, s1);
                }
            } else {
                let k = cursor[c] - 1;
                out.rsp_size[k] += r.bytes;
                (out.rsp_t0[k], out.rsp_t1[k]) = (s0, s1);
            }
        });
    }
}
