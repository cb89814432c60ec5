//! The words the tier keeps in the host's segment (its application words,
//! u64 each, zero in a new file): every process of the host, whichever its
//! language, the stream reader and the command line read the same. The table
//! is in docs/format.md (cluster tier).

/// Pid of the process reading the stream (the lease; 0: none).
pub const LEASE: usize = 0;
/// Its last sign of life, ms of `CLOCK_MONOTONIC`.
pub const BEAT: usize = 1;
/// Sequence number of the last event applied.
pub const SEQ: usize = 2;
/// Stream id of that event, first part (ms).
pub const ID_MS: usize = 3;
/// And second part.
pub const ID_SEQ: usize = 4;
/// This host's id in events (random, set once).
pub const HOST: usize = 5;
/// Writes kept local while Redis was unreachable.
pub const DIRTY: usize = 6;
/// Events applied.
pub const APPLIED: usize = 7;
/// Clears after a gap, a rewind or a dirty host.
pub const GAP_CLEARS: usize = 8;
/// Invalidation lag observed by the reader, µs, p50.
pub const LAG_P50: usize = 9;
/// And p99.
pub const LAG_P99: usize = 10;
/// Events published by the host.
pub const PUBLISHED: usize = 11;
/// 1 once SEQ and ID_* hold a position (SEQ 0 is a valid one).
pub const POSITIONED: usize = 12;
/// The stream's generation that position is in (0: not known yet).
pub const GEN: usize = 13;
/// The host's fence: raised before each recovery from a cut-off.
pub const FENCE: usize = 14;
/// Events applied that were in the stream before the reader connected.
pub const REPLAYS: usize = 15;
/// Pid of a process that only follows the stream (`ziggurat follow`).
pub const FOLLOWER: usize = 16;
/// When it last asked for the lease, ms of `CLOCK_MONOTONIC`.
pub const FOLLOWER_AT: usize = 17;
/// Write time (µs) of the latest whole-cache clear the host made or applied.
pub const CLEARED: usize = 18;
/// The latest write time (µs) the host gave or saw.
pub const CLOCK: usize = 19;
/// 1 once a process joined the tier, before any write or connection: a front
/// end that cannot join refuses the cache from then on.
pub const JOINED: usize = ziggurat_cache::JOINED_WORD;

// Every word lies among the segment's application words.
const _: () = assert!(CLOCK < JOINED && JOINED < ziggurat_core::APP_WORDS);

/// Every word, by the name front ends give it.
pub const ALL_WORDS: [(&str, usize); 21] = [
    ("LEASE", LEASE),
    ("BEAT", BEAT),
    ("SEQ", SEQ),
    ("ID_MS", ID_MS),
    ("ID_SEQ", ID_SEQ),
    ("HOST", HOST),
    ("DIRTY", DIRTY),
    ("APPLIED", APPLIED),
    ("GAP_CLEARS", GAP_CLEARS),
    ("LAG_P50", LAG_P50),
    ("LAG_P99", LAG_P99),
    ("PUBLISHED", PUBLISHED),
    ("POSITIONED", POSITIONED),
    ("GEN", GEN),
    ("FENCE", FENCE),
    ("REPLAYS", REPLAYS),
    ("FOLLOWER", FOLLOWER),
    ("FOLLOWER_AT", FOLLOWER_AT),
    ("CLEARED", CLEARED),
    ("CLOCK", CLOCK),
    ("JOINED", JOINED),
];

/// The host-wide figures of the tier that every front end's `stats()` shows:
/// each is a word divided by a unit (the lag words hold microseconds, shown
/// in milliseconds). Front ends read this table; their names may change case.
///
/// ```
/// use ziggurat_cluster::words::{FIGURES, LAG_P99};
/// assert!(FIGURES.contains(&("lag_p99_ms", LAG_P99, 1000.0)));
/// ```
pub const FIGURES: [(&str, usize, f64); 8] = [
    ("events_published", PUBLISHED, 1.0),
    ("events_applied", APPLIED, 1.0),
    ("replays", REPLAYS, 1.0),
    ("gap_clears", GAP_CLEARS, 1.0),
    ("dirty_writes", DIRTY, 1.0),
    ("last_seq", SEQ, 1.0),
    ("lag_p50_ms", LAG_P50, 1000.0),
    ("lag_p99_ms", LAG_P99, 1000.0),
];
