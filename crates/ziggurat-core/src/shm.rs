//! The mapped file and the only raw-pointer access to it (the read-only view
//! that a runtime outside Rust loads words through is `read_only_view`).
//!
//! Every other module addresses the segment by byte offset and goes through
//! [`Shm`], which hands out atomics for shared words and copies bytes in and
//! out. Concurrent readers copy with relaxed word loads, never with `memcpy`,
//! so a copy that races with a writer is a well-defined (if useless) read that
//! the caller then discards after re-validating (a seqlock read).

use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

/// Refuses a mapping whose length is not whole words: the word copies of
/// `read_racy` load the last word whole, which must then lie inside it.
fn whole_words(len: usize) -> io::Result<()> {
    if len % 8 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a mapping of {len} bytes is not whole 8-byte words"),
        ));
    }
    Ok(())
}

/// Maps `len` bytes of `file` from its start, shared, with `prot`, at an
/// address one page past a 2 MiB boundary (see [`Shm::map_small_pages`]).
#[cfg(target_os = "linux")]
pub(crate) fn map_off_grid(file: &File, len: usize, prot: libc::c_int) -> io::Result<*mut u8> {
    use std::os::unix::io::AsRawFd;
    const HUGE: usize = 2 << 20;
    const PAGE: usize = 4096;
    let span = len
        .checked_add(HUGE + PAGE)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: a new anonymous reservation at an address the kernel picks:
    // it replaces nothing, and nothing refers to it yet.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = base as usize;
    let at = base.next_multiple_of(HUGE) + PAGE;
    // SAFETY: `[at, at + len)` lies inside the reservation made above
    // (`at - base < HUGE + PAGE`), which this function alone owns; MAP_FIXED
    // replaces only that part of it.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            prot,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    let failed = p == libc::MAP_FAILED;
    let err = io::Error::last_os_error();
    // SAFETY: unmaps the parts of the reservation around the file's
    // mapping (all of it if the mapping failed), which nothing uses.
    unsafe {
        if failed {
            libc::munmap(base as *mut libc::c_void, span);
        } else {
            libc::munmap(base as *mut libc::c_void, at - base);
            let end = at + len;
            if base + span > end {
                libc::munmap(end as *mut libc::c_void, base + span - end);
            }
        }
    }
    if failed {
        return Err(err);
    }
    Ok(at as *mut u8)
}

/// A shared, writable mapping of a whole segment file.
pub struct Shm {
    /// Unmapped on drop only if no [`Word32`] or [`Word64`] was ever made.
    /// `None` for a mapping made by [`Shm::map_small_pages`], which `Drop`
    /// unmaps itself.
    map: ManuallyDrop<Option<MmapRaw>>,
    ptr: *mut u8,
    len: usize,
    /// Set by the first word handle: from then on the address range must stay
    /// readable for the rest of the process (see `Drop`).
    pinned: AtomicBool,
}

/// A handle on a 32-bit word of a segment (a key's version stamp, a tag's
/// version) that, unlike a borrowed `&AtomicU32`, may be kept without the
/// segment: a process-local cache stores it in each entry and loads it on every
/// hit, with no indirection. Loads are always defined: the word's address stays
/// mapped for the rest of the process. Once the segment is dropped the word no
/// longer follows the file and reads 0, so a holder that needs live values
/// keeps the segment alive as long as its handles.
#[derive(Clone, Copy, Debug)]
pub struct Word32(NonNull<AtomicU32>);

/// Like [`Word32`], for a 64-bit word (the segment epoch).
#[derive(Clone, Copy, Debug)]
pub struct Word64(NonNull<AtomicU64>);

// SAFETY: a handle only ever loads its word atomically, and the address stays
// readable for the life of the process (see `Word32::load`), so using it from
// any thread is as sound as from the one that made it.
unsafe impl Send for Word32 {}
// SAFETY: see `Send` above; a shared handle allows nothing more than loads.
unsafe impl Sync for Word32 {}
// SAFETY: as for `Word32`.
unsafe impl Send for Word64 {}
// SAFETY: as for `Word32`.
unsafe impl Sync for Word64 {}

impl Word32 {
    /// The word's current value (acquire).
    #[inline(always)]
    pub fn load(self) -> u32 {
        // SAFETY: made only by `Shm::word32` from an in-range, 4-aligned word of
        // a mapping it pinned, which `Drop for Shm` then never unmaps (it swaps
        // in zero pages at the same addresses instead): the pointer is valid for
        // reads for the rest of the process. Every access to shared words is
        // atomic, and an atomic load of read-only memory is allowed.
        unsafe { self.0.as_ref() }.load(Ordering::Acquire)
    }

    /// The word's address, for a front end that names the word by its place
    /// in its table: it stays mapped for the rest of the process, as for
    /// [`Word32::load`]. Only loads are allowed.
    #[inline]
    pub fn as_ptr(self) -> *const AtomicU32 {
        self.0.as_ptr()
    }
}

impl Word64 {
    /// The word's current value (acquire).
    #[inline(always)]
    pub fn load(self) -> u64 {
        // SAFETY: as in `Word32::load` (made by `Shm::word64`, 8-aligned).
        unsafe { self.0.as_ref() }.load(Ordering::Acquire)
    }
    /// The word's address, for a front end that names the word by its place
    /// in its table: it stays mapped for the rest of the process, as for
    /// [`Word64::load`]. Only loads are allowed.
    #[inline]
    pub fn as_ptr(self) -> *const AtomicU64 {
        self.0.as_ptr()
    }
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
        whole_words(len)?;
        let map = MmapOptions::new().len(len).map_raw(file)?;
        let ptr = map.as_mut_ptr();
        Ok(Shm {
            map: ManuallyDrop::new(Some(map)),
            ptr,
            len,
            pinned: AtomicBool::new(false),
        })
    }

    /// Maps `len` bytes of `file` shared and read-only: any store into it
    /// faults, so callers must never hand out a path that writes.
    pub fn map_read_only(file: &File, len: usize) -> io::Result<Self> {
        whole_words(len)?;
        let map = MmapOptions::new().len(len).map_raw_read_only(file)?;
        let ptr = map.as_mut_ptr();
        Ok(Shm {
            map: ManuallyDrop::new(Some(map)),
            ptr,
            len,
            pinned: AtomicBool::new(false),
        })
    }

    /// Maps `len` bytes of `file` shared (read-only with `read_only`) at an
    /// address one page past a 2 MiB boundary. A huge page maps a 2 MiB-aligned
    /// range of addresses to a 2 MiB-aligned range of the file, so none can map
    /// any of this one, whatever pages back the file: the way to refuse them
    /// that holds even where the kernel ignores `MADV_NOHUGEPAGE` for pages the
    /// file already has.
    #[cfg(target_os = "linux")]
    pub fn map_small_pages(file: &File, len: usize, read_only: bool) -> io::Result<Self> {
        whole_words(len)?;
        let prot = if read_only {
            libc::PROT_READ
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        let at = map_off_grid(file, len, prot)?;
        Ok(Shm {
            map: ManuallyDrop::new(None),
            ptr: at,
            len,
            pinned: AtomicBool::new(false),
        })
    }

    /// Off Linux no segment is mapped (see `sys_elsewhere.rs`).
    #[cfg(not(target_os = "linux"))]
    pub fn map_small_pages(_file: &File, _len: usize, _read_only: bool) -> io::Result<Self> {
        Err(crate::sys::unsupported())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn advise_huge(&self, _huge: bool) -> io::Result<()> {
        Err(crate::sys::unsupported())
    }

    #[cfg(not(target_os = "linux"))]
    pub fn populate(&self) -> io::Result<()> {
        Err(crate::sys::unsupported())
    }

    /// Whether this mapping refuses huge pages ([`Shm::map_small_pages`]).
    pub fn small_pages(&self) -> bool {
        self.map.is_none()
    }

    /// Length of the mapping in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Address of the mapping's first byte, to find it in `/proc/self/smaps`.
    pub fn start(&self) -> usize {
        self.ptr as usize
    }

    /// Asks the kernel for huge pages on this mapping (`MADV_HUGEPAGE`), or
    /// for small pages only (`MADV_NOHUGEPAGE`). Advice: it changes which pages
    /// back the range, never its contents.
    #[cfg(target_os = "linux")]
    pub fn advise_huge(&self, huge: bool) -> io::Result<()> {
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: the range is exactly this handle's mapping (page-aligned start,
        // its whole length); both advices only change how the kernel backs it.
        let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, advice) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Allocates every page of a new file through this (writable) mapping,
    /// as a first write would (`MADV_POPULATE_WRITE`): on a tmpfs mounted
    /// `huge=advise`, only pages allocated through an advised mapping are huge.
    /// Fails (EFAULT, ENOMEM) when the file system has no room; the pages then
    /// stay as far as they got.
    #[cfg(target_os = "linux")]
    pub fn populate(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this handle's writable mapping; the call
        // faults its pages in as writes of zero bytes would, which nothing reads
        // yet (the file is new and unnamed), and changes no byte's value.
        let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_POPULATE_WRITE) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Whether `len` bytes at `off` lie inside the mapping. Checked
    /// arithmetic: offsets derive from words of the file, which anyone who can
    /// write it may set to anything, and a sum that wraps must not pass.
    #[inline(always)]
    fn inside(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// The 8-byte word at `off` as an atomic. Panics outside the mapping.
    #[inline]
    pub fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(
            off % 8 == 0 && self.inside(off, 8),
            "u64 offset {off} out of range"
        );
        // SAFETY: the offset is 8-aligned and inside the mapping (checked above);
        // the mapping outlives `&self`, and the word is only ever accessed atomically
        // or by the lock holder's bulk writes, which readers re-validate.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    /// The 4-byte word at `off` as an atomic. Panics outside the mapping.
    #[inline]
    pub fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(
            off % 4 == 0 && self.inside(off, 4),
            "u32 offset {off} out of range"
        );
        // SAFETY: 4-aligned and in range (checked above); same reasoning as `u64_at`.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }

    /// A handle on the 4-byte word at `off` that may outlive `self`; pins the
    /// mapping's address range for the rest of the process.
    #[inline]
    pub fn word32(&self, off: usize) -> Word32 {
        let w = NonNull::from(self.u32_at(off));
        self.pin();
        Word32(w)
    }

    /// Like [`Shm::word32`] for the 8-byte word at `off`.
    #[inline]
    pub fn word64(&self, off: usize) -> Word64 {
        let w = NonNull::from(self.u64_at(off));
        self.pin();
        Word64(w)
    }

    /// Marks the mapping as referenced by word handles. Read first: every L1
    /// fill makes handles, and a store each time would keep taking the cache
    /// line away from the other threads that read this handle.
    #[inline(always)]
    fn pin(&self) {
        if !self.pinned.load(Ordering::Relaxed) {
            self.pinned.store(true, Ordering::Relaxed);
        }
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
        assert!(self.inside(off, dst.len()), "read past the mapping");
        let end = off + dst.len();
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
        // Whole words, then the last partial one. Chunks rather than indexes:
        // the copy of a word is then a load and a store, with no bounds checks.
        let mut chunks = dst[o..].chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.word(w));
            w += 8;
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let n = rest.len();
            rest.copy_from_slice(&self.word(w)[..n]);
        }
    }

    /// Whether the bytes at `off` equal `bytes`, compared a word at a time
    /// with relaxed loads (racy like [`Shm::read_racy`]: a concurrent writer
    /// makes the answer meaningless, which the caller's re-check catches).
    /// `off` is 8-aligned, and the word holding the last byte lies inside the
    /// mapping: the last partial word is loaded whole (records are padded to
    /// whole words, so it stays inside the record).
    #[inline]
    pub fn eq_racy(&self, off: usize, bytes: &[u8]) -> bool {
        assert!(
            off % 8 == 0
                && bytes
                    .len()
                    .checked_next_multiple_of(8)
                    .is_some_and(|n| self.inside(off, n)),
            "compare past the mapping"
        );
        let mut w = off;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            if self.word(w) != *chunk {
                return false;
            }
            w += 8;
        }
        let rest = chunks.remainder();
        rest.is_empty() || self.word(w)[..rest.len()] == *rest
    }

    #[inline(always)]
    fn word(&self, w: usize) -> [u8; 8] {
        // SAFETY: callers keep `w` 8-aligned and `w + 8 <= self.len`: `read_racy`
        // and `eq_racy` asserted (with checked sums) that the words they walk
        // end inside the mapping, whose length is a multiple of 8.
        unsafe { (*(self.ptr.add(w) as *const AtomicU64)).load(Ordering::Relaxed) }.to_le_bytes()
    }

    /// Writes `src` at `off`. Only the holder of the shard lock that owns the
    /// range calls this, and only on space no published slot points to.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) {
        assert!(self.inside(off, src.len()), "write past the mapping");
        // SAFETY: in range (checked above). No Rust reference to this range
        // exists; concurrent readers only perform relaxed atomic loads on it and
        // discard what they read unless the range was stable (seqlock protocol).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) }
    }
}

// Off Linux no segment is mapped (see `sys_elsewhere.rs`).
#[cfg(target_os = "linux")]
impl Drop for Shm {
    fn drop(&mut self) {
        // `&mut self`: every thread that used this handle has synchronised with
        // the drop, so a relaxed flag set by any of them is visible here.
        if !*self.pinned.get_mut() {
            if self.map.is_none() {
                // SAFETY: the range `map_small_pages` mapped and this handle
                // owns; nothing points into it (no word handle was made and all
                // borrows of `self` have ended).
                unsafe { libc::munmap(self.ptr.cast(), self.len) };
                return;
            }
            // SAFETY: dropped exactly once, here; nothing points into the mapping
            // (no word handle was made and all borrows of `self` have ended).
            unsafe { ManuallyDrop::drop(&mut self.map) };
            return;
        }
        // Word handles may still be loaded, from any thread. Replace the file's
        // pages with read-only zero pages at the same addresses, in one mmap that
        // the kernel applies atomically: a concurrent load sees either page, never
        // a hole, and the file's memory is released (a tmpfs file is freed once
        // unlinked). The address range itself is never returned. Should the call
        // fail, the file mapping is kept instead, which is just as sound.
        // SAFETY: MAP_FIXED over exactly the range this handle mapped and owns;
        // no Rust reference into it remains (`&mut self`), and the word handles
        // only load atomically, which the new pages allow.
        let _ = unsafe {
            libc::mmap(
                self.ptr.cast(),
                self.len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        // `map` is deliberately not dropped: unmapping would free the range.
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Shm;
    use std::fs::File;

    /// An unlinked file of `len` bytes for a mapping test.
    pub(crate) fn scratch_file(tag: &str, len: u64) -> File {
        let path = std::env::temp_dir().join(format!("zg-{tag}-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("scratch file");
        file.set_len(len).expect("size");
        std::fs::remove_file(&path).expect("unlink");
        file
    }

    /// A mapping that refuses huge pages starts one page past a 2 MiB boundary
    /// (so no huge page can map it), and reads and writes the file like any other.
    #[test]
    fn small_page_mappings_are_off_the_huge_page_grid() {
        let file = scratch_file("small", 4 << 20);
        let a = Shm::map_small_pages(&file, 4 << 20, false).expect("map");
        assert_eq!(a.start() % (2 << 20), 4096);
        a.write((3 << 20) + 8, b"abcdefgh");
        let b = Shm::map_small_pages(&file, 4 << 20, true).expect("map read-only");
        let mut got = [0u8; 8];
        b.read_racy((3 << 20) + 8, &mut got);
        assert_eq!(&got, b"abcdefgh");
        let c = Shm::map(&file, 4 << 20).expect("map");
        c.read_racy((3 << 20) + 8, &mut got);
        assert_eq!(&got, b"abcdefgh");
    }

    /// `eq_racy` agrees with slice equality for every length over the first
    /// three words and a change of any one byte, the last partial word's
    /// bytes included (the bytes after the compared ones are the next record's
    /// and must not count).
    #[test]
    fn eq_racy_agrees_with_slices() {
        let path = std::env::temp_dir().join(format!("zg-eq-racy-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("scratch file");
        file.set_len(64).expect("size");
        let shm = Shm::map(&file, 64).expect("map");
        std::fs::remove_file(&path).expect("unlink");
        let stored: Vec<u8> = (0..56u8).map(|i| i.wrapping_mul(37) | 1).collect();
        shm.write(8, &stored);
        for len in 1..=24 {
            let same = &stored[..len];
            assert!(shm.eq_racy(8, same), "length {len}");
            for at in 0..len {
                let mut other = same.to_vec();
                other[at] ^= 0x40;
                assert!(!shm.eq_racy(8, &other), "length {len}, byte {at} changed");
            }
        }
    }
}
