//! The lock-free read path: probe, copy, confirm; and this process's hit and
//! miss counts.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use crate::clock::now_ms;
use crate::error::Result;
use crate::fork::{fork_generation, GEN_BITS};
use crate::hash::KeyHash;
use crate::layout::{Stat, MAX_TAGS};
use crate::segment::Segment;
use crate::shard::{Found, Probe};

/// What a successful read returns besides the value.
#[derive(Clone, Copy, Debug)]
pub struct ReadMeta {
    /// Absolute monotonic deadline in ms (0 = none).
    pub expiry: u64,
    /// Number of tag references in `tags`.
    pub ntags: u8,
    /// Tag references of the entry (packed [`TagRef`](crate::TagRef)s); the first `ntags` count.
    pub tags: [u64; MAX_TAGS],
}

/// Attempts before a read that keeps seeing writes is reported as a miss.
const READ_TRIES: usize = 4;
/// Reads between flushes of this process's hit/miss counts into the segment.
const FLUSH_EVERY: u64 = 1024;

/// A pending-count word is `fork generation << GEN_SHIFT | count`.
const GEN_SHIFT: u32 = 64 - GEN_BITS;
const COUNT_MASK: u64 = (1 << GEN_SHIFT) - 1;

impl Segment {
    /// Whether the copy from `f` was stable; if so, counts the hit.
    #[inline]
    pub(crate) fn confirm(&self, kh: &KeyHash, f: &Found) -> bool {
        let sh = self.shard_of(kh);
        if sh.stable(f) {
            sh.note_hit(f, self.freq_cap);
            self.count(true);
            true
        } else {
            false
        }
    }

    /// Counts a hit or a miss in this process, flushing to the segment now and then.
    #[inline]
    pub fn count(&self, hit: bool) {
        let c = if hit {
            &self.local_hits
        } else {
            &self.local_misses
        };
        // Only this process touches these; a plain load+store is enough. A
        // word of another fork generation holds the parent's pending counts,
        // which the parent flushes: start again from zero.
        let gen = fork_generation();
        let mut w = c.load(Ordering::Relaxed);
        if w >> GEN_SHIFT != gen {
            w = gen << GEN_SHIFT;
        }
        let w = w + 1;
        c.store(w, Ordering::Relaxed);
        if w & COUNT_MASK >= FLUSH_EVERY {
            self.flush_counts();
        }
    }

    /// Moves this process's pending hit/miss counts into the segment. Counts
    /// inherited through `fork` are left to the parent, which still has them.
    pub fn flush_counts(&self) {
        let sh = self.shard(0);
        let gen = fork_generation();
        let take = |c: &std::sync::atomic::AtomicU64| {
            let w = c.swap(gen << GEN_SHIFT, Ordering::Relaxed);
            if w >> GEN_SHIFT == gen {
                w & COUNT_MASK
            } else {
                0
            }
        };
        let h = take(&self.local_hits);
        let m = take(&self.local_misses);
        if self.read_only {
            return; // the shared counters are in the read-only mapping
        }
        if h > 0 {
            sh.bump(Stat::Hits, h);
        }
        if m > 0 {
            sh.bump(Stat::Misses, m);
        }
    }

    /// Reads a key's value with a caller-provided buffer maker. `make` gets the
    /// value length and a filler; it must call the filler on a buffer of that
    /// length and return the buffer. Returns the value and its metadata.
    pub fn read_with<T>(
        &self,
        key: &[u8],
        mut make: impl FnMut(usize, &dyn Fn(&mut [u8])) -> T,
    ) -> Result<Option<(T, ReadMeta)>> {
        self.check_key(key)?;
        let kh = self.hash(key);
        Ok(self.read_hashed(&kh, key, now_ms(), |n, copy| {
            Some(make(n, &|dst| copy(0, dst)))
        }))
    }

    /// Whether the shard of `kh` holds no entry at all, so a read of the key
    /// can stop before the index. A write of the key that ended before the
    /// caller read the key's stamp (acquire) is seen: the writer counts the
    /// entry before it makes the stamp even again.
    #[inline]
    pub fn shard_empty(&self, kh: &KeyHash) -> bool {
        self.shard_of(kh)
            .stat(Stat::Entries)
            .load(Ordering::Relaxed)
            == 0
    }

    /// The lock-free read of every caller, for a key already hashed (and
    /// checked): finds the record, lets `make` copy what it needs of the value,
    /// then checks that no write moved the record meanwhile, and tries again
    /// if one did. `make` gets the value's length and `copy(at, dst)`, which
    /// fills `dst` from the value's byte `at`; what it makes from a copy that
    /// turns out unstable is dropped. `make` may refuse the record (`None`, a
    /// value it cannot use): that read is a miss. Counts the hit or the miss.
    /// `now` ([`now_ms`]) decides expiry: the caller reads the clock once for
    /// this and for its own deadlines.
    pub fn read_hashed<T>(
        &self,
        kh: &KeyHash,
        key: &[u8],
        now: u64,
        make: impl FnMut(usize, &dyn Fn(usize, &mut [u8])) -> Option<T>,
    ) -> Option<(T, ReadMeta)> {
        // A read cannot fail, so what stops one (see `Segment::contain`) reads
        // as a miss, and the handle's next write reports the failure.
        if self.failure().is_some() {
            self.count(false);
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| self.read_contained(kh, key, now, make))) {
            Ok(found) => found,
            Err(payload) => {
                self.fail(payload);
                None
            }
        }
    }

    #[inline(always)]
    fn read_contained<T>(
        &self,
        kh: &KeyHash,
        key: &[u8],
        now: u64,
        mut make: impl FnMut(usize, &dyn Fn(usize, &mut [u8])) -> Option<T>,
    ) -> Option<(T, ReadMeta)> {
        for _ in 0..READ_TRIES {
            // The record found is copied from, then confirmed: a copy that a
            // write moved under is garbage, and the probe starts again.
            // (Matched by reference: moving the record out copies it.)
            match &self.shard_of(kh).probe(kh, key, now) {
                Probe::Miss => break,
                Probe::Unstable => continue,
                Probe::Hit(f) => {
                    let copy = |at: usize, dst: &mut [u8]| {
                        assert!(at + dst.len() <= f.val_len, "copy past the value");
                        self.shm.read_racy(f.val_off + at, dst);
                    };
                    let Some(v) = make(f.val_len, &copy) else {
                        break;
                    };
                    if self.confirm(kh, f) {
                        let meta = ReadMeta {
                            expiry: f.expiry,
                            ntags: f.ntags,
                            tags: f.tags,
                        };
                        return Some((v, meta));
                    }
                }
            }
        }
        self.count(false);
        None
    }

    /// Reads a key's value into a new vector.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .read_with(key, |n, fill| {
                let mut v = vec![0u8; n];
                fill(&mut v);
                v
            })?
            .map(|(v, _)| v))
    }
}
