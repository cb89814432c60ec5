//! `NativeCache`: one cache's two segments, opened by name with the same
//! `open_pair` as the Python front end (both languages attach to one pair of
//! files), and every call of the JavaScript `Cache` that is not a miss.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use napi::bindgen_prelude::{ArrayBuffer, BigInt, Buffer, Either};
use napi::{Env, Result};
use napi_derive::napi;
use ziggurat_cache::{
    cluster_joined, defaults, open_pair, pair_options, size_bytes, size_text, Arg, Body, Cache,
    CacheOptions, Pair, Words, Written, DEFAULT_SIZE,
};
use ziggurat_core::Geometry;

use crate::args::{int64, key_bytes, payload, tag_bytes, KeyArg};
use crate::errors::{
    closed, clustered, core_to_napi, incr_err, invalid, js_number, refused, to_napi, NodeWords,
};
use crate::front::{forget_reader_of, int_out, read_below, register, NodeFront, Out};
use crate::stats::{counts, Counts};
use crate::words::{keep, nothing_kept, Regions, Views};

/// How a cache is opened: the segment's options and the cache's defaults,
/// checked by the JavaScript `Cache` for types and here for ranges.
#[napi(object)]
pub struct OpenOptions {
    /// Bytes of entries: a number or a string like "256MiB" (none: 64 MiB, fitted).
    pub size: Option<Either<f64, String>>,
    /// Bytes of cached misses (none: a sixteenth of `size`, at least 1 MiB).
    pub neg_size: Option<Either<f64, String>>,
    /// The directory of the segment files.
    pub directory: Option<String>,
    /// The expected size of an entry, which sizes the index.
    pub avg_item_size: Option<f64>,
    /// Seconds a write waits for a shard lock.
    pub lock_timeout: Option<f64>,
    /// "auto", "require" or "off".
    pub huge_pages: Option<String>,
    /// Seconds a value lives.
    pub ttl: f64,
    /// Seconds a loader's miss is cached (none: not cached).
    pub neg_ttl: Option<f64>,
    /// Seconds a stale value may answer a failed load (none: off).
    pub stale_ttl: Option<f64>,
    /// The fraction of a loaded TTL taken off at random.
    pub jitter: f64,
    /// Seconds a waiter waits for another caller's load.
    pub loader_timeout: f64,
    /// Whether the caller keeps an L1 (and so wants the words it watches).
    pub l1: bool,
    /// Values are encoded in JavaScript (serializer 'msgpack'): stored and
    /// read as the bytes it gives (counters apart).
    pub raw_values: Option<bool>,
    /// The last fraction of a loaded value's TTL in which a `getOrSet` hit
    /// starts an early refresh (none: 0, never).
    pub refresh_ahead: Option<f64>,
    /// Whether a file that cannot be attached (another layout, damaged) is
    /// replaced by a new empty one instead of refused.
    pub recreate: Option<bool>,
    /// The group the files are shared with (mode 660): a group name or a gid.
    pub group: Option<Either<f64, String>>,
    /// The cache's version: a segment of its own (`<name>.ver-<version>`).
    pub version: Option<Either<f64, String>>,
    /// The cache joins the cluster tier (`NativeTier.join` follows).
    pub joining: Option<bool>,
}

/// A snapshot `NativeCache.fill` compares against (from `NativeCache.seen`).
#[napi]
pub struct Seen((u32, u64, u64));

/// Why a cache's segments could not be opened (the package then runs the
/// cache degraded, or throws, as its `degraded` option says).
#[napi(object)]
pub struct OpenFailure {
    /// The stable short name (missing_directory, not_writable, other_owner,
    /// no_space, damaged, incompatible, locked, no_huge_pages, unsupported_platform, io).
    pub cause: String,
    /// What happened and what to do, naming the file.
    pub reason: String,
}

/// What a write with tags works on: the cache, the key's bytes, the tags' bytes.
type WriteTarget<'c, 'k> = (&'c Arc<Cache>, &'k [u8], Vec<Vec<u8>>);

/// One cache as a Node.js process uses it.
#[napi]
pub struct NativeCache {
    pub(crate) cache: Option<Arc<Cache>>,
    pub(crate) name: String,
    pub(crate) regions: Option<Regions>,
    /// The read-only views JavaScript's L1 loads words through: handed out
    /// once (`words`), retired as the cache closes.
    views: Option<Views>,
    words_given: bool,
    pub(crate) foreign: Arc<AtomicU64>,
    /// Values are encoded in JavaScript (`OpenOptions::raw_values`).
    pub(crate) raw: bool,
    notice: Option<String>,
    /// Set when the entries' file was made with other parameters than this
    /// open's: it is used as it is, and the package says so with the remedy.
    resized: Option<String>,
    failure: Option<(String, String)>,
    /// The slot of this cache's reader (see `reader`).
    slot: Option<u32>,
    /// The main segment's name (the cluster tier names its keys by it).
    pub(crate) segment: String,
    /// Whether this cache joins (or joined) the cluster tier: its writes go
    /// through it, and a segment joined by another process is no refusal.
    pub(crate) joined: bool,
}

impl Drop for NativeCache {
    /// A cache dropped without `close()` frees its reader's slot, which holds
    /// the cache (a closed one freed it already, and the slot may be another's),
    /// and retires its views, as `close()` does.
    fn drop(&mut self) {
        if let (Some(slot), Some(c)) = (self.slot, &self.cache) {
            forget_reader_of(slot, c);
        }
        if let Some(v) = self.views.take() {
            v.retire();
        }
    }
}

/// The bytes of the size option `arg` (the rules name the main segment's).
fn size_of(v: Option<Either<f64, String>>, arg: Arg) -> Result<Option<u64>> {
    let r = match v {
        None => return Ok(None),
        Some(Either::A(n)) if n.fract() == 0.0 => size_bytes(n as i128),
        Some(Either::A(n)) => {
            return Err(invalid(format!(
                "{} must be a whole number of bytes, got {}",
                NodeWords.arg(arg),
                js_number(n)
            )))
        }
        Some(Either::B(s)) => size_text(&s),
    };
    r.map(Some).map_err(|e| match e {
        ziggurat_cache::Error::Invalid { problem, .. } => refused(arg, &problem),
        e => to_napi(e),
    })
}

/// The gid of a `group` option: a gid, or a group name looked up in the
/// host's group database (the rule of every front end).
fn gid_of(group: Option<Either<f64, String>>) -> Result<Option<u32>> {
    match group {
        None => Ok(None),
        Some(Either::A(n)) if n.fract() == 0.0 && (0.0..4_294_967_296.0).contains(&n) => {
            Ok(Some(n as u32))
        }
        Some(Either::A(n)) => Err(invalid(format!(
            "group must be a gid from 0 to 4294967295, got {}",
            js_number(n)
        ))),
        Some(Either::B(name)) => ziggurat_core::group_id(&name)
            .map(Some)
            .ok_or_else(|| invalid(format!("group {name:?} does not exist on this host"))),
    }
}

/// The main segment's name of cache `name` at the `version` option (a whole
/// number, or a string), by the rule every front end shares.
fn segment_of(name: &str, version: Option<Either<f64, String>>) -> Result<String> {
    let v = match version {
        None => None,
        Some(Either::A(n)) if n.fract() == 0.0 && (0.0..1e16).contains(&n) => {
            Some(format!("{}", n as u64))
        }
        Some(Either::A(n)) => {
            return Err(invalid(format!(
                "version must be a whole number >= 0 or a string, got {}",
                js_number(n)
            )))
        }
        Some(Either::B(s)) => Some(s),
    };
    ziggurat_cache::segment_name(name, v.as_deref()).map_err(to_napi)
}

/// The notice of cache `name` when its entries' file is not the size this
/// open asked for (the pair's rule: a file made earlier is used as it is).
fn resized(name: &str, pair: &Pair, size: Option<u64>, avg_item_size: u64) -> Option<String> {
    let actual = pair.main.geometry().file_size();
    if actual == pair.requested.0 {
        return None;
    }
    let asked = size.map_or_else(|| "the default".to_owned(), |s| s.to_string());
    Some(format!(
        "ziggurat cache {name:?}: the segment at {} was created with other parameters \
         (a {actual}-byte file, where size={asked} and avgItemSize={avg_item_size} make a \
         {}-byte one); it is used as it is, and stats() shows its real size. To use the new \
         parameters, open the cache under a new `version`, or remove its files once no \
         process uses them (cache.unlink()) and open it again",
        pair.main.path().display(),
        pair.requested.0,
    ))
}

#[napi]
impl NativeCache {
    /// Opens (or creates) the cache `name`: the segments `name` and
    /// `name.neg`, as every front end does.
    #[napi(constructor)]
    pub fn new(name: String, o: OpenOptions) -> Result<NativeCache> {
        let defaults = CacheOptions {
            ttl: o.ttl,
            neg_ttl: o.neg_ttl,
            stale_ttl: o.stale_ttl,
            jitter: o.jitter,
            loader_timeout: o.loader_timeout,
            refresh_ahead: o.refresh_ahead.unwrap_or(0.0),
            degraded_ttl: None,
        }
        .checked()
        .map_err(to_napi)?;
        let group = gid_of(o.group)?;
        let segment = segment_of(&name, o.version)?;
        let size = size_of(o.size, Arg::Size)?;
        let neg_size = size_of(o.neg_size, Arg::NegSize)?;
        // A whole number (JavaScript checked), so the cast keeps it.
        let opts = pair_options(
            PathBuf::from(o.directory.unwrap_or_else(|| defaults::DIRECTORY.into())),
            o.recreate.unwrap_or(false),
            o.avg_item_size.unwrap_or(defaults::AVG_ITEM_SIZE as f64) as i128,
            o.lock_timeout.unwrap_or(defaults::LOCK_TIMEOUT),
            group,
            o.huge_pages.as_deref().unwrap_or(defaults::HUGE_PAGES),
        )
        .map_err(core_to_napi)?;
        let pair = match open_pair(&segment, size, neg_size, &opts) {
            Ok(pair) => pair,
            // A size out of its range is a bad argument, refused as any other (as
            // Python's ValueError), never a cache run without its segment.
            Err(ziggurat_core::Error::Invalid { arg, problem }) => {
                let main = size.unwrap_or(DEFAULT_SIZE);
                let neg_at_fault = Geometry::compute(main, opts.avg_item_size, opts.shards).is_ok();
                let arg = if arg == Arg::Size && neg_at_fault {
                    Arg::NegSize
                } else {
                    arg
                };
                return Err(refused(arg, &problem));
            }
            // Not an exception: whether the cache runs without its segment is the
            // package's `degraded` option, and it needs the cause's stable name.
            Err(e) => {
                return Ok(NativeCache {
                    cache: None,
                    name,
                    regions: None,
                    views: None,
                    words_given: false,
                    foreign: Arc::new(AtomicU64::new(0)),
                    raw: o.raw_values.unwrap_or(false),
                    notice: None,
                    resized: None,
                    failure: Some((e.cause().to_owned(), e.message(&NodeWords))),
                    slot: None,
                    segment,
                    joined: false,
                })
            }
        };
        let joined = o.joining.unwrap_or(false);
        if !joined && cluster_joined(&pair.main) {
            return Err(clustered(&name));
        }
        let resized = resized(&name, &pair, size, opts.avg_item_size);
        let regions = o.l1.then(|| Regions::of(&pair.main, &pair.neg));
        let views = if o.l1 {
            Views::of(&pair.main, &pair.neg)
        } else {
            None
        };
        let cache = Cache::new(
            Some(Arc::new(pair.main)),
            Some(Arc::new(pair.neg)),
            defaults,
            o.l1,
        )
        .map_err(to_napi)?;
        Ok(NativeCache {
            cache: Some(Arc::new(cache)),
            name,
            regions,
            views,
            words_given: false,
            foreign: Arc::new(AtomicU64::new(0)),
            raw: o.raw_values.unwrap_or(false),
            notice: pair.notice,
            resized,
            failure: None,
            slot: None,
            segment,
            joined,
        })
    }

    /// Why the segments could not be opened (this object then holds no
    /// cache: every other call fails as on a closed one); null when open.
    #[napi(getter)]
    pub fn failure(&self) -> Option<OpenFailure> {
        self.failure.as_ref().map(|(cause, reason)| OpenFailure {
            cause: cause.clone(),
            reason: reason.clone(),
        })
    }

    /// The notice of an open that fitted the default size to the directory.
    #[napi(getter)]
    pub fn notice(&self) -> Option<String> {
        self.notice.clone()
    }

    /// The notice of an open whose entries' file was made with other
    /// parameters (another `size` or `avgItemSize`), with the remedy.
    #[napi(getter)]
    pub fn resized(&self) -> Option<String> {
        self.resized.clone()
    }

    /// The stamp table, the tag table, the epoch and the cached-miss
    /// segment's tag table as buffers over a read-only view of the files (for
    /// `Atomics.load`), once: the cache's L1 takes them as it is made, and
    /// any later call gets null, as does a cache closed or opened without L1,
    /// or a runtime that cannot map them (the caller then keeps no L1).
    #[napi]
    pub fn words<'env>(&mut self, env: &'env Env) -> Result<Option<Vec<ArrayBuffer<'env>>>> {
        if self.words_given || self.cache.is_none() {
            return Ok(None);
        }
        self.words_given = true;
        match (&self.regions, &self.views) {
            (Some(_), Some(v)) => Ok(v.buffers(env)?.map(Vec::from)),
            _ => Ok(None),
        }
    }

    pub(crate) fn cache(&self) -> Result<&Arc<Cache>> {
        self.cache.as_ref().ok_or_else(|| closed(&self.name))
    }

    /// The cache for a write: refused once a cluster tier joined the segment.
    fn for_write(&self) -> Result<&Arc<Cache>> {
        let c = self.cache()?;
        if !self.joined && c.main().is_some_and(|m| cluster_joined(m)) {
            return Err(clustered(&self.name));
        }
        Ok(c)
    }

    /// The cache, key and tags of a write that carries tags, checked.
    fn write_target<'k>(
        &self,
        key: &'k KeyArg,
        tags: Option<Vec<String>>,
    ) -> Result<WriteTarget<'_, 'k>> {
        let c = self.for_write()?;
        let k = key_bytes(key);
        ziggurat_cache::check_key(k).map_err(to_napi)?;
        let tags = tag_bytes(tags);
        ziggurat_cache::check_tags(&tags).map_err(to_napi)?;
        Ok((c, k, tags))
    }

    /// Reads `key` below L1: the value, the meta words saying what it is.
    #[napi(ts_return_type = "string | Buffer | number | bigint | null")]
    pub fn read(&self, key: KeyArg) -> Result<Out> {
        let c = self.cache()?;
        Ok(
            read_below(c, key_bytes(&key), self.front())?
                .and_then(|v| v.out(self.regions.as_ref())),
        )
    }

    /// Registers this cache for `readInput()` in this thread (once); its
    /// slot, which `forgetReader` frees as the cache closes.
    #[napi]
    pub fn reader(&mut self) -> Result<u32> {
        if let Some(slot) = self.slot {
            return Ok(slot);
        }
        let slot = register(self.cache()?, self.regions, &self.foreign, self.raw);
        self.slot = Some(slot);
        Ok(slot)
    }

    /// Stores a value: JSON text (`code` 1, in `text`), bytes (2, `bytes`)
    /// or a counter (3, `num` or `big`), for `ttl` seconds with `tags`. The
    /// meta words say whether JavaScript may keep it in L1, and what the
    /// entry then watches.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn store(
        &self,
        key: KeyArg,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<()> {
        let (c, k, tags) = self.write_target(&key, tags)?;
        let (ttl, stale) =
            c.write_ttls(ziggurat_cache::ttl_or_default(ttl, Arg::Ttl).map_err(to_napi)?);
        let (body, kind) = payload(code, text, bytes, num, big)?;
        // Whatever the write does, the meta words answer for it: an L1 keep
        // after a failed or refused write must not read a previous call's words.
        let w = c.store(k, None, body, kind, ttl, stale, &tags, || ());
        self.kept(w.as_ref().ok());
        w.map(|_| ()).map_err(to_napi)
    }

    /// Says in the meta words, the one channel JavaScript's L1 reads, whether
    /// it may keep what a write left (`w`, None when nothing was written) and
    /// what the entry then watches.
    pub(crate) fn kept(&self, w: Option<&Written>) {
        match (
            self.regions.as_ref(),
            w.and_then(|w| w.kept.as_ref().map(|k| (w, k))),
        ) {
            (Some(r), Some((w, kept))) => keep(r, &kept.watch, &kept.tags, &w.trailer),
            _ => nothing_kept(),
        }
    }

    /// What `fill` compares against for `key` (its stamp, the epoch, the tag
    /// invalidations), taken before the value is made; null without a segment
    /// or while a write of the key is in progress (then do not fill).
    #[napi]
    pub fn seen(&self, key: KeyArg) -> Result<Option<Seen>> {
        let c = self.cache()?;
        Ok(c.seen(key_bytes(&key)).map(|s| Seen(s.parts())))
    }

    /// Stores a value as `store` does, only if nothing voided `seen` (taken
    /// with `seen(of)`, `of` defaulting to `key`) since; whether it stored.
    /// L1 keeps nothing of it: the next read takes it from the segment.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        &self,
        key: KeyArg,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        ttl: f64,
        tags: Option<Vec<String>>,
        seen: &Seen,
        of: Option<KeyArg>,
    ) -> Result<bool> {
        let (c, k, tags) = self.write_target(&key, tags)?;
        let ttl = ziggurat_cache::check_ttl(ttl, Arg::Ttl).map_err(to_napi)?;
        let (body, kind) = payload(code, text, bytes, None, None)?;
        let bytes = match &body {
            Body::Bytes(b) => *b,
            Body::Owned(v) => &v[..],
        };
        let of = of.as_ref().map_or(k, key_bytes);
        let Some(snap) = c.seen_from(of, seen.0) else {
            return Ok(false);
        };
        c.fill(k, bytes, kind, ttl, &tags, &snap).map_err(to_napi)
    }

    /// Stores a value only if the key holds no fresh one; whether it did.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        key: KeyArg,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<bool> {
        let (c, k, tags) = self.write_target(&key, tags)?;
        let ttl = ziggurat_cache::ttl_or_default(ttl, Arg::Ttl).map_err(to_napi)?;
        let (body, kind) = payload(code, text, bytes, num, big)?;
        let p = match &body {
            Body::Bytes(b) => b,
            Body::Owned(v) => v.as_slice(),
        };
        c.add(k, p, kind, ttl, &tags).map_err(to_napi)
    }

    /// Adds `delta` to the counter under `key` (a missing key starts from
    /// `start`); the new value.
    #[napi]
    pub fn incr(
        &self,
        key: KeyArg,
        delta: BigInt,
        start: Option<BigInt>,
        tags: Option<Vec<String>>,
    ) -> Result<Either<f64, BigInt>> {
        let (c, k, tags) = self.write_target(&key, tags)?;
        let delta = int64(&delta, "delta")?;
        let start = start.map(|s| int64(&s, "default")).transpose()?;
        let n = c.incr(k, delta, start, &tags).map_err(|e| incr_err(k, e))?;
        Ok(match int_out(n) {
            napi::bindgen_prelude::Either4::C(f) => Either::A(f),
            napi::bindgen_prelude::Either4::D(b) => Either::B(b),
            _ => Either::A(n as f64),
        })
    }

    /// A new lifetime of `ttl` seconds (none: the cache's) for the fresh
    /// value under `key`; whether there was one.
    #[napi]
    pub fn touch(&self, key: KeyArg, ttl: Option<f64>) -> Result<bool> {
        let c = self.for_write()?;
        let k = key_bytes(&key);
        ziggurat_cache::check_key(k).map_err(to_napi)?;
        let ttl = ziggurat_cache::ttl_or_default(ttl, Arg::Ttl).map_err(to_napi)?;
        c.touch(k, ttl).map_err(to_napi)
    }

    /// Removes the value of `key`; whether there was one.
    #[napi]
    pub fn delete(&self, key: KeyArg) -> Result<bool> {
        let c = self.for_write()?;
        let k = key_bytes(&key);
        ziggurat_cache::check_key(k).map_err(to_napi)?;
        c.delete(k).map_err(to_napi)
    }

    /// Voids every entry carrying any of `tags`, in every process.
    #[napi]
    pub fn invalidate_tags(&self, tags: Vec<String>) -> Result<()> {
        let c = self.for_write()?;
        let tags = tag_bytes(Some(tags));
        if tags.iter().any(|t| t.is_empty()) {
            return Err(invalid("a tag must not be empty"));
        }
        c.invalidate_tags(&tags).map_err(to_napi)
    }

    /// Empties the cache for every process.
    #[napi]
    pub fn clear(&self) -> Result<()> {
        self.for_write()?.clear().map_err(to_napi)
    }

    /// This process's counters and the segment's figures.
    #[napi]
    pub fn counts(&self) -> Result<Counts> {
        Ok(counts(self.cache()?, &self.foreign))
    }

    /// Detaches this process (the files stay for the others). The buffers
    /// `words` gave read 0 from now on, and a store into them lands in this
    /// process's own memory.
    #[napi]
    pub fn close(&mut self) {
        self.cache = None;
        if let Some(v) = self.views.take() {
            v.retire();
        }
    }

    /// Removes both files (the processes attached keep their mapping).
    #[napi]
    pub fn unlink(&self) -> Result<()> {
        let c = self.cache()?;
        for s in [c.main(), c.neg()].into_iter().flatten() {
            s.unlink().map_err(|e| to_napi(e.into()))?;
        }
        Ok(())
    }
}

impl NativeCache {
    /// The front end of one read of this cache.
    pub(crate) fn front(&self) -> NodeFront<'_> {
        NodeFront {
            foreign: &self.foreign,
            raw: self.raw,
            regions: self.regions.as_ref(),
            key: &[],
        }
    }
}
