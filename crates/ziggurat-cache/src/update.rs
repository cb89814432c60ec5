//! Writes that depend on the entry already there (`add`, `incr`, `touch`),
//! each one [`Segment::rewrite`], or on nothing having changed since a
//! snapshot (`fill`, one [`Segment::land`]): the check and the write happen
//! under the key's shard lock, so no other process's write comes between.

use ziggurat_core::now_ms;
use ziggurat_core::{Error as CoreError, Rewrite, Segment, Snapshot};

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

/// Stores `payload` (of `kind`) under `key` only if nothing that could void
/// it happened since `seen` was taken, before the payload was read (see
/// [`Snapshot`]): a delete, a clear or a tag invalidation that lands while the
/// entry travels always wins. Returns whether it stored.
pub fn fill(
    seg: &Segment,
    key: &[u8],
    payload: &[u8],
    kind: Kind,
    life: &Lifetime,
    tags: &[&[u8]],
    seen: &Snapshot,
) -> Result<bool, CoreError> {
    let t = Trailer::starting_now(kind, life.ttl_ms);
    let kh = seg.hash(key);
    seg.land(
        key,
        &kh,
        &encode(payload, &t),
        life.record_ttl(),
        tags,
        seen,
    )
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
