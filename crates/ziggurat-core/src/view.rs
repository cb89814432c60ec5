//! Read-only views of shared words for code outside the engine: a key's
//! stamp, a tag's version, the epoch. Only the engine's write protocol
//! stores into the mapping; a view can only load.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A 32-bit word of a segment, borrowed for loads only.
#[derive(Clone, Copy, Debug)]
pub struct View32<'a>(&'a AtomicU32);

/// A 64-bit word of a segment, borrowed for loads only.
#[derive(Clone, Copy, Debug)]
pub struct View64<'a>(&'a AtomicU64);

impl<'a> View32<'a> {
    #[inline(always)]
    pub(crate) fn of(w: &'a AtomicU32) -> Self {
        View32(w)
    }

    /// The word's current value (acquire).
    #[inline(always)]
    pub fn load(self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
}

impl<'a> View64<'a> {
    #[inline(always)]
    pub(crate) fn of(w: &'a AtomicU64) -> Self {
        View64(w)
    }

    /// The word's current value (acquire).
    #[inline(always)]
    pub fn load(self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
