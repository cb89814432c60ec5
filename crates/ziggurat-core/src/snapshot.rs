//! What a load saw of the segment before it read its source: the words any
//! write that could make its result old moves. A landing ([`Segment::land`])
//! checks them under the key's shard lock and stores only while all still
//! read the same, so a write, delete, tag invalidation or clear that returned
//! while the load was in flight always wins over the load's older result
//! (memcache's leases, which a delete invalidates, are the same idea).

use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::hash::KeyHash;
use crate::layout::H_TAG_INVALIDATIONS;
use crate::segment::Segment;
use crate::tags::TagRef;

/// The words a landing checks, as read before a load (see the module doc).
///
/// ```
/// use ziggurat_core::{Options, Segment};
/// let directory = std::env::temp_dir();
/// let opts = Options { size: 4 << 20, directory, ..Options::default() };
/// let s = Segment::open(&format!("doc-snapshot-{}", std::process::id()), &opts).unwrap();
/// let kh = s.hash(b"k");
/// let snap = s.snapshot(&kh, Some(&[b"t"])).unwrap();
/// s.invalidate_tag(b"t").unwrap(); // returns while the load is in flight
/// assert!(!s.land(b"k", &kh, b"old", None, &[b"t"], &snap).unwrap());
/// let snap = s.snapshot(&kh, Some(&[b"t"])).unwrap();
/// assert!(s.land(b"k", &kh, b"new", None, &[b"t"], &snap).unwrap());
/// s.unlink().unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The stamp word watched: the key's own, or the key of what the stored
    /// value belongs to (a URL's, for one of its variants).
    stamp_index: u32,
    stamp: u32,
    epoch: u64,
    /// The references of the tags the load will store with, at their
    /// versions then: known tags are checked one by one.
    tags: Option<Vec<u64>>,
    /// The segment's count of tag invalidations then: tags learned only from
    /// the result (an HTTP response's) are checked against any invalidation.
    invalidations: u64,
}

impl Snapshot {
    /// The stamp, epoch and invalidation count, for a caller that keeps the
    /// snapshot elsewhere (see [`Segment::snapshot_from`]).
    pub fn parts(&self) -> (u32, u64, u64) {
        (self.stamp, self.epoch, self.invalidations)
    }

    /// Makes this snapshot one of a store whose tags are known only from its result (a
    /// loader chose them): they are checked against any tag invalidation since it was
    /// taken, not one by one.
    pub fn forget_tags(&mut self) {
        self.tags = None;
    }

    /// The references of the tags it was taken with, at their versions then:
    /// what a landing against it stores (None: tags not known when taken).
    pub fn tag_refs(&self) -> Option<&[u64]> {
        self.tags.as_deref()
    }

    /// The cells of a landing's tags: the snapshot's own when it was taken
    /// with them (resolved once), else `tags` resolved now.
    pub(crate) fn cells(&self, seg: &Segment, tags: &[&[u8]]) -> Result<Vec<u32>> {
        match &self.tags {
            Some(refs) => Ok(refs.iter().map(|&r| TagRef::unpack(r).cell).collect()),
            None => seg.tag_cells(tags),
        }
    }

    /// Whether a write was in progress on the watched stamp when the snapshot
    /// was taken: nothing can then land against it.
    pub fn in_progress(&self) -> bool {
        self.stamp & 1 == 1
    }

    /// Under the shard lock of the key being landed: the references to store
    /// for the tag `cells`, or None when something watched moved.
    pub(crate) fn holds(&self, seg: &Segment, cells: &[u32]) -> Option<Vec<u64>> {
        if self.in_progress()
            || seg.stamp_at(self.stamp_index).load(Ordering::SeqCst) != self.stamp
            || seg.epoch_atomic().load(Ordering::SeqCst) != self.epoch
        {
            return None;
        }
        let refs = seg.tag_versions(cells);
        let current = match &self.tags {
            Some(seen) => refs == *seen,
            // Read after the versions: an invalidation counts before it bumps
            // its tag, so a new version read here means a moved count.
            None => {
                cells.is_empty()
                    || seg.shm.u64_at(H_TAG_INVALIDATIONS).load(Ordering::SeqCst)
                        == self.invalidations
            }
        };
        current.then_some(refs)
    }
}

impl Segment {
    /// Takes a [`Snapshot`] for a load whose result will be stored under the
    /// key hashed as `of` (or under a key that belongs to it), before the load
    /// reads its source. `tags`: the tags it will store with, when known now
    /// (a landing against it then stores with these, whatever tags it is
    /// given); None when they come with the result (any tag invalidation then
    /// voids the landing of a result that has tags).
    pub fn snapshot(&self, of: &KeyHash, tags: Option<&[&[u8]]>) -> Result<Snapshot> {
        let stamp_index = self.stamp_index(of);
        let stamp = self.stamp_at(stamp_index).load(Ordering::SeqCst);
        let epoch = self.epoch_atomic().load(Ordering::SeqCst);
        let invalidations = self.shm.u64_at(H_TAG_INVALIDATIONS).load(Ordering::SeqCst);
        let tags = match tags {
            Some(t) => Some(self.tag_refs(t)?),
            None => None,
        };
        Ok(Snapshot {
            stamp_index,
            stamp,
            epoch,
            tags,
            invalidations,
        })
    }

    /// A snapshot of the key hashed as `of` back from [`Snapshot::parts`].
    pub fn snapshot_from(&self, of: &KeyHash, parts: (u32, u64, u64)) -> Snapshot {
        let (stamp, epoch, invalidations) = parts;
        Snapshot {
            stamp_index: self.stamp_index(of),
            stamp,
            epoch,
            tags: None,
            invalidations,
        }
    }
}
