//! Crash injection for tests: a process arms a point, and the next write that
//! reaches it SIGKILLs its own process while holding the shard lock. Costs one
//! relaxed load per point when disarmed. [`Point::Panic`] instead makes the
//! next write panic with the lock held, as an engine bug or an unforeseen
//! damage would: the segment must contain it.
//!
//! Built only with the `failpoints` feature (the tests and the development
//! build); without it every point is an empty function and nothing can arm one.

#[cfg(feature = "failpoints")]
use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(feature = "failpoints")]
static ARMED: AtomicU32 = AtomicU32::new(0);

/// The places a write can be killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))] // only armed with the feature
pub enum Point {
    /// Lock taken, intent written, nothing else done.
    Locked = 1,
    /// New record appended to the log, not yet published.
    Appended = 2,
    /// Key's stamp made odd.
    StampOdd = 3,
    /// New slot word published, stamp still odd.
    Published = 4,
    /// In the middle of evicting or moving a record at a ring's tail.
    Evict = 5,
    /// Not a kill: the next write panics once its shard lock is taken.
    Panic = 6,
    /// Not a kill: the next write to reach [`Point::Unlocked`] waits there
    /// until [`arm`]`(None)` (once), so a test can put other calls between
    /// a write's start and its lock.
    Pause = 7,
    /// A write's arguments checked and its tags resolved, the lock not yet
    /// asked for (only [`Point::Pause`] stops here).
    Unlocked = 8,
}

/// What [`ARMED`] holds while a write waits at a [`Point::Pause`].
#[cfg(feature = "failpoints")]
const PAUSED: u32 = u32::MAX;

#[cfg(feature = "failpoints")]
impl Point {
    /// Parses a point name.
    pub fn parse(name: &str) -> Option<Point> {
        Some(match name {
            "locked" => Point::Locked,
            "appended" => Point::Appended,
            "stamp_odd" => Point::StampOdd,
            "published" => Point::Published,
            "evict" => Point::Evict,
            "panic" => Point::Panic,
            "pause" => Point::Pause,
            _ => return None,
        })
    }
}

/// Arms `p` for this process (`None` disarms, and lets a paused write go on).
#[cfg(feature = "failpoints")]
pub fn arm(p: Option<Point>) {
    ARMED.store(p.map_or(0, |p| p as u32), Ordering::SeqCst);
}

/// Kills the process if `p` is armed; panics at [`Point::Locked`] if
/// [`Point::Panic`] is (once: the point disarms itself); waits at
/// [`Point::Unlocked`] if [`Point::Pause`] is.
#[cfg(feature = "failpoints")]
#[inline(always)]
pub fn hit(p: Point) {
    let armed = ARMED.load(Ordering::Relaxed);
    if armed != 0 {
        fire(armed, p);
    }
}

/// Without the feature: nothing is ever armed.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_: Point) {}

#[cfg(feature = "failpoints")]
#[cold]
#[inline(never)]
fn fire(armed: u32, p: Point) {
    if armed == p as u32 {
        crate::sys::kill_self();
    }
    if armed == Point::Pause as u32 && p == Point::Unlocked {
        if ARMED
            .compare_exchange(armed, PAUSED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            while ARMED.load(Ordering::SeqCst) == PAUSED {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        return;
    }
    if armed == Point::Panic as u32 && p == Point::Locked {
        ARMED.store(0, Ordering::SeqCst);
        panic!("failpoint: a write panicked with its shard lock held");
    }
}

/// Whether a write waits at [`Point::Unlocked`] (see [`Point::Pause`]).
#[cfg(feature = "failpoints")]
pub fn paused() -> bool {
    ARMED.load(Ordering::SeqCst) == PAUSED
}

/// Test hook: leaves the stamp of the key hashed as `kh` odd (`odd`), as a
/// write in progress or killed mid-way does, or makes it even again.
#[cfg(feature = "failpoints")]
pub fn tear_stamp(seg: &crate::Segment, kh: &crate::KeyHash, odd: bool) {
    let w = seg.stamp_at(seg.stamp_index(kh));
    if odd {
        w.fetch_add(1, Ordering::AcqRel);
    } else {
        w.fetch_sub(1, Ordering::AcqRel);
    }
}
