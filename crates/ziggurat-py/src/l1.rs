//! The L1 tier: live Python objects in this process, each entry validated on
//! every hit against words in the shared segment (the key's version stamp, the
//! segment epoch, its tags' versions) plus a deadline. A write in any process
//! changes one of those words before it returns, so a stale L1 entry is never
//! served after that (G1). Bounded by item count, with a separate bound for
//! cached misses; eviction is CLOCK (FIFO with a second chance for entries hit
//! since they were queued).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use hashbrown::HashTable;
use pyo3::prelude::*;
use pyo3::types::PyString;
use ziggurat_cache::{L1Watch, Watch32};
use ziggurat_core::{Word32, Word64};

/// One cached object. The fields a hit reads come first and fill exactly one
/// 64-byte cache line (the struct is aligned to it), so validating a hit costs
/// one miss on the entry, not two or three: with thousands of entries the L1
/// does not fit in the CPU caches, and these misses are most of a hit's cost.
#[repr(C, align(64))]
pub struct Entry {
    pub key: Py<PyAny>,
    /// The object (or its encoded bytes in decode mode); None for a cached miss.
    pub value: Py<PyAny>,
    pub hash: u64,
    /// Monotonic ms after which the entry is stale (0 = never).
    pub deadline: u64,
    /// Key stamp word (none when there is no segment: degraded mode) and the
    /// value it had at fill time. Split from its value, unlike a `Watch32`, so
    /// that the flags below fill the padding and the line holds everything.
    stamp_word: Option<Word32>,
    stamp_seen: u32,
    pub negative: bool,
    visited: bool,
    has_tags: bool,
    epoch_word: Option<Word64>,
    epoch_seen: u64,
    // Second line: read on fills, evictions, debug checks and early refresh.
    tags: Box<[Watch32]>,
    /// The encoded form, kept only in debug mode to detect mutation.
    pub encoded: Option<Py<PyAny>>,
    /// The TTL it was written with, in ms (for early refresh decisions).
    pub ttl_ms: u32,
    /// Insert number: tells a queue position of this entry from a stale one.
    id: u64,
}

// The hit path's fields end within the first cache line.
const _: () = assert!(std::mem::offset_of!(Entry, tags) == 64);
const _: () = assert!(std::mem::size_of::<Entry>() == 128);
// An absent word costs no tag: the handles are non-null pointers.
const _: () = assert!(std::mem::size_of::<Option<Word32>>() == 8);
const _: () = assert!(std::mem::size_of::<Option<Word64>>() == 8);
// Entries cross threads inside the pyclass, which is `Send + Sync`.
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Entry>()
};

impl Entry {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: Py<PyAny>,
        hash: u64,
        value: Py<PyAny>,
        encoded: Option<Py<PyAny>>,
        negative: bool,
        watch: Option<L1Watch>,
        tags: Box<[Watch32]>,
        deadline: u64,
        ttl_ms: u32,
    ) -> Entry {
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
    pub hits: u64,
    pub stale: u64,
    pub evictions: u64,
    pub fills: u64,
}

/// The per-process table. Entries live in the hash table itself, so a hit
/// reads the table's control bytes and then the entry's line: no slot array
/// between them, one memory access fewer when the L1 outgrows the CPU caches.
pub struct L1 {
    table: HashTable<Entry>,
    /// CLOCK queues of (hash, insert number): an entry is found again by its
    /// hash, and a position whose entry was replaced or removed is skipped.
    queue: VecDeque<(u64, u64)>,
    neg_queue: VecDeque<(u64, u64)>,
    next_id: u64,
    cap: usize,
    neg_cap: usize,
    len: usize,
    neg_len: usize,
    pub stats: L1Stats,
}

/// Whether an entry is the one of `key` (whose hash is `hash`).
#[inline(always)]
fn is_key<'a>(key: &'a Bound<'_, PyAny>, hash: u64) -> impl Fn(&Entry) -> bool + 'a {
    move |e| e.hash == hash && same_key(key, &e.key)
}

/// Whether two keys are equal: identity first, then str contents, then `==`.
#[inline(always)]
fn same_key(a: &Bound<'_, PyAny>, b: &Py<PyAny>) -> bool {
    if a.as_ptr() == b.as_ptr() {
        return true;
    }
    let b = b.bind(a.py());
    if let (Ok(x), Ok(y)) = (a.cast::<PyString>(), b.cast::<PyString>()) {
        return match (x.to_str(), y.to_str()) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        };
    }
    a.eq(b).unwrap_or(false)
}

impl L1 {
    /// A table for at most `cap` objects and `neg_cap` cached misses.
    pub fn new(cap: usize, neg_cap: usize) -> L1 {
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

    pub fn len(&self) -> usize {
        self.len + self.neg_len
    }

    /// `take`'s answer from `key`'s entry when it is valid at `now` (ms),
    /// counted as a hit and marked for CLOCK. An entry no longer valid is
    /// dropped and counted, unless `keep_stale` (the caller cannot drop a
    /// reference where it runs).
    #[inline(always)]
    pub fn probe<R>(
        &mut self,
        key: &Bound<'_, PyAny>,
        hash: u64,
        now: u64,
        keep_stale: bool,
        take: impl FnOnce(&Entry) -> R,
    ) -> Option<R> {
        let Ok(mut found) = self.table.find_entry(hash, is_key(key, hash)) else {
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

    /// Counts an entry out of the table.
    fn forget(&mut self, e: &Entry) {
        if e.negative {
            self.neg_len -= 1;
        } else {
            self.len -= 1;
        }
        // The queue keeps the position; it is skipped when reached.
    }

    /// Removes `key` if present.
    pub fn discard(&mut self, key: &Bound<'_, PyAny>, hash: u64) {
        if let Ok(found) = self.table.find_entry(hash, is_key(key, hash)) {
            let (e, _) = found.remove();
            self.forget(&e);
        }
    }

    /// Inserts or replaces an entry, evicting to stay within the bounds.
    pub fn insert(&mut self, key: &Bound<'_, PyAny>, mut e: Entry) {
        let negative = e.negative;
        self.next_id += 1;
        e.id = self.next_id;
        let id = e.id;
        if !self.enabled() || (negative && self.neg_cap == 0) {
            return;
        }
        let hash = e.hash;
        if let Ok(mut found) = self.table.find_entry(hash, is_key(key, hash)) {
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

/// The L1 behind a re-entry guard. Every caller holds the GIL, so only one
/// thread is ever inside at a time, except when code inside runs Python (a key's
/// `__eq__`, an object's finalizer), which may switch threads or re-enter this
/// cache: such a caller finds the guard set and bypasses L1 for that call.
/// Nothing ever waits for it, so no thread can hold the GIL while waiting on a
/// thread that waits for the GIL.
pub struct Shared {
    busy: std::sync::atomic::AtomicBool,
    l1: std::cell::UnsafeCell<L1>,
}

// SAFETY: `l1` is only reached through `try_with`, which requires the GIL and
// hands out the `&mut` to at most one caller at a time (the `busy` flag); the
// `L1` itself is `Send` (so `Shared` is `Send` without help).
#[allow(unsafe_code)]
unsafe impl Sync for Shared {}

impl Shared {
    pub fn new(l1: L1) -> Shared {
        Shared {
            busy: std::sync::atomic::AtomicBool::new(false),
            l1: std::cell::UnsafeCell::new(l1),
        }
    }

    /// Runs `f` on the L1 unless another caller is inside; `None` then.
    #[inline(always)]
    #[allow(unsafe_code)] // the cell access below; the binding's only other is `Sync`
    pub fn try_with<R>(&self, _gil: Python<'_>, f: impl FnOnce(&mut L1) -> R) -> Option<R> {
        // The GIL orders every access: a plain load and store suffice, no
        // locked instruction (this is on the path of every L1 hit).
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        self.busy.store(true, Ordering::Relaxed);
        struct Release<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _release = Release(&self.busy);
        // SAFETY: the caller holds the GIL (the token), and the flag was clear:
        // no other caller is inside until `_release` drops.
        Some(f(unsafe { &mut *self.l1.get() }))
    }
}
