//! Write times: the clock of a host's writes and the freshness of a body
//! (`ziggurat.cluster.write_times`).

use pyo3::prelude::*;
use ziggurat_cluster as zc;

/// The time of a write made now (`now_us`, µs since the epoch) after the
/// latest write time the host gave or saw, `latest`: `(w, ignored)`, where
/// `ignored` says `latest` was too far ahead of the clock and was dropped.
///
/// >>> cluster_next_write_time(1000, 5000), cluster_next_write_time(1000, 10**12)
/// ((5001, False), (1000, True))
#[pyfunction]
pub fn cluster_next_write_time(now_us: u64, latest: u64) -> (u64, bool) {
    match zc::next_write_time(now_us, latest) {
        Ok(w) => (w, false),
        Err(w) => (w, true),
    }
}

/// Whether a write time `w` learnt from elsewhere is within the allowed skew
/// of the wall clock `now_us`.
///
/// >>> cluster_believable(1000, 1000), cluster_believable(10**12, 1000)
/// (True, False)
#[pyfunction]
pub fn cluster_believable(w: u64, now_us: u64) -> bool {
    zc::believable(w, now_us)
}

/// `w`, cut to the allowed skew ahead of the wall clock `now_us`.
///
/// >>> cluster_bounded(10**12, 1000) < 10**12
/// True
#[pyfunction]
pub fn cluster_bounded(w: u64, now_us: u64) -> u64 {
    zc::bounded(w, now_us)
}

/// Whether a body written at `written` with `tags` is not older than the
/// latest clear (`cleared`), its key's note and its tags' notes (`tag_notes`,
/// one per tag, 0: none).
///
/// >>> cluster_fresh(60, 10, 20, ("a",), [50]), cluster_fresh(40, 10, 20, ("a",), [50])
/// (True, False)
#[pyfunction]
pub fn cluster_fresh(
    written: u64,
    cleared: u64,
    key_note: u64,
    tags: Vec<String>,
    tag_notes: Vec<u64>,
) -> bool {
    let mut notes = tag_notes.into_iter();
    zc::fresh(written, cleared, key_note, &tags, |_| {
        notes.next().unwrap_or(0)
    })
}
