//! This process's counters of a cache: its tiers' hits and misses and its
//! loads. A front end bumps them from one thread at a time (Python's GIL, a
//! Node.js isolate), so a plain load and store suffice: a locked add would
//! wait for the caller's earlier segment writes to drain. Threads that do
//! race only lose counts, never corrupt one.

use std::sync::atomic::{AtomicU64, Ordering};

/// One counter (see the module's note on concurrency).
#[derive(Default, Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one; returns the new count.
    #[inline]
    pub fn bump(&self) -> u64 {
        self.add(1)
    }

    /// Adds `n`; returns the new count.
    #[inline]
    pub fn add(&self, n: u64) -> u64 {
        let v = self.0.load(Ordering::Relaxed) + n;
        self.0.store(v, Ordering::Relaxed);
        v
    }

    /// Raises the count to `n` if it is below.
    fn raise_to(&self, n: u64) {
        if n > self.get() {
            self.0.store(n, Ordering::Relaxed);
        }
    }

    /// The count.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How long a loader took: in ticks ([`ziggurat_core::ticks`], what a
/// front end that calls its loader itself measures cheaply) or in ns.
#[derive(Clone, Copy, Debug)]
pub enum Took {
    /// Ticks of [`ziggurat_core::ticks`].
    Ticks(u64),
    /// Nanoseconds.
    Ns(u64),
}

impl Took {
    /// A span measured in seconds by the front end.
    pub fn seconds(s: f64) -> Took {
        Took::Ns((s.max(0.0) * 1e9) as u64)
    }
}

/// The most and the sum of some spans.
#[derive(Default, Debug)]
struct Spans {
    total: Counter,
    max: Counter,
}

impl Spans {
    fn add(&self, n: u64) {
        self.total.add(n);
        self.max.raise_to(n);
    }
}

/// The counters of one cache in this process.
#[derive(Default, Debug)]
pub struct Counts {
    /// Reads that L1 could not answer.
    pub l1_misses: Counter,
    /// Fresh values read from the main segment.
    pub l2_hits: Counter,
    /// Reads of the main segment that found nothing usable.
    pub l2_misses: Counter,
    /// Stale values read for a load that may fail.
    pub l2_stale: Counter,
    /// Cached misses read.
    pub neg_hits: Counter,
    /// Stored values this process could not decode (counted as misses).
    pub decode_errors: Counter,
    /// Loader calls.
    pub loads: Counter,
    /// Loader calls that raised.
    pub load_errors: Counter,
    /// Sleeps on another caller's load.
    pub waits: Counter,
    /// Leases taken from a holder whose process was gone.
    pub takeovers: Counter,
    /// Failed loads answered with a stale value.
    pub stale_served: Counter,
    /// Early refreshes started.
    pub refreshes: Counter,
    ticks: Spans,
    ns: Spans,
}

impl Counts {
    /// Counts a loader call that took `took` and raised unless `ok`.
    pub fn loaded(&self, took: Took, ok: bool) {
        self.loads.bump();
        if !ok {
            self.load_errors.bump();
        }
        match took {
            Took::Ticks(t) => self.ticks.add(t),
            Took::Ns(n) => self.ns.add(n),
        }
    }

    /// The loaders' total and longest time, in ns. Spans in ticks are
    /// converted only here: converting each would read the clock they avoid.
    pub fn load_ns(&self) -> (u64, u64) {
        let ns = |t: &Counter| ziggurat_core::ticks_to_ns(t.get());
        (
            self.ns.total.get() + ns(&self.ticks.total),
            self.ns.max.get().max(ns(&self.ticks.max)),
        )
    }
}
