//! Taking a shard's lock: waiting at most `lock_timeout`, repairing the
//! shard when its previous owner died holding the lock, and the guard that
//! unlocks it (ending a write's intent first when a panic unwinds through it).

use std::sync::atomic::Ordering;

use crate::error::{Error, OpenCause, Result};
use crate::invalid::remove_mark;
use crate::layout::Stat;
use crate::lock::{LockError, Locked};
use crate::segment::Segment;
use crate::shard::Shard;
use crate::stamps;

impl Segment {
    /// Locks shard `s` for a write, repairing it first when its previous
    /// owner died holding the lock.
    pub(crate) fn lock(&self, s: u32) -> Result<Guard<'_>> {
        // Every write path checks first, naming itself; this is the backstop,
        // since locking writes to the mapping.
        self.check_writable("taking a shard lock")?;
        let sh = self.shard(s);
        match sh.mutex().lock(self.lock_timeout) {
            Ok(Locked::Clean) => Ok(Guard {
                sh,
                owner_died: false,
            }),
            Ok(Locked::OwnerDied) => {
                let mut g = Guard {
                    sh,
                    owner_died: true,
                };
                let rep = sh.repair(true);
                sh.bump(Stat::LockRepairs, 1);
                if rep.reset {
                    sh.note_reset();
                }
                if sh.mutex().make_consistent().is_ok() {
                    g.owner_died = false;
                }
                Ok(g)
            }
            Err(LockError::Timeout) => {
                sh.bump(Stat::LockTimeouts, 1);
                Err(Error::LockTimeout)
            }
            Err(LockError::Damaged) => Err(Error::open(
                OpenCause::Damaged,
                format!(
                    "segment file {} cannot be used: the lock of shard {s} is damaged. \
                     Remove the file once no process uses it ({}): the next open makes a new one",
                    self.path.display(),
                    remove_mark(true)
                ),
            )),
            Err(LockError::Os(e)) => Err(Error::Io(format!("cannot lock shard {s}"), e)),
        }
    }
}

/// Holds a shard lock; unlocks on drop (marking the mutex consistent first if a
/// repair was cut short, so it never becomes unrecoverable).
pub(crate) struct Guard<'a> {
    pub(crate) sh: Shard<'a>,
    owner_died: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.end_intent();
        }
        let m = self.sh.mutex();
        if self.owner_died {
            let _ = m.make_consistent();
        }
        m.unlock();
    }
}

impl Guard<'_> {
    /// Ends the intent of a write that stopped halfway (a panic unwinding
    /// with the lock held): evens the stamp it may have left odd and wakes its
    /// waiters, as the repair after a crash does. Nothing here can panic: the
    /// stamp index is checked against the table.
    #[cold]
    fn end_intent(&self) {
        let sh = &self.sh;
        if sh.intent_active().load(Ordering::Acquire) == 0 {
            return;
        }
        let i = sh.intent_stamp().load(Ordering::Relaxed);
        if i < sh.g.nstamps {
            let st = sh.stamp(i);
            if stamps::is_odd(st.load(Ordering::Acquire)) {
                st.fetch_add(1, Ordering::SeqCst);
                stamps::futex_wake(st);
            }
        }
        sh.intent_active().store(0, Ordering::Release);
    }
}
