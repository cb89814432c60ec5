//! `NativeTier`: a cache joined to the cluster tier (Redis or Valkey under
//! every host), ziggurat-cluster's tier and stream reader on the cache's own
//! segment, for `new Cache(name, { redis, secret })`. Every call that talks
//! to Redis runs on the pool's threads (`pool`) and returns a promise; the
//! crate decides everything, JavaScript keeps its encoding of values, its L1
//! and the wording of what it throws. When Redis cannot take a write, the
//! promise says so (false, or null) and JavaScript writes the host alone, as
//! the crate asks (it marked the host dirty already).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{BigInt, Buffer, Either, Either4, Function, Object};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;
use ziggurat_cache::Cache;
use ziggurat_cluster as zc;

use crate::args::{int64, key_bytes, tag_bytes, KeyArg};
use crate::cache::NativeCache;
use crate::errors::{incr_err, invalid, to_napi};
use crate::front::int_out;
use crate::miss::MissState;
use crate::pool::promise;
use crate::tier_value::{asking, found, js_found, told, Owned};

/// The warnings' function, called from the tier's threads; weak: it keeps
/// no process alive.
type Warn = ThreadsafeFunction<String, (), String, Status, false, true, 0>;

/// How a cache joins the tier, checked by the JavaScript `Cache` for types.
#[napi(object)]
pub struct TierOptions {
    /// `redis://`, `rediss://`, `unix://` (or `valkey(s)://`) URLs: one
    /// server, or the seed nodes of a Redis Cluster.
    pub urls: Vec<String>,
    /// Whether the URLs are the nodes of a Redis Cluster.
    pub cluster: bool,
    /// The secrets: the first signs, every one verifies.
    pub secrets: Vec<Buffer>,
    /// Seconds a call to Redis may take.
    pub timeout: f64,
    /// Entries the invalidation stream keeps.
    pub stream_length: f64,
    /// Whether a load takes a lease across hosts.
    pub single_flight: bool,
}

/// The tier's options checked against the crate's rules, nothing made: the
/// secrets and the server.
fn checked(o: &TierOptions) -> Result<(Vec<Vec<u8>>, zc::Server)> {
    if !zc::timeout_ok(o.timeout) {
        return Err(invalid(format!(
            "redisTimeout must be seconds in (0, {}], got {}",
            zc::MAX_TIMEOUT_S,
            o.timeout
        )));
    }
    if !zc::stream_length_ok(o.stream_length) {
        return Err(invalid(format!(
            "streamLength must be a whole number >= {}, got {}",
            zc::MIN_STREAM_LENGTH,
            o.stream_length
        )));
    }
    let secrets: Vec<Vec<u8>> = o.secrets.iter().map(|s| s.to_vec()).collect();
    zc::Signer::new(b"", &secrets).map_err(secret_problem)?;
    let server = zc::Server::of(&o.urls, o.cluster).map_err(invalid)?;
    Ok((secrets, server))
}

fn secret_problem(e: zc::SecretProblem) -> napi::Error {
    match e {
        zc::SecretProblem::None => invalid("secret is required with redis"),
        zc::SecretProblem::Short(_) => invalid(format!(
            "secret must be at least {} bytes (each of them, for an array)",
            zc::MIN_SECRET
        )),
    }
}

/// Checks the cluster tier's options (`new Cache()` does, before it opens
/// any file): a RangeError says what is wrong, never a password.
#[napi]
pub fn check_tier(o: TierOptions) -> Result<()> {
    checked(&o).map(|_| ())
}

/// One cache's tier (see the module).
#[napi]
pub struct NativeTier {
    tier: Arc<zc::Tier>,
    reader: Arc<zc::Reader>,
    cache: Arc<Cache>,
    foreign: Arc<AtomicU64>,
    raw: bool,
}

impl Drop for NativeTier {
    /// A tier dropped without `close` lets its reader's thread end.
    fn drop(&mut self) {
        self.reader.halt();
    }
}

/// The tags as the tier takes them, checked as a write's.
fn tags_of(tags: Option<Vec<String>>) -> Result<Vec<String>> {
    let tags = tags.unwrap_or_default();
    let bytes = tag_bytes(Some(tags.clone()));
    ziggurat_cache::check_tags(&bytes).map_err(to_napi)?;
    Ok(tags)
}

fn strs(tags: &[String]) -> Vec<&str> {
    tags.iter().map(String::as_str).collect()
}

fn checked_key(key: &KeyArg) -> Result<Vec<u8>> {
    let k = key_bytes(key);
    ziggurat_cache::check_key(k).map_err(to_napi)?;
    Ok(k.to_vec())
}

#[napi]
impl NativeTier {
    /// Joins `native`'s cache to the tier and starts its stream reader;
    /// `warn(message)` says what the tier reports, worded by the crate.
    #[napi(factory)]
    pub fn join(
        native: &mut NativeCache,
        o: TierOptions,
        warn: Function<String, ()>,
    ) -> Result<NativeTier> {
        let c = native.cache()?.clone();
        let (secrets, server) = checked(&o)?;
        let segment = native.segment.clone();
        let signer = zc::Signer::new(segment.as_bytes(), &secrets).map_err(secret_problem)?;
        let link = zc::Link::new(server, Duration::from_secs_f64(o.timeout), zc::RETRY_AFTER)
            .map_err(invalid)?;
        let loader_timeout = Duration::from_secs_f64(c.options().loader_timeout.max(0.001));
        let settings = zc::Settings {
            name: segment.clone(),
            stream_length: o.stream_length as u64,
            tombstone: zc::tombstone_for(loader_timeout),
            single_flight: o.single_flight,
            loader_timeout,
        };
        let warn: Warn = warn
            .build_threadsafe_function::<String>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        let say = move |w: zc::Warning| {
            warn.call(w.message(&segment), ThreadsafeFunctionCallMode::NonBlocking);
        };
        let tier = Arc::new(zc::Tier::new(
            Arc::new(link),
            signer,
            settings,
            Box::new(say),
        ));
        if !c.join_tier_below() {
            return Err(invalid("this cache is joined to a tier already"));
        }
        let _ = c.app_cas(ziggurat_cache::JOINED_WORD, 0, 1);
        let reader = zc::Reader::new(tier.clone(), c.clone(), false, Duration::from_millis(500));
        reader.start();
        native.joined = true;
        Ok(NativeTier {
            tier,
            reader,
            cache: c,
            foreign: native.foreign.clone(),
            raw: native.raw,
        })
    }

    /// The value of `key` in Redis, copied into the host's segment, or null
    /// (after a miss in the host's tiers).
    #[napi(ts_return_type = "Promise<Found | null>")]
    pub fn get<'e>(&self, env: &'e Env, key: KeyArg) -> Result<Object<'e>> {
        self.read(env, checked_key(&key)?, false)
    }

    /// For a load step of `getOrSet` (`m`, which keeps the host's lease):
    /// the value of its key in Redis (with `clusterSingleFlight`, after
    /// waiting for another host's load), or null; null at once, with no
    /// promise, when the tier is not asked (an early refresh).
    #[napi(ts_return_type = "Promise<Found | null> | null")]
    pub fn ask<'e>(&self, env: &'e Env, m: &MissState) -> Result<Option<Object<'e>>> {
        match asking(m, &self.cache) {
            Some(k) => self.read(env, k, true).map(Some),
            None => Ok(None),
        }
    }

    /// After a load step ended (`land`, `landNegative`, `landUnstored`,
    /// `failed`): offers the value landed to Redis (where it lands only if
    /// no value and no recent delete is there), gives the cluster-wide lease
    /// back if held, then the host's lease.
    /// Null, with the host's lease given back at once, when there is
    /// nothing to tell Redis (no value to offer, no lease there).
    #[napi(ts_return_type = "Promise<void> | null")]
    pub fn tell<'e>(&self, env: &'e Env, m: &mut MissState) -> Result<Option<Object<'e>>> {
        let (key, miss, offer) = told(m);
        // A counter Redis could not count exactly is not offered.
        let data = offer.and_then(|(b, kind)| Owned::from_body(b, kind));
        if data.is_none() && !self.tier.holds_lease(&key) {
            if let Some(miss) = miss {
                self.cache.give_back(&key, &miss);
            }
            return Ok(None);
        }
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || {
                let (ttl, tags) = miss.as_ref().map_or((0.0, Vec::new()), |m| {
                    let tags = m.plan().tags.iter();
                    let tags = tags.map(|t| String::from_utf8_lossy(t).into_owned());
                    (m.ttl(), tags.collect())
                });
                let host = zc::Host { cache: &cache };
                tier.tell(
                    host,
                    &key,
                    data.as_ref().map(Owned::data),
                    ttl,
                    &strs(&tags),
                );
                if let Some(miss) = miss {
                    cache.give_back(&key, &miss);
                }
                Ok(())
            },
            |_, ()| Ok(()),
        )
        .map(Some)
    }

    /// `set` in Redis and this host: true; false when Redis could not take
    /// it (write the host alone).
    #[napi(ts_return_type = "Promise<boolean>")]
    #[allow(clippy::too_many_arguments)] // a value's encoding, as `store` takes it
    pub fn set<'e>(
        &self,
        env: &'e Env,
        key: KeyArg,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<Object<'e>> {
        let v = Owned::of(code, text, bytes, num, big)?;
        self.value_write(env, zc::Tier::set, key, v, ttl, tags, |r| r.is_ok())
    }

    /// `add` across the cluster: whether it stored; null when Redis could
    /// not take it (add on the host alone).
    #[napi(ts_return_type = "Promise<boolean | null>")]
    #[allow(clippy::too_many_arguments)] // a value's encoding, as `add` takes it
    pub fn add<'e>(
        &self,
        env: &'e Env,
        key: KeyArg,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<Object<'e>> {
        let v = Owned::of(code, text, bytes, num, big)?;
        self.value_write(env, zc::Tier::add, key, v, ttl, tags, |r| r.ok())
    }

    /// `delete` in Redis: whether Redis held a value (the host's own copy is
    /// the caller's to delete).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'e>(&self, env: &'e Env, key: KeyArg) -> Result<Object<'e>> {
        let k = checked_key(&key)?;
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || Ok(tier.delete(zc::Host { cache: &cache }, &k)),
            |_, held| Ok(held),
        )
    }

    /// `incr` in Redis (a missing key starts from `start`, with the cache's
    /// TTL): the count; null when Redis could not take it (count on the
    /// host alone).
    #[napi(ts_return_type = "Promise<number | bigint | null>")]
    pub fn incr<'e>(
        &self,
        env: &'e Env,
        key: KeyArg,
        delta: BigInt,
        start: BigInt,
        tags: Option<Vec<String>>,
    ) -> Result<Object<'e>> {
        let k = checked_key(&key)?;
        let (delta, start) = (int64(&delta, "delta")?, int64(&start, "default")?);
        let tags = tags_of(tags)?;
        let ttl = self.cache.options().ttl;
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || {
                let host = zc::Host { cache: &cache };
                match tier.incr(host, &k, delta, Some(start), ttl, &strs(&tags)) {
                    Ok(n) => Ok(Some(n)),
                    Err(zc::NotDone::Local) => Ok(None),
                    Err(zc::NotDone::Incr(why)) => Err(incr_refused(&k, why)),
                }
            },
            |_, n| {
                Ok(n.map(|n| match int_out(n) {
                    Either4::D(b) => Either::B(b),
                    _ => Either::A(n as f64),
                }))
            },
        )
    }

    /// `touch` in Redis: whether the key held a value; null when Redis could
    /// not take it (touch the host alone).
    #[napi(ts_return_type = "Promise<boolean | null>")]
    pub fn touch<'e>(&self, env: &'e Env, key: KeyArg, ttl: Option<f64>) -> Result<Object<'e>> {
        let k = checked_key(&key)?;
        let ttl = self.ttl(ttl)?;
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || Ok(tier.touch(zc::Host { cache: &cache }, &k, ttl).ok()),
            |_, held| Ok(held),
        )
    }

    /// `invalidateTags` in Redis and this host.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn invalidate_tags<'e>(&self, env: &'e Env, tags: Vec<String>) -> Result<Object<'e>> {
        if tags.iter().any(String::is_empty) {
            return Err(invalid("a tag must not be empty"));
        }
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || {
                tier.invalidate_tags(zc::Host { cache: &cache }, &strs(&tags));
                Ok(())
            },
            |_, ()| Ok(()),
        )
    }

    /// `clear` in Redis and this host.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn clear<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || {
                tier.clear(zc::Host { cache: &cache });
                Ok(())
            },
            |_, ()| Ok(()),
        )
    }

    /// This process's counters of the tier and its connection's state, and
    /// the host's figures (the crate's tables, by their names).
    #[napi]
    pub fn counts(&self) -> TierCounts {
        let link = &self.tier.link;
        let counts = self.tier.counts.all().into_iter();
        let figures = zc::words::FIGURES.iter();
        TierCounts {
            errors: link.errors() as f64,
            timeouts: link.timeouts() as f64,
            connected: link.up(),
            positioned: self.host().positioned(),
            counts: counts
                .map(|(name, n)| (name.to_owned(), n as f64))
                .collect(),
            host: figures
                .map(|(name, word, unit)| {
                    ((*name).to_owned(), self.host().load(*word) as f64 / unit)
                })
                .collect(),
        }
    }

    /// Stops the stream reader and gives its lease up, on a thread of its
    /// own: the reader may be inside a read that blocks for up to half a
    /// second, which the event loop must not wait for.
    #[napi]
    pub fn close(&self) {
        self.reader.halt();
        let reader = self.reader.clone();
        let _ = std::thread::Builder::new()
            .name("ziggurat-stop".into())
            .spawn(move || reader.stop());
    }
}

/// The tier's counters of one process (`stats().l3`).
#[napi(object)]
pub struct TierCounts {
    /// Calls that failed for want of the server (timeouts aside).
    pub errors: f64,
    /// Calls that timed out.
    pub timeouts: f64,
    /// Whether the last call reached the server.
    pub connected: bool,
    /// Whether the host's stream reader has a place in the stream (until then,
    /// values read from Redis are returned but not kept on the host).
    pub positioned: bool,
    /// The reads and loads of this process (`zc::Counts::all`), by their names.
    pub counts: HashMap<String, f64>,
    /// The host-wide figures (`zc::words::FIGURES`), by their names.
    pub host: HashMap<String, f64>,
}

impl NativeTier {
    fn host(&self) -> zc::Host<'_> {
        zc::Host { cache: &self.cache }
    }

    fn parts(&self) -> (Arc<zc::Tier>, Arc<Cache>, Arc<AtomicU64>, bool) {
        (
            self.tier.clone(),
            self.cache.clone(),
            self.foreign.clone(),
            self.raw,
        )
    }

    /// A write's TTL: the one given (checked) or the cache's.
    fn ttl(&self, ttl: Option<f64>) -> Result<f64> {
        let t = ziggurat_cache::ttl_or_default(ttl, ziggurat_cache::Arg::Ttl).map_err(to_napi)?;
        Ok(t.unwrap_or(self.cache.options().ttl))
    }

    /// A read of `k` in Redis (`loading`: by a load about to run its loader).
    fn read<'e>(&self, env: &'e Env, k: Vec<u8>, loading: bool) -> Result<Object<'e>> {
        let (tier, cache, foreign, raw) = self.parts();
        promise(
            env,
            move || {
                let s = tier.ask(zc::Host { cache: &cache }, &k, loading);
                Ok(s.and_then(|s| found(s, raw, &foreign)))
            },
            |_, r| Ok(js_found(r)),
        )
    }

    /// `set` or `add` (`write`) of `v` with its arguments checked; `answer`
    /// makes the promise's value of the tier's.
    #[allow(clippy::too_many_arguments)] // the call's own arguments
    fn value_write<'e, T, R>(
        &self,
        env: &'e Env,
        write: ValueWrite<T>,
        key: KeyArg,
        v: Owned,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
        answer: fn(std::result::Result<T, zc::NotDone>) -> R,
    ) -> Result<Object<'e>>
    where
        T: Send + 'static,
        R: napi::bindgen_prelude::ToNapiValue + Send + 'static,
    {
        let (k, ttl, tags) = (checked_key(&key)?, self.ttl(ttl)?, tags_of(tags)?);
        let (tier, cache, ..) = self.parts();
        promise(
            env,
            move || {
                let host = zc::Host { cache: &cache };
                Ok(answer(write(&tier, host, &k, v.data(), ttl, &strs(&tags))))
            },
            |_, r| Ok(r),
        )
    }
}

/// `zc::Tier::set` or `add`.
type ValueWrite<T> = fn(
    &zc::Tier,
    zc::Host<'_>,
    &[u8],
    zc::Data<'_>,
    f64,
    &[&str],
) -> std::result::Result<T, zc::NotDone>;

/// The write script's refusal of an `incr`, as the Cache's own refusals are
/// worded (a counter past what Redis scripts count exactly is a RangeError).
fn incr_refused(key: &[u8], why: zc::Refusal) -> napi::Error {
    match why {
        zc::Refusal::Missing => incr_err(key, ziggurat_cache::Error::Missing),
        zc::Refusal::NotInt => incr_err(key, ziggurat_cache::Error::NotInteger),
        zc::Refusal::Overflow => invalid(format!(
            "the counter {:?} would leave the range Redis scripts count exactly (±{})",
            String::from_utf8_lossy(key),
            zc::EXACT_INT
        )),
        _ => napi::Error::new(
            Status::GenericFailure,
            format!(
                "Redis refused the increment of {:?}",
                String::from_utf8_lossy(key)
            ),
        ),
    }
}
