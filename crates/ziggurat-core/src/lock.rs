//! Robust, process-shared pthread mutexes: one per shard.
//!
//! A writer SIGKILLed while holding one does not block the others: the kernel
//! marks the mutex owner-dead and the next locker gets `EOWNERDEAD`, repairs
//! the shard, and marks the mutex consistent. A holder that is alive but stuck
//! (stopped, in a debugger) is covered by the timeout instead.

use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::layout::S_MUTEX_BYTES;
use crate::shm::Shm;

/// What `lock` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Locked {
    /// Got the lock normally.
    Clean,
    /// Got the lock from a dead owner: repair, then call [`make_consistent`].
    OwnerDied,
}

/// Why `lock` failed.
#[derive(Debug)]
pub enum LockError {
    /// Not obtained within the timeout.
    Timeout,
    /// The mutex's type word is not the one `init` writes: damage (see `Mutex::lock`).
    Damaged,
    /// Any other error from pthreads.
    Os(io::Error),
}

/// The robust mutex of one shard, inside a live mapping.
///
/// The handle borrows the mapping, so the mutex cannot be unmapped while a
/// call is in progress or while the lock is held through a [`Shard`] view.
///
/// What the calls touch: the mutex's bytes, and while this thread holds it,
/// glibc links the mutex into the thread's robust list through pointers kept
/// in those bytes (so the kernel can mark it owner-dead if the thread dies).
/// Whatever another process left in a mutex that is free, locking it yields
/// an error, a timeout or the lock: glibc writes the list pointers itself
/// when it takes it. Only a process that overwrites a mutex *another thread
/// holds* can make that thread's unlock write through a bad pointer, and a
/// process with write access to the segment can already corrupt everything
/// in it: that is why only the owner (or the configured group) may open one.
///
/// [`Shard`]: crate::shard::Shard
#[derive(Clone, Copy)]
pub struct Mutex<'a> {
    m: *mut libc::pthread_mutex_t,
    _map: PhantomData<&'a Shm>,
}

/// Offset of the type word (`__kind`) in glibc's `pthread_mutex_t` on 64-bit
/// Linux: after `__lock`, `__count`, `__owner` and `__nusers`, four 32-bit words.
const KIND_OFF: usize = 16;

/// The type word `init` writes (a robust, process-shared, normal mutex), read
/// once from a mutex initialised the same way in this process's memory.
fn expected_kind() -> u32 {
    static KIND: OnceLock<u32> = OnceLock::new();
    *KIND.get_or_init(|| {
        #[repr(C, align(64))]
        struct Cell([u64; S_MUTEX_BYTES / 8]);
        let mut m = Cell([0; S_MUTEX_BYTES / 8]);
        let probe = Mutex {
            m: m.0.as_mut_ptr().cast(),
            _map: PhantomData,
        };
        if probe.init().is_err() {
            return u32::MAX; // never matches: every lock then reports damage
        }
        // The u32 at byte KIND_OFF, as `kind` reads it, whatever the byte order.
        let w = m.0[KIND_OFF / 8].to_ne_bytes();
        let at = KIND_OFF % 8;
        u32::from_ne_bytes([w[at], w[at + 1], w[at + 2], w[at + 3]])
    })
}

impl<'a> Mutex<'a> {
    /// The mutex stored at `off` of `shm`.
    ///
    /// Panics if the `S_MUTEX_BYTES` bytes at `off` are not inside the mapping
    /// or not 64-aligned (offsets come from a checked geometry).
    #[inline]
    pub fn at(shm: &'a Shm, off: usize) -> Mutex<'a> {
        assert!(
            off % 64 == 0
                && off
                    .checked_add(S_MUTEX_BYTES)
                    .is_some_and(|end| end <= shm.len()),
            "mutex offset {off} out of range"
        );
        const _: () = assert!(std::mem::size_of::<libc::pthread_mutex_t>() <= S_MUTEX_BYTES);
        Mutex {
            m: shm.addr(off).cast(),
            _map: PhantomData,
        }
    }

    /// The mutex's type word (glibc's `__kind`), read before every lock.
    #[inline]
    fn kind(&self) -> &AtomicU32 {
        // SAFETY: `at` checked that the mutex's `S_MUTEX_BYTES` bytes, 64-aligned, lie in
        // the mapping, which outlives `'a`; the word at `KIND_OFF` (4-aligned) is inside
        // them, and every process touches shared words only atomically or through glibc.
        unsafe { &*self.m.cast::<u8>().add(KIND_OFF).cast::<AtomicU32>() }
    }

    /// Initialises the mutex as process-shared and robust. Only the creator of
    /// a segment calls this, before the file is visible to anyone else.
    pub fn init(&self) -> io::Result<()> {
        // SAFETY: an all-zero attribute object is valid storage for
        // pthread_mutexattr_init, which fully initialises it.
        let mut attr: libc::pthread_mutexattr_t = unsafe { std::mem::zeroed() };
        // SAFETY: `attr` is live, writable and owned by this frame; `self.m`
        // points to S_MUTEX_BYTES (>= size_of::<pthread_mutex_t>()) 64-aligned
        // bytes inside a mapping that outlives `'a` (checked in `at`), or, for
        // `expected_kind`'s probe, in a local buffer of that size and
        // alignment. The mutex is not in use: the file is not yet visible to
        // anyone, and the probe is never locked.
        unsafe {
            check(libc::pthread_mutexattr_init(&mut attr))?;
            let r = check(libc::pthread_mutexattr_setpshared(
                &mut attr,
                libc::PTHREAD_PROCESS_SHARED,
            ))
            .and_then(|()| {
                check(libc::pthread_mutexattr_setrobust(
                    &mut attr,
                    libc::PTHREAD_MUTEX_ROBUST,
                ))
            })
            .and_then(|()| check(libc::pthread_mutex_init(self.m, &attr)));
            libc::pthread_mutexattr_destroy(&mut attr);
            r
        }
    }

    /// Locks the mutex, waiting at most `timeout`.
    ///
    /// First checks its type word: glibc trusts it to pick the locking
    /// protocol, and a value no `init` writes (a priority-protected type with
    /// an impossible priority, say) makes it abort the process. A file that
    /// holds one is damaged: the lock is refused, nothing is called.
    pub fn lock(&self, timeout: Duration) -> Result<Locked, LockError> {
        if self.kind().load(Ordering::Relaxed) != expected_kind() {
            return Err(LockError::Damaged);
        }
        // Uncontended fast path: no clock read.
        // SAFETY: `self.m` is in range and aligned for the mapping's lifetime
        // (see `at`); on success glibc links it into this thread's robust list,
        // which stays valid while the mapping does (see the type's notes).
        match unsafe { libc::pthread_mutex_trylock(self.m) } {
            0 => return Ok(Locked::Clean),
            libc::EOWNERDEAD => return Ok(Locked::OwnerDied),
            libc::EBUSY => {}
            e => return Err(LockError::Os(io::Error::from_raw_os_error(e))),
        }
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a writable timespec owned by this frame.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        let total = now.tv_nsec as u128 + timeout.as_nanos();
        let abs = libc::timespec {
            tv_sec: now.tv_sec + (total / 1_000_000_000) as libc::time_t,
            tv_nsec: (total % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: as for trylock; `abs` is a live timespec the call only reads.
        match unsafe { libc::pthread_mutex_timedlock(self.m, &abs) } {
            0 => Ok(Locked::Clean),
            libc::EOWNERDEAD => Ok(Locked::OwnerDied),
            libc::ETIMEDOUT => Err(LockError::Timeout),
            e => Err(LockError::Os(io::Error::from_raw_os_error(e))),
        }
    }

    /// Marks a mutex obtained with [`Locked::OwnerDied`] consistent again,
    /// once what it guards was repaired. Fails (EINVAL) if it is not in that state.
    pub fn make_consistent(&self) -> io::Result<()> {
        // SAFETY: `self.m` is in range and aligned (see `at`); the call only
        // touches the mutex's bytes and checks the caller's ownership itself.
        check(unsafe { libc::pthread_mutex_consistent(self.m) })
    }

    /// Unlocks the mutex. A robust mutex checks ownership, so a call by a
    /// thread that does not hold it returns EPERM and changes nothing.
    pub fn unlock(&self) {
        // SAFETY: `self.m` is in range and aligned (see `at`). glibc checks
        // that this thread owns it before it unlinks it from this thread's
        // robust list, through the pointers it stored there when locking.
        unsafe { libc::pthread_mutex_unlock(self.m) };
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_unlock_and_timeout() {
        let file = tempfile_of(4096);
        let shm = Shm::map(&file, 4096).unwrap();
        let m = Mutex::at(&shm, 0);
        m.init().unwrap();
        assert_eq!(m.lock(Duration::from_millis(10)).unwrap(), Locked::Clean);
        let timed_out = std::thread::scope(|s| {
            s.spawn(|| {
                matches!(
                    Mutex::at(&shm, 0).lock(Duration::from_millis(20)),
                    Err(LockError::Timeout)
                )
            })
            .join()
            .unwrap()
        });
        assert!(timed_out, "a held lock must time out in another thread");
        m.unlock();
        assert_eq!(m.lock(Duration::from_millis(10)).unwrap(), Locked::Clean);
        m.unlock();
    }

    fn tempfile_of(len: u64) -> std::fs::File {
        let dir = std::env::temp_dir();
        let path = dir.join(format!("ziggurat-lock-test.{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        f.set_len(len).unwrap();
        f
    }
}
