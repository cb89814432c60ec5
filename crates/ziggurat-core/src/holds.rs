//! What one handle holds in its segment's lease cells, as the threads of
//! this process see it (the leases themselves are in `lease`): kept apart
//! from the cells because it lives in the process, not in the segment.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::fork::fork_generation;
use crate::hash::KeyHash;
use crate::layout::LEASE_CELLS;

/// The low bits of a cell's record in [`Holds`]: how many loads of other keys
/// ride on the lease ([`Lease::Busy`]).
pub(crate) const RIDERS: u64 = 0xFFFF;

/// How many loads beside leases one handle tracks at once; past that, a
/// caller waits for the cell instead of loading beside it.
const RIDE_SLOTS: usize = 32;

/// The rest of a cell's record, and of a ride's: the key (never 0; a cell's
/// 0 means none, as after the lease's own load ended while loads beside it
/// still run).
pub(crate) fn key_tag(kh: &KeyHash) -> u64 {
    (kh.h << 16) | (1 << 16)
}

/// What one handle holds in the lease cells, as threads of this process see
/// it: for each cell, the tag of the key the lease was taken for and how many
/// loads ride on it; for each load riding on a cell, its key's tag and the
/// cell (so that a second caller of the same key waits for the first instead
/// of loading it again). A record means something only while the cell's
/// holder word names this process.
///
/// The records and the holder word change together under a lock of the
/// handle's own: a thread that reads the holder word as this process's must
/// find the record of that hold, not the moment between a release's two
/// steps (a load counted then would ride on a cell already given back). The
/// lock is not a `Mutex` because a child forked while another thread of its
/// parent held it would wait for it forever: the word records the fork
/// generation of its taker, and a child takes a lock of another generation
/// as free. Every section it guards is a few atomic operations long.
pub(crate) struct Holds {
    lock: AtomicU64,
    cells: [AtomicU64; LEASE_CELLS as usize],
    rides: [AtomicU64; RIDE_SLOTS],
}

/// A held [`Holds`] lock, given back on drop.
pub(crate) struct HoldsGuard<'a>(&'a Holds);

impl Drop for HoldsGuard<'_> {
    fn drop(&mut self) {
        self.0.lock.store(0, Ordering::Release);
    }
}

impl Holds {
    pub(crate) fn new() -> Holds {
        Holds {
            lock: AtomicU64::new(0),
            cells: std::array::from_fn(|_| AtomicU64::new(0)),
            rides: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn lock(&self) -> HoldsGuard<'_> {
        let mine = fork_generation() << 1 | 1;
        let mut spins = 0u32;
        loop {
            let cur = self.lock.load(Ordering::Relaxed);
            // Free, or taken in the parent before this process was forked.
            if cur != mine
                && self
                    .lock
                    .compare_exchange_weak(cur, mine, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return HoldsGuard(self);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    // Read and written only under the lock, whose acquire and release order them.
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.cells[i].load(Ordering::Relaxed)
    }

    pub(crate) fn set(&self, i: usize, v: u64) {
        self.cells[i].store(v, Ordering::Relaxed)
    }

    /// The slot of the load of `tag` riding on cell `i`, if one runs.
    pub(crate) fn ride(&self, i: usize, tag: u64) -> Option<&AtomicU64> {
        let want = tag | i as u64;
        self.rides
            .iter()
            .find(|r| r.load(Ordering::Relaxed) == want)
    }

    /// Records a load of `tag` riding on cell `i`; false when every slot is in use.
    pub(crate) fn add_ride(&self, i: usize, tag: u64) -> bool {
        let free = self.rides.iter().find(|r| r.load(Ordering::Relaxed) == 0);
        free.map(|r| r.store(tag | i as u64, Ordering::Relaxed))
            .is_some()
    }

    /// Forgets every load riding on cell `i` (its hold lapsed and was replaced).
    pub(crate) fn drop_rides(&self, i: usize) {
        for r in &self.rides {
            if r.load(Ordering::Relaxed) & RIDERS == i as u64 {
                r.store(0, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_child_forked_while_another_thread_held_the_lock_takes_it() {
        crate::fork::track_forks();
        let holds = Holds::new();
        let guard = holds.lock();
        let child = crate::sys::in_child(Duration::from_secs(10), || drop(holds.lock()));
        drop(guard);
        assert_eq!(
            child,
            Some(true),
            "the child waited for a lock its parent's thread held"
        );
    }
}
