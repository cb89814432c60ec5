//! What `stats()` reads of the addon: this process's counters of the Cache
//! and the segments' own figures, host-wide.

use std::sync::atomic::{AtomicU64, Ordering};

use napi_derive::napi;
use ziggurat_cache::Cache;

/// This process's counters of the cache, for `stats()`.
#[napi(object)]
pub struct Counts {
    /// Reads that went below L1.
    pub l1_misses: f64,
    /// Fresh values read from the segment.
    pub l2_hits: f64,
    /// Reads of the segment that found nothing usable.
    pub l2_misses: f64,
    /// Expired values read by a load as its fallback (kept for `staleTtl`).
    pub stale_reads: f64,
    /// Cached misses read.
    pub neg_hits: f64,
    /// Entries this process could not read (another language's pickles).
    pub foreign: f64,
    /// Loader calls.
    pub loads: f64,
    /// Loader calls that failed.
    pub load_errors: f64,
    /// Sleeps on another caller's load.
    pub waits: f64,
    /// Leases taken from a dead holder.
    pub takeovers: f64,
    /// Failed loads answered with a stale value.
    pub stale_served: f64,
    /// Early refreshes started (`refreshAhead`).
    pub refreshes: f64,
    /// The loaders' total time, in seconds.
    pub load_seconds: f64,
    /// The longest loader call, in seconds.
    pub load_max_seconds: f64,
    /// The segment's own figures (entries, bytes, evictions...), host-wide.
    pub host: Vec<HostFigure>,
    /// The same of the cached-miss segment (cached misses and load leases).
    pub neg_host: Vec<HostFigure>,
}

/// One figure of the segment.
#[napi(object)]
pub struct HostFigure {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: f64,
}

/// The counters of `c` and its segments' figures; `foreign`: the entries this
/// process could not read.
pub fn counts(c: &Cache, foreign: &AtomicU64) -> Counts {
    let n = c.counts();
    let f = |x: &ziggurat_cache::Counter| x.get() as f64;
    let figures = |seg: Option<&ziggurat_core::Segment>| -> Vec<HostFigure> {
        seg.map(|m| {
            m.stats()
                .into_iter()
                .map(|(name, value)| HostFigure {
                    name: name.to_string(),
                    value: value as f64,
                })
                .collect()
        })
        .unwrap_or_default()
    };
    let (load_ns, load_max_ns) = n.load_ns();
    Counts {
        l1_misses: f(&n.l1_misses),
        l2_hits: f(&n.l2_hits),
        l2_misses: f(&n.l2_misses),
        stale_reads: f(&n.l2_stale),
        neg_hits: f(&n.neg_hits),
        foreign: foreign.load(Ordering::Relaxed) as f64,
        loads: f(&n.loads),
        load_errors: f(&n.load_errors),
        waits: f(&n.waits),
        takeovers: f(&n.takeovers),
        stale_served: f(&n.stale_served),
        refreshes: f(&n.refreshes),
        load_seconds: load_ns as f64 / 1e9,
        load_max_seconds: load_max_ns as f64 / 1e9,
        host: figures(c.main().map(|m| &**m)),
        neg_host: figures(c.neg().map(|m| &**m)),
    }
}
