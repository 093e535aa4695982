//! The request/response pairs of the native tracker (part of `conntrack`): which
//! runs a connection's pairs come from (real data, or acknowledgement-inferred for a
//! TCP connection seen in one direction only), ordered by connection with a counting
//! sort, then cut into pairs with the arithmetic of `pairs_from_runs` in
//! `extract/sessions.py`.

use super::{Conn, DoneRun, Tracker, TCP};

/// Request/response pairs (columns of `pairs_from_runs`).
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

    /// Handles of the final runs stable-sorted by connection (a counting sort).
    pub fn final_order(&self) -> Vec<u64> {
        let inferred = self.inferred_runs();
        let mut pos = vec![0usize; self.conns.len() + 1];
        self.for_final_runs(&inferred, |cid, _| pos[cid as usize + 1] += 1);
        for i in 0..self.conns.len() {
            pos[i + 1] += pos[i];
        }
        let mut order = vec![0u64; pos[self.conns.len()]];
        self.for_final_runs(&inferred, |cid, h| {
            order[pos[cid as usize]] = h;
            pos[cid as usize] += 1;
        });
        order
    }

    /// Request/response pairs from the final runs, exactly as `pairs_from_runs` of
    /// `extract/sessions.py` computes them: a client run opens a pair, the server run
    /// after it closes it, a server run first in its connection makes a pair with an
    /// empty request; times in seconds since `t0`. `cdir` is the client's direction
    /// per connection. Returns the pairs in connection order.
    pub fn pairs(&self, cdir: &[i64], t0: i64) -> Pairs {
        let sec = |t: i64| (t.wrapping_sub(t0)) as f64 * 1e-9;
        let order = self.final_order();
        let mut prev_cid = -1i64;
        let mut n = 0;
        for &h in &order {
            let (cid, dir, ..) = self.run_at(h);
            n += (dir == cdir[cid as usize] || cid != prev_cid) as usize;
            prev_cid = cid;
        }
        let (i, f) = (|| Vec::with_capacity(n), || Vec::with_capacity(n));
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
        prev_cid = -1;
        for h in order {
            let (cid, dir, bytes, t0r, t1r) = self.run_at(h);
            let is_req = dir == cdir[cid as usize];
            if is_req || cid != prev_cid {
                p.conn.push(cid);
                p.req_size.push(0);
                p.rsp_size.push(0);
                for v in [&mut p.req_t0, &mut p.req_t1, &mut p.rsp_t0, &mut p.rsp_t1] {
                    v.push(f64::NAN);
                }
            }
            prev_cid = cid;
            let k = p.conn.len() - 1;
            if is_req {
                p.req_size[k] += bytes;
                (p.req_t0[k], p.req_t1[k]) = (sec(t0r), sec(t1r));
            } else {
                p.rsp_size[k] += bytes;
                (p.rsp_t0[k], p.rsp_t1[k]) = (sec(t0r), sec(t1r));
            }
        }
        p.think = (0..p.conn.len())
            .map(|k| {
                if k == 0 || p.conn[k] != p.conn[k - 1] {
                    f64::NAN
                } else {
                    p.req_t0[k] - p.rsp_t1[k - 1]
                }
            })
            .collect();
        p
    }
}
