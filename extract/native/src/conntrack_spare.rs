//! Spare blocks for the native tracker's `Blocks` (part of `conntrack`), paged in
//! ahead of time by another thread.
//!
//! On a virtual machine the first touch of fresh memory is expensive (about 1-2 ms
//! per MB here: the kernel zeroes the page and the hypervisor backs it), and the
//! tracker touches ~340 bytes per connection and 32 per request/response run the
//! first time it writes them. In `swell extract` the tracker runs in a worker thread
//! and is the slower of the two threads; the reader's thread has time to spare. So
//! the tracker's stores take new blocks from a `Pool` that the reader's thread keeps
//! stocked (`Spares::fill`, between two reads) with blocks whose pages it has already
//! touched. When the pool is empty, `Blocks` allocates as before: the pool changes
//! where the cost is paid, never the results.

use std::sync::{Arc, Mutex};

/// Touch every page of `v`'s capacity (one write per 4 KB) so that the kernel backs
/// it now. The bytes are not initialised values of `T`; `v` stays empty.
fn page_in<T>(v: &mut Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    let p = v.as_mut_ptr() as *mut u8;
    for off in (0..bytes).step_by(4096) {
        // SAFETY: `off` is inside the allocation; writing a byte of spare capacity
        // through a raw pointer creates no reference to a `T`.
        unsafe { std::ptr::write_volatile(p.add(off), 0) };
    }
}

/// Spare empty blocks of capacity `cap` for one kind of element.
pub struct Pool<T> {
    inner: Mutex<PoolState<T>>,
    cap: usize,
}

struct PoolState<T> {
    spare: Vec<Vec<T>>,
    /// Blocks taken since the last `fill`: how many to add next time.
    taken: usize,
}

impl<T> Pool<T> {
    pub fn new(cap: usize) -> Self {
        Pool {
            inner: Mutex::new(PoolState {
                spare: Vec::new(),
                taken: 1,
            }),
            cap,
        }
    }

    /// A paged-in empty block, if one is ready.
    pub fn take(&self) -> Option<Vec<T>> {
        let mut st = self.inner.lock().ok()?;
        st.taken += 1;
        st.spare.pop()
    }

    /// Stock the pool: as many blocks as were taken since the last fill (the recent
    /// rate of growth), at least one, at most `most`, paged in outside the lock.
    pub fn fill(&self, most: usize) {
        let want = match self.inner.lock() {
            Ok(mut st) => {
                let w = st.taken.clamp(1, most).saturating_sub(st.spare.len());
                st.taken = 0;
                w
            }
            Err(_) => return,
        };
        for _ in 0..want {
            let mut b = Vec::with_capacity(self.cap);
            page_in(&mut b);
            if let Ok(mut st) = self.inner.lock() {
                st.spare.push(b);
            }
        }
    }
}

/// The pools of one tracker, shared with the thread that stocks them.
pub struct Spares {
    pub conns: Arc<Pool<super::Conn>>,
    pub cold: Arc<Pool<super::Cold>>,
    pub runs: Arc<Pool<super::DoneRun>>,
}

impl Spares {
    /// Stock every pool (see `Pool::fill`).
    pub fn fill(&self) {
        self.conns.fill(4);
        self.cold.fill(2);
        self.runs.fill(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_follows_the_rate_of_taking() {
        let pool: Pool<u64> = Pool::new(1024);
        pool.fill(4);
        let b = pool.take().expect("one block after the first fill");
        assert!(b.is_empty() && b.capacity() >= 1024);
        assert!(pool.take().is_none()); // taken twice since the fill
        pool.fill(4);
        assert_eq!(pool.inner.lock().unwrap().spare.len(), 2);
        for _ in 0..9 {
            pool.take();
        }
        pool.fill(4); // capped
        assert_eq!(pool.inner.lock().unwrap().spare.len(), 4);
    }

    #[test]
    fn blocks_use_the_pool_and_keep_their_values() {
        use super::super::state::Blocks;
        let pool = Blocks::<u64, 4>::new_pool();
        pool.fill(2);
        let mut b = Blocks::<u64, 4>::with_pool(pool.clone());
        for i in 0..100u64 {
            b.push(i);
        }
        assert_eq!(
            b.iter().copied().collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        assert!(pool.take().is_none()); // the one spare went into the store
    }
}
