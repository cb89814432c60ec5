//! Tag versions: one u32 per tag cell, found by hashing the tag.
//!
//! An entry records the version of each of its tags when written; bumping a
//! tag's version makes every entry that carries it a miss at once, in every
//! process, without touching the entries (they are reclaimed as the log moves).
//! Two tags sharing a cell over-invalidate each other, never under-invalidate.

use crate::hash::{reduce, tag_hash};

/// A tag reference as stored in a record: cell index and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagRef {
    /// Index of the tag's cell in the tag table.
    pub cell: u32,
    /// The cell's version when the entry was written.
    pub version: u32,
}

impl TagRef {
    /// Packs into the record's 8-byte form.
    #[inline]
    pub fn pack(self) -> u64 {
        self.cell as u64 | (self.version as u64) << 32
    }

    /// Unpacks the record's 8-byte form.
    #[inline]
    pub fn unpack(w: u64) -> TagRef {
        TagRef {
            cell: w as u32,
            version: (w >> 32) as u32,
        }
    }
}

/// The cell of `tag` in a table of `ntags` cells.
#[inline]
pub fn cell(seed: u64, ntags: u32, tag: &[u8]) -> u32 {
    reduce(tag_hash(seed, tag) as u32, ntags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_roundtrip() {
        let t = TagRef {
            cell: 77,
            version: u32::MAX,
        };
        assert_eq!(TagRef::unpack(t.pack()), t);
        assert!(cell(1, 1024, b"user:1") < 1024);
    }
}
