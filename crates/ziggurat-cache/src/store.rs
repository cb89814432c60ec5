//! The plain writes of a cache: a value (or counter) into the main segment,
//! telling the front end whether its L1 may keep the object it wrote, and a
//! cached miss into the cached-miss segment.

use ziggurat_core::{KeyHash, Segment, Snapshot};

use crate::cache::Cache;
use crate::entry::{encode, seal, Kind, Trailer};
use crate::error::Error;
use crate::tags::refs;
use crate::ttl::{lifetime, Lifetime};
use crate::watch::{tag_watches, L1Watch, Watch32, Watch64};

/// A value to write: bytes the front end owns (its serializer's output, a
/// buffer of its language) or a vector the write may extend in place.
pub enum Body<'a> {
    /// Borrowed bytes; the write copies them once, with the trailer.
    Bytes(&'a [u8]),
    /// A vector the trailer is appended to.
    Owned(Vec<u8>),
}

/// What a write left for an L1 entry of the value.
pub struct Written {
    /// The entry's kind and deadlines.
    pub trailer: Trailer,
    /// The words an L1 entry watches, when L1 may keep the value (see
    /// [`Kept`]); None: drop any L1 entry of the key.
    pub kept: Option<Kept>,
    /// Whether the value was stored: a load's result is not when a write
    /// came during the load (then no tier is told of it either).
    pub stored: bool,
}

/// What an L1 entry of a value just written watches.
pub struct Kept {
    /// The key's stamp and the epoch, as the write left them.
    pub watch: L1Watch,
    /// The entry's tags, at the versions the write stored.
    pub tags: Vec<Watch32>,
}

/// Writes `stored` (payload and trailer, see [`crate::seal`]) as the value of
/// `key` in the main segment `seg`, hashed as `kh`, with `life`'s record
/// lifetime and `tags`. `written` runs as soon as the segment holds the value
/// (before the L1 check below).
///
/// With `landing` (a load's result), the value is stored only while nothing
/// the snapshot watches moved since it was taken (see [`Snapshot`]): a write
/// that returned during the load wins, and the front end drops any L1 entry.
///
/// Returns whether the value was stored (always, without `landing`), and
/// what an L1 entry of the value watches when the front end keeps one
/// (`l1`) and no other write landed between the stamp reads around this one:
/// the key's stamp (even before, two more after: this write alone, not one of
/// a key sharing the stamp) and the epoch unchanged. Otherwise None: an L1
/// copy of what was written could not be told from a newer value.
#[allow(clippy::too_many_arguments)]
pub fn store(
    seg: &Segment,
    key: &[u8],
    kh: &KeyHash,
    stored: &[u8],
    life: &Lifetime,
    tags: &[&[u8]],
    l1: bool,
    landing: Option<&Snapshot>,
    written: impl FnOnce(),
) -> Result<(bool, Option<Kept>), ziggurat_core::Error> {
    let (stamp, watch) = seg.write_start(kh);
    let epoch = seg.epoch();
    let s0 = stamp.load();
    let e0 = epoch.load();
    // The tags' versions as they are before the write, which stores these or
    // later ones: an L1 entry watching them is never valid longer than the record.
    // A landing stores the versions its snapshot took, already resolved.
    let refs = match (l1, landing.and_then(Snapshot::tag_refs)) {
        (false, _) => Vec::new(),
        (true, Some(r)) => r.to_vec(),
        (true, None) => seg.tag_refs(tags)?,
    };
    let stored = match landing {
        Some(snap) => seg.land(key, kh, stored, life.record_ttl(), tags, snap)?,
        None => {
            seg.set_hashed(key, kh, stored, life.record_ttl(), tags)?;
            true
        }
    };
    written();
    let s1 = stamp.load();
    if !(stored && l1 && s0 & 1 == 0 && s1 == s0.wrapping_add(2) && epoch.load() == e0) {
        return Ok((stored, None));
    }
    Ok((
        true,
        Some(Kept {
            watch: L1Watch {
                stamp: Watch32::of(watch, s1),
                epoch: Watch64::of(seg.epoch_watch(), e0),
            },
            tags: tag_watches(seg, &refs),
        }),
    ))
}

/// Stores a cached miss of `key` in the cached-miss segment `neg`: the key's
/// main stamp `stamp` as read before the load that found nothing (the miss
/// counts only while that stamp holds), living `life`, with `tags`. With
/// `landing` (taken in `neg` before the load), only while no tag
/// invalidation or clear came since.
pub fn store_negative(
    neg: &Segment,
    key: &[u8],
    stamp: u32,
    life: &Lifetime,
    tags: &[&[u8]],
    landing: Option<&Snapshot>,
) -> Result<(), ziggurat_core::Error> {
    let t = Trailer::starting_now(Kind::Negative, life.ttl_ms);
    let stored = encode(&stamp.to_le_bytes(), &t);
    match landing {
        Some(snap) => neg
            .land(key, &neg.hash(key), &stored, life.record_ttl(), tags, snap)
            .map(|_| ()),
        None => neg.set(key, &stored, life.record_ttl(), tags),
    }
}

impl Cache {
    /// Writes `body` (of `kind`) as the value of `key` (checked) for `ttl`
    /// seconds, kept `stale` seconds more for fail-safe reads, with `tags`
    /// (checked). `kh`: the key as the main segment hashes it, when the
    /// caller has it (and loaded what the write touches, if at all).
    /// `written` runs as soon as the segment holds the value. The caller's
    /// L1 keeps the value only with [`Written::kept`].
    #[allow(clippy::too_many_arguments)]
    pub fn store(
        &self,
        key: &[u8],
        kh: Option<KeyHash>,
        body: Body<'_>,
        kind: Kind,
        ttl: f64,
        stale: f64,
        tags: &[Vec<u8>],
        written: impl FnOnce(),
    ) -> Result<Written, Error> {
        self.store_from(key, kh, body, kind, ttl, stale, tags, None, written)
    }

    /// [`Cache::store`] of a load's result, stored only while nothing
    /// `landing` watches moved (None: always, as a write).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_from(
        &self,
        key: &[u8],
        kh: Option<KeyHash>,
        body: Body<'_>,
        kind: Kind,
        ttl: f64,
        stale: f64,
        tags: &[Vec<u8>],
        landing: Option<&Snapshot>,
        written: impl FnOnce(),
    ) -> Result<Written, Error> {
        let main = self.writable()?;
        let kh = kh.unwrap_or_else(|| {
            let kh = main.hash(key);
            main.prefetch_write(&kh);
            kh
        });
        let life = lifetime(ttl, stale);
        let trailer = Trailer::starting_now(kind, life.ttl_ms);
        let buf = match body {
            Body::Owned(v) => seal(v, &trailer),
            Body::Bytes(b) => encode(b, &trailer),
        };
        let (stored, kept) = store(
            main,
            key,
            &kh,
            &buf,
            &life,
            &refs(tags),
            self.has_l1(),
            landing,
            written,
        )?;
        Ok(Written {
            trailer,
            kept,
            stored,
        })
    }

    /// Stores a cached miss of `key` for `ttl` seconds, valid while the key's
    /// main stamp is `stamp` (read before the load that found nothing), and
    /// only while nothing `landing` watches moved (see [`store_negative`]).
    pub fn store_negative(
        &self,
        key: &[u8],
        ttl: f64,
        stamp: u32,
        tags: &[Vec<u8>],
        landing: Option<&Snapshot>,
    ) -> Result<(), Error> {
        let Some(neg) = self.neg().map(|n| &**n) else {
            return Ok(());
        };
        store_negative(neg, key, stamp, &lifetime(ttl, 0.0), &refs(tags), landing)?;
        Ok(())
    }
}
