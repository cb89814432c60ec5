//! The bounds of a tier's settings: every front end checks its arguments
//! against them, and words the refusal in its own names.

use std::time::Duration;

/// The longest `redis_timeout` (seconds): a call bounded by more would hold
/// a request longer than the loader it stands in front of.
pub const MAX_TIMEOUT_S: f64 = 60.0;

/// The shortest stream (entries kept, `MAXLEN ~`): shorter, a reader that
/// paused for a moment would find its place trimmed away, and clear.
pub const MIN_STREAM_LENGTH: u64 = 100;

/// How long a link leaves its server alone after a failure.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether `seconds` is a valid `redis_timeout`: in (0, [`MAX_TIMEOUT_S`]].
///
/// ```
/// assert!(ziggurat_cluster::timeout_ok(0.1));
/// assert!(!ziggurat_cluster::timeout_ok(0.0) && !ziggurat_cluster::timeout_ok(f64::NAN));
/// ```
pub fn timeout_ok(seconds: f64) -> bool {
    seconds > 0.0 && seconds <= MAX_TIMEOUT_S
}

/// Whether `n` is a valid stream length: a whole number of at least
/// [`MIN_STREAM_LENGTH`].
///
/// ```
/// assert!(ziggurat_cluster::stream_length_ok(100_000.0));
/// assert!(!ziggurat_cluster::stream_length_ok(99.0) && !ziggurat_cluster::stream_length_ok(1e3 + 0.5));
/// ```
pub fn stream_length_ok(n: f64) -> bool {
    n.fract() == 0.0 && n >= MIN_STREAM_LENGTH as f64 && n < 2f64.powi(53)
}

/// How long a delete's tombstone in Redis keeps out a load that began before
/// it, for loads bounded by `loader_timeout`: that long, within 1 s to 60 s.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(ziggurat_cluster::tombstone_for(Duration::from_secs(10)), Duration::from_secs(10));
/// assert_eq!(ziggurat_cluster::tombstone_for(Duration::from_millis(5)), Duration::from_secs(1));
/// ```
pub fn tombstone_for(loader_timeout: Duration) -> Duration {
    loader_timeout.clamp(Duration::from_secs(1), Duration::from_secs(60))
}
