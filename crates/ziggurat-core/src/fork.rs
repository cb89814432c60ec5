//! Which process this is after `fork()`: a generation bumped in every child
//! (so per-process state inherited from the parent is told apart with one
//! relaxed load) and the process id, read once per process.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Once;

use crate::sys;

/// Bits of the fork generation kept next to a count (modulo 2^24).
pub(crate) const GEN_BITS: u32 = 24;

/// How many `fork`s lie between this process and the first process of its
/// line that loaded the engine (modulo 2^24): bumped in every child. Pending
/// counts carry the generation they were counted in, so a child tells its own
/// from its parent's with one relaxed load and no `getpid` call.
static FORK_GEN: AtomicU64 = AtomicU64::new(0);

/// This process's id, once asked for (0: not yet, or forked since). Lease
/// holders are named by pid on every miss; `getpid` is a system call.
static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_fork_child() {
    // Runs in the child before fork returns there; atomic stores are
    // async-signal-safe, as a handler in a threaded parent's child must be.
    FORK_GEN.fetch_add(1, Ordering::Relaxed);
    PID.store(0, Ordering::Relaxed);
}

/// This process's id, without a system call after the first (a forked child
/// asks again: the fork handler forgets the parent's).
pub fn current_pid() -> u32 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    track_forks();
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    p
}

#[inline(always)]
pub(crate) fn fork_generation() -> u64 {
    FORK_GEN.load(Ordering::Relaxed) & ((1 << GEN_BITS) - 1)
}

/// Registers the fork handler once per process (every segment calls this
/// when it opens). Without it (the registration failed for lack of memory),
/// a forked child would also flush counts it inherited: never fewer counts.
pub(crate) fn track_forks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = sys::at_fork_child(on_fork_child);
    });
}
