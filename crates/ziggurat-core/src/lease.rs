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
//! itself. Not for a cell its own process holds for another key: a caller of
//! the holding process whose key differs is told [`Lease::Busy`] and loads
//! beside the lease instead of waiting for itself (a loader that fetches
//! another key of the same cell, an HTTP cache's fill that runs an app which
//! fetches, would otherwise wait out the lease's deadline). Such a load rides
//! on the cell: the handle counts it, and the cell is given back only when
//! the lease's own load and every load beside it are done. Otherwise a caller
//! of another process, woken by the first release, would find the second key
//! still missing and load it a second time.
//!
//! A lease lapses at its deadline, so a holder that died (or whose pid was
//! reused) holds nobody past it; callers can also take over earlier from a
//! holder whose process is gone (`take_over`, compare-and-set on the holder
//! they saw, so exactly one of them wins).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::hash::{reduce, KeyHash};
use crate::holds::{key_tag, RIDERS};
use crate::layout::{H_LEASES, LEASE_CELL, LEASE_CELLS};
use crate::segment::Segment;
use crate::stamps;

/// What a [`Segment::lease_try`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// The caller holds the lease now.
    Taken,
    /// This process holds the cell for another key: load beside the lease
    /// (waiting would wait for this process's own load, which may be the
    /// caller's), then [`Segment::lease_release`] as after [`Lease::Taken`]:
    /// the cell is kept until that release.
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

    /// Every lease cell as a read-only handle sees it, without touching it:
    /// `(pid, releases)` per cell, `pid` the holder's (0 when free or lapsed),
    /// `releases` the cell's release counter. None for a writable handle,
    /// which could only look at a lease by taking it.
    pub fn lease_cells(&self) -> Option<Vec<(u32, u32)>> {
        if !self.read_only {
            return None;
        }
        let now_s = crate::clock::now_ms() / 1000;
        let cells = (0..LEASE_CELLS as usize).map(|i| {
            let c = self.lease_cell(i);
            let seq = c.seq.load(Ordering::SeqCst);
            let holder = c.holder.load(Ordering::SeqCst);
            let live = holder != 0 && (holder >> 32) > now_s;
            (if live { holder_pid(holder) } else { 0 }, seq)
        });
        Some(cells.collect())
    }

    /// Takes the lease of the key hashed as `kh` (by this segment) for
    /// process `pid` for `ttl` seconds, if it is free or lapsed. A read-only
    /// handle never takes it: it reports the lease as held by its current
    /// holder (0 when free).
    pub fn lease_try(&self, kh: &KeyHash, pid: u32, ttl: f64) -> Lease {
        let i = Self::lease_index(kh);
        let c = self.lease_cell(i);
        if self.read_only {
            let seq = c.seq.load(Ordering::SeqCst);
            let holder = c.holder.load(Ordering::SeqCst);
            return Lease::Held { holder, seq };
        }
        let _g = self.holds.lock();
        // seq first: a release after this read changes it, so a waiter that
        // passes this seq never sleeps through that release.
        let seq = c.seq.load(Ordering::SeqCst);
        let mut cur = c.holder.load(Ordering::SeqCst);
        while cur == 0 || lapsed(cur) {
            match c.holder.compare_exchange(
                cur,
                holder_word(pid, ttl),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    // Loads that rode on a hold of this handle that lapsed are
                    // forgotten: their releases find nothing to give back.
                    if self.holds.get(i) & RIDERS != 0 {
                        self.holds.drop_rides(i);
                    }
                    self.holds.set(i, key_tag(kh));
                    return Lease::Taken;
                }
                Err(now) => cur = now,
            }
        }
        if holder_pid(cur) != pid {
            return Lease::Held { holder: cur, seq };
        }
        let rec = self.holds.get(i);
        let tag = key_tag(kh);
        if rec & !RIDERS == tag || self.holds.ride(i, tag).is_some() {
            // The key's own load runs in another thread of this process: wait
            // for it (the cell is given back once it is stored).
            return Lease::Held { holder: cur, seq };
        }
        if rec != 0 {
            if !self.holds.add_ride(i, tag) {
                // Too many loads beside leases at once: wait for the cell.
                return Lease::Held { holder: cur, seq };
            }
            self.holds.set(i, rec + 1);
            // The cell is now held until this load ends too: its deadline
            // moves to cover it, as the deadline of a lease taken now would.
            let later = holder_word(pid, ttl);
            if later > cur {
                let _ = c
                    .holder
                    .compare_exchange(cur, later, Ordering::SeqCst, Ordering::SeqCst);
            }
        }
        // rec == 0: another handle of this process holds the cell (a second
        // Cache on the same file). Its load cannot be waited for, nor counted
        // here: this load rides uncounted, and its release gives back nothing.
        Lease::Busy
    }

    /// [`Segment::lease_try`], then the key's stamp in `main` (hashed there as
    /// `main_kh`) and in this segment, read after the compare-and-set: the
    /// lease and the words the read that follows starts from, in one call.
    pub fn lease_try_stamped(
        &self,
        kh: &KeyHash,
        pid: u32,
        ttl: f64,
        main: &Segment,
        main_kh: &KeyHash,
    ) -> (Lease, u32, u32) {
        let lease = self.lease_try(kh, pid, ttl);
        let m = main.stamp_word(main_kh).load();
        (lease, m, self.stamp_word(kh).load())
    }

    /// Gives back what the key hashed as `kh` holds through this handle for
    /// `pid`: the lease taken for it ([`Lease::Taken`]) or a load beside
    /// another key's ([`Lease::Busy`]). The cell is freed, and its waiters
    /// woken, when neither the lease's own load nor any load beside it still
    /// runs. False if the key held nothing here (a lease that lapsed and was
    /// taken over, a load that rode uncounted; always false read-only).
    pub fn lease_release(&self, kh: &KeyHash, pid: u32) -> bool {
        if self.read_only {
            return false;
        }
        let i = Self::lease_index(kh);
        let c = self.lease_cell(i);
        let freed = {
            let _g = self.holds.lock();
            let rec = self.holds.get(i);
            let (tag, riders) = (rec & !RIDERS, rec & RIDERS);
            let left = if tag == key_tag(kh) {
                riders
            } else if let Some(ride) = self.holds.ride(i, key_tag(kh)) {
                ride.store(0, Ordering::Relaxed);
                tag | riders.saturating_sub(1)
            } else {
                return false;
            };
            self.holds.set(i, left);
            if left != 0 {
                return true;
            }
            let cur = c.holder.load(Ordering::SeqCst);
            let freed = cur != 0
                && holder_pid(cur) == pid
                && c.holder
                    .compare_exchange(cur, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
            if freed {
                c.seq.fetch_add(1, Ordering::SeqCst);
            }
            freed
        };
        // Woken outside the lock: the system call is the slow part.
        if freed && c.waiters.load(Ordering::SeqCst) > 0 {
            stamps::futex_wake(c.seq);
        }
        freed
    }

    /// Replaces the holder `seen` (whose process is gone) by `pid`; true for
    /// exactly one of several callers that saw the same holder (always false
    /// read-only).
    pub fn lease_take_over(&self, kh: &KeyHash, seen: u64, pid: u32, ttl: f64) -> bool {
        if self.read_only || seen == 0 {
            return false;
        }
        let i = Self::lease_index(kh);
        let c = self.lease_cell(i);
        let _g = self.holds.lock();
        let won = c
            .holder
            .compare_exchange(
                seen,
                holder_word(pid, ttl),
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if won {
            self.holds.drop_rides(i);
            self.holds.set(i, key_tag(kh));
        }
        won
    }

    /// Whether the lease of the key hashed as `kh` was released since `seq` was read (see
    /// [`Lease::Held`]), without waiting: for a caller that watches many leases from one
    /// thread. It does not count as a waiter, so a release does not wake it.
    pub fn lease_released(&self, kh: &KeyHash, seq: u32) -> bool {
        self.lease_cell(Self::lease_index(kh))
            .seq
            .load(Ordering::SeqCst)
            != seq
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
