//! Robust, process-shared pthread mutexes: one per shard.
//!
//! A writer SIGKILLed while holding one does not block the others: the kernel
//! marks the mutex owner-dead and the next locker gets `EOWNERDEAD`, repairs
//! the shard, and marks the mutex consistent. A holder that is alive but stuck
//! (stopped, in a debugger) is covered by the timeout instead.

use std::io;
use std::time::Duration;

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
    /// Any other error from pthreads.
    Os(io::Error),
}

/// Initialises a process-shared robust mutex at `m`.
///
/// # Safety
/// `m` must point to at least `size_of::<pthread_mutex_t>()` writable bytes,
/// aligned for it, that no process is using as a mutex at this moment.
pub unsafe fn init(m: *mut libc::pthread_mutex_t) -> io::Result<()> {
    let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
    check(libc::pthread_mutexattr_init(&mut attr))?;
    let r = (|| {
        check(libc::pthread_mutexattr_setpshared(
            &mut attr,
            libc::PTHREAD_PROCESS_SHARED,
        ))?;
        check(libc::pthread_mutexattr_setrobust(
            &mut attr,
            libc::PTHREAD_MUTEX_ROBUST,
        ))?;
        check(libc::pthread_mutex_init(m, &attr))
    })();
    libc::pthread_mutexattr_destroy(&mut attr);
    r
}

/// Locks `m`, waiting at most `timeout`.
///
/// # Safety
/// `m` must point to a mutex initialised by [`init`] inside a live mapping.
pub unsafe fn lock(m: *mut libc::pthread_mutex_t, timeout: Duration) -> Result<Locked, LockError> {
    // Uncontended fast path: no clock read.
    match libc::pthread_mutex_trylock(m) {
        0 => return Ok(Locked::Clean),
        libc::EOWNERDEAD => return Ok(Locked::OwnerDied),
        libc::EBUSY => {}
        e => return Err(LockError::Os(io::Error::from_raw_os_error(e))),
    }
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    libc::clock_gettime(libc::CLOCK_REALTIME, &mut now);
    let total = now.tv_nsec as u128 + timeout.as_nanos();
    let abs = libc::timespec {
        tv_sec: now.tv_sec + (total / 1_000_000_000) as libc::time_t,
        tv_nsec: (total % 1_000_000_000) as libc::c_long,
    };
    match libc::pthread_mutex_timedlock(m, &abs) {
        0 => Ok(Locked::Clean),
        libc::EOWNERDEAD => Ok(Locked::OwnerDied),
        libc::ETIMEDOUT => Err(LockError::Timeout),
        e => Err(LockError::Os(io::Error::from_raw_os_error(e))),
    }
}

/// Marks a mutex obtained with [`Locked::OwnerDied`] as consistent again.
///
/// # Safety
/// The caller holds `m` after an `EOWNERDEAD` and has repaired what it guards.
pub unsafe fn make_consistent(m: *mut libc::pthread_mutex_t) -> io::Result<()> {
    check(libc::pthread_mutex_consistent(m))
}

/// Unlocks `m`.
///
/// # Safety
/// The calling thread holds `m`.
pub unsafe fn unlock(m: *mut libc::pthread_mutex_t) {
    libc::pthread_mutex_unlock(m);
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
        let mut storage = vec![0u64; 8];
        let m = storage.as_mut_ptr() as *mut libc::pthread_mutex_t;
        // SAFETY: 64 zeroed, aligned bytes owned by this test, used only here.
        unsafe {
            init(m).unwrap();
            assert_eq!(lock(m, Duration::from_millis(10)).unwrap(), Locked::Clean);
            let h = std::thread::spawn({
                let addr = m as usize;
                move || {
                    let m = addr as *mut libc::pthread_mutex_t;
                    matches!(lock(m, Duration::from_millis(20)), Err(LockError::Timeout))
                }
            });
            assert!(
                h.join().unwrap(),
                "a held lock must time out in another thread"
            );
            unlock(m);
        }
    }
}
