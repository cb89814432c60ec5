//! Load leases: which process is loading a key right now (single flight).
//!
//! A lease is one 16-byte cell in the segment's header, chosen by the key's
//! hash: `holder: u64` (0 = free, else `deadline_s << 32 | pid`), `seq: u32`
//! (bumped by every release, so waiters can sleep on it with a futex) and
//! `waiters: u32` (so a release makes the wake-up system call only when
//! someone sleeps). Taking is one compare-and-set, releasing another: far
//! cheaper than writing and deleting a record, which is what makes `fetch`'s
//! single flight affordable on every miss.
//!
//! Keys that share a cell share its lease: a caller may wait for the load of
//! another key, then finds its own key still missing and takes the lease
//! itself. Not for a cell its own process holds for another key: each handle
//! remembers the key of every cell it holds, and a caller of the holding
//! process whose key differs is told [`Lease::Busy`] instead of waiting for
//! itself (a loader that fetches another key of the same cell, an HTTP
//! cache's fill that runs an app which fetches, would otherwise wait out the
//! lease's deadline). A lease lapses at its deadline, so a holder that died (or whose pid
//! was reused) holds nobody past it; callers can also take over earlier from a
//! holder whose process is gone (`take_over`, compare-and-set on the holder
//! they saw, so exactly one of them wins).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::hash::{reduce, KeyHash};
use crate::layout::{H_LEASES, LEASE_CELL, LEASE_CELLS};
use crate::segment::Segment;
use crate::stamps;

/// What a [`Segment::lease_try`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// The caller holds the lease now.
    Taken,
    /// This process holds the cell for another key: load without the lease
    /// (waiting would wait for this process's own load, which may be the
    /// caller's).
    Busy,
    /// Another caller holds it: `holder` as read, and the cell's `seq` read
    /// before it (pass it to [`Segment::lease_wait`]).
    Held {
        /// The holder word: `deadline_s << 32 | pid`.
        holder: u64,
        /// The cell's release counter, read before `holder`.
        seq: u32,
    },
}

/// The pid in a holder word.
#[inline]
pub fn holder_pid(holder: u64) -> u32 {
    holder as u32
}

struct Cell<'a> {
    holder: &'a AtomicU64,
    seq: &'a AtomicU32,
    waiters: &'a AtomicU32,
}

fn holder_word(pid: u32, ttl: f64) -> u64 {
    // Rounded up to whole seconds, at least one: a lease never lapses early.
    let secs = ttl.clamp(0.0, u32::MAX as f64 / 2.0).ceil().max(1.0) as u64;
    let deadline = (now_ms() / 1000 + secs + 1).min(u32::MAX as u64);
    deadline << 32 | pid as u64
}

fn lapsed(holder: u64) -> bool {
    (holder >> 32) <= now_ms() / 1000
}

/// The key a handle remembers for a cell it holds (never 0, which means none).
fn key_id(kh: &KeyHash) -> u64 {
    kh.h | 1
}

impl Segment {
    fn lease_index(kh: &KeyHash) -> usize {
        reduce((kh.h2 >> 8) as u32, LEASE_CELLS) as usize
    }

    fn lease_cell(&self, i: usize) -> Cell<'_> {
        let off = H_LEASES + i * LEASE_CELL;
        Cell {
            holder: self.shm.u64_at(off),
            seq: self.shm.u32_at(off + 8),
            waiters: self.shm.u32_at(off + 12),
        }
    }

    /// Takes the lease of the key hashed as `kh` (by this segment) for process `pid` for `ttl` seconds, if it is
    /// free or lapsed. A read-only handle never takes it: it reports the
    /// lease as held by its current holder (0 when free).
    pub fn lease_try(&self, kh: &KeyHash, pid: u32, ttl: f64) -> Lease {
        let i = Self::lease_index(kh);
        let c = self.lease_cell(i);
        // seq first: a release after this read changes it, so a waiter that
        // passes this seq never sleeps through that release.
        let seq = c.seq.load(Ordering::SeqCst);
        let mut cur = c.holder.load(Ordering::SeqCst);
        if self.read_only {
            return Lease::Held { holder: cur, seq };
        }
        while cur == 0 || lapsed(cur) {
            match c.holder.compare_exchange(
                cur,
                holder_word(pid, ttl),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    self.held[i].store(key_id(kh), Ordering::Relaxed);
                    return Lease::Taken;
                }
                Err(now) => cur = now,
            }
        }
        if holder_pid(cur) == pid && self.held[i].load(Ordering::Relaxed) != key_id(kh) {
            return Lease::Busy;
        }
        Lease::Held { holder: cur, seq }
    }

    /// Gives up `pid`'s lease of the key hashed as `kh` and wakes its waiters; false if `pid`
    /// did not hold it for this key through this handle (it lapsed and was taken over, or
    /// the cell was [`Lease::Busy`] with another key; always false read-only).
    pub fn lease_release(&self, kh: &KeyHash, pid: u32) -> bool {
        if self.read_only {
            return false;
        }
        let i = Self::lease_index(kh);
        // Forgotten first: once the holder word is 0 another thread may take the
        // cell and record its own key.
        let mine =
            self.held[i].compare_exchange(key_id(kh), 0, Ordering::Relaxed, Ordering::Relaxed);
        if mine.is_err() {
            return false;
        }
        let c = self.lease_cell(i);
        let cur = c.holder.load(Ordering::SeqCst);
        if cur == 0 || holder_pid(cur) != pid {
            return false;
        }
        let released = c
            .holder
            .compare_exchange(cur, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if released {
            c.seq.fetch_add(1, Ordering::SeqCst);
            if c.waiters.load(Ordering::SeqCst) > 0 {
                stamps::futex_wake(c.seq);
            }
        }
        released
    }

    /// Replaces the holder `seen` (whose process is gone) by `pid`; true for
    /// exactly one of several callers that saw the same holder (always false
    /// read-only).
    pub fn lease_take_over(&self, kh: &KeyHash, seen: u64, pid: u32, ttl: f64) -> bool {
        if self.read_only {
            return false;
        }
        let i = Self::lease_index(kh);
        let c = self.lease_cell(i);
        let won = seen != 0
            && c.holder
                .compare_exchange(
                    seen,
                    holder_word(pid, ttl),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok();
        if won {
            self.held[i].store(key_id(kh), Ordering::Relaxed);
        }
        won
    }

    /// Sleeps until the lease of the key hashed as `kh` is released after `seq` was read (see
    /// [`Lease::Held`]) or `timeout` passes; returns whether it was.
    pub fn lease_wait(&self, kh: &KeyHash, seq: u32, timeout: Duration) -> bool {
        let c = self.lease_cell(Self::lease_index(kh));
        let deadline = Instant::now() + timeout;
        // A read-only handle cannot register as a waiter, so a release may not
        // wake it: it notices the change at the latest when its timeout ends.
        let registered = !self.read_only;
        if registered {
            c.waiters.fetch_add(1, Ordering::SeqCst);
        }
        let changed = loop {
            if c.seq.load(Ordering::SeqCst) != seq {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            stamps::futex_wait(c.seq, seq, deadline - now);
        };
        if registered {
            c.waiters.fetch_sub(1, Ordering::SeqCst);
        }
        changed
    }
}
