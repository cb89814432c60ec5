//! The mapped file and the only raw-pointer access to it.
//!
//! Every other module addresses the segment by byte offset and goes through
//! [`Shm`], which hands out atomics for shared words and copies bytes in and
//! out. Concurrent readers copy with relaxed word loads, never with `memcpy`,
//! so a copy that races with a writer is a well-defined (if useless) read that
//! the caller then discards after re-validating (a seqlock read).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// A shared, writable mapping of a whole segment file.
pub struct Shm {
    _map: MmapRaw,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory. All mutation of shared words goes
// through atomics; bulk writes happen only under the owning shard's lock and
// readers treat bulk bytes as untrusted until re-validated. Moving or sharing
// the handle between threads therefore adds no hazard beyond what other
// processes already do to the same pages.
unsafe impl Send for Shm {}
// SAFETY: see `Send` above.
unsafe impl Sync for Shm {}

impl Shm {
    /// Maps `len` bytes of `file` shared and writable.
    pub fn map(file: &File, len: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(len).map_raw(file)?;
        let ptr = map.as_mut_ptr();
        Ok(Shm {
            _map: map,
            ptr,
            len,
        })
    }

    /// Maps `len` bytes of `file` shared and read-only: any store into it
    /// faults, so callers must never hand out a path that writes.
    pub fn map_read_only(file: &File, len: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        let ptr = map.as_mut_ptr();
        Ok(Shm {
            _map: map,
            ptr,
            len,
        })
    }

    /// Length of the mapping in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// The 8-byte word at `off` as an atomic.
    #[inline]
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && off + 8 <= self.len,
            "u64 offset {off} out of range"
        );
        // SAFETY: the offset is 8-aligned and inside the mapping (checked above);
        // the mapping outlives `&self`, and the word is only ever accessed atomically
        // or by the lock holder's bulk writes, which readers re-validate.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    /// The 4-byte word at `off` as an atomic.
    #[inline]
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && off + 4 <= self.len,
            "u32 offset {off} out of range"
        );
        // SAFETY: 4-aligned and in range (checked above); same reasoning as `u64_at`.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }

    /// Raw address of `off`, for the pthread mutex and futex calls that need one.
    #[inline]
    pub fn addr(&self, off: usize) -> *mut u8 {
        assert!(off < self.len);
        // SAFETY: in range (checked above), so the pointer stays inside the mapping.
        unsafe { self.ptr.add(off) }
    }

    /// Asks the CPU to start loading the cache line at `off`: a hint, no effect
    /// on memory. Writers issue it for the index pair, stamp and ghost cell of
    /// a key before work that does not need them yet (encoding the value), so
    /// those misses overlap it instead of following one another.
    #[inline(always)]
    pub fn prefetch(&self, off: usize) {
        if off >= self.len {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `off` is inside the mapping (checked above); a prefetch never
        // faults and neither reads nor writes memory as far as the program sees.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.ptr.add(off) as *const i8);
        }
    }

    /// Copies `dst.len()` bytes from `off` with relaxed word loads.
    ///
    /// Safe against a concurrent writer: the result may be garbage, which the
    /// caller detects afterwards (acquire fence, then re-check of the slot and
    /// the ring tail).
    #[inline]
    pub fn read_racy(&self, off: usize, dst: &mut [u8]) {
        let end = off + dst.len();
        assert!(end <= self.len, "read past the mapping");
        if dst.is_empty() {
            return;
        }
        let mut w = off & !7;
        let mut o = 0usize;
        // First, possibly partial, word.
        if w < off {
            let word = self.word(w);
            let lo = off - w;
            let hi = (end - w).min(8);
            dst[..hi - lo].copy_from_slice(&word[lo..hi]);
            o = hi - lo;
            w += 8;
        }
        // Whole words.
        while w + 8 <= end {
            dst[o..o + 8].copy_from_slice(&self.word(w));
            o += 8;
            w += 8;
        }
        // Last partial word.
        if w < end {
            let word = self.word(w);
            let n = end - w;
            dst[o..o + n].copy_from_slice(&word[..n]);
        }
    }

    #[inline(always)]
    fn word(&self, w: usize) -> [u8; 8] {
        // SAFETY: callers keep `w` 8-aligned and `w + 8 <= self.len`: `read_racy`
        // asserted `end <= len` and the mapping length is a multiple of 8.
        unsafe { (*(self.ptr.add(w) as *const AtomicU64)).load(Ordering::Relaxed) }.to_le_bytes()
    }

    /// Writes `src` at `off`. Only the holder of the shard lock that owns the
    /// range calls this, and only on space no published slot points to.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) {
        assert!(off + src.len() <= self.len, "write past the mapping");
        // SAFETY: in range (checked above). No Rust reference to this range
        // exists; concurrent readers only perform relaxed atomic loads on it and
        // discard what they read unless the range was stable (seqlock protocol).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) }
    }
}
