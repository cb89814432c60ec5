//! Write times: the clock a host stamps its writes with, and the rules that
//! refuse a body older than a write the host knows of.
//!
//! Redis is trusted to hand back what was written, not to keep it: a writer
//! without the secret can put an older signed body back. A host notes, for each
//! key and tag it wrote or applied an event about, the latest write time it
//! knows ([`note_key`](crate::note_key)); a body written before it is refused
//! ([`fresh`]). Write times come from a clock the host's processes share, never
//! behind the latest write time the host has seen ([`next_write_time`]), so a
//! write made after applying another host's event is the later one even when
//! the hosts' clocks differ. A time more than [`MAX_SKEW_US`] ahead of the host's
//! wall clock moves nothing: one host with a wrong clock (or a damaged word)
//! would otherwise move every host's write times ahead for good.

use crate::body::{ALL, MAX_SKEW_US};

/// The time of a write made now, given the wall clock `now_us` and the
/// latest write time the host gave or saw, `latest`: one more than `latest`
/// when the clock is behind it, else the clock. A `latest` more than
/// [`MAX_SKEW_US`] ahead is dropped for the clock (`Err` gives the time to
/// use, and says the host's word was ignored).
///
/// ```
/// use ziggurat_cluster::next_write_time;
/// assert_eq!(next_write_time(1_000, 0), Ok(1_000));
/// assert_eq!(next_write_time(1_000, 5_000), Ok(5_001));
/// assert_eq!(next_write_time(1_000, 1_000 + 400_000_000), Err(1_000));
/// ```
pub fn next_write_time(now_us: u64, latest: u64) -> Result<u64, u64> {
    let w = now_us.max(latest.saturating_add(1));
    if w > now_us.saturating_add(MAX_SKEW_US) {
        Err(now_us)
    } else {
        Ok(w)
    }
}

/// Whether a write time `w` learnt from elsewhere (an event, a body) is within
/// [`MAX_SKEW_US`] of the wall clock `now_us`, so that the host's clock may move
/// up to it.
///
/// ```
/// use ziggurat_cluster::believable;
/// assert!(believable(1_000 + 300_000_000, 1_000));
/// assert!(!believable(1_000 + 300_000_001, 1_000));
/// ```
pub fn believable(w: u64, now_us: u64) -> bool {
    w <= now_us.saturating_add(MAX_SKEW_US)
}

/// `w`, cut to [`MAX_SKEW_US`] ahead of the wall clock: what a note made from
/// another host's event keeps (a later time would refuse the key's next
/// writes for as long as the note lives).
pub fn bounded(w: u64, now_us: u64) -> u64 {
    w.min(now_us.saturating_add(MAX_SKEW_US))
}

/// Whether a body written at `written` with `tags` is not older than what the
/// host knows: the latest whole-cache clear (`cleared`), the note of its key
/// (`key_note`, 0: none) and the note of each tag (`tag_note`, 0: none; the
/// tag every value carries is the clear's).
///
/// ```
/// use ziggurat_cluster::fresh;
/// let notes = |t: &str| if t == "a" { 50 } else { 0 };
/// assert!(fresh(60, 10, 20, &["a".to_string()], notes));
/// assert!(!fresh(40, 10, 20, &["a".to_string()], notes));
/// assert!(!fresh(15, 10, 20, &[], notes));
/// ```
pub fn fresh(
    written: u64,
    cleared: u64,
    key_note: u64,
    tags: &[String],
    mut tag_note: impl FnMut(&str) -> u64,
) -> bool {
    written >= cleared
        && written >= key_note
        && tags.iter().all(|t| t == ALL || written >= tag_note(t))
}
