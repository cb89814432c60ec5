//! Which process of a host reads the stream: a lease in the segment (the
//! holder's pid and its heartbeat, [`words`](crate::words)). Every process that
//! opens a joined cache stands for election; when the holder dies, or stops
//! beating for [`STALE_MS`], another takes over and resumes from the position
//! the holder left. A process that does nothing else can follow the stream
//! instead (`ziggurat follow`, a dedicated reader): while it lives, the
//! workers stand aside, and a worker holding the lease hands it back.

use ziggurat_cache::process_alive;

/// A holder whose heartbeat is older than this is taken over, in ms.
pub const STALE_MS: u64 = 3000;

/// How often a process that does not hold the lease looks at it, in ms.
pub const CHECK_MS: u64 = 250;

/// The lease's words as a process read them, with the monotonic clock (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lease {
    /// The holder's pid (0: none).
    pub holder: u64,
    /// Its last heartbeat.
    pub beat_ms: u64,
    /// A dedicated reader's pid (0: none).
    pub follower: u64,
    /// When it last asked for the lease.
    pub follower_at_ms: u64,
    /// The monotonic clock now.
    pub now_ms: u64,
}

/// What a process does about the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// It holds the lease: follow the stream.
    Hold,
    /// It holds it, but a dedicated reader follows for the host: give it back
    /// (swap its pid for 0).
    HandBack,
    /// Another live process holds it: stand by.
    Wait,
    /// Another live process holds it, and this dedicated reader goes on
    /// asking for it (stamp the time it asked): the holder stands aside.
    Ask,
    /// Nobody holds it, or a dead or silent process does: take it (swap the
    /// holder's pid for this one's, then beat).
    Claim,
}

fn alive(pid: u64) -> bool {
    u32::try_from(pid).is_ok_and(process_alive)
}

/// Whether a worker `me` stands aside for a dedicated reader: another live
/// process that holds the lease and beats, or asked for it within
/// [`STALE_MS`] (a pid alone could be another process's by now). A dedicated
/// reader never stands aside.
pub fn standing_aside(me: u64, dedicated: bool, l: &Lease) -> bool {
    if dedicated || l.follower == 0 || l.follower == me || !alive(l.follower) {
        return false;
    }
    let since = if l.holder == l.follower {
        l.beat_ms
    } else {
        l.follower_at_ms
    };
    l.now_ms.saturating_sub(since) < STALE_MS
}

/// What process `me` (a dedicated reader when `dedicated`) does about the
/// lease `l`.
///
/// ```
/// use ziggurat_cluster::{take, Lease, Take};
/// let me = std::process::id() as u64;
/// assert_eq!(take(me, false, &Lease { now_ms: 10_000, ..Lease::default() }), Take::Claim);
/// assert_eq!(take(me, false, &Lease { holder: me, now_ms: 10_000, ..Lease::default() }), Take::Hold);
/// // A live holder that beat a second ago keeps it.
/// let held = Lease { holder: 1, beat_ms: 9_000, now_ms: 10_000, ..Lease::default() };
/// assert_eq!(take(me, false, &held), Take::Wait);
/// assert_eq!(take(me, true, &held), Take::Ask);
/// // A holder silent for longer than STALE_MS is taken over.
/// assert_eq!(take(me, false, &Lease { holder: 1, beat_ms: 1_000, now_ms: 10_000, ..Lease::default() }), Take::Claim);
/// ```
pub fn take(me: u64, dedicated: bool, l: &Lease) -> Take {
    if standing_aside(me, dedicated, l) {
        return if l.holder == me {
            Take::HandBack
        } else {
            Take::Wait
        };
    }
    if l.holder == me {
        return Take::Hold;
    }
    if l.holder != 0 && alive(l.holder) && l.now_ms.saturating_sub(l.beat_ms) < STALE_MS {
        return if dedicated { Take::Ask } else { Take::Wait };
    }
    Take::Claim
}
