//! The 5-tuple key table of the native tracker (part of `conntrack`): key -> the
//! key's current connection and its slot in the chunk's per-key scratch.
//!
//! Open addressing with linear probing over 16-byte slots (four to a cache line),
//! at most half full, so that a look-up is almost always one cache line, and that
//! line is known from the key alone: the tracker prefetches the slots of the packets
//! a few places ahead (`prefetch`), which a general-purpose map does not allow.
//! Keys are already 64-bit hashes of the 5-tuple; one multiply spreads them over
//! the table. There is no removal.

/// `local` of an empty slot (a used slot's `local` is an index into a chunk's scratch,
/// possibly stale: the tracker checks it against the scratch).
const EMPTY: u32 = u32::MAX;
/// `cur` of a key without a connection yet.
pub const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct Slot {
    pub key: u64,
    /// The key's current connection (`NONE` while it has none).
    pub cur: u32,
    /// Where the key's per-chunk state is in the chunk's scratch (valid only if the
    /// scratch entry there names this key).
    pub local: u32,
}

const FREE: Slot = Slot {
    key: 0,
    cur: NONE,
    local: EMPTY,
};

pub struct KeyTable {
    slots: Vec<Slot>,
    len: usize,
}

impl Default for KeyTable {
    fn default() -> Self {
        KeyTable {
            slots: vec![FREE; 1024],
            len: 0,
        }
    }
}

impl KeyTable {
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
    }

    /// Ask the CPU to fetch the cache line where `key`'s look-up starts.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        super::prefetch(self.slots.as_ptr().wrapping_add(self.home(key)) as *const u8);
    }

    /// The slot of `key`, inserted (with no connection and no scratch entry) if new;
    /// the flag tells whether it was new.
    #[inline(always)]
    pub fn entry(&mut self, key: u64) -> (&mut Slot, bool) {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.local == EMPTY {
                self.len += 1;
                self.slots[i] = Slot {
                    key,
                    cur: NONE,
                    local: 0,
                };
                return (&mut self.slots[i], true);
            }
            if s.key == key {
                return (&mut self.slots[i], false);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `key`, if present.
    pub fn get_mut(&mut self, key: u64) -> Option<&mut Slot> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.local == EMPTY {
                return None;
            }
            if s.key == key {
                return Some(&mut self.slots[i]);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let bigger = vec![FREE; 2 * self.slots.len()];
        let old = std::mem::replace(&mut self.slots, bigger);
        let mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.local != EMPTY) {
            let mut i = self.home(s.key);
            while self.slots[i].local != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}
