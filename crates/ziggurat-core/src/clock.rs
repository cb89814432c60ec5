//! Time for TTLs: CLOCK_MONOTONIC in milliseconds, shared by every process on
//! the host (it does not jump with wall-clock changes, and a tmpfs segment does
//! not outlive a reboot, after which the clock restarts).

/// Milliseconds on the host's monotonic clock (coarse: ~1-4 ms resolution, vDSO, no syscall).
#[inline]
pub fn now_ms() -> u64 {
    crate::sys::monotonic_coarse_ms()
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
