//! A view of one shard: its header words, index slots, rings and counters,
//! and the lock-free read path over them.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use crate::arena::Ring;
use crate::geometry::Geometry;
use crate::hash::KeyHash;
use crate::index::{self, PAIR_SLOTS};
use crate::layout::*;
use crate::lock::Mutex;
use crate::shm::Shm;
use crate::tags::TagRef;

/// Reads of a record within the newest `cap / CORRELATED_FRACTION` bytes of
/// the small ring do not count towards its promotion (see [`Shard::note_hit`]).
pub const CORRELATED_FRACTION: u64 = 8;
/// ... nor within the newest `CORRELATED_RECORDS` records of its size, where
/// that is longer (a small ring of large records).
pub const CORRELATED_RECORDS: u64 = 8;

/// One shard of a mapped segment.
#[derive(Clone, Copy)]
pub struct Shard<'a> {
    pub shm: &'a Shm,
    pub g: &'a Geometry,
    pub seed: u64,
    pub id: u32,
    pub base: usize,
}

/// A record found by a read, not yet confirmed stable.
#[derive(Clone, Copy, Debug)]
pub struct Found {
    pub(crate) ring: Ring,
    pub(crate) slot: usize,
    pub(crate) word: u64,
    pub(crate) logical: u64,
    /// File offset of the value's first byte.
    pub val_off: usize,
    /// Length of the value.
    pub val_len: usize,
    /// Absolute monotonic deadline in ms, 0 = none.
    pub expiry: u64,
    /// Number of tag references in `tags`.
    pub ntags: u8,
    /// The entry's tag references (packed [`TagRef`]s); the first `ntags` count.
    pub tags: [u64; MAX_TAGS],
}

/// Outcome of probing the index for a key.
#[derive(Debug)]
pub enum Probe {
    Hit(Found),
    Miss,
    /// Something moved under the read: try again, or count a miss.
    Unstable,
}

impl<'a> Shard<'a> {
    #[inline]
    pub fn ring(&self, id: RingId) -> Ring {
        let (h, t, rel, cap) = match id {
            RingId::Small => (
                S_SMALL_HEAD,
                S_SMALL_TAIL,
                self.g.small_rel,
                self.g.small_cap,
            ),
            RingId::Main => (S_MAIN_HEAD, S_MAIN_TAIL, self.g.main_rel, self.g.main_cap),
        };
        Ring {
            head_off: self.base + h,
            tail_off: self.base + t,
            data: self.base + rel as usize,
            cap,
        }
    }

    #[inline]
    pub fn stat(&self, s: Stat) -> &'a AtomicU64 {
        self.shm.u64_at(self.base + s.rel())
    }

    #[inline]
    pub fn bump(&self, s: Stat, n: u64) {
        self.stat(s).fetch_add(n, Ordering::Relaxed);
    }

    /// Decrements a counter without wrapping below zero.
    #[inline]
    pub fn drop_one(&self, s: Stat) {
        let c = self.stat(s);
        let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
    }

    /// Absolute offset of slot `i` (0..16) of bucket pair `pair`.
    #[inline]
    pub fn slot_off(&self, pair: u32, i: usize) -> usize {
        // Wrapping on purpose (no overflow check on the read's path): `base`
        // and `index_rel` come from a checked geometry that places every pair
        // inside the file (at most 128 GiB), `pair < npairs` and `i < 16`, so
        // the sum cannot wrap; and were it wrong, `Shm` bounds-checks the word.
        self.base
            .wrapping_add(self.g.index_rel as usize)
            .wrapping_add((pair as usize).wrapping_mul(128))
            .wrapping_add(i.wrapping_mul(8))
    }

    #[inline]
    pub fn slot(&self, pair: u32, i: usize) -> &'a AtomicU64 {
        self.shm.u64_at(self.slot_off(pair, i))
    }

    /// The shard's writer lock.
    #[inline]
    pub fn mutex(&self) -> Mutex<'a> {
        Mutex::at(self.shm, self.base + S_MUTEX)
    }

    #[inline]
    pub fn stamp(&self, idx: u32) -> &'a AtomicU32 {
        self.shm
            .u32_at(self.g.stamps_off as usize + 4 * idx as usize)
    }

    #[inline]
    pub fn tag_cell(&self, cell: u32) -> &'a AtomicU32 {
        self.shm
            .u32_at(self.g.tags_off as usize + 4 * cell as usize)
    }

    #[inline]
    pub fn waiters(&self) -> &'a AtomicU32 {
        self.shm.u32_at(self.base + S_WAITERS)
    }

    #[inline]
    pub fn intent_active(&self) -> &'a AtomicU32 {
        self.shm.u32_at(self.base + S_INTENT_ACTIVE)
    }

    #[inline]
    pub fn intent_stamp(&self) -> &'a AtomicU32 {
        self.shm.u32_at(self.base + S_INTENT_STAMP)
    }

    /// Whether every tag of a record still has the version it was written with.
    #[inline]
    pub fn tags_current(&self, tags: &[u64]) -> bool {
        tags.iter().all(|&t| {
            let t = TagRef::unpack(t);
            t.cell < self.g.ntags && self.tag_cell(t.cell).load(Ordering::Acquire) == t.version
        })
    }

    /// Looks a key up without locking or waiting.
    pub fn probe(&self, kh: &KeyHash, key: &[u8], now: u64) -> Probe {
        let pair = kh.pair(self.g.npairs);
        let fpv = kh.fingerprint();
        for i in 0..PAIR_SLOTS {
            let slot_off = self.slot_off(pair, i);
            let w = self.shm.u64_at(slot_off).load(Ordering::Acquire);
            if w == 0 || index::fp(w) != fpv {
                continue;
            }
            let ring = self.ring(index::ring(w));
            let phys = index::phys(w);
            let moved = || {
                let w2 = self.shm.u64_at(slot_off).load(Ordering::Acquire);
                !index::same_target(w, w2)
            };
            let head = ring.head(self.shm).load(Ordering::Acquire);
            let (Some(logical), Some((h, expiry))) =
                (ring.logical(head, phys), ring.header(self.shm, phys))
            else {
                if moved() {
                    return Probe::Unstable;
                }
                continue;
            };
            // A value longer than any write makes is damage: never hand it out
            // (a reader would allocate and copy up to a whole ring for it).
            if h.is_pad() || h.val_len > self.g.max_value || !ring.key_eq(self.shm, phys, &h, key) {
                if moved() {
                    return Probe::Unstable;
                }
                continue;
            }
            let mut tags = [0u64; MAX_TAGS];
            for (t, slot) in tags.iter_mut().enumerate().take(h.ntags as usize) {
                *slot = ring.tag(self.shm, phys, &h, t);
            }
            let f = Found {
                ring,
                slot: slot_off,
                word: w,
                logical,
                val_off: ring.at(phys) + h.meta_len() + h.key_len as usize,
                val_len: h.val_len as usize,
                expiry,
                ntags: h.ntags,
                tags,
            };
            if (expiry != 0 && expiry <= now) || !self.tags_current(&tags[..h.ntags as usize]) {
                return if self.stable(&f) {
                    Probe::Miss
                } else {
                    Probe::Unstable
                };
            }
            return Probe::Hit(f);
        }
        Probe::Miss
    }

    /// After copying out of `f`: whether nothing moved meanwhile (seqlock check).
    #[inline]
    pub fn stable(&self, f: &Found) -> bool {
        fence(Ordering::Acquire);
        let tail = f.ring.tail(self.shm).load(Ordering::Relaxed);
        let w2 = self.shm.u64_at(f.slot).load(Ordering::Relaxed);
        tail <= f.logical && index::same_target(w2, f.word)
    }

    /// Records a hit in the slot's 2-bit frequency (S3-FIFO). Skipped once
    /// the frequency reaches `cap` (at most [`index::FREQ_MAX`]), so hot keys
    /// stop writing to shared lines; a `cap` of 0 never writes (read-only).
    ///
    /// Also skipped while the record is among the newest
    /// 1/[`CORRELATED_FRACTION`] of the small ring's bytes: a read that closely
    /// follows the write (the same block read again by the next request, a
    /// value read back right after it was computed) says nothing about reuse,
    /// and counting it would promote one-off keys to main (2Q's correlated
    /// reference period). Where the ring holds only a few dozen records (large
    /// values in a small segment), that eighth is a handful of writes, shorter
    /// than a burst of requests; the period is then the newest
    /// [`CORRELATED_RECORDS`] records of this one's size, at most half the ring
    /// (so reads in its older half always count).
    #[inline]
    pub fn note_hit(&self, f: &Found, cap: u8) {
        let slot = self.shm.u64_at(f.slot);
        let w = slot.load(Ordering::Relaxed);
        if !index::same_target(w, f.word) || index::freq(w) >= cap {
            return;
        }
        if index::ring(w) == RingId::Small {
            let head = f.ring.head(self.shm).load(Ordering::Relaxed);
            let len = (f.val_off + f.val_len).saturating_sub(f.ring.at(index::phys(w))) as u64;
            let period = (f.ring.cap / CORRELATED_FRACTION)
                .max(CORRELATED_RECORDS * len)
                .min(f.ring.cap / 2);
            if head.saturating_sub(f.logical) <= period {
                return;
            }
        }
        let _ = slot.compare_exchange(w, w + index::FREQ_ONE, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// What a writer found in a key's bucket pair.
#[derive(Debug, Default)]
pub struct Located {
    /// The key's slot and its word, if the key is indexed.
    pub found: Option<(usize, u64)>,
    /// First empty slot.
    pub empty: Option<usize>,
    /// Coldest occupied slot: the in-place victim when the pair is full.
    pub victim: Option<(usize, u64)>,
}

impl Shard<'_> {
    /// Starts loading the records the index names for `kh`'s fingerprint (the
    /// key's current version, usually), so that `locate`'s key comparison does
    /// not wait for them. Reads the index racily: only a hint.
    #[inline]
    pub fn prefetch_matches(&self, kh: &KeyHash) {
        let pair = kh.pair(self.g.npairs);
        let fpv = kh.fingerprint();
        for i in 0..PAIR_SLOTS {
            let w = self.slot(pair, i).load(Ordering::Relaxed);
            if w != 0 && index::fp(w) == fpv {
                let r = self.ring(index::ring(w));
                self.shm.prefetch(r.at(index::phys(w)));
            }
        }
    }

    /// Finds `key` in its pair (writers, under the shard lock).
    pub fn locate(&self, kh: &KeyHash, key: &[u8]) -> Located {
        let pair = kh.pair(self.g.npairs);
        let fpv = kh.fingerprint();
        let mut out = Located::default();
        for i in 0..PAIR_SLOTS {
            let off = self.slot_off(pair, i);
            let w = self.shm.u64_at(off).load(Ordering::Acquire);
            if w == 0 {
                out.empty.get_or_insert(off);
                continue;
            }
            if out.found.is_none() && index::fp(w) == fpv {
                let r = self.ring(index::ring(w));
                if let Some((h, _)) = r.header(self.shm, index::phys(w)) {
                    if !h.is_pad() && r.key_eq(self.shm, index::phys(w), &h, key) {
                        out.found = Some((off, w));
                        continue;
                    }
                }
            }
            // Coldest first; among equals prefer the small ring (newer, unproven).
            let better = match out.victim {
                None => true,
                Some((_, v)) => {
                    (index::freq(w), index::ring(w) as u8) < (index::freq(v), index::ring(v) as u8)
                }
            };
            if better {
                out.victim = Some((off, w));
            }
        }
        out
    }

    /// Finds the slot that points at the record at (`ring`, `phys`) whose key
    /// hashes to `kh` (writers, under the shard lock).
    pub fn slot_of(&self, kh: &KeyHash, id: RingId, at: u64) -> Option<(usize, u64)> {
        let pair = kh.pair(self.g.npairs);
        (0..PAIR_SLOTS).find_map(|i| {
            let off = self.slot_off(pair, i);
            let w = self.shm.u64_at(off).load(Ordering::Acquire);
            (w != 0 && index::ring(w) == id && index::phys(w) == at).then_some((off, w))
        })
    }

    /// Replaces a slot's word, whatever frequency a reader bumped meanwhile.
    #[inline]
    pub fn publish(&self, slot_off: usize, w: u64) {
        self.shm.u64_at(slot_off).swap(w, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use crate::options::Options;
    use crate::segment::Segment;
    use std::path::PathBuf;

    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let p = PathBuf::from(format!("/dev/shm/zigshard-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn promotions(seg: &Segment) -> u64 {
        let s = seg.stats();
        s.into_iter().find(|(k, _)| *k == "promotions").unwrap().1
    }

    #[test]
    fn a_small_ring_of_large_records_ignores_reads_within_its_newest_records() {
        let d = Dir::new("corr");
        let opts = Options {
            size: 2 << 20,
            directory: d.0.clone(),
            ..Options::default()
        };
        let seg = Segment::open("corr", &opts).unwrap();
        let g = *seg.geometry();
        assert_eq!(g.nshards, 1);
        // About 40 records fill the small ring, so its newest eighth is 5 of
        // them: shorter than the correlated period of 8 records.
        let val = vec![7u8; (g.small_cap / 40) as usize - 32];
        // Unread keys fill both rings first, so no move below is the cold start's.
        for i in 0..2000 {
            seg.set(format!("fill{i}").as_bytes(), &val, None, &[])
                .unwrap();
        }
        // Keys each read back `lag` writes after its own; how many moved to main.
        let n = 500;
        let moved = |prefix: &str, lag: u64| {
            let before = promotions(&seg);
            for i in 0..n + lag {
                if i < n {
                    seg.set(format!("{prefix}{i}").as_bytes(), &val, None, &[])
                        .unwrap();
                }
                if i >= lag {
                    assert!(seg
                        .get(format!("{prefix}{}", i - lag).as_bytes())
                        .unwrap()
                        .is_some());
                }
            }
            promotions(&seg) - before
        };
        // 6 writes later: the 7th newest record, outside the newest eighth but
        // inside the newest 8 records.
        let near = moved("near", 6);
        assert!(
            near < n / 50,
            "{near} of {n} keys read 6 writes after their own moved to main"
        );
        // 12 writes later, the read is past the period and still in the small ring.
        let far = moved("far", 12);
        assert!(
            far >= n * 9 / 10,
            "only {far} of {n} keys read 12 writes after their own moved to main"
        );
    }
}
