//! Time for TTLs: CLOCK_MONOTONIC in milliseconds, shared by every process on
//! the host (it does not jump with wall-clock changes, and a tmpfs segment does
//! not outlive a reboot, after which the clock restarts). And ticks, for
//! timing short spans of this process cheaply.

use std::sync::OnceLock;
use std::time::Instant;

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

/// How this process reads ticks: the time-stamp counter (with where it and the
/// monotonic clock stood at the first read, to convert), or nanoseconds of the
/// monotonic clock since `Instant`.
enum Ticker {
    #[cfg(target_arch = "x86_64")]
    Tsc(Instant, u64),
    Clock(Instant),
}

static TICKER: OnceLock<Ticker> = OnceLock::new();

fn ticker() -> &'static Ticker {
    TICKER.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if tsc_trusted() {
            return Ticker::Tsc(Instant::now(), crate::sys::tsc());
        }
        Ticker::Clock(Instant::now())
    })
}

/// Whether the kernel itself keeps time by the time-stamp counter: then the
/// counter ticks at one rate on every CPU, through sleep states.
#[cfg(target_arch = "x86_64")]
fn tsc_trusted() -> bool {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .is_ok_and(|s| s.trim() == "tsc")
}

/// A timestamp for timing short spans of this process (see [`ticks_to_ns`]).
/// Where the kernel keeps time by the CPU's time-stamp counter, this reads the
/// counter without waiting for earlier instructions to finish, as reading the
/// monotonic clock does: right after a read of the segment that missed the CPU
/// caches, that wait costs more than a fast span itself. Elsewhere, nanoseconds
/// of the monotonic clock.
#[inline]
pub fn ticks() -> u64 {
    match ticker() {
        #[cfg(target_arch = "x86_64")]
        Ticker::Tsc(..) => crate::sys::tsc(),
        Ticker::Clock(t0) => t0.elapsed().as_nanos() as u64,
    }
}

/// Nanoseconds in a span of `ticks` (a difference of two [`ticks`]), at the
/// rate the counter kept since this process first read it.
pub fn ticks_to_ns(ticks: u64) -> u64 {
    match ticker() {
        #[cfg(target_arch = "x86_64")]
        Ticker::Tsc(t0, c0) => {
            let ns = t0.elapsed().as_nanos() as f64;
            let counted = crate::sys::tsc().wrapping_sub(*c0) as f64;
            if counted <= 0.0 || ns <= 0.0 {
                return ticks;
            }
            (ticks as f64 * ns / counted) as u64
        }
        Ticker::Clock(_) => ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_measure_a_sleep() {
        let t0 = ticks();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = ticks_to_ns(ticks().saturating_sub(t0));
        assert!((15_000_000..2_000_000_000).contains(&ns), "{ns} ns");
    }
}
