//! Writes that depend on the entry already there (`add`, `incr`, `touch`) or
//! on nothing having changed since a snapshot (`fill`). Each is one
//! [`Segment::rewrite`], so the check and the write happen under the key's
//! shard lock and no other process's write can come between them.

use ziggurat_core::now_ms;
use ziggurat_core::{Error as CoreError, Rewrite, Segment};

use crate::entry::{counter_payload, encode, split, Kind, Trailer};
use crate::error::Error;
use crate::ttl::Lifetime;

/// The payload and trailer of a live record, if it is fresh at `now`.
fn fresh(cur: Option<(&[u8], u64)>, now: u64) -> Option<(&[u8], Trailer, u64)> {
    let (stored, expiry) = cur?;
    let (payload, t) = split(stored)?;
    (!t.stale_at(now)).then_some((payload, t, expiry))
}

/// A new record for `payload` of `kind` living `life` from now, with `tags`.
fn fresh_record(payload: &[u8], kind: Kind, life: &Lifetime, tags: Vec<u64>) -> Rewrite {
    let t = Trailer::starting_now(kind, life.ttl_ms);
    Rewrite {
        value: encode(payload, &t),
        expiry: life.record_expiry(t.soft),
        tags: Some(tags),
    }
}

/// Stores `payload` (of `kind`) under `key` only if the key holds no fresh
/// entry (a stale one, kept for fail-safe reads, does not count). Returns
/// whether it stored. Of several processes adding the same key at once,
/// exactly one stores.
pub fn add(
    seg: &Segment,
    key: &[u8],
    payload: &[u8],
    kind: Kind,
    life: &Lifetime,
    tags: &[&[u8]],
) -> Result<bool, CoreError> {
    let refs = seg.tag_refs(tags)?;
    seg.rewrite(key, |cur| {
        fresh(cur, now_ms())
            .is_none()
            .then(|| fresh_record(payload, kind, life, refs))
    })
}

/// What a reader saw before copying an entry in from another tier: the key's
/// stamp, the segment epoch and its count of tag invalidations. A later
/// [`fill`] stores only if all three are unchanged, so a delete, a clear or a
/// tag invalidation that lands while the entry travels always wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    stamp: u32,
    epoch: u64,
    tag_invalidations: u64,
}

impl Seen {
    /// Takes the snapshot, or None while a write of the key is in progress
    /// (its stamp is odd): then there is nothing safe to fill against.
    pub fn now(seg: &Segment, key: &[u8]) -> Option<Seen> {
        let stamp = seg.stamp_watch(&seg.hash(key)).load();
        let seen = Seen {
            stamp,
            epoch: seg.epoch().load(),
            tag_invalidations: seg.tag_invalidations(),
        };
        (stamp & 1 == 0).then_some(seen)
    }

    /// The snapshot as one integer pair, for a caller that keeps it elsewhere.
    pub fn parts(self) -> (u32, u64, u64) {
        (self.stamp, self.epoch, self.tag_invalidations)
    }

    /// The snapshot back from [`Seen::parts`].
    pub fn from_parts(stamp: u32, epoch: u64, tag_invalidations: u64) -> Seen {
        Seen {
            stamp,
            epoch,
            tag_invalidations,
        }
    }
}

/// Stores `payload` (of `kind`) under `key` only if nothing that could void
/// it happened since `seen` (see [`Seen`]). Returns whether it stored.
pub fn fill(
    seg: &Segment,
    key: &[u8],
    payload: &[u8],
    kind: Kind,
    life: &Lifetime,
    tags: &[&[u8]],
    seen: Seen,
) -> Result<bool, CoreError> {
    let refs = seg.tag_refs(tags)?;
    let stamp = seg.stamp_watch(&seg.hash(key));
    let epoch = seg.epoch_watch();
    seg.rewrite(key, |_| {
        let now = Seen {
            stamp: stamp.load(),
            epoch: epoch.load(),
            tag_invalidations: seg.tag_invalidations(),
        };
        (now == seen).then(|| fresh_record(payload, kind, life, refs))
    })
}

/// Adds `delta` to the counter under `key` and returns the new value. The
/// entry keeps its deadline and tags. A key without a fresh entry starts from
/// `default` (with `life` and `tags`) when one is given.
pub fn incr(
    seg: &Segment,
    key: &[u8],
    delta: i64,
    default: Option<(i64, &Lifetime, &[&[u8]])>,
) -> Result<i64, Error> {
    let refs = match default {
        Some((_, _, tags)) => seg.tag_refs(tags)?,
        None => Vec::new(),
    };
    let mut result = Err(Error::Missing);
    seg.rewrite(key, |cur| match fresh(cur, now_ms()) {
        Some((payload, t, expiry)) => {
            let Ok(bytes) = <[u8; 8]>::try_from(payload) else {
                result = Err(Error::NotInteger);
                return None;
            };
            if t.kind != Kind::Counter {
                result = Err(Error::NotInteger);
                return None;
            }
            let Some(n) = i64::from_le_bytes(bytes).checked_add(delta) else {
                result = Err(Error::Overflow);
                return None;
            };
            result = Ok(n);
            Some(Rewrite {
                value: encode(&counter_payload(n), &t),
                expiry,
                tags: None,
            })
        }
        None => {
            let (start, life, _) = default?;
            let Some(n) = start.checked_add(delta) else {
                result = Err(Error::Overflow);
                return None;
            };
            result = Ok(n);
            Some(fresh_record(&counter_payload(n), Kind::Counter, life, refs))
        }
    })?;
    result
}

/// Gives the fresh entry under `key` a new lifetime from now, keeping its
/// value and tags. Returns whether the key held one.
pub fn touch(seg: &Segment, key: &[u8], life: &Lifetime) -> Result<bool, CoreError> {
    seg.rewrite(key, |cur| {
        let (payload, t, _) = fresh(cur, now_ms())?;
        let nt = Trailer::starting_now(t.kind, life.ttl_ms);
        Some(Rewrite {
            value: encode(payload, &nt),
            expiry: life.record_expiry(nt.soft),
            tags: None,
        })
    })
}
