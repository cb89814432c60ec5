//! A front end's L1: the live objects of one process, each entry validated
//! on every hit against words in the shared segment (the key's version
//! stamp, the segment epoch, its tags' versions) plus a deadline. A write in
//! any process changes one of those words before it returns, so a stale L1
//! entry is never served after that (G1). Bounded by item count, with a
//! separate bound for cached misses; eviction is CLOCK (FIFO with a second
//! chance for entries hit since they were queued). Generic over the front
//! end's key and value objects: it compares keys through the closure it is
//! given (a language's own equality), and holds the objects, never looks
//! inside them.

use std::collections::VecDeque;

use hashbrown::HashTable;
use ziggurat_core::{Word32, Word64};

use crate::watch::{L1Watch, Watch32};

/// One cached object. The fields a hit reads come first and fill exactly one
/// 64-byte cache line (the struct is aligned to it), so validating a hit costs
/// one miss on the entry, not two or three: with thousands of entries the L1
/// does not fit in the CPU caches, and these misses are most of a hit's cost.
#[repr(C, align(64))]
pub struct Entry<K, V> {
    /// The key's object.
    pub key: K,
    /// The object (or its encoded bytes); the front end's null for a cached miss.
    pub value: V,
    /// The key's hash as the front end hashes it.
    pub hash: u64,
    /// Monotonic ms after which the entry is stale (0 = never).
    pub deadline: u64,
    /// Key stamp word (none when there is no segment: degraded mode) and the
    /// value it had when the entry was made. Split from its value, unlike a `Watch32`, so
    /// that the flags below fill the padding and the line holds everything.
    stamp_word: Option<Word32>,
    stamp_seen: u32,
    /// A cached miss.
    pub negative: bool,
    visited: bool,
    has_tags: bool,
    epoch_word: Option<Word64>,
    epoch_seen: u64,
    // Second line: read on fills, evictions, debug checks and early refresh.
    tags: Box<[Watch32]>,
    /// The encoded form, kept only to detect mutation (a debug mode).
    pub encoded: Option<V>,
    /// The TTL it was written with, in ms (for early refresh decisions).
    pub ttl_ms: u32,
    /// Insert number: tells a queue position of this entry from a stale one.
    id: u64,
}

// An absent word costs no tag: the handles are non-null pointers.
const _: () = assert!(std::mem::size_of::<Option<Word32>>() == std::mem::size_of::<usize>());
const _: () = assert!(std::mem::size_of::<Option<Word64>>() == std::mem::size_of::<usize>());

impl<K, V> Entry<K, V> {
    /// Whether the fields a hit reads fill exactly the entry's first 64-byte
    /// line and the entry is two lines (true for pointer-sized objects): a
    /// front end asserts it for its own key and value types.
    pub const fn fits_one_line() -> bool {
        std::mem::offset_of!(Self, tags) == 64 && std::mem::size_of::<Self>() == 128
    }
}

impl<K, V> Entry<K, V> {
    /// An entry of `value` for `key`, valid while `watch` and `tags` hold
    /// and until `deadline` (0: none); `watch` None without a segment.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: K,
        hash: u64,
        value: V,
        encoded: Option<V>,
        negative: bool,
        watch: Option<L1Watch>,
        tags: Box<[Watch32]>,
        deadline: u64,
        ttl_ms: u32,
    ) -> Entry<K, V> {
        Entry {
            key,
            value,
            hash,
            deadline,
            stamp_word: watch.map(|w| w.stamp.word),
            stamp_seen: watch.map_or(0, |w| w.stamp.seen),
            negative,
            visited: false,
            has_tags: !tags.is_empty(),
            epoch_word: watch.map(|w| w.epoch.word),
            epoch_seen: watch.map_or(0, |w| w.epoch.seen),
            tags,
            encoded,
            ttl_ms,
            id: 0,
        }
    }

    /// Whether the entry may be served at `now` (ms).
    #[inline(always)]
    pub fn valid(&self, now: u64) -> bool {
        if self.deadline != 0 && now >= self.deadline {
            return false;
        }
        if self.stamp_word.is_some_and(|w| w.load() != self.stamp_seen) {
            return false;
        }
        if self.epoch_word.is_some_and(|w| w.load() != self.epoch_seen) {
            return false;
        }
        !self.has_tags || self.tags.iter().all(|t| t.holds())
    }
}

/// Counters of the L1 tier.
#[derive(Default, Clone, Copy)]
pub struct L1Stats {
    /// Valid entries found.
    pub hits: u64,
    /// Entries found no longer valid (dropped).
    pub stale: u64,
    /// Entries evicted for room.
    pub evictions: u64,
    /// Entries put in.
    pub fills: u64,
}

/// The per-process table. Entries live in the hash table itself, so a hit
/// reads the table's control bytes and then the entry's line: no slot array
/// between them, one memory access fewer when the L1 outgrows the CPU caches.
pub struct L1<K, V> {
    table: HashTable<Entry<K, V>>,
    /// CLOCK queues of (hash, insert number): an entry is found again by its
    /// hash, and a position whose entry was replaced or removed is skipped.
    queue: VecDeque<(u64, u64)>,
    neg_queue: VecDeque<(u64, u64)>,
    next_id: u64,
    cap: usize,
    neg_cap: usize,
    len: usize,
    neg_len: usize,
    /// The table's counters.
    pub stats: L1Stats,
}

/// What [`L1::peek`] found for a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Peeked<R> {
    /// A valid entry: `take`'s answer.
    Valid(R),
    /// An entry no longer valid, left in the table.
    Invalid,
    /// No entry for the key.
    Absent,
}

/// Whether an entry is the one whose key `is_key` accepts, hashed `hash`.
#[inline(always)]
fn is_entry<K, V>(hash: u64, is_key: impl Fn(&K) -> bool) -> impl Fn(&Entry<K, V>) -> bool {
    move |e| e.hash == hash && is_key(&e.key)
}

impl<K, V> L1<K, V> {
    /// A table for at most `cap` objects and `neg_cap` cached misses.
    pub fn new(cap: usize, neg_cap: usize) -> L1<K, V> {
        L1 {
            table: HashTable::new(),
            queue: VecDeque::new(),
            neg_queue: VecDeque::new(),
            next_id: 0,
            cap,
            neg_cap,
            len: 0,
            neg_len: 0,
            stats: L1Stats::default(),
        }
    }

    /// Whether the tier holds anything at all (cap 0 disables it).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.cap > 0
    }

    /// Entries held (objects and cached misses).
    pub fn len(&self) -> usize {
        self.len + self.neg_len
    }

    /// Whether the table holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `take`'s answer from the entry of the key `is_key` accepts (hashed
    /// `hash`) when it is valid at `now` (ms), counted as a hit and marked for
    /// CLOCK. An entry no longer valid is dropped and counted, unless
    /// `keep_stale` (the caller cannot drop an object where it runs).
    #[inline(always)]
    pub fn probe<R>(
        &mut self,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        now: u64,
        keep_stale: bool,
        take: impl FnOnce(&Entry<K, V>) -> R,
    ) -> Option<R> {
        let Ok(mut found) = self.table.find_entry(hash, is_entry(hash, is_key)) else {
            return None;
        };
        let e = found.get_mut();
        if !e.valid(now) {
            if !keep_stale {
                let (e, _) = found.remove();
                self.forget(&e);
                self.stats.stale += 1;
            }
            return None;
        }
        let out = take(e);
        e.visited = true;
        self.stats.hits += 1;
        Some(out)
    }

    /// What the table holds for the key `is_key` accepts (hashed `hash`) at
    /// `now` (ms), for a caller that cannot drop an object where it runs: a
    /// valid entry gives `take`'s answer (counted as a hit, marked for
    /// CLOCK), one no longer valid is left in place, and no entry at all is
    /// told apart from it, so that the caller need not look again before
    /// reading below L1.
    #[inline(always)]
    pub fn peek<R>(
        &mut self,
        hash: u64,
        is_key: impl Fn(&K) -> bool,
        now: u64,
        take: impl FnOnce(&Entry<K, V>) -> R,
    ) -> Peeked<R> {
        let Some(e) = self.table.find_mut(hash, is_entry(hash, is_key)) else {
            return Peeked::Absent;
        };
        if !e.valid(now) {
            return Peeked::Invalid;
        }
        let out = take(e);
        e.visited = true;
        self.stats.hits += 1;
        Peeked::Valid(out)
    }

    /// Counts an entry out of the table.
    fn forget(&mut self, e: &Entry<K, V>) {
        if e.negative {
            self.neg_len -= 1;
        } else {
            self.len -= 1;
        }
        // The queue keeps the position; it is skipped when reached.
    }

    /// Removes the entry of the key `is_key` accepts, if present.
    pub fn discard(&mut self, hash: u64, is_key: impl Fn(&K) -> bool) {
        if let Ok(found) = self.table.find_entry(hash, is_entry(hash, is_key)) {
            let (e, _) = found.remove();
            self.forget(&e);
        }
    }

    /// Inserts or replaces the entry of the key `is_key` accepts, evicting to
    /// stay within the bounds.
    pub fn insert(&mut self, is_key: impl Fn(&K) -> bool, mut e: Entry<K, V>) {
        let negative = e.negative;
        self.next_id += 1;
        e.id = self.next_id;
        let id = e.id;
        if !self.enabled() || (negative && self.neg_cap == 0) {
            return;
        }
        let hash = e.hash;
        if let Ok(mut found) = self.table.find_entry(hash, is_entry(hash, is_key)) {
            let old = found.get_mut();
            if old.negative == negative {
                // An overwrite keeps its place in the queue: no queue traffic
                // on the write path.
                e.id = old.id;
                e.visited = old.visited;
                *old = e;
                self.stats.fills += 1;
                return;
            }
            let (old, _) = found.remove();
            self.forget(&old);
        }
        while (negative && self.neg_len >= self.neg_cap) || (!negative && self.len >= self.cap) {
            if !self.evict_one(negative) {
                break;
            }
        }
        self.table.insert_unique(hash, e, |x| x.hash);
        if negative {
            self.neg_len += 1;
            self.neg_queue.push_back((hash, id));
        } else {
            self.len += 1;
            self.queue.push_back((hash, id));
        }
        self.stats.fills += 1;
        self.compact();
    }

    /// Drops queue positions of removed entries once they outnumber the live ones.
    fn compact(&mut self) {
        let table = &self.table;
        let live = |&(hash, id): &(u64, u64)| table.find(hash, |e| e.id == id).is_some();
        if self.queue.len() > 2 * self.len + 64 {
            self.queue.retain(live);
        }
        if self.neg_queue.len() > 2 * self.neg_len + 64 {
            self.neg_queue.retain(live);
        }
    }

    /// CLOCK step over one queue; returns false if the queue is empty.
    fn evict_one(&mut self, negative: bool) -> bool {
        loop {
            let q = if negative {
                &mut self.neg_queue
            } else {
                &mut self.queue
            };
            let Some((hash, id)) = q.pop_front() else {
                return false;
            };
            // Insert numbers are unique: a miss means the entry was removed or
            // replaced since it was queued.
            let Ok(mut found) = self.table.find_entry(hash, |e| e.id == id) else {
                continue;
            };
            let e = found.get_mut();
            if e.visited {
                e.visited = false;
                let q = if negative {
                    &mut self.neg_queue
                } else {
                    &mut self.queue
                };
                q.push_back((hash, id));
                continue;
            }
            let (e, _) = found.remove();
            self.forget(&e);
            self.stats.evictions += 1;
            return true;
        }
    }

    /// Empties the table.
    pub fn clear(&mut self) {
        self.table.clear();
        self.queue.clear();
        self.neg_queue.clear();
        self.len = 0;
        self.neg_len = 0;
    }

    /// Object entries and cached-miss entries held.
    pub fn counts(&self) -> (usize, usize) {
        (self.len, self.neg_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: u32, negative: bool, deadline: u64) -> Entry<u32, u32> {
        Entry::new(
            k,
            k as u64,
            k,
            None,
            negative,
            None,
            Box::new([]),
            deadline,
            0,
        )
    }

    fn is(k: u32) -> impl Fn(&u32) -> bool {
        move |x| *x == k
    }

    #[test]
    fn hits_until_the_deadline() {
        let mut l1 = L1::new(4, 4);
        l1.insert(is(1), entry(1, false, 100));
        assert_eq!(l1.probe(1, is(1), 50, false, |e| e.value), Some(1));
        assert_eq!(l1.probe(1, is(1), 100, true, |e| e.value), None);
        assert_eq!(l1.len(), 1, "kept: the caller could not drop it");
        assert_eq!(l1.probe(1, is(1), 100, false, |e| e.value), None);
        assert!(l1.is_empty());
        assert_eq!((l1.stats.hits, l1.stats.stale), (1, 1));
    }

    #[test]
    fn a_peek_tells_no_entry_from_one_no_longer_valid() {
        let mut l1 = L1::new(4, 4);
        assert_eq!(l1.peek(1, is(1), 50, |e| e.value), Peeked::Absent);
        l1.insert(is(1), entry(1, false, 100));
        assert_eq!(l1.peek(1, is(1), 50, |e| e.value), Peeked::Valid(1));
        assert_eq!(l1.peek(1, is(1), 100, |e| e.value), Peeked::Invalid);
        assert_eq!(l1.len(), 1, "left in place for the caller's probe to drop");
        assert_eq!((l1.stats.hits, l1.stats.stale), (1, 0));
    }

    #[test]
    fn clock_evicts_the_entry_not_hit_since_it_was_queued() {
        let mut l1 = L1::new(2, 1);
        l1.insert(is(1), entry(1, false, 0));
        l1.insert(is(2), entry(2, false, 0));
        assert!(l1.probe(1, is(1), 0, false, |_| ()).is_some());
        l1.insert(is(3), entry(3, false, 0));
        assert!(l1.probe(1, is(1), 0, false, |_| ()).is_some());
        assert!(l1.probe(2, is(2), 0, false, |_| ()).is_none());
        // Cached misses have their own bound.
        l1.insert(is(4), entry(4, true, 0));
        l1.insert(is(5), entry(5, true, 0));
        assert_eq!(l1.counts(), (2, 1));
        l1.discard(1, is(1));
        assert_eq!(l1.counts(), (1, 1));
        l1.clear();
        assert!(l1.is_empty());
    }
}
