//! The write path: take the shard lock, append the record into free space,
//! publish it with one slot store between the key's odd and even stamp.

use std::sync::atomic::{fence, AtomicU32, Ordering};

use crate::arena::{record_len, Header, HAS_EXPIRY};
use crate::clock::{deadline_ms, now_ms};
use crate::error::{Error, Result};
use crate::failpoint::{self, Point};
use crate::hash::KeyHash;
use crate::index;
use crate::invalid::{Arg, Problem};
use crate::layout::*;
use crate::segment::Segment;
use crate::shard::Shard;
use crate::shard_lock::Guard;
use crate::shm::Word32;
use crate::snapshot::Snapshot;
use crate::stamps;
use crate::tags::TagRef;
use crate::view::View32;

impl Segment {
    /// Takes the key's shard lock and records the write's intent (its stamp), so
    /// that a repair after a crash knows which stamp may be left odd.
    fn begin(&self, kh: &KeyHash) -> Result<(Guard<'_>, u32)> {
        let guard = self.lock(kh.shard(self.g.nshards))?;
        let stamp_idx = self.stamp_index(kh);
        guard.sh.intent_stamp().store(stamp_idx, Ordering::Relaxed);
        guard.sh.intent_active().store(1, Ordering::Release);
        failpoint::hit(Point::Locked);
        Ok((guard, stamp_idx))
    }

    /// Makes a stamp odd before a publish. The release fence orders it before
    /// the slot store, so a reader that sees the new slot sees the odd stamp.
    fn stamp_odd(&self, stamp_idx: u32) -> &AtomicU32 {
        let stamp = self.stamp_at(stamp_idx);
        stamp.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        failpoint::hit(Point::StampOdd);
        stamp
    }

    /// Makes a stamp even after a publish, wakes waiters, and ends the intent.
    fn stamp_even(sh: &Shard<'_>, stamp: &AtomicU32) {
        failpoint::hit(Point::Published);
        stamp.fetch_add(1, Ordering::SeqCst);
        if sh.waiters().load(Ordering::SeqCst) != 0 {
            stamps::futex_wake(stamp);
        }
        sh.intent_active().store(0, Ordering::Release);
    }

    /// Stores `value` under `key`. `ttl` in seconds (None: no expiry).
    pub fn set(&self, key: &[u8], value: &[u8], ttl: Option<f64>, tags: &[&[u8]]) -> Result<()> {
        self.write(key, None, value, ttl, tags, Cond::Always)
            .map(|_| ())
    }

    /// What a write of the key hashed as `kh` reads first, in one call: the
    /// record it compares its key with on its way ([`Segment::prefetch_current`]),
    /// and the key's stamp as a view (to load around the write) and as a
    /// watch (for a copy of what it writes kept above the segment).
    #[inline]
    pub fn write_start(&self, kh: &KeyHash) -> (View32<'_>, Word32) {
        self.prefetch_current(kh);
        (self.stamp_word(kh), self.stamp_watch(kh))
    }

    /// [`Segment::set`] for a caller that already hashed `key` with [`Segment::hash`].
    pub fn set_hashed(
        &self,
        key: &[u8],
        kh: &KeyHash,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
    ) -> Result<()> {
        self.write(key, Some(kh), value, ttl, tags, Cond::Always)
            .map(|_| ())
    }

    /// Stores `value` under `key` (hashed as `kh`) with `tags` only while
    /// nothing `snap` watches has changed since it was taken (see
    /// [`Snapshot`]): what a load read after the snapshot lands only if no
    /// write it could be older than came between. Returns whether it stored.
    pub fn land(
        &self,
        key: &[u8],
        kh: &KeyHash,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
        snap: &Snapshot,
    ) -> Result<bool> {
        self.write(key, Some(kh), value, ttl, tags, Cond::Unchanged(snap))
    }

    /// Stores `value` only if `key` has no live entry. Returns whether it did.
    pub fn add(&self, key: &[u8], value: &[u8], ttl: Option<f64>, tags: &[&[u8]]) -> Result<bool> {
        self.write(key, None, value, ttl, tags, Cond::Absent)
    }

    /// Stores `value` only if `key`'s live value is `expected`; returns whether it did.
    pub fn replace_if(
        &self,
        key: &[u8],
        expected: &[u8],
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
    ) -> Result<bool> {
        self.write(key, None, value, ttl, tags, Cond::Equals(expected))
    }

    fn write(
        &self,
        key: &[u8],
        kh: Option<&KeyHash>,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
        cond: Cond<'_>,
    ) -> Result<bool> {
        let what = match cond {
            Cond::Always => "set",
            Cond::Unchanged(_) => "land",
            Cond::Absent => "add",
            Cond::Equals(_) => "replace_if",
        };
        self.check_writable(what)?;
        self.contain(what, || {
            self.write_contained(key, kh, value, ttl, tags, cond)
        })
    }

    fn write_contained(
        &self,
        key: &[u8],
        kh: Option<&KeyHash>,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
        cond: Cond<'_>,
    ) -> Result<bool> {
        self.check_key(key)?;
        if value.is_empty() {
            return Err(Error::invalid(Arg::Value, Problem::Empty));
        }
        if value.len() > self.g.max_value as usize {
            return Err(self.too_large(value.len()));
        }
        Self::check_ttl(ttl)?;
        let cells = match cond {
            Cond::Unchanged(snap) => snap.cells(self, tags)?,
            _ => self.tag_cells(tags)?,
        };
        let kh = kh.copied().unwrap_or_else(|| self.hash(key));
        let expiry = deadline_ms(ttl);
        failpoint::hit(Point::Unlocked);
        let (guard, stamp_idx) = self.begin(&kh)?;
        let sh = guard.sh;
        // The tags' versions are read under the lock: a write delayed before it
        // while a tag was invalidated and a later write of the key landed would
        // otherwise store a record void on arrival over that later write.
        let tag_refs = match cond {
            Cond::Unchanged(snap) => match snap.holds(self, &cells) {
                Some(refs) => refs,
                None => {
                    sh.intent_active().store(0, Ordering::Release);
                    return Ok(false);
                }
            },
            _ => self.tag_versions(&cells),
        };
        // A plain set needs nothing of the current record: `append` finds its
        // slot again after reserving. Reading it would cost a cache miss in the
        // ring on every overwrite.
        let current = || {
            sh.locate(&kh, key)
                .found
                .filter(|&(_, w)| self.live(&sh, w))
        };
        let go = match cond {
            Cond::Always | Cond::Unchanged(_) => true,
            Cond::Absent => current().is_none(),
            Cond::Equals(expected) => {
                current().is_some_and(|(_, w)| self.value_is(&sh, w, expected))
            }
        };
        if !go {
            sh.intent_active().store(0, Ordering::Release);
            return Ok(false);
        }
        self.append(&sh, stamp_idx, &kh, key, value, expiry, &tag_refs);
        Ok(true)
    }

    fn too_large(&self, len: usize) -> Error {
        Error::invalid(
            Arg::Value,
            Problem::TooLarge {
                max: self.g.max_value.into(),
                got: len as u64,
            },
        )
    }

    /// Rewrites `key`'s entry under its shard lock, so no other write can come
    /// between the read and the write: `f` gets the live value and its expiry
    /// (absolute, ms of [`now_ms`](crate::now_ms); 0 never), or None when there
    /// is none, and returns the new record, or None to leave the key as it is.
    /// Returns whether a record was written. `f` runs with the lock held: it
    /// must be short and must not call into this segment.
    pub fn rewrite(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u64)>) -> Option<Rewrite>,
    ) -> Result<bool> {
        self.check_writable("rewrite")?;
        self.contain("rewrite", || self.rewrite_contained(key, f))
    }

    fn rewrite_contained(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u64)>) -> Option<Rewrite>,
    ) -> Result<bool> {
        self.check_key(key)?;
        let kh = self.hash(key);
        let (guard, stamp_idx) = self.begin(&kh)?;
        let sh = guard.sh;
        let current = sh
            .locate(&kh, key)
            .found
            .filter(|&(_, w)| self.live(&sh, w))
            .map(|(_, w)| self.record_of(&sh, w));
        let out = f(current.as_ref().map(|(v, e, _)| (v.as_slice(), *e)));
        let Some(rw) = out else {
            sh.intent_active().store(0, Ordering::Release);
            return Ok(false);
        };
        let bad = if rw.value.is_empty() {
            Some(Error::invalid(Arg::Value, Problem::Empty))
        } else if rw.value.len() > self.g.max_value as usize {
            Some(self.too_large(rw.value.len()))
        } else if rw.tags.as_ref().is_some_and(|t| t.len() > MAX_TAGS) {
            Some(Error::invalid(
                Arg::Tags,
                Problem::TooMany {
                    max: MAX_TAGS,
                    got: rw.tags.as_ref().map_or(0, |t| t.len()),
                },
            ))
        } else {
            None
        };
        if let Some(e) = bad {
            sh.intent_active().store(0, Ordering::Release);
            return Err(e);
        }
        let tags = match rw.tags {
            // At their versions now, under the lock, as a plain write reads them.
            Some(t) => {
                let cells: Vec<u32> = t.iter().map(|&r| TagRef::unpack(r).cell).collect();
                self.tag_versions(&cells)
            }
            None => current.map(|(_, _, t)| t).unwrap_or_default(),
        };
        self.append(&sh, stamp_idx, &kh, key, &rw.value, rw.expiry, &tags);
        Ok(true)
    }

    /// The value, expiry and tag references of the record a slot word points
    /// to (writers, under the shard lock).
    fn record_of(&self, sh: &Shard<'_>, w: u64) -> (Vec<u8>, u64, Vec<u64>) {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        // A value longer than any write makes is damage: not copied (it could
        // be most of a ring), and read as no value.
        let Some((h, expiry)) = ring
            .header(&self.shm, phys)
            .filter(|(h, _)| h.val_len <= self.g.max_value)
        else {
            return (Vec::new(), 0, Vec::new());
        };
        let mut v = vec![0u8; h.val_len as usize];
        self.shm
            .read_racy(ring.at(phys) + h.meta_len() + h.key_len as usize, &mut v);
        let tags = (0..h.ntags as usize)
            .map(|t| ring.tag(&self.shm, phys, &h, t))
            .collect();
        (v, expiry, tags)
    }

    /// Appends a record and publishes it (the shard lock held, the intent set).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        sh: &Shard<'_>,
        stamp_idx: u32,
        kh: &KeyHash,
        key: &[u8],
        value: &[u8],
        expiry: u64,
        tag_refs: &[u64],
    ) {
        let h = Header {
            val_len: value.len() as u32,
            key_len: key.len() as u16,
            ntags: tag_refs.len() as u8,
            flags: if expiry != 0 { HAS_EXPIRY } else { 0 },
        };
        let len = record_len(h.meta_len(), key.len(), value.len());
        let target = if len > self.g.small_cap / 4 || sh.ghost_take(kh) {
            if len <= self.g.small_cap / 4 {
                sh.bump(Stat::GhostHits, 1);
            }
            RingId::Main
        } else {
            RingId::Small
        };
        let at = sh.reserve(target, len, true);
        let ring = sh.ring(target);
        ring.write_record(&self.shm, at, &h, expiry, tag_refs, key, value);
        let head = ring.head(&self.shm).load(Ordering::Relaxed);
        ring.head(&self.shm).store(head + len, Ordering::Release);
        failpoint::hit(Point::Appended);
        // Locate after reserving: eviction may have moved or dropped the old record.
        let loc = sh.locate(kh, key);
        let stamp = self.stamp_odd(stamp_idx);
        let word = index::pack(kh.fingerprint(), 0, target, at);
        match (loc.found, loc.empty, loc.victim) {
            (Some((off, _)), _, _) => sh.publish(off, word),
            (None, Some(off), _) => {
                sh.publish(off, word);
                sh.bump(Stat::Entries, 1);
            }
            (None, None, Some((off, _))) => {
                sh.publish(off, word);
                sh.bump(Stat::IndexEvictions, 1);
                sh.bump(Stat::Evictions, 1);
            }
            (None, None, None) => unreachable!("a full pair always has a victim"),
        }
        Self::stamp_even(sh, stamp);
        sh.bump(Stat::Sets, 1);
    }

    /// Whether the value of the record a slot word points to equals `expected`
    /// (writers, under the shard lock, so the bytes cannot change meanwhile).
    fn value_is(&self, sh: &Shard<'_>, w: u64, expected: &[u8]) -> bool {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        let Some((h, _)) = ring.header(&self.shm, phys) else {
            return false;
        };
        if h.val_len as usize != expected.len() {
            return false;
        }
        let mut v = vec![0u8; expected.len()];
        self.shm
            .read_racy(ring.at(phys) + h.meta_len() + h.key_len as usize, &mut v);
        v == expected
    }

    /// Whether the entry a slot word points to is live (not expired, tags current).
    fn live(&self, sh: &Shard<'_>, w: u64) -> bool {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        let Some((h, expiry)) = ring.header(&self.shm, phys) else {
            return false;
        };
        if expiry != 0 && expiry <= now_ms() {
            return false;
        }
        let tags: Vec<u64> = (0..h.ntags as usize)
            .map(|t| ring.tag(&self.shm, phys, &h, t))
            .collect();
        sh.tags_current(&tags)
    }

    /// Removes `key`. Returns whether a live entry was removed. Always bumps the
    /// key's stamp, so a copy held in any process's L1 stops validating.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_writable("delete")?;
        self.check_key(key)?;
        self.contain("delete", || {
            let kh = self.hash(key);
            let (guard, stamp_idx) = self.begin(&kh)?;
            let sh = guard.sh;
            let found = sh.locate(&kh, key).found;
            let stamp = self.stamp_odd(stamp_idx);
            let mut was_live = false;
            if let Some((off, w)) = found {
                was_live = self.live(&sh, w);
                sh.publish(off, 0);
                sh.drop_one(Stat::Entries);
            }
            Self::stamp_even(&sh, stamp);
            if was_live {
                sh.bump(Stat::Deletes, 1);
            }
            Ok(was_live)
        })
    }

    /// Makes every entry carrying `tag` a miss, in every process, at once. Lock-free.
    pub fn invalidate_tag(&self, tag: &[u8]) -> Result<()> {
        self.check_writable("invalidate_tag")?;
        if tag.is_empty() {
            return Err(Error::invalid(Arg::Tags, Problem::Empty));
        }
        self.contain("invalidate_tag", || {
            let cell = self.tag_cell(tag);
            // The count first: a landing that read the new version then finds
            // the count moved too (see `Snapshot::holds`).
            self.shm
                .u64_at(H_TAG_INVALIDATIONS)
                .fetch_add(1, Ordering::SeqCst);
            self.tag_atomic(cell).fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

/// When a write goes ahead.
#[derive(Clone, Copy)]
enum Cond<'a> {
    Always,
    /// Only while nothing the snapshot watches has changed.
    Unchanged(&'a Snapshot),
    /// Only if the key has no live entry.
    Absent,
    /// Only if the key's live value equals this.
    Equals(&'a [u8]),
}

/// A record [`Segment::rewrite`] writes: the value, its absolute expiry (ms of
/// [`now_ms`](crate::now_ms), 0 never) and its tag references (None keeps the
/// current ones).
pub struct Rewrite {
    /// The new value.
    pub value: Vec<u8>,
    /// Absolute expiry in ms of [`now_ms`](crate::now_ms); 0 never expires.
    pub expiry: u64,
    /// Tag references from [`Segment::tag_refs`] (their cells: the versions
    /// stored are read under the lock); None keeps the entry's own.
    pub tags: Option<Vec<u64>>,
}
