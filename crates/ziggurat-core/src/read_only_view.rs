//! A read-only mapping of a segment file's first bytes, for a runtime that
//! loads shared words through pointers of its own (JavaScript's typed
//! arrays): a stray store faults instead of changing what other processes
//! trust, and once retired the same addresses take stores into private pages.

use std::fs::File;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(target_os = "linux")]
use crate::shm::map_off_grid;

/// A second mapping of the first bytes of a segment file, read-only: for a
/// runtime that loads shared words through pointers of its own (JavaScript's
/// typed arrays), which Rust cannot stop from storing. A store through it
/// faults at once (the process gets SIGSEGV) instead of changing words every
/// other process trusts. [`ReadOnlyView::retire`] replaces it with private
/// zero pages that take stores, for when nothing must read the file through
/// it any more but its pointers may still be used. Unmapped on drop: its
/// owner keeps it alive as long as any pointer into it.
pub struct ReadOnlyView {
    ptr: NonNull<u8>,
    len: usize,
    retired: AtomicBool,
}

// SAFETY: the view hands out addresses, never references; Rust code never
// loads or stores through it. Moving or sharing the handle adds nothing to
// what any thread holding one of its addresses can already do.
unsafe impl Send for ReadOnlyView {}
// SAFETY: see `Send` above; `retire` is an atomic swap of the pages (mmap).
unsafe impl Sync for ReadOnlyView {}

impl ReadOnlyView {
    /// Maps the first `len` bytes of `file` (a multiple of the page size)
    /// shared and read-only; off the huge-page grid with `small_pages`, as
    /// [`Shm::map_small_pages`] does.
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn map(_file: &File, _len: usize, _small_pages: bool) -> io::Result<Self> {
        Err(crate::sys::unsupported())
    }

    #[cfg(target_os = "linux")]
    pub(crate) fn map(file: &File, len: usize, small_pages: bool) -> io::Result<Self> {
        use std::os::unix::io::AsRawFd;
        if len == 0 || len % 4096 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a view of {len} bytes is not whole pages"),
            ));
        }
        let p = if small_pages {
            map_off_grid(file, len, libc::PROT_READ)?
        } else {
            // SAFETY: a new mapping at an address the kernel picks: it replaces
            // nothing, and nothing refers to it yet.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            p.cast()
        };
        let ptr = NonNull::new(p).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        Ok(ReadOnlyView {
            ptr,
            len,
            retired: AtomicBool::new(false),
        })
    }

    /// The address of the file's byte `off` in this view, when `len` bytes
    /// from there lie inside it.
    pub fn at(&self, off: usize, len: usize) -> Option<*const u8> {
        let end = off.checked_add(len)?;
        // `wrapping_add` stays inside the mapping: `off < end <= self.len`.
        (end <= self.len).then(|| self.ptr.as_ptr().wrapping_add(off) as *const u8)
    }

    /// Replaces the view with private, writable zero pages at the same
    /// addresses, in one mmap that the kernel applies atomically (a
    /// concurrent load sees either page, never a hole): from then on the
    /// view reads 0, no longer follows the file, and a store into it lands in
    /// this process's own memory. Once; later calls do nothing. Should the
    /// call fail, the read-only view stays, which is just as sound.
    pub fn retire(&self) {
        if self.retired.swap(true, Ordering::AcqRel) {
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: MAP_FIXED over exactly the range this view mapped and owns;
        // Rust code never holds a reference into it, and what runtimes do
        // through its addresses (loads, stray stores) the new pages allow.
        let _ = unsafe {
            libc::mmap(
                self.ptr.as_ptr().cast(),
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: the range this view mapped and owns; its owner drops it only
        // once nothing can use an address in it (see the type's doc).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ReadOnlyView;
    use crate::shm::tests::scratch_file;
    use crate::shm::Shm;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A read-only view follows what a writable mapping of the file stores,
    /// with small pages or not; once retired it reads 0 and takes stores into
    /// private memory, which the file never sees.
    #[test]
    fn read_only_views_follow_the_file_until_retired() {
        for small in [false, true] {
            let file = scratch_file(&format!("view-{small}"), 3 * 4096);
            let shm = Shm::map(&file, 3 * 4096).expect("map");
            let view = ReadOnlyView::map(&file, 2 * 4096, small).expect("view");
            assert!(view.at(2 * 4096 - 4, 4).is_some());
            assert!(view.at(2 * 4096 - 4, 8).is_none());
            assert!(view.at(usize::MAX, 2).is_none());
            let p = view.at(4096 + 8, 4).expect("inside") as *const AtomicU32;
            // SAFETY: a 4-aligned word inside the view, which lives until the
            // end of the test and is only loaded from until retired.
            let word = unsafe { &*p };
            shm.u32_at(4096 + 8).store(7, Ordering::Release);
            assert_eq!(word.load(Ordering::Acquire), 7);
            view.retire();
            view.retire();
            assert_eq!(word.load(Ordering::Acquire), 0);
            word.store(9, Ordering::Release);
            assert_eq!(word.load(Ordering::Acquire), 9);
            assert_eq!(shm.u32_at(4096 + 8).load(Ordering::Acquire), 7);
            assert!(ReadOnlyView::map(&file, 100, small).is_err());
        }
    }
}
