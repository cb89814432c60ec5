//! This process's figures of one cache, assembled once for every front end:
//! named fields, and the names front ends report them under (Python's
//! `Cache.stats()` and the loader's counters use exactly these).

use crate::cache::Cache;
use crate::l1::L1;

/// The tiers' counters of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// L1 hits.
    pub l1_hits: u64,
    /// Reads L1 could not answer.
    pub l1_misses: u64,
    /// L1 entries found no longer valid (dropped).
    pub l1_stale_drops: u64,
    /// L1 entries evicted for room.
    pub l1_evictions: u64,
    /// L1 entries put in.
    pub l1_fills: u64,
    /// Values L1 holds now.
    pub l1_items: u64,
    /// Cached misses L1 holds now.
    pub l1_negative_items: u64,
    /// Fresh values read from the main segment.
    pub l2_hits: u64,
    /// Reads of the main segment that found nothing usable.
    pub l2_misses: u64,
    /// Stale values read for a load that may fail.
    pub l2_stale_reads: u64,
    /// Cached misses read.
    pub negative_hits: u64,
    /// Stored values this process could not decode.
    pub decode_errors: u64,
}

impl Stats {
    /// Each field under its reported name, in a fixed order.
    pub fn fields(&self) -> [(&'static str, u64); 12] {
        [
            ("l1_hits", self.l1_hits),
            ("l1_misses", self.l1_misses),
            ("l1_stale_drops", self.l1_stale_drops),
            ("l1_evictions", self.l1_evictions),
            ("l1_fills", self.l1_fills),
            ("l1_items", self.l1_items),
            ("l1_negative_items", self.l1_negative_items),
            ("l2_hits", self.l2_hits),
            ("l2_misses", self.l2_misses),
            ("l2_stale_reads", self.l2_stale_reads),
            ("negative_hits", self.negative_hits),
            ("decode_errors", self.decode_errors),
        ]
    }
}

/// The loader's and the miss path's counters of this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderStats {
    /// Loader calls.
    pub calls: u64,
    /// Loader calls that raised.
    pub errors: u64,
    /// The loaders' total time, in ns.
    pub total_ns: u64,
    /// The longest loader call, in ns.
    pub max_ns: u64,
    /// Sleeps on another caller's load.
    pub waits: u64,
    /// Leases taken from a holder whose process was gone.
    pub takeovers: u64,
    /// Failed loads answered with a stale value.
    pub stale_served: u64,
    /// Early refreshes started.
    pub refreshes: u64,
}

impl LoaderStats {
    /// Each field under its reported name, in a fixed order.
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("calls", self.calls),
            ("errors", self.errors),
            ("total_ns", self.total_ns),
            ("max_ns", self.max_ns),
            ("waits", self.waits),
            ("takeovers", self.takeovers),
            ("stale_served", self.stale_served),
            ("refreshes", self.refreshes),
        ]
    }
}

impl Cache {
    /// The tiers' counters, with the front end's L1 table (None: another
    /// call of this process is inside it now, so its figures read as zero).
    ///
    /// ```
    /// use ziggurat_cache::{Cache, CacheOptions, L1};
    /// let c = Cache::new(None, None, CacheOptions::default(), true).unwrap();
    /// c.counts().l1_misses.bump();
    /// let s = c.stats(Some(&L1::<u8, u8>::new(8, 8)));
    /// assert_eq!((s.l1_misses, s.l1_items), (1, 0));
    /// assert_eq!(s.fields()[1], ("l1_misses", 1));
    /// ```
    pub fn stats<K, V>(&self, l1: Option<&L1<K, V>>) -> Stats {
        let (s, (items, neg_items)) = l1.map(|l| (l.stats, l.counts())).unwrap_or_default();
        let c = self.counts();
        Stats {
            l1_hits: s.hits,
            l1_misses: c.l1_misses.get(),
            l1_stale_drops: s.stale,
            l1_evictions: s.evictions,
            l1_fills: s.fills,
            l1_items: items as u64,
            l1_negative_items: neg_items as u64,
            l2_hits: c.l2_hits.get(),
            l2_misses: c.l2_misses.get(),
            l2_stale_reads: c.l2_stale.get(),
            negative_hits: c.neg_hits.get(),
            decode_errors: c.decode_errors.get(),
        }
    }

    /// The loader's and the miss path's counters.
    pub fn loader_stats(&self) -> LoaderStats {
        let c = self.counts();
        let (total_ns, max_ns) = c.load_ns();
        LoaderStats {
            calls: c.loads.get(),
            errors: c.load_errors.get(),
            total_ns,
            max_ns,
            waits: c.waits.get(),
            takeovers: c.takeovers.get(),
            stale_served: c.stale_served.get(),
            refreshes: c.refreshes.get(),
        }
    }
}
