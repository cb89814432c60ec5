//! Every option default of a cache, the same in every front end: each
//! front end's signature, option parser and documentation take its
//! defaults from here (through [`crate::rules`]), so a default changed here
//! is changed everywhere, and a copy left behind fails the front end's
//! conformance test.

/// Seconds a value lives.
pub const TTL: f64 = 300.0;
/// Seconds a loader's null is cached as a miss.
pub const NEG_TTL: f64 = 30.0;
/// The fraction of a loaded value's TTL taken off at random.
pub const JITTER: f64 = 0.1;
/// The last fraction of a TTL in which a hit starts an early refresh (0: never).
pub const REFRESH_AHEAD: f64 = 0.0;
/// Seconds the others wait for a loader, and a lease's deadline.
pub const LOADER_TIMEOUT: f64 = 10.0;
/// Values the front end's L1 keeps.
pub const L1_ITEMS: u64 = 10_000;
/// Without its own bound, an L1 keeps this share of `L1_ITEMS` cached
/// misses: `l1_items / L1_NEGATIVE_SHARE`, rounded down.
pub const L1_NEGATIVE_SHARE: u64 = 10;
/// The average entry size the segment's index is sized for, in bytes.
pub const AVG_ITEM_SIZE: u64 = 256;
/// Seconds a writer waits for a shard lock before `LockTimeout`.
pub const LOCK_TIMEOUT: f64 = 0.5;
/// Without a segment, in the "local" mode, the longest an L1 entry lives.
pub const DEGRADED_TTL: f64 = 1.0;
/// Where the segments' files are made.
pub const DIRECTORY: &str = "/dev/shm";
/// The serializer of values that are not counters.
pub const SERIALIZER: &str = "auto";
/// How L1 hands out what it keeps (a [`crate::COPY_MODES`] name).
pub const COPY: &str = "shared";
/// What a cache does without its segment (a [`crate::DEGRADED_MODES`] name).
pub const DEGRADED: &str = "passthrough";
/// Whether the mapping asks for huge pages (a [`crate::HUGE_PAGES_MODES`] name).
pub const HUGE_PAGES: &str = "auto";
/// Seconds a call to the cluster tier waits for Redis.
pub const REDIS_TIMEOUT: f64 = 0.1;
/// The events the cluster tier's stream keeps.
pub const STREAM_LENGTH: u64 = 100_000;

/// The cached misses an L1 of `l1_items` values keeps when not told.
///
/// ```
/// assert_eq!(ziggurat_cache::l1_negative_items(10_000), 1_000);
/// assert_eq!(ziggurat_cache::l1_negative_items(9), 0);
/// ```
pub fn l1_negative_items(l1_items: u64) -> u64 {
    l1_items / L1_NEGATIVE_SHARE
}
