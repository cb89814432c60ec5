//! [`Cache`]: one cache's two segments (values, and cached misses with the
//! load leases), its checked options and this process's counters. Every
//! front end keeps one per cache and does through it all that does not touch
//! its language's objects: reads below L1, writes, counters, tags, clears,
//! and the miss path ([`crate::miss`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ziggurat_core::{now_ms, Arg, Problem, Segment, Snapshot};

use crate::counts::Counts;
use crate::entry::{refresh_due, Kind, Trailer};
use crate::error::Error;
use crate::flight::Flight;
use crate::options::CacheOptions;
use crate::tags::refs;
use crate::ttl::{check_ttl, lifetime};
use crate::update::{add, fill, incr, touch};

/// One cache's shared tiers as a front end uses them.
///
/// ```
/// use std::sync::Arc;
/// use ziggurat_cache::{Body, Cache, CacheOptions, Kind};
/// use ziggurat_core::{Options, Segment};
///
/// let dir = std::env::temp_dir();
/// let name = format!("doc-cache-{}", std::process::id());
/// let opts = Options { size: 4 << 20, directory: dir, ..Options::default() };
/// let open = |n: &str| Segment::open(n, &opts).unwrap();
/// let (main, neg) = (open(&name), open(&format!("{name}.neg")));
/// let c = Cache::new(Some(Arc::new(main)), Some(Arc::new(neg)), CacheOptions::default(), false).unwrap();
/// c.store(b"k", None, Body::Bytes(b"v"), Kind::Value, 60.0, 0.0, &[], || ()).unwrap();
/// assert_eq!(c.stamp(b"k") % 2, 0);
/// c.main().unwrap().unlink().unwrap();
/// c.neg().unwrap().unlink().unwrap();
/// ```
pub struct Cache {
    main: Option<Arc<Segment>>,
    neg: Option<Arc<Segment>>,
    opts: CacheOptions,
    l1: bool,
    tier_below: AtomicBool,
    counts: Counts,
    rng: AtomicU64,
}

impl Cache {
    /// A cache over `main` and its cached-miss segment `neg` (both None: the
    /// degraded cache, L1 and loader only) with `opts` (checked here). `l1`:
    /// whether the front end keeps what it reads in an L1 (reads then load
    /// the words an L1 entry watches).
    pub fn new(
        main: Option<Arc<Segment>>,
        neg: Option<Arc<Segment>>,
        opts: CacheOptions,
        l1: bool,
    ) -> Result<Cache, Error> {
        let seed = now_ms() ^ ((std::process::id() as u64) << 32) | 1;
        Ok(Cache {
            main,
            neg,
            opts: opts.checked()?,
            l1,
            tier_below: AtomicBool::new(false),
            counts: Counts::default(),
            rng: AtomicU64::new(seed),
        })
    }

    /// The main segment, None for a degraded cache.
    #[inline]
    pub fn main(&self) -> Option<&Arc<Segment>> {
        self.main.as_ref()
    }

    /// The cached-miss segment.
    #[inline]
    pub fn neg(&self) -> Option<&Arc<Segment>> {
        self.neg.as_ref()
    }

    /// The main segment, or [`Error::NoSegment`].
    pub fn writable(&self) -> Result<&Segment, Error> {
        self.main.as_deref().ok_or(Error::NoSegment)
    }

    /// The cache's options.
    #[inline]
    pub fn options(&self) -> &CacheOptions {
        &self.opts
    }

    /// This process's counters of the cache.
    #[inline]
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Whether the front end keeps an L1.
    #[inline]
    pub fn has_l1(&self) -> bool {
        self.l1
    }

    /// Marks a tier below as joined (once; false if one was already). From
    /// then on a load's lease is given back only after the front end told
    /// the tier below how the load ended.
    pub fn join_tier_below(&self) -> bool {
        !self.tier_below.swap(true, Ordering::AcqRel)
    }

    /// Whether a tier below is joined.
    #[inline]
    pub fn has_tier_below(&self) -> bool {
        self.tier_below.load(Ordering::Relaxed)
    }

    /// The leases, when the cache has both segments.
    #[inline]
    pub(crate) fn flight(&self) -> Option<Flight<'_>> {
        match (self.main.as_deref(), self.neg.as_deref()) {
            (Some(m), Some(n)) => Some(Flight::new(m, n)),
            _ => None,
        }
    }

    /// `ttl` less a random part of up to `jitter` of it (infinity stays).
    pub fn jittered(&self, ttl: f64) -> f64 {
        if !ttl.is_finite() {
            return ttl;
        }
        // xorshift; races between threads only mix the state further.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        let draw = (x >> 11) as f64 / (1u64 << 53) as f64;
        ttl * (1.0 - self.opts.jitter * draw)
    }

    /// Whether an entry with soft deadline `soft` written with `ttl_ms` is
    /// in the last `refresh_ahead` part of its life now.
    #[inline]
    pub fn refresh_due(&self, soft: u64, ttl_ms: u32) -> bool {
        refresh_due(soft, ttl_ms, self.opts.refresh_ahead, now_ms())
    }

    /// Milliseconds until [`Cache::refresh_due`] holds for an entry with soft
    /// deadline `soft` written with `ttl_ms` (0: now); None: never.
    pub fn refresh_due_in(&self, soft: u64, ttl_ms: u32) -> Option<u64> {
        crate::entry::refresh_due_in(soft, ttl_ms, self.opts.refresh_ahead, now_ms())
    }

    /// The trailer a value written now for `ttl` seconds
    /// gets: what a degraded cache's L1 entry keeps, capped by `degraded_ttl`.
    pub fn degraded_trailer(&self, kind: Kind, ttl: f64) -> Trailer {
        let ttl = self.opts.degraded_ttl.map_or(ttl, |cap| ttl.min(cap));
        Trailer::starting_now(kind, lifetime(ttl, 0.0).ttl_ms)
    }

    /// Stores `payload` under `key` only if it holds no fresh value (one
    /// winner among every process of the host); whether it stored.
    pub fn add(
        &self,
        key: &[u8],
        payload: &[u8],
        kind: Kind,
        ttl: Option<f64>,
        tags: &[Vec<u8>],
    ) -> Result<bool, Error> {
        let main = self.writable()?;
        let life = self.life(ttl);
        Ok(add(main, key, payload, kind, &life, &refs(tags))?)
    }

    /// Adds `delta` to the counter under `key` for every process of the
    /// host; a missing key starts from `default` (with the cache's TTL and
    /// `tags`), else [`Error::Missing`].
    pub fn incr(
        &self,
        key: &[u8],
        delta: i64,
        default: Option<i64>,
        tags: &[Vec<u8>],
    ) -> Result<i64, Error> {
        let main = self.writable()?;
        let life = self.life(None);
        let tags = refs(tags);
        incr(main, key, delta, default.map(|d| (d, &life, &tags[..])))
    }

    /// A new lifetime of `ttl` seconds (None: the cache's) from now for the
    /// fresh value under `key`; whether there was one.
    pub fn touch(&self, key: &[u8], ttl: Option<f64>) -> Result<bool, Error> {
        let main = self.writable()?;
        Ok(touch(main, key, &self.life(ttl))?)
    }

    /// What [`Cache::fill`] compares against for `key`, taken before the
    /// value is read: None without a segment or while a write of the key is
    /// in progress (do not fill then).
    pub fn seen(&self, key: &[u8]) -> Option<Snapshot> {
        let m = self.main.as_deref()?;
        let snap = m.snapshot(&m.hash(key), None).ok()?;
        (!snap.in_progress()).then_some(snap)
    }

    /// A snapshot of the key `of` back from [`Snapshot::parts`] (None without
    /// a segment).
    pub fn seen_from(&self, of: &[u8], parts: (u32, u64, u64)) -> Option<Snapshot> {
        let m = self.main.as_deref()?;
        Some(m.snapshot_from(&m.hash(of), parts))
    }

    /// Copies a value from a tier below (or a response of the key `seen`
    /// watches) into the main segment, only if nothing voided it since
    /// `seen`; whether it stored.
    pub fn fill(
        &self,
        key: &[u8],
        payload: &[u8],
        kind: Kind,
        ttl: f64,
        tags: &[Vec<u8>],
        seen: &Snapshot,
    ) -> Result<bool, Error> {
        let main = self.writable()?;
        let life = self.life(Some(ttl));
        Ok(fill(main, key, payload, kind, &life, &refs(tags), seen)?)
    }

    /// Removes `key`'s value; whether the segment held one.
    pub fn delete(&self, key: &[u8]) -> Result<bool, Error> {
        match self.main.as_deref() {
            Some(m) => Ok(m.delete(key)?),
            None => Ok(false),
        }
    }

    /// Voids every entry carrying any of `tags` in every process.
    pub fn invalidate_tags(&self, tags: &[Vec<u8>]) -> Result<(), Error> {
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            for t in tags {
                seg.invalidate_tag(t)?;
            }
        }
        Ok(())
    }

    /// Empties both segments (blocking: a front end runs it off its lock).
    pub fn clear(&self) -> Result<(), Error> {
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            seg.clear()?;
        }
        Ok(())
    }

    /// The key's version stamp in the main segment now (0 without one).
    pub fn stamp(&self, key: &[u8]) -> u32 {
        self.main
            .as_deref()
            .map_or(0, |m| m.stamp_watch(&m.hash(key)).load())
    }

    /// Word `i` of the words a tier below keeps in the segment.
    pub fn app_load(&self, i: usize) -> Result<u64, Error> {
        self.writable()?.app_load(i).ok_or_else(|| {
            Error::invalid(
                Arg::Word,
                Problem::NoSuchWord {
                    index: i,
                    count: ziggurat_core::APP_WORDS,
                },
            )
        })
    }

    /// Replaces word `i` with `new` if it holds `old`; whether it did.
    pub fn app_cas(&self, i: usize, old: u64, new: u64) -> Result<bool, Error> {
        Ok(self.writable()?.app_cas(i, old, new)?)
    }

    /// The TTL and the stale window of a plain write, for a `ttl` already
    /// checked ([`ttl_or_default`]; None: the cache's): what [`Cache::store`]
    /// takes, the same for every front end.
    ///
    /// ```
    /// # use ziggurat_cache::{Cache, CacheOptions};
    /// let o = CacheOptions { ttl: 60.0, stale_ttl: Some(5.0), ..CacheOptions::default() };
    /// let c = Cache::new(None, None, o, false).unwrap();
    /// assert_eq!(c.write_ttls(None), (60.0, 5.0));
    /// assert_eq!(c.write_ttls(Some(2.0)), (2.0, 5.0));
    /// ```
    pub fn write_ttls(&self, ttl: Option<f64>) -> (f64, f64) {
        (
            ttl.unwrap_or(self.opts.ttl),
            self.opts.stale_ttl.unwrap_or(0.0),
        )
    }

    /// The lifetime of a write for `ttl` (None: the cache's), with the
    /// cache's stale window.
    fn life(&self, ttl: Option<f64>) -> crate::ttl::Lifetime {
        lifetime(
            ttl.unwrap_or(self.opts.ttl),
            self.opts.stale_ttl.unwrap_or(0.0),
        )
    }
}

/// A TTL argument checked, or None (the cache's own).
pub fn ttl_or_default(ttl: Option<f64>, what: Arg) -> Result<Option<f64>, Error> {
    ttl.map(|t| check_ttl(t, what)).transpose()
}
