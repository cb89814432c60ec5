//! The mapped words a JavaScript L1 validates its hits against (the keys'
//! stamps, the tags' versions, the segment epoch), as array buffers over the
//! mapping itself, so that a hit is checked with `Atomics.load` and no call
//! into the addon. This is the addon's only `unsafe` code.
//!
//! The buffers are never written: the package's JavaScript only loads from
//! them, and keeps them in private fields no other code can reach.

use napi::bindgen_prelude::ArrayBuffer;
use napi::{Env, Result};
use ziggurat_core::Segment;

/// Where the regions an L1 watches start in this process's mapping, and
/// their lengths in bytes.
#[derive(Clone, Copy)]
pub struct Regions {
    stamps: *const u8,
    nstamps: usize,
    tags: *const u8,
    ntags: usize,
    epoch: *const u8,
}

// SAFETY: the pointers are addresses of a mapping that stays mapped for the
// rest of the process (see `Regions::of`); they are only ever read through
// atomic loads, from any thread.
unsafe impl Send for Regions {}
// SAFETY: as for `Send`.
unsafe impl Sync for Regions {}

impl Regions {
    /// The regions of `main`, found from the handles the engine gives out for
    /// single words (`stamp_watch`, `tag_watch`, `epoch_watch`), which stay
    /// mapped for the rest of the process even once the segment is dropped
    /// (the engine then swaps zero pages in at the same addresses).
    pub fn of(main: &Segment) -> Regions {
        let g = main.geometry();
        let kh = main.hash(b"\0");
        let idx = main.stamp_index(&kh) as usize;
        let one = main.stamp_watch(&kh).as_ptr() as *const u8;
        Regions {
            stamps: one.wrapping_sub(4 * idx),
            nstamps: g.nstamps() as usize,
            tags: main.tag_watch(0).as_ptr() as *const u8,
            ntags: g.ntags() as usize,
            epoch: main.epoch_watch().as_ptr() as *const u8,
        }
    }

    /// The index (in 32-bit words) of the word at `ptr` in the stamp table.
    pub fn stamp_index(&self, ptr: *const u32) -> u32 {
        ((ptr as usize - self.stamps as usize) / 4) as u32
    }

    /// The index of the word at `ptr` in the tag table.
    pub fn tag_index(&self, ptr: *const u32) -> u32 {
        ((ptr as usize - self.tags as usize) / 4) as u32
    }

    /// The stamp table, the tag table and the epoch as array buffers over the
    /// mapping; None when the runtime refuses external buffers (it would copy
    /// the words, and a copy never moves: the caller then keeps no L1).
    pub fn buffers<'env>(&self, env: &'env Env) -> Result<Option<[ArrayBuffer<'env>; 3]>> {
        let make = |ptr: *const u8, len: usize| -> Result<Option<ArrayBuffer<'env>>> {
            // SAFETY: `ptr..ptr + len` is a region of the segment's mapping (the
            // stamp table, the tag table, the 8-byte epoch: `Regions::of`), which
            // stays mapped and readable for the rest of the process, so it
            // outlives any buffer over it and the finalizer has nothing to free.
            // JavaScript only loads from these buffers (atomically); nothing
            // writes through them, so the `*mut` the call takes is never used to
            // write. The region's words are aligned for the typed arrays put over
            // them (4 bytes for the tables, 8 for the epoch).
            let ab =
                unsafe { ArrayBuffer::from_external(env, ptr as *mut u8, len, (), |_, _| ()) }?;
            Ok((ab.as_ptr() == ptr).then_some(ab))
        };
        let stamps = make(self.stamps, 4 * self.nstamps)?;
        let tags = make(self.tags, 4 * self.ntags)?;
        let epoch = make(self.epoch, 8)?;
        Ok(match (stamps, tags, epoch) {
            (Some(s), Some(t), Some(e)) => Some([s, t, e]),
            _ => None,
        })
    }
}
