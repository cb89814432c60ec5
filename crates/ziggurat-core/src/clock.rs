//! Time for TTLs: CLOCK_MONOTONIC in milliseconds, shared by every process on
//! the host (it does not jump with wall-clock changes, and a tmpfs segment does
//! not outlive a reboot, after which the clock restarts).

/// Milliseconds on the host's monotonic clock (coarse: ~1-4 ms resolution, vDSO, no syscall).
#[inline]
pub fn now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Absolute deadline `ttl` seconds from now, or 0 for "never".
#[inline]
pub fn deadline_ms(ttl: Option<f64>) -> u64 {
    match ttl {
        None => 0,
        // At least 1 ms so a tiny TTL still means "expires", never "never".
        Some(t) => now_ms() + ((t * 1000.0).ceil() as u64).max(1),
    }
}
