//! Repair after a writer died holding a shard lock, and `verify()`.
//!
//! Because writers only append into free space, publish with single atomic
//! stores, and move a ring's tail only past records no slot points to, a
//! shard abandoned at any instruction is consistent except for the dead
//! writer's key stamp (possibly left odd) and the counters. Repair evens that
//! stamp, then checks everything anyway: it walks both rings from tail to
//! head, checks every index slot points to a record start whose key hashes to
//! that slot, clears the slots that do not, and recounts the entries. A shard
//! whose rings cannot be walked (only damage does that) is reset: for a cache,
//! dropping one shard's entries is always a valid repair.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use crate::arena::MAX_POS;
use crate::hash::KeyHash;
use crate::index::{self, PAIR_SLOTS};
use crate::layout::RingId;
use crate::layout::{Stat, GHOST_CELLS, H_EPOCH, S_MAIN_SCORE};
use crate::shard::Shard;
use crate::stamps;

/// What a check of one shard (or all) found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Human-readable descriptions of what was wrong.
    pub problems: Vec<String>,
    /// Number of things put right.
    pub repaired: u64,
    /// Live index entries after the check.
    pub entries: u64,
    /// Whether a shard had to be reset.
    pub reset: bool,
}

impl Report {
    /// Adds another shard's report.
    pub fn merge(&mut self, o: Report) {
        self.problems.extend(o.problems);
        self.repaired += o.repaired;
        self.entries += o.entries;
        self.reset |= o.reset;
    }
}

impl Shard<'_> {
    /// Empties the shard: index, ghost, both rings. Writers only, under lock.
    pub fn reset(&self) {
        let idx = self.base + self.g.index_rel as usize;
        for i in 0..(self.g.npairs as usize * PAIR_SLOTS) {
            self.shm.u64_at(idx + 8 * i).store(0, Ordering::Release);
        }
        let ghost = self.base + self.g.ghost_rel as usize;
        for i in 0..(self.g.ghost_buckets as usize * GHOST_CELLS) {
            self.shm.u32_at(ghost + 4 * i).store(0, Ordering::Relaxed);
        }
        for id in [RingId::Small, RingId::Main] {
            let r = self.ring(id);
            // Keep positions growing (readers compare logical positions); if
            // they are nonsense, restart both past anything a reader may hold,
            // or at 0 when that would pass the highest position (only damage
            // gets there: a reader's confirm then fails on its cleared slot).
            let pos = match r.ends(self.shm) {
                Some((head, _)) => head,
                None => {
                    let head = r.head(self.shm).load(Ordering::Relaxed);
                    let tail = r.tail(self.shm).load(Ordering::Relaxed);
                    head.max(tail)
                        .checked_add(r.cap)
                        .filter(|&p| p <= MAX_POS)
                        .map_or(0, |p| p & !7)
                }
            };
            r.head(self.shm).store(pos, Ordering::Release);
            r.tail(self.shm).store(pos, Ordering::Release);
        }
        self.stat(Stat::Entries).store(0, Ordering::Relaxed);
        // The eviction hint starts again with the shard's new life.
        self.shm
            .u64_at(self.base + S_MAIN_SCORE)
            .store(0, Ordering::Relaxed);
    }

    /// Empties a shard found damaged during a write (see [`Shard::reset`]),
    /// counts the reset and bumps the segment epoch, as a repair's reset
    /// does, so no process keeps an L1 copy validated by the old shard.
    pub fn reset_damaged(&self) {
        self.reset();
        self.note_reset();
    }

    /// Counts a reset of this shard and bumps the segment epoch, so that every
    /// L1 copy of what the shard held stops validating.
    pub fn note_reset(&self) {
        self.bump(Stat::ShardResets, 1);
        self.shm.u64_at(H_EPOCH).fetch_add(1, Ordering::SeqCst);
    }

    /// Checks the shard and, with `fix`, repairs it. Caller holds the lock.
    ///
    /// Bounded whatever the file holds: positions are checked before the
    /// walk (`Ring::ends`), which then moves forward by at least one word
    /// a record and stops at the head; the index walk visits each slot once.
    pub fn repair(&self, fix: bool) -> Report {
        let mut rep = Report::default();
        let sh = self.id;
        if self.intent_active().load(Ordering::Acquire) != 0 {
            let i = self.intent_stamp().load(Ordering::Relaxed);
            if i < self.g.nstamps {
                let st = self.stamp(i);
                if stamps::is_odd(st.load(Ordering::Acquire)) {
                    rep.problems.push(format!(
                        "shard {sh}: stamp {i} left odd by an interrupted write"
                    ));
                    if fix {
                        st.fetch_add(1, Ordering::SeqCst);
                        stamps::futex_wake(st);
                        rep.repaired += 1;
                    }
                }
            }
            if fix {
                self.intent_active().store(0, Ordering::Release);
            }
        }
        let mut starts: HashSet<(RingId, u64)> = HashSet::new();
        let mut broken = None;
        'rings: for id in [RingId::Small, RingId::Main] {
            let r = self.ring(id);
            let Some((head, tail)) = r.ends(self.shm) else {
                broken = Some(format!(
                    "shard {sh}: {id:?} ring positions are inconsistent"
                ));
                break;
            };
            let mut pos = tail;
            while pos < head {
                let phys = pos % r.cap;
                let Some((h, _)) = r.header(self.shm, phys) else {
                    broken = Some(format!("shard {sh}: unreadable record in the {id:?} ring"));
                    break 'rings;
                };
                let len = h.total_len();
                if len > head - pos {
                    broken = Some(format!("shard {sh}: record crosses the {id:?} ring's head"));
                    break 'rings;
                }
                if !h.is_pad() {
                    starts.insert((id, phys));
                }
                pos += len;
            }
        }
        if let Some(msg) = broken {
            rep.problems.push(msg);
            rep.reset = true;
            if fix {
                self.reset();
                rep.repaired += 1;
            }
            return rep;
        }
        let mut seen: HashSet<(RingId, u64)> = HashSet::new();
        for pair in 0..self.g.npairs {
            for i in 0..PAIR_SLOTS {
                let slot = self.slot(pair, i);
                let w = slot.load(Ordering::Acquire);
                if w == 0 {
                    continue;
                }
                let target = (index::ring(w), index::phys(w));
                let ok =
                    w & index::VALID != 0 && starts.contains(&target) && seen.insert(target) && {
                        let r = self.ring(target.0);
                        r.header(self.shm, target.1).is_some_and(|(h, _)| {
                            let kh = KeyHash::new(self.seed, &r.key(self.shm, target.1, &h));
                            kh.shard(self.g.nshards) == sh
                                && kh.pair(self.g.npairs) == pair
                                && kh.fingerprint() == index::fp(w)
                        })
                    };
                if ok {
                    rep.entries += 1;
                } else {
                    rep.problems.push(format!(
                        "shard {sh}: index slot {pair}/{i} points to no record of its key"
                    ));
                    if fix {
                        slot.store(0, Ordering::Release);
                        rep.repaired += 1;
                    }
                }
            }
        }
        if fix {
            self.stat(Stat::Entries)
                .store(rep.entries, Ordering::Relaxed);
        }
        rep
    }
}
