//! Single flight: at most one loader per key per host, by the load leases of
//! the cached-miss segment. Front ends drive it the same way whether they call
//! or await the loader:
//!
//! 1. [`Flight::begin`] after a read that missed: `Load` (this process holds the
//!    lease; when `recheck` is set, read again first, since a value may have
//!    landed) or `Wait` (another process or thread loads). Or [`Flight::claim`]
//!    before the read, then the read: a value found there answers the call
//!    (the lease given back at once if taken), else the same `Load` or `Wait`.
//! 2. `Load`: run the loader, store its result, then [`Flight::release`], which
//!    wakes the waiters. A holder that dies is replaced by one waiter (a
//!    compare-and-set on the holder it saw); one that hangs holds the others at
//!    most until the lease's deadline.
//! 3. `Wait`: [`Flight::wait`] (blocking: off any event loop), read again, and
//!    begin again if there is still nothing.
//!
//! Early refreshes use the same cells under a derived key, so at most one
//! refresh of a key runs per host.

use std::time::Duration;

use ziggurat_core::{current_pid, holder_pid, Lease};
use ziggurat_core::{KeyHash, Segment};

/// What a caller does after a read that found nothing fresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// This process holds the lease: load, store, then [`Flight::release`].
    /// `main_stamp` is the key's stamp before the load (a cached miss stored
    /// for it counts only while the stamp still has this value). With
    /// `recheck`, read the key again first: if a value landed meanwhile, use
    /// it and release. `took_over`: the lease was taken from a holder whose
    /// process is gone.
    Load {
        /// The key's main stamp before the load.
        main_stamp: u32,
        /// Read the key again before loading.
        recheck: bool,
        /// The lease was taken from a dead holder.
        took_over: bool,
    },
    /// Another caller holds the lease: [`Flight::wait`] for `seq` to move.
    Wait {
        /// The holder word seen (deadline and pid).
        holder: u64,
        /// The lease's release counter seen: wait for it to move.
        seq: u32,
    },
}

/// The stamps of a key in both segments, as read before a probe that found
/// nothing: a later lease holder compares them instead of reading again.
/// None while either stamp is odd (a write in progress).
pub fn snapshot(main_stamp: u32, neg_stamp: u32) -> Option<u64> {
    (main_stamp & 1 == 0 && neg_stamp & 1 == 0)
        .then_some(main_stamp as u64 | (neg_stamp as u64) << 32)
}

/// Whether the process `pid` exists (a holder whose process is gone can be
/// replaced at once instead of at its deadline).
pub fn process_alive(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The key under which the refresh lease of `key` is taken.
fn refresh_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(b"\x00refresh:");
    k.extend_from_slice(key);
    k
}

/// A key hashed once for both segments of a cache (each has its own seed):
/// every step of a miss uses these instead of hashing the key again.
#[derive(Clone, Copy, Debug)]
pub struct FlightKey {
    // Read in place along a miss (no accessor call between the steps).
    pub(crate) main: KeyHash,
    pub(crate) neg: KeyHash,
}

impl FlightKey {
    /// The key's hashes as `main.hash(key)` and `neg.hash(key)` made them: a
    /// read that hashed the key already hands them on instead of hashing again.
    pub fn from_hashes(main: KeyHash, neg: KeyHash) -> FlightKey {
        FlightKey { main, neg }
    }

    /// The key's hash in the main segment (what a write of its value takes).
    pub fn main(&self) -> &KeyHash {
        &self.main
    }

    /// The key's hash in the cached-miss segment.
    pub fn neg(&self) -> &KeyHash {
        &self.neg
    }
}

/// What [`Flight::claim`] found: the key hashed for both segments, its
/// stamps there as read just after the lease's compare-and-set (what the read
/// that follows starts from, see [`crate::Cache::read`]) and what to do next.
#[derive(Clone, Copy, Debug)]
pub struct Claim {
    /// The key's hashes.
    pub keys: FlightKey,
    /// The key's stamp in the main segment.
    pub main_stamp: u32,
    /// The key's stamp in the cached-miss segment.
    pub neg_stamp: u32,
    /// Load (this process holds the lease) or wait.
    pub next: Next,
}

/// The load and refresh leases of one cache: its main segment (whose stamps
/// say whether a key changed) and its cached-miss segment (which holds the
/// lease cells).
pub struct Flight<'a> {
    main: &'a Segment,
    neg: &'a Segment,
}

impl<'a> Flight<'a> {
    /// The leases of the cache made of `main` and `neg`.
    pub fn new(main: &'a Segment, neg: &'a Segment) -> Flight<'a> {
        Flight { main, neg }
    }

    /// The key's hashes in both segments.
    pub fn key(&self, key: &[u8]) -> FlightKey {
        FlightKey {
            main: self.main.hash(key),
            neg: self.neg.hash(key),
        }
    }

    /// The key's stamp in the main segment now.
    pub fn main_stamp(&self, k: &FlightKey) -> u32 {
        self.main.stamp_word(&k.main).load()
    }

    /// The key's stamps in both segments now, as [`snapshot`] packs them.
    pub fn stamps(&self, k: &FlightKey) -> Option<u64> {
        let n = self.neg.stamp_word(&k.neg).load();
        snapshot(self.main_stamp(k), n)
    }

    /// Takes the load lease of the key for `timeout` seconds, or says who
    /// holds it. `snap` comes from the read that missed ([`Flight::stamps`]
    /// before the probe); when the key has not changed since, no second read
    /// is needed.
    pub fn begin(&self, k: &FlightKey, snap: Option<u64>, timeout: f64) -> Next {
        self.take(k, timeout, Some(snap))
    }

    /// Takes the load lease of `key` for `timeout` seconds before any read
    /// of it, or says who holds it: the caller reads the key after this, so
    /// nothing needs reading again (`recheck` is false). The key is hashed for
    /// both segments here, with the lines its read and write touch on their
    /// way, and its stamps are read just after the compare-and-set: the read
    /// that follows starts from them. Taking the lease first costs a release
    /// when the read then finds a value, but the compare-and-set no longer
    /// waits for that read's loads from memory, as it must when it follows them.
    pub fn claim(&self, key: &[u8], timeout: f64) -> Claim {
        let keys = FlightKey {
            main: self.main.hash_prefetch(key, true),
            neg: self.neg.hash_prefetch(key, false),
        };
        let pid = current_pid();
        let (lease, main_stamp, neg_stamp) = self
            .neg
            .lease_try_stamped(&keys.neg, pid, timeout, self.main, &keys.main);
        let next = match lease {
            // Busy: as in `take`.
            Lease::Taken | Lease::Busy => Next::Load {
                main_stamp,
                recheck: false,
                took_over: false,
            },
            Lease::Held { holder, seq } => self.held(&keys, holder, seq, pid, timeout, None),
        };
        Claim {
            keys,
            main_stamp,
            neg_stamp,
            next,
        }
    }

    /// The lease, for a caller that read the key before (`read`: the snapshot
    /// it took then) or reads it after (`None`).
    fn take(&self, k: &FlightKey, timeout: f64, read: Option<Option<u64>>) -> Next {
        let pid = current_pid();
        match self.neg.lease_try(&k.neg, pid, timeout) {
            // Busy: this process loads another key of the same cell, perhaps in this
            // very call's caller: load this one beside that lease rather than wait
            // for it. The cell stays held until this load's release too.
            Lease::Taken | Lease::Busy => Next::Load {
                main_stamp: self.main_stamp(k),
                // A read made before the lease may be out of date when the
                // key's stamps moved since its snapshot.
                recheck: read.is_some_and(|snap| snap.is_none_or(|s| self.stamps(k) != Some(s))),
                took_over: false,
            },
            Lease::Held { holder, seq } => self.held(k, holder, seq, pid, timeout, read),
        }
    }

    /// The lease is held by `holder`: wait for it, or take it over when its
    /// process is gone (a read made before, `read`, is then checked again).
    fn held(
        &self,
        k: &FlightKey,
        holder: u64,
        seq: u32,
        pid: u32,
        timeout: f64,
        read: Option<Option<u64>>,
    ) -> Next {
        let dead = !process_alive(holder_pid(holder));
        if !(dead && self.neg.lease_take_over(&k.neg, holder, pid, timeout)) {
            return Next::Wait { holder, seq };
        }
        Next::Load {
            main_stamp: self.main_stamp(k),
            recheck: read.is_some(),
            took_over: true,
        }
    }

    /// Sleeps until the lease seen as `seq` is released or `timeout` passes;
    /// whether it was released.
    pub fn wait(&self, k: &FlightKey, seq: u32, timeout: Duration) -> bool {
        self.neg.lease_wait(&k.neg, seq, timeout)
    }

    /// Whether the lease seen as `seq` was released, without waiting.
    pub fn released(&self, k: &FlightKey, seq: u32) -> bool {
        self.neg.lease_released(&k.neg, seq)
    }

    /// Gives back this process's lease of the key, waking its waiters.
    pub fn release(&self, k: &FlightKey) {
        self.neg.lease_release(&k.neg, current_pid());
    }

    /// Gives back the lease a load of `key` holds: the refresh lease of an
    /// early refresh, else the load lease (hashed as `keys` when known).
    pub fn end_load(&self, key: &[u8], refreshing: bool, keys: Option<FlightKey>) {
        match (refreshing, keys) {
            (true, _) => self.end_refresh(key),
            (false, Some(fk)) => self.release(&fk),
            (false, None) => self.release(&self.key(key)),
        }
    }

    /// Takes the refresh lease of `key` (one early refresh per key per host);
    /// whether this process now runs the refresh.
    pub fn begin_refresh(&self, key: &[u8], timeout: f64) -> bool {
        let k = self.neg.hash(&refresh_key(key));
        match self.neg.lease_try(&k, current_pid(), timeout) {
            Lease::Taken => true,
            // The cell is this process's for another key's refresh or load: no
            // refresh now (the next hit asks again), so give back the ride.
            Lease::Busy => {
                self.neg.lease_release(&k, current_pid());
                false
            }
            Lease::Held { .. } => false,
        }
    }

    /// Gives back the refresh lease of `key`.
    pub fn end_refresh(&self, key: &[u8]) {
        let k = self.neg.hash(&refresh_key(key));
        self.neg.lease_release(&k, current_pid());
    }
}
