//! S3-FIFO over the two rings of a shard, plus the ghost table.
//!
//! New entries go to the small ring (about 10% of the bytes), or straight to
//! the main ring when their key is in the ghost table (evicted from small
//! recently) or when the value is large. When the small ring needs room, its
//! oldest entry moves to main if it was read since it was written, not counting
//! reads right after the write (see `Shard::note_hit`), or while main still has
//! free space (so a cold start fills the whole segment), or while main is
//! mostly dropping entries unread (see `Shard::main_takes_cold`); else it
//! is dropped and its fingerprint goes to the ghost table. When main needs
//! room, its oldest entry is copied forward with its frequency lowered by one
//! if it was read, else dropped. Reads only raise a 2-bit counter in the slot.
//!
//! Every step keeps the invariants recovery relies on: a slot points only to a
//! complete record between its ring's tail and head, and the tail passes a
//! record only after its slot was cleared or moved.

use std::sync::atomic::Ordering;

use crate::arena::Header;
use crate::clock::now_ms;
use crate::failpoint::{self, Point};
use crate::hash::KeyHash;
use crate::index;
use crate::layout::RingId;
use crate::layout::{
    Stat, GHOST_CELLS, S_GHOST_CURSOR, S_GHOST_EPOCH, S_GHOST_EPOCH_START, S_MAIN_SCORE,
};
use crate::shard::Shard;

/// Ghost epochs a fingerprint stays valid for.
const GHOST_WINDOW: u64 = 8;
/// What an entry main keeps for a read adds to the main ring's score; one it
/// drops unread takes away [`SCORE_DROP`]. Below zero, main keeps fewer than
/// 3 entries for every 4 it drops unread.
const SCORE_KEEP: i64 = 4;
const SCORE_DROP: i64 = 3;
/// Bound of the main ring's score: it reflects about the last few hundred
/// entries main kept or dropped, so it turns within that many when the
/// workload changes.
pub const MAIN_SCORE_LIMIT: i64 = 1024;

impl Shard<'_> {
    /// Makes room for `len` contiguous bytes at the head of ring `id` and
    /// returns their physical offset. Writers only, under the shard lock.
    /// `reinsert`: whether main's hot entries may be copied forward meanwhile
    /// (false inside such a copy, which bounds the recursion).
    ///
    /// Ends: each turn returns, pads the ring's end (after which the record
    /// fits before the end), or has `process_tail` move the tail forward by a
    /// record or reset the shard; a record main copies forward loses a unit of
    /// its 2-bit frequency each time. Damaged positions reset the shard first,
    /// so free space is never computed from a tail past the head.
    pub fn reserve(&self, id: RingId, len: u64, reinsert: bool) -> u64 {
        let ring = self.ring(id);
        debug_assert!(len <= ring.cap && len % 8 == 0);
        loop {
            let Some((head, tail)) = ring.ends(self.shm) else {
                self.reset_damaged();
                continue;
            };
            let hp = head % ring.cap;
            let free = ring.cap - (head - tail);
            if hp + len > ring.cap {
                // Fill the end of the ring with a PAD record and start over at 0.
                let pad = ring.cap - hp;
                if free >= pad {
                    let h = Header::pad(pad);
                    self.shm
                        .u64_at(ring.at(hp))
                        .store(h.encode(), Ordering::Relaxed);
                    ring.head(self.shm).store(head + pad, Ordering::Release);
                    continue;
                }
            } else if free >= len {
                return hp;
            }
            self.process_tail(id, reinsert);
        }
    }

    /// Appends a copy of `bytes` (a whole record) to ring `id`; returns its offset.
    fn append_raw(&self, id: RingId, bytes: &[u8], reinsert: bool) -> u64 {
        let at = self.reserve(id, bytes.len() as u64, reinsert);
        let ring = self.ring(id);
        self.shm.write(ring.at(at), bytes);
        let head = ring.head(self.shm).load(Ordering::Relaxed);
        ring.head(self.shm)
            .store(head + bytes.len() as u64, Ordering::Release);
        at
    }

    /// Free bytes ring `id` has for a `len`-byte record without evicting.
    fn fits_without_eviction(&self, id: RingId, len: u64) -> bool {
        let ring = self.ring(id);
        let hp = ring.head(self.shm).load(Ordering::Relaxed) % ring.cap;
        let pad = if hp + len > ring.cap {
            ring.cap - hp
        } else {
            0
        };
        ring.free(self.shm) >= pad + len
    }

    /// Evicts, moves or skips the oldest record of ring `id`.
    fn process_tail(&self, id: RingId, reinsert: bool) {
        let ring = self.ring(id);
        let Some((head, tail)) = ring.ends(self.shm) else {
            self.reset_damaged();
            return;
        };
        if tail >= head {
            return;
        }
        let phys = tail % ring.cap;
        let header = ring
            .header(self.shm, phys)
            .filter(|(h, _)| h.total_len() <= head - tail);
        let Some((h, expiry)) = header else {
            // Only damage can put an unreadable record inside [tail, head),
            // or one that runs past the head.
            self.reset_damaged();
            return;
        };
        let len = h.total_len();
        let advance = || ring.tail(self.shm).store(tail + len, Ordering::Release);
        if h.is_pad() {
            advance();
            return;
        }
        let key = ring.key(self.shm, phys, &h);
        let kh = KeyHash::new(self.seed, &key);
        let Some((slot, w)) = self.slot_of(&kh, id, phys) else {
            advance(); // dead: overwritten, deleted, or left by a crash
            return;
        };
        failpoint::hit(Point::Evict);
        let mut tags = [0u64; crate::layout::MAX_TAGS];
        for (t, v) in tags.iter_mut().enumerate().take(h.ntags as usize) {
            *v = ring.tag(self.shm, phys, &h, t);
        }
        let expired = expiry != 0 && expiry <= now_ms();
        if expired || !self.tags_current(&tags[..h.ntags as usize]) {
            self.publish(slot, 0);
            self.drop_one(Stat::Entries);
            if expired {
                self.bump(Stat::Expirations, 1);
            }
            advance();
            return;
        }
        let mut rec = vec![0u8; len as usize];
        self.shm.read_racy(ring.at(phys), &mut rec);
        match id {
            RingId::Small => {
                if index::freq(w) > 0
                    || self.fits_without_eviction(RingId::Main, len)
                    || self.main_takes_cold()
                {
                    let at = self.append_raw(RingId::Main, &rec, true);
                    self.publish(slot, index::pack(index::fp(w), 0, RingId::Main, at));
                    self.bump(Stat::Promotions, 1);
                } else {
                    self.publish(slot, 0);
                    self.ghost_insert(&kh);
                    self.drop_one(Stat::Entries);
                    self.bump(Stat::Evictions, 1);
                }
                advance();
            }
            RingId::Main => {
                let f = index::freq(w);
                if f > 0 && reinsert {
                    self.bump(Stat::Reinsertions, 1);
                    self.score_main(SCORE_KEEP);
                    if self.fits_without_eviction(RingId::Main, len) {
                        let at = self.append_raw(RingId::Main, &rec, false);
                        self.publish(slot, index::pack(index::fp(w), f - 1, RingId::Main, at));
                        advance();
                    } else {
                        // The ring is full: retire the record first, then write it
                        // again. Readers miss it for the length of this copy.
                        self.publish(slot, 0);
                        advance();
                        let at = self.append_raw(RingId::Main, &rec, false);
                        self.publish(slot, index::pack(index::fp(w), f - 1, RingId::Main, at));
                    }
                } else {
                    if f == 0 {
                        self.score_main(-SCORE_DROP);
                    }
                    self.publish(slot, 0);
                    self.drop_one(Stat::Entries);
                    self.bump(Stat::Evictions, 1);
                    advance();
                }
            }
        }
    }

    /// Adds `d` to the main ring's score, within ±[`MAIN_SCORE_LIMIT`].
    fn score_main(&self, d: i64) {
        let w = self.shm.u64_at(self.base + S_MAIN_SCORE);
        let v = (w.load(Ordering::Relaxed) as i64)
            .saturating_add(d)
            .clamp(-MAIN_SCORE_LIMIT, MAIN_SCORE_LIMIT);
        w.store(v as u64, Ordering::Relaxed);
    }

    /// Whether an entry leaving the small ring unread should move to main
    /// anyway: main has lately dropped more than 4 entries unread for every 3
    /// it kept for a read (its score is below zero), and its oldest entry is
    /// one it would drop. Main then holds little worth keeping, and an entry
    /// seen once recently is worth more than one main has held a whole lap
    /// unread. Where reuse follows recency rather than frequency (block
    /// traces), a small ring of a few dozen entries drops most keys before
    /// their second access, which LRU of the same size would have kept; where
    /// main's entries are read again (skewed popularity), the score stays
    /// positive and the small ring filters as S3-FIFO does.
    ///
    /// Only a hint: a damaged score or tail changes which entry is kept, never
    /// what a slot points to.
    fn main_takes_cold(&self) -> bool {
        let score = self
            .shm
            .u64_at(self.base + S_MAIN_SCORE)
            .load(Ordering::Relaxed) as i64;
        if score >= 0 {
            return false;
        }
        let ring = self.ring(RingId::Main);
        let Some((head, mut tail)) = ring.ends(self.shm) else {
            return false;
        };
        // A PAD at the tail hides the record that follows it (at offset 0).
        for _ in 0..2 {
            if tail >= head {
                return true;
            }
            let phys = tail % ring.cap;
            let Some((h, _)) = ring.header(self.shm, phys) else {
                return false;
            };
            if h.is_pad() {
                tail += h.total_len();
                continue;
            }
            let key = ring.key(self.shm, phys, &h);
            let kh = KeyHash::new(self.seed, &key);
            return self
                .slot_of(&kh, RingId::Main, phys)
                .is_none_or(|(_, w)| index::freq(w) == 0);
        }
        false
    }

    fn ghost_cell(&self, bucket: u32, i: usize) -> &std::sync::atomic::AtomicU32 {
        self.shm.u32_at(self.ghost_off(bucket, i))
    }

    fn ghost_off(&self, bucket: u32, i: usize) -> usize {
        self.base + self.g.ghost_rel as usize + (bucket as usize * GHOST_CELLS + i) * 4
    }

    /// Starts loading the lines the next write of this shard will touch that no
    /// key decides: the oldest records of both rings (which it may evict or
    /// move) and the small ring's head (where it appends). These are cold by
    /// construction in a log: the tail was written a ring's length ago.
    #[inline]
    pub fn prefetch_ends(&self) {
        for id in [RingId::Small, RingId::Main] {
            let ring = self.ring(id);
            let tail = ring.tail(self.shm).load(Ordering::Relaxed) % ring.cap.max(1);
            for line in 0..3 {
                self.shm.prefetch(ring.at(tail) + line * 64);
            }
        }
        let small = self.ring(RingId::Small);
        let head = small.head(self.shm).load(Ordering::Relaxed) % small.cap.max(1);
        self.shm.prefetch(small.at(head));
        self.shm.prefetch(small.at(head) + 64);
    }

    /// Starts loading the ghost bucket a write of `kh` will look at.
    #[inline]
    pub fn prefetch_ghost(&self, kh: &KeyHash) {
        let b = kh.ghost_bucket(self.g.ghost_buckets);
        self.shm.prefetch(self.ghost_off(b, 0));
    }

    /// Remembers that `kh` was evicted from the small ring.
    ///
    /// S3-FIFO's ghost should remember about as many keys as the main queue
    /// holds. The table is sized for the expected entry count, which can be far
    /// more than the real one (large values), so cells also carry an 8-bit ghost
    /// epoch: an epoch lasts `0.9 · entries / 7` inserts and a cell older than
    /// 8 epochs no longer counts. The window thus follows the live entry count
    /// and, as the current epoch fills, spans 0.9 to 1.03 times it: never less
    /// than S3-FIFO's 90% (a window below it measurably raised the miss ratio
    /// on the benchmark's real block trace).
    pub fn ghost_insert(&self, kh: &KeyHash) {
        let b = kh.ghost_bucket(self.g.ghost_buckets);
        let cursor = self.shm.u64_at(self.base + S_GHOST_CURSOR);
        let epoch = self.shm.u64_at(self.base + S_GHOST_EPOCH);
        let start = self.shm.u64_at(self.base + S_GHOST_EPOCH_START);
        let c = cursor.fetch_add(1, Ordering::Relaxed);
        let entries = self.stat(Stat::Entries).load(Ordering::Relaxed);
        // The oldest of the GHOST_WINDOW epochs is partly forgotten already:
        // the other seven alone cover 90% of the entries.
        // The counts are words of the file: saturating and wrapping sums keep
        // a damaged one a matter of which fingerprints are kept.
        let per_epoch = (entries.saturating_mul(9) / 10 / (GHOST_WINDOW - 1)).max(1);
        let mut ep = epoch.load(Ordering::Relaxed);
        if c.wrapping_sub(start.load(Ordering::Relaxed)) >= per_epoch {
            ep = ep.wrapping_add(1);
            epoch.store(ep, Ordering::Relaxed);
            start.store(c, Ordering::Relaxed);
        }
        let ep = ep as u8;
        let age = |v: u32| ep.wrapping_sub(v as u8);
        let mut pick = 0;
        let mut oldest = 0u8;
        for i in 0..GHOST_CELLS {
            let v = self.ghost_cell(b, i).load(Ordering::Relaxed);
            if v == 0 || age(v) as u64 >= GHOST_WINDOW {
                pick = i;
                break;
            }
            if age(v) >= oldest {
                oldest = age(v);
                pick = i;
            }
        }
        self.ghost_cell(b, pick)
            .store(kh.ghost() << 8 | ep as u32, Ordering::Relaxed);
    }

    /// Whether `kh` was evicted from small recently; forgets it if so.
    pub fn ghost_take(&self, kh: &KeyHash) -> bool {
        let b = kh.ghost_bucket(self.g.ghost_buckets);
        let ep = self
            .shm
            .u64_at(self.base + S_GHOST_EPOCH)
            .load(Ordering::Relaxed) as u8;
        let fp = kh.ghost();
        for i in 0..GHOST_CELLS {
            let c = self.ghost_cell(b, i);
            let v = c.load(Ordering::Relaxed);
            if v != 0 && v >> 8 == fp && (ep.wrapping_sub(v as u8) as u64) < GHOST_WINDOW {
                c.store(0, Ordering::Relaxed);
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::segment::Segment;
    use std::path::PathBuf;

    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_damaged_main_score_only_changes_which_entries_stay() {
        let d = Dir(PathBuf::from(format!(
            "/dev/shm/zigevict-score-{}",
            std::process::id()
        )));
        let _ = std::fs::remove_dir_all(&d.0);
        std::fs::create_dir_all(&d.0).unwrap();
        let opts = Options {
            size: 2 << 20,
            directory: d.0.clone(),
            ..Options::default()
        };
        let seg = Segment::open("score", &opts).unwrap();
        let sh = seg.shard(0);
        let word = seg.shm.u64_at(sh.base + S_MAIN_SCORE);
        let val = [5u8; 5000];
        for (round, garbage) in [i64::MIN, i64::MAX, -1, 0].into_iter().enumerate() {
            word.store(garbage as u64, Ordering::Relaxed);
            for i in 0..2000 {
                let k = format!("r{round}-{i}");
                seg.set(k.as_bytes(), &val, None, &[]).unwrap();
                if i % 3 == 0 {
                    let _ = seg.get(format!("r{round}-{}", i / 2).as_bytes()).unwrap();
                }
            }
            let score = word.load(Ordering::Relaxed) as i64;
            assert!(
                (-MAIN_SCORE_LIMIT..=MAIN_SCORE_LIMIT).contains(&score),
                "score {score} after {garbage}"
            );
            let last = format!("r{round}-1999");
            assert_eq!(seg.get(last.as_bytes()).unwrap().as_deref(), Some(&val[..]));
            let report = seg.verify(false).unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
        }
    }
}
