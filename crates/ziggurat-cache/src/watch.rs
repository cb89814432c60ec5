//! What a front end's L1 entry validates against: shared words with the values
//! they had when the entry was kept. A write in any process changes one of
//! them before it returns, so an entry whose words all hold is current.

use ziggurat_core::{KeyHash, Segment, TagRef, Word32, Word64};

/// A shared 32-bit word (a key's stamp, a tag cell's version) and the value it
/// had when the entry was kept. The engine's handle keeps the load defined whatever
/// happens to the segment, as long as the front end keeps the segment alive.
#[derive(Clone, Copy)]
pub struct Watch32 {
    /// The word watched.
    pub word: Word32,
    /// Its value when the entry was kept.
    pub seen: u32,
}

/// Like [`Watch32`] for the 64-bit segment epoch.
#[derive(Clone, Copy)]
pub struct Watch64 {
    /// The word watched.
    pub word: Word64,
    /// Its value when the entry was kept.
    pub seen: u64,
}

impl Watch32 {
    /// Watches `word` for a change from `seen`.
    #[inline]
    pub fn of(word: Word32, seen: u32) -> Watch32 {
        Watch32 { word, seen }
    }

    /// Whether the word still holds the value seen.
    #[inline(always)]
    pub fn holds(&self) -> bool {
        self.word.load() == self.seen
    }
}

impl Watch64 {
    /// Watches `word` for a change from `seen`.
    #[inline]
    pub fn of(word: Word64, seen: u64) -> Watch64 {
        Watch64 { word, seen }
    }

    /// Whether the word still holds the value seen.
    #[inline(always)]
    pub fn holds(&self) -> bool {
        self.word.load() == self.seen
    }
}

/// What every L1 entry of a key watches besides its tags: the key's stamp and
/// the segment epoch, at the values an L1 copy is current for.
#[derive(Clone, Copy)]
pub struct L1Watch {
    /// The key's stamp in the main segment.
    pub stamp: Watch32,
    /// The main segment's epoch (a clear moves it).
    pub epoch: Watch64,
}

impl L1Watch {
    /// Watches the stamp of the key hashed as `kh` in `seg` for `stamp`, and
    /// the segment's epoch for `epoch`.
    pub fn of(seg: &Segment, kh: &KeyHash, stamp: u32, epoch: u64) -> L1Watch {
        L1Watch {
            stamp: Watch32::of(seg.stamp_watch(kh), stamp),
            epoch: Watch64::of(seg.epoch_watch(), epoch),
        }
    }
}

/// Watches of an entry's tag references read from `seg` (packed [`TagRef`]s,
/// as [`ziggurat_core::ReadMeta`] and [`Segment::tag_refs`] give them).
pub(crate) fn tag_watches(seg: &Segment, refs: &[u64]) -> Vec<Watch32> {
    refs.iter()
        .map(|&t| {
            let r = TagRef::unpack(t);
            Watch32::of(seg.tag_watch(r.cell), r.version)
        })
        .collect()
}
