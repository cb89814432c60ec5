//! The metric families every front end reports, in one table: each family's
//! Prometheus and OpenTelemetry names, kind, unit and help text, so that the
//! Python exporter and the Node.js collector publish the same series under
//! the same words. A front end only adds its labels and reads each value
//! from its own `stats()`.
//!
//! Three groups:
//! - [`Group::Cache`]: whether the cache could be read (`ziggurat_up`) and
//!   whether it runs without its shared segment (`ziggurat_degraded`).
//! - [`Group::Host`]: the figures of a segment, the same for every process
//!   of the host; [`Family::key`] is the segment's stats key, read from tier
//!   `l2` (entries) and `negative_l2` (cached misses and load leases).
//! - [`Group::Process`]: this process's own counters that both front ends
//!   count; [`Family::key`] is the family's name after `ziggurat_process_`.
//!
//! Each family also has a [`Scope`]: how its figure adds up when a scrape
//! gathers the series of several processes of one host (prom-client's
//! `AggregatorRegistry` under `cluster`, say). A host-wide figure is taken
//! once; a process's own figures add up.
//!
//! ```
//! use ziggurat_cache::{Group, MetricKind, FAMILIES};
//! let sets = FAMILIES.iter().find(|f| f.group == Group::Host && f.key == "sets").unwrap();
//! assert_eq!(sets.prom, "ziggurat_sets_total");
//! assert_eq!(sets.kind, MetricKind::Counter);
//! ```

/// Which figures a family reports (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Group {
    /// The cache as a whole.
    Cache,
    /// A segment's figures, for the whole host.
    Host,
    /// This process's own counters.
    Process,
}

impl Group {
    /// The group's name for a front end: `"cache"`, `"host"` or `"process"`.
    pub fn name(self) -> &'static str {
        match self {
            Group::Cache => "cache",
            Group::Host => "host",
            Group::Process => "process",
        }
    }
}

/// How a family's figure adds up over the processes of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One figure for the host, whichever process reports it (a segment's
    /// figures; `up` and `degraded`, which say whether any process answers
    /// and whether any runs without the segment): taken once, the largest
    /// (the latest reading of a counter).
    Host,
    /// This process's own figure: the host's is the sum over its processes.
    Process,
}

impl Scope {
    /// The scope's name for a front end: `"host"` or `"process"`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Host => "host",
            Scope::Process => "process",
        }
    }
}

/// A counter only rises (its Prometheus name ends in `_total`); a gauge is
/// the value now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A count that only rises.
    Counter,
    /// A value now.
    Gauge,
}

impl MetricKind {
    /// `"counter"` or `"gauge"`.
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }
}

/// One metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Which figures it reports.
    pub group: Group,
    /// Where its value comes from: see [`Group`].
    pub key: &'static str,
    /// The Prometheus name.
    pub prom: &'static str,
    /// The OpenTelemetry instrument's name.
    pub otel: &'static str,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// The OpenTelemetry unit (UCUM, or an annotation in braces).
    pub unit: &'static str,
    /// What it counts, in words true of every front end.
    pub help: &'static str,
    /// How it adds up over the processes of a host.
    pub scope: Scope,
}

const fn family(
    group: Group,
    key: &'static str,
    prom: &'static str,
    otel: &'static str,
    kind: MetricKind,
    unit: &'static str,
    help: &'static str,
) -> Family {
    Family {
        group,
        key,
        prom,
        otel,
        kind,
        unit,
        help,
        // A process's own counters are its group; the cache's status and a
        // segment's figures are the host's.
        scope: match group {
            Group::Process => Scope::Process,
            Group::Cache | Group::Host => Scope::Host,
        },
    }
}

/// The labels of a [`Group::Host`] family's samples.
pub const HOST_LABELS: [&str; 2] = ["cache", "tier"];
/// The labels of a [`Group::Process`] family's samples that count by tier.
pub const PROCESS_LABELS: [&str; 3] = ["cache", "pid", "tier"];
/// The labels of a [`Group::Process`] family's samples of no tier (the
/// loader's, the decode and write errors).
pub const PROCESS_UNTIERED_LABELS: [&str; 2] = ["cache", "pid"];
/// The labels of `ziggurat_up`.
pub const UP_LABELS: [&str; 1] = ["cache"];
/// The labels of `ziggurat_degraded` (`cause`: why the segment is not used,
/// empty when it is).
pub const DEGRADED_LABELS: [&str; 2] = ["cache", "cause"];
/// The values of the `tier` label: this process's L1 (its values, its
/// cached misses), the main segment (entries), the cached-miss segment.
pub const TIERS: [&str; 4] = ["l1", "negative_l1", "l2", "negative_l2"];

use Group::{Cache, Host, Process};
use MetricKind::{Counter, Gauge};

// The core adds each process's hits and misses to the segment in batches
// (read.rs's FLUSH_EVERY), whatever the front end.
macro_rules! batched {
    ($text:literal) => {
        concat!(
            $text,
            "; each process adds its own every 1024 lookups and when it reads stats() (a scrape)"
        )
    };
}

/// Every family both front ends report, cache, then host, then process.
#[rustfmt::skip]
pub const FAMILIES: &[Family] = &[
    family(Cache, "up", "ziggurat_up", "ziggurat.up", Gauge, "1",
        "1 when the cache is open and its counters were read, 0 when closed or unreadable"),
    family(Cache, "degraded", "ziggurat_degraded", "ziggurat.degraded", Gauge, "1",
        "1 when the answering process runs the cache without its shared segment"),
    family(Host, "hits", "ziggurat_hits_total", "ziggurat.hits", Counter, "{lookup}",
        batched!("Segment lookups by every process of the host that found a live record")),
    family(Host, "misses", "ziggurat_misses_total", "ziggurat.misses", Counter, "{lookup}",
        batched!("Segment lookups by every process of the host that found no live record")),
    family(Host, "sets", "ziggurat_sets_total", "ziggurat.sets", Counter, "{record}",
        "Records written to the segment by every process of the host"),
    family(Host, "deletes", "ziggurat_deletes_total", "ziggurat.deletes", Counter, "{record}",
        "Deletes that removed a live record, by every process of the host"),
    family(Host, "evictions", "ziggurat_evictions_total", "ziggurat.evictions", Counter,
        "{record}", "Records removed to make room (index evictions included)"),
    family(Host, "expirations", "ziggurat_expirations_total", "ziggurat.expirations", Counter,
        "{record}", "Expired records reclaimed"),
    family(Host, "promotions", "ziggurat_promotions_total", "ziggurat.promotions", Counter,
        "{record}", "Records moved from the small (probation) ring to the main ring"),
    family(Host, "reinsertions", "ziggurat_reinsertions_total", "ziggurat.reinsertions",
        Counter, "{record}", "Main-ring records read since their last pass, kept for another"),
    family(Host, "ghost_hits", "ziggurat_ghost_hits_total", "ziggurat.ghost_hits", Counter,
        "{record}",
        "Records written straight to the main ring because their key was recently evicted"),
    family(Host, "index_evictions", "ziggurat_index_evictions_total",
        "ziggurat.index_evictions", Counter, "{record}",
        "Records dropped because their index bucket was full"),
    family(Host, "lock_repairs", "ziggurat_lock_repairs_total", "ziggurat.lock_repairs",
        Counter, "{repair}", "Shard locks recovered from a writer that died holding them"),
    family(Host, "lock_timeouts", "ziggurat_lock_timeouts_total", "ziggurat.lock_timeouts",
        Counter, "{write}", "Writes refused with LockTimeout"),
    family(Host, "shard_resets", "ziggurat_shard_resets_total", "ziggurat.shard_resets",
        Counter, "{reset}", "Shards emptied because they were found damaged"),
    family(Host, "tag_invalidations", "ziggurat_tag_invalidations_total",
        "ziggurat.tag_invalidations", Counter, "{invalidation}",
        "Tag versions raised: one per tag invalidated, one per namespace cleared"),
    family(Host, "clears", "ziggurat_clears_total", "ziggurat.clears", Counter, "{clear}",
        "clear() calls"),
    family(Host, "entries", "ziggurat_entries", "ziggurat.entries", Gauge, "{record}",
        "Records the index points at now (expired ones until reclaimed)"),
    family(Host, "bytes_used", "ziggurat_memory_used_bytes", "ziggurat.memory.used", Gauge,
        "By", "Bytes of the rings holding records, reclaimable ones included"),
    family(Host, "bytes_capacity", "ziggurat_memory_capacity_bytes",
        "ziggurat.memory.capacity", Gauge, "By", "Bytes of the rings: what records can occupy"),
    family(Host, "file_size", "ziggurat_file_size_bytes", "ziggurat.file.size", Gauge, "By",
        "The segment file's size"),
    family(Host, "max_value_size", "ziggurat_max_value_size_bytes", "ziggurat.max_value.size",
        Gauge, "By", "The largest value the segment stores (the serialized value plus 13 bytes)"),
    family(Host, "shards", "ziggurat_shards", "ziggurat.shards", Gauge, "{shard}",
        "Shards of the segment, each with its own writer lock"),
    family(Host, "index_slots", "ziggurat_index_slots", "ziggurat.index.slots", Gauge, "{slot}",
        "Slots of the segment's index, all shards"),
    family(Process, "hits", "ziggurat_process_hits_total", "ziggurat.process.hits", Counter,
        "{lookup}", "Lookups this process answered, by tier"),
    family(Process, "misses", "ziggurat_process_misses_total", "ziggurat.process.misses",
        Counter, "{lookup}", "Lookups this process's tier did not answer"),
    family(Process, "entries", "ziggurat_process_entries", "ziggurat.process.entries", Gauge,
        "{entry}", "Entries held in this process's L1"),
    family(Process, "evictions", "ziggurat_process_evictions_total",
        "ziggurat.process.evictions", Counter, "{entry}",
        "L1 entries dropped to stay within its bound of items"),
    family(Process, "stale_drops", "ziggurat_process_stale_drops_total",
        "ziggurat.process.stale_drops", Counter, "{entry}",
        "L1 entries found expired or invalidated"),
    family(Process, "stale_reads", "ziggurat_process_stale_reads_total",
        "ziggurat.process.stale_reads", Counter, "{read}",
        "Expired values read by a load as its fallback"),
    family(Process, "decode_errors", "ziggurat_process_decode_errors_total",
        "ziggurat.process.decode_errors", Counter, "{value}",
        "Values this process could not decode (each a miss)"),
    family(Process, "write_errors", "ziggurat_process_write_errors_total",
        "ziggurat.process.write_errors", Counter, "{write}",
        "Writes the segment refused, store_failures included"),
    family(Process, "store_failures", "ziggurat_process_store_failures_total",
        "ziggurat.process.store_failures", Counter, "{value}",
        "Loaded values returned but not stored"),
    family(Process, "loader_calls", "ziggurat_process_loader_calls_total",
        "ziggurat.process.loader_calls", Counter, "{call}",
        "Loader calls in this process, failed ones included"),
    family(Process, "loader_errors", "ziggurat_process_loader_errors_total",
        "ziggurat.process.loader_errors", Counter, "{call}", "Loader calls that raised"),
    family(Process, "loader_stale_served", "ziggurat_process_loader_stale_served_total",
        "ziggurat.process.loader_stale_served", Counter, "{call}",
        "Failed loads answered with a stale value"),
    family(Process, "loader_waits", "ziggurat_process_loader_waits_total",
        "ziggurat.process.loader_waits", Counter, "{wait}", "Sleeps on another caller's load"),
    family(Process, "loader_takeovers", "ziggurat_process_loader_takeovers_total",
        "ziggurat.process.loader_takeovers", Counter, "{lease}",
        "Load leases taken over from a dead process"),
    family(Process, "loader_refreshes", "ziggurat_process_loader_refreshes_total",
        "ziggurat.process.loader_refreshes", Counter, "{load}",
        "Background reloads started by early refresh (refresh-ahead)"),
    family(Process, "loader_seconds", "ziggurat_process_loader_seconds_total",
        "ziggurat.process.loader_seconds", Counter, "s", "Time spent in loader calls"),
    family(Process, "loader_max_seconds", "ziggurat_process_loader_max_seconds",
        "ziggurat.process.loader_max_seconds", Gauge, "s", "The longest loader call"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_counters_end_in_total() {
        let mut prom = HashSet::new();
        let mut otel = HashSet::new();
        let mut keys = HashSet::new();
        for f in FAMILIES {
            assert!(prom.insert(f.prom), "{} twice", f.prom);
            assert!(otel.insert(f.otel), "{} twice", f.otel);
            assert!(keys.insert((f.group, f.key)), "{} twice", f.key);
            assert!(f.prom.starts_with("ziggurat_"), "{}", f.prom);
            assert!(f.otel.starts_with("ziggurat."), "{}", f.otel);
            assert!(!f.help.is_empty() && !f.unit.is_empty(), "{}", f.prom);
            match f.kind {
                MetricKind::Counter => assert!(f.prom.ends_with("_total"), "{}", f.prom),
                MetricKind::Gauge => assert!(!f.prom.ends_with("_total"), "{}", f.prom),
            }
        }
    }

    #[test]
    fn only_process_counters_add_up_over_processes() {
        for f in FAMILIES {
            assert_eq!(
                f.scope == Scope::Process,
                f.group == Group::Process,
                "{}",
                f.prom
            );
        }
        let up = FAMILIES.iter().find(|f| f.prom == "ziggurat_up").unwrap();
        assert_eq!(up.scope.name(), "host");
    }

    #[test]
    fn process_keys_name_their_family() {
        for f in FAMILIES.iter().filter(|f| f.group == Group::Process) {
            let name = f.prom.strip_prefix("ziggurat_process_").unwrap();
            assert_eq!(name.strip_suffix("_total").unwrap_or(name), f.key);
            assert_eq!(f.otel, format!("ziggurat.process.{}", f.key));
        }
    }

    #[test]
    fn host_keys_are_segment_stats() {
        use ziggurat_core::{Options, Segment};
        let opts = Options {
            size: 1 << 20,
            directory: std::env::temp_dir(),
            ..Options::default()
        };
        let seg = Segment::open(&format!("families-{}", std::process::id()), &opts).unwrap();
        let keys: HashSet<&str> = seg.stats().iter().map(|(k, _)| *k).collect();
        seg.unlink().unwrap();
        for f in FAMILIES.iter().filter(|f| f.group == Group::Host) {
            assert!(keys.contains(f.key), "{} is no segment stat", f.key);
        }
    }
}
