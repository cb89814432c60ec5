//! Per-key version stamps, and waiting for one to change.
//!
//! A stamp is a u32 in shared memory, found by hashing the key. Writers make it
//! odd before publishing a key's new slot and even after, so an L1 fill that
//! saw the same even stamp before and after its L2 read cannot hold a value
//! older than the newest publish. Different keys may share a stamp: that costs
//! only spurious L1 misses. Waiters sleep on the stamp with a shared futex, so
//! a process waiting for another process's load wakes when the value lands.

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout`. Returns early on a wake,
/// a change of the word, or a signal; callers re-check the word.
#[cfg(target_os = "linux")]
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 inside a MAP_SHARED mapping that
    // outlives the call; FUTEX_WAIT (not _PRIVATE) keys it by the physical page
    // so other processes' wakes reach it. The kernel only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every process sleeping in [`futex_wait`] on `word`.
#[cfg(target_os = "linux")]
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: as in `futex_wait`; FUTEX_WAKE does not access user memory beyond
    // using the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Off Linux no segment opens (see `sys_elsewhere.rs`), so no word of one is
/// waited on; a caller that waits re-checks its word after a short sleep.
#[cfg(not(target_os = "linux"))]
pub fn futex_wait(_word: &AtomicU32, _expected: u32, timeout: Duration) {
    std::thread::sleep(timeout.min(Duration::from_millis(1)));
}

#[cfg(not(target_os = "linux"))]
pub fn futex_wake(_word: &AtomicU32) {}

/// Whether a stamp value says a write is being published.
#[inline]
pub fn is_odd(stamp: u32) -> bool {
    stamp & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn wait_times_out_and_wakes() {
        let w = Arc::new(AtomicU32::new(2));
        let t = Instant::now();
        futex_wait(&w, 2, Duration::from_millis(30));
        assert!(t.elapsed() >= Duration::from_millis(25));
        // A changed word returns at once.
        let t = Instant::now();
        futex_wait(&w, 3, Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(1));
        let w2 = Arc::clone(&w);
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            w2.store(4, Ordering::SeqCst);
            futex_wake(&w2);
        });
        let t = Instant::now();
        while w.load(Ordering::SeqCst) == 2 && t.elapsed() < Duration::from_secs(5) {
            futex_wait(&w, 2, Duration::from_secs(5));
        }
        h.join().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the wake must end the wait early"
        );
    }
}
