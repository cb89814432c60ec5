//! `getOrSet` below the JavaScript L1: every call into the Cache's miss path
//! is in this file (plan, begin, the waits, after a wait, and how a load
//! ends: land and store, a cached miss, a failure, a give-back), so that a
//! change of that API is made here alone.
//!
//! A miss is a `MissState` that JavaScript hands back at each step. Waits
//! for another caller's load run off the event loop, and off libuv's thread
//! pool: a wait can last for a whole slow load, and the pool's four threads
//! are the process's file system, DNS and zlib. A few waits at a time sleep
//! on a thread each, woken the moment the load lands; any more are watched
//! by one thread for the whole process, which looks at their leases every
//! `POLL`: the threads a process starts stay few however many keys it waits
//! for. Loaders are JavaScript's: one promise per key per process (the
//! package shares it among concurrent callers), one lease per key per host.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::{BigInt, Buffer, Object, PromiseRaw};
use napi::{Either, Env, JsDeferred, Result, Task};
use napi_derive::napi;
use ziggurat_cache::{
    Body, Cache, Kind, Loaded, Lookup, Miss, Parked, Payload, Reader, Step, StepKind, Took,
    ValueCode,
};

use crate::args::{key_bytes, payload, tag_bytes, KeyArg};
use crate::cache::NativeCache;
use crate::errors::{invalid, to_napi, wait_err};
use crate::front::{NodeValue, Out};
use crate::words::found;

/// The steps as JavaScript reads them: `ziggurat_cache::StepKind`, the
/// numbering of every front end. HIT: `got()` has the value, or says a
/// cached miss (value code NEGATIVE, in the meta words since the read);
/// LOAD (and LOCAL, without a segment): run the loader, then land it;
/// WAIT: `wait`, then `afterWait`.
const HIT: u32 = StepKind::Hit as u32;
pub(crate) const LOAD: u32 = StepKind::Load as u32;
const WAIT: u32 = StepKind::Wait as u32;

/// One key's miss between the steps of `getOrSet`.
#[napi]
pub struct MissState {
    /// The cache the miss belongs to, kept so that its lease can be given
    /// back even once the JavaScript cache is closed.
    cache: Arc<Cache>,
    pub(crate) key: Vec<u8>,
    pub(crate) step: u32,
    got: Option<NodeValue>,
    pub(crate) miss: Option<Miss<NodeValue>>,
    /// Whether `got` may be kept in L1 (the cache had the mapped words).
    words: Option<crate::words::Regions>,
    /// With a value (a HIT), the early refresh this process took the key's
    /// refresh lease for (one per key per host): `takeRefresh()` hands it out.
    refresh: Option<Miss<NodeValue>>,
    /// In a cache joined to the cluster tier: the value a load stored, which
    /// `NativeTier.tell` offers to Redis (the host's lease is kept until then).
    pub(crate) offer: Option<Offer>,
}

/// A loaded value's body and kind, as the cluster tier is offered it.
pub(crate) type Offer = (Vec<u8>, Kind);

#[napi]
impl MissState {
    /// The step to act on (a `StepKind`: 1 hit, 2 load, 3 wait, 4 local).
    #[napi(getter)]
    pub fn step(&self) -> u32 {
        self.step
    }

    /// Gives the lease back without a result, if this miss still holds one
    /// (a load abandoned, or ended after the cache was closed).
    #[napi]
    pub fn give_back(&mut self) {
        if let Some(miss) = self.miss.take() {
            self.cache.give_back(&self.key, &miss);
        }
    }

    /// With a value (a HIT): the early refresh this process runs in the
    /// background, as a load step (2), once; null when none is due or
    /// another process of the host runs it.
    #[napi]
    pub fn take_refresh(&mut self) -> Option<MissState> {
        let r = self.refresh.take()?;
        Some(MissState {
            cache: self.cache.clone(),
            key: self.key.clone(),
            step: LOAD,
            got: None,
            miss: Some(r),
            words: self.words,
            refresh: None,
            offer: None,
        })
    }

    /// The value found (a HIT), once; the meta words say what it is. A HIT
    /// of a cached miss has none: the meta words say NEGATIVE, as the read
    /// left them (with what an L1 entry of it watches).
    #[napi(ts_return_type = "string | Buffer | number | bigint | null")]
    pub fn got(&mut self) -> Out {
        match self.got.take() {
            Some(v) => v.out(self.words.as_ref()),
            None if self.step == HIT => None,
            None => {
                found(ValueCode::Nothing);
                None
            }
        }
    }
}

impl Drop for MissState {
    /// A miss JavaScript dropped while it held the key's lease (a path that
    /// neither landed nor gave it back) gives it back when collected, rather
    /// than leaving the other callers to wait for the lease's deadline.
    fn drop(&mut self) {
        self.give_back();
        if let Some(r) = self.refresh.take() {
            self.cache.give_back(&self.key, &r);
        }
    }
}

impl MissState {
    fn held(&self) -> Result<&Miss<NodeValue>> {
        self.miss
            .as_ref()
            .ok_or_else(|| invalid("this miss has ended"))
    }

    /// Takes what the loader said of its result (`ctx.setTtl`, `ctx.setTags`).
    fn overridden(&mut self, ttl: Option<f64>, tags: Option<Vec<String>>) -> Result<()> {
        let miss = self
            .miss
            .as_mut()
            .ok_or_else(|| invalid("this miss has ended"))?;
        if ttl.is_none() && tags.is_none() {
            return Ok(());
        }
        let tags = tags.map(|t| tag_bytes(Some(t)));
        miss.override_with(ttl, tags).map_err(to_napi)
    }
}

/// A step as the state JavaScript holds.
fn state(nc: &NativeCache, c: &Arc<Cache>, key: Vec<u8>, step: Step<NodeValue>) -> MissState {
    let code = StepKind::of(&step) as u32;
    let (got, miss, refresh) = match step {
        Step::Value(v, refresh) => (Some(v), None, refresh),
        Step::Negative => (None, None, None),
        Step::Load(m) | Step::NoSegment(m) | Step::Wait(m) => (None, Some(m), None),
    };
    MissState {
        cache: c.clone(),
        key,
        step: code,
        got,
        miss,
        words: nc.regions,
        refresh,
        offer: None,
    }
}

/// A wait for another caller's load.
pub struct Sleeping {
    cache: Arc<Cache>,
    key: Vec<u8>,
    miss: Option<Miss<NodeValue>>,
}

impl Sleeping {
    fn sleep(&self) -> Result<()> {
        if let Some(m) = self.miss.as_ref() {
            self.cache
                .sleep(&self.key, m)
                .map_err(|e| wait_err(&self.key, e))?
                .run();
        }
        Ok(())
    }

    /// The same sleep, to be watched by the poller.
    fn park(&self) -> Result<Parked> {
        let m = self
            .miss
            .as_ref()
            .ok_or_else(|| invalid("wait(): the wait was lost"))?;
        Ok(self
            .cache
            .sleep(&self.key, m)
            .map_err(|e| wait_err(&self.key, e))?
            .park())
    }

    fn woken(&mut self) -> MissState {
        MissState {
            cache: self.cache.clone(),
            key: std::mem::take(&mut self.key),
            step: WAIT,
            got: None,
            miss: self.miss.take(),
            words: None,
            refresh: None,
            offer: None,
        }
    }

    /// Settles the wait's promise: the state to go on from, or the error
    /// (the lease, if any, goes back here: the state is dropped with it).
    fn settle(mut self, d: Deferred, slept: Result<()>) {
        match slept {
            Ok(()) => d.resolve(Box::new(move |_| Ok(self.woken()))),
            Err(e) => {
                drop(self.woken());
                d.reject(e)
            }
        }
    }
}

type Deferred = JsDeferred<MissState, Box<dyn FnOnce(Env) -> Result<MissState> + Send>>;

/// Waits that sleep on a thread of their own at once, at most: each is woken
/// by the release itself. Beyond them, waits go to the poller.
const SLEEPERS: usize = 8;
/// How often the poller looks at the leases it watches: what a wait beyond
/// `SLEEPERS` may add to the moment it sees its load land.
const POLL: Duration = Duration::from_millis(2);
/// The threads of `SLEEPERS` running now (or starting).
static SLEEPING: AtomicUsize = AtomicUsize::new(0);

/// A thread of its own for one wait, if fewer than `SLEEPERS` have one: the
/// channel to hand it the wait on. The thread is started before the wait's
/// promise is made, so that a thread that cannot start leaves no promise
/// behind; dropping the sender ends the thread.
fn sleeper() -> Option<mpsc::Sender<(Sleeping, Deferred)>> {
    if SLEEPING.fetch_add(1, Ordering::AcqRel) >= SLEEPERS {
        SLEEPING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    let (tx, rx) = mpsc::channel::<(Sleeping, Deferred)>();
    let started = std::thread::Builder::new()
        .name("ziggurat-wait".into())
        .spawn(move || {
            let Ok((s, d)) = rx.recv() else {
                SLEEPING.fetch_sub(1, Ordering::AcqRel);
                return;
            };
            let slept = s.sleep();
            // Free before the promise settles: the next wait of the key may
            // ask for a thread as soon as it does.
            SLEEPING.fetch_sub(1, Ordering::AcqRel);
            s.settle(d, slept);
        });
    if started.is_err() {
        SLEEPING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    Some(tx)
}

/// A wait the poller watches.
struct Polled {
    s: Sleeping,
    parked: Parked,
    /// When its slice ends: the wait then ends as a sleep that timed out.
    until: Instant,
    d: Deferred,
}

/// The waits the poller watches, and the signal that one was added.
static WATCHED: Mutex<Vec<Polled>> = Mutex::new(Vec::new());
static ADDED: Condvar = Condvar::new();

fn watched() -> MutexGuard<'static, Vec<Polled>> {
    // A panic while the list was held left it whole (pushes and swap_removes).
    WATCHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether the poller runs, started on the first call that needs it (and
/// again at a later call if it could not start).
fn poller() -> bool {
    static STARTED: Mutex<bool> = Mutex::new(false);
    let mut started = STARTED.lock().unwrap_or_else(PoisonError::into_inner);
    if !*started {
        *started = std::thread::Builder::new()
            .name("ziggurat-poll".into())
            .spawn(poll)
            .is_ok();
    }
    *started
}

/// The poller: every `POLL`, ends the waits whose lease was released or
/// whose slice passed; sleeps on `ADDED` while it watches none. It never
/// keeps the process alive (a promise it has not settled does).
fn poll() {
    let mut ended = Vec::new();
    loop {
        {
            let mut w = watched();
            while w.is_empty() {
                w = ADDED.wait(w).unwrap_or_else(PoisonError::into_inner);
            }
            let now = Instant::now();
            let mut i = 0;
            while i < w.len() {
                let p = &w[i];
                if now >= p.until || p.s.cache.released(&p.parked) {
                    ended.push(w.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        for p in ended.drain(..) {
            p.s.settle(p.d, Ok(()));
        }
        std::thread::sleep(POLL);
    }
}

/// The same wait on libuv's thread pool: only when no thread can be started.
impl Task for Sleeping {
    type Output = ();
    type JsValue = MissState;

    fn compute(&mut self) -> Result<()> {
        self.sleep()
    }

    fn resolve(&mut self, _env: Env, _: ()) -> Result<MissState> {
        Ok(self.woken())
    }
}

/// A payload that is not copied: an early refresh's look at an entry wants
/// its deadlines alone.
struct Unread;

impl Payload for Unread {
    type Out = ();

    fn copied(&mut self, _: &[u8]) {}

    fn written(&mut self, _: usize, _: &dyn Fn(&mut [u8])) {}
}

fn took(seconds: f64) -> Took {
    Took::seconds(seconds)
}

#[napi]
impl NativeCache {
    /// The first step after the JavaScript L1 missed `key`: the call's
    /// options checked (before any loader runs), then the lease and a read.
    #[napi]
    pub fn begin(
        &self,
        key: KeyArg,
        ttl: Option<f64>,
        neg_ttl: Option<f64>,
        stale_ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<MissState> {
        let c = self.cache()?;
        let k = key_bytes(&key).to_vec();
        ziggurat_cache::check_key(&k).map_err(to_napi)?;
        let plan = c
            .plan(ttl, neg_ttl, stale_ttl, tag_bytes(tags))
            .map_err(to_napi)?;
        c.counts().l1_misses.bump();
        let mut f = self.front();
        let step = c.begin(&k, plan, &mut f)?;
        Ok(state(self, c, k, step))
    }

    /// A `getOrSet` hit in the JavaScript L1, with early refresh on
    /// (`refreshAhead`): the early refresh of `key` as a load step (2) when
    /// its entry is in the last `refreshAhead` part of its life and this
    /// process takes the key's refresh lease (one per key per host); else
    /// the milliseconds before the entry can be due (0: ask at the next hit;
    /// Infinity: never). The entry's deadlines are read from
    /// the segment (the L1 entry keeps only the soft one); its value is not
    /// copied, and this process's read counters are left as they are (the
    /// segment's own host-wide figures count the look as a hit).
    #[napi(ts_return_type = "MissState | number")]
    pub fn refresh_of(
        &self,
        key: KeyArg,
        ttl: Option<f64>,
        neg_ttl: Option<f64>,
        stale_ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<Either<MissState, f64>> {
        let c = self.cache()?;
        let k = key_bytes(&key);
        ziggurat_cache::check_key(k).map_err(to_napi)?;
        let Some(main) = c.main() else {
            return Ok(Either::B(f64::INFINITY));
        };
        let reader = Reader::new(main, c.neg().map(|n| &**n), false);
        // Not fresh (gone, or stale): the next hit is an L1 miss, which begins anew.
        let Lookup::Fresh(found, _) = reader.lookup(k, None, false, &mut Unread) else {
            return Ok(Either::B(0.0));
        };
        let t = found.trailer;
        match c.refresh_due_in(t.soft, t.ttl_ms) {
            None => return Ok(Either::B(f64::INFINITY)),
            Some(0) => {}
            Some(ms) => return Ok(Either::B(ms as f64)),
        }
        let plan = c
            .plan(ttl, neg_ttl, stale_ttl, tag_bytes(tags))
            .map_err(to_napi)?;
        Ok(match c.refresh(k, plan) {
            Some(r) => Either::A(MissState {
                cache: c.clone(),
                key: k.to_vec(),
                step: LOAD,
                got: None,
                miss: Some(r),
                words: self.regions,
                refresh: None,
                offer: None,
            }),
            // Another caller refreshes: ask again at the next hit, as the
            // other front ends do.
            None => Either::B(0.0),
        })
    }

    /// Waits (off the event loop) until the holder of the key's lease
    /// releases it, a slice passes or `loaderTimeout` does (then rejects
    /// with a timeout); then call `afterWait`.
    #[napi(ts_return_type = "Promise<MissState>")]
    pub fn wait<'e>(
        &self,
        env: &'e Env,
        m: &mut MissState,
    ) -> Result<Either<Object<'e>, PromiseRaw<'e, MissState>>> {
        let c = self.cache()?;
        if m.step != WAIT || m.miss.is_none() {
            return Err(invalid("wait() follows a wait step"));
        }
        let s = Sleeping {
            cache: c.clone(),
            key: std::mem::take(&mut m.key),
            miss: m.miss.take(),
        };
        if let Some(tx) = sleeper() {
            let (d, promise) = env.create_deferred()?;
            // The thread waits for this message: a send cannot fail.
            let _ = tx.send((s, d));
            return Ok(Either::A(promise));
        }
        if poller() {
            let mut s = s;
            let parked = match s.park() {
                Ok(p) => p,
                Err(e) => {
                    // As a sleep's error: the state (and any lease) dropped here.
                    drop(s.woken());
                    return Err(e);
                }
            };
            let (d, promise) = env.create_deferred()?;
            let until = Instant::now() + parked.slice();
            watched().push(Polled {
                s,
                parked,
                until,
                d,
            });
            ADDED.notify_one();
            return Ok(Either::A(promise));
        }
        // No thread at all (the process is at its limit): the pool, not the event loop.
        Ok(Either::B(env.spawn(s)?.promise_object()))
    }

    /// The step after a wait: the value if it landed, else the lease again.
    #[napi]
    pub fn after_wait(&self, m: &mut MissState) -> Result<u32> {
        let c = self.cache()?;
        let miss = m
            .miss
            .take()
            .ok_or_else(|| invalid("afterWait() follows a wait"))?;
        let mut f = self.front();
        f.key = &m.key;
        let step = c.after_wait(&m.key, miss, &mut f)?;
        *m = state(self, c, std::mem::take(&mut m.key), step);
        Ok(m.step)
    }

    /// The loader returned a value after `seconds`: stores it (JSON text,
    /// bytes or a counter, as `store` takes them; for `ttl` seconds and with
    /// `tags` when the loader chose them) unless a write came since the lease
    /// was taken, and gives the lease back. The meta words say
    /// whether JavaScript may keep it in L1 (see `store`).
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn land(
        &self,
        m: &mut MissState,
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
        seconds: f64,
        ttl: Option<f64>,
        tags: Option<Vec<String>>,
    ) -> Result<()> {
        let c = self.cache()?;
        m.overridden(ttl, tags)?;
        let miss = m.held()?;
        // A value that cannot be encoded is refused before the load is counted.
        let (body, kind) = payload(code, text, bytes, num, big)?;
        let offer = c.has_tier_below().then(|| match &body {
            Body::Bytes(b) => (b.to_vec(), kind),
            Body::Owned(v) => (v.clone(), kind),
        });
        let landed = c.land(&m.key, miss, took(seconds), Loaded::Value(body, kind));
        // With a tier below, the lease is held until `NativeTier.tell` offered
        // the value there; a value refused for a write during the load is
        // older than that write, and is not offered.
        if landed.held {
            let stored = landed.written.as_ref();
            m.offer = offer.filter(|_| stored.is_ok_and(|w| w.as_ref().is_none_or(|w| w.stored)));
        } else {
            m.miss = None;
        }
        let written = landed.written.map_err(to_napi);
        self.kept(written.as_ref().ok().and_then(Option::as_ref));
        written.map(|_| ())
    }

    /// The loader found nothing (undefined or null) after `seconds`: a
    /// cached miss, if the plan caches misses (with `tags`, when the loader
    /// chose them); the lease is given back.
    #[napi]
    pub fn land_negative(
        &self,
        m: &mut MissState,
        seconds: f64,
        tags: Option<Vec<String>>,
    ) -> Result<()> {
        m.overridden(None, tags)?;
        self.land_nothing(m, seconds, Loaded::Null)
    }

    /// The loader returned after `seconds` a value JavaScript cannot encode:
    /// the load is counted, nothing is stored, the lease is given back.
    #[napi]
    pub fn land_unstored(&self, m: &mut MissState, seconds: f64) -> Result<()> {
        self.land_nothing(m, seconds, Loaded::Unstored)
    }

    fn land_nothing(&self, m: &mut MissState, seconds: f64, loaded: Loaded<'_>) -> Result<()> {
        let c = self.cache()?;
        let miss = m.held()?;
        let landed = c.land(&m.key, miss, took(seconds), loaded);
        // With a tier below, `NativeTier.tell` gives the lease back.
        if !landed.held {
            m.miss = None;
        }
        landed.written.map(|_| ()).map_err(to_napi)
    }

    /// The loader failed after `seconds`: gives the lease back; the stale
    /// value to answer with instead, if fail-safe allows one.
    #[napi(ts_return_type = "string | Buffer | number | bigint | null")]
    pub fn failed(&self, m: &mut MissState, seconds: f64) -> Result<Out> {
        let c = self.cache()?;
        let miss = m.held()?;
        let stale = c.failed(&m.key, miss, took(seconds)).map(NodeValue::copy);
        m.miss = None;
        Ok(match stale {
            Some(v) => v.out(None),
            None => {
                found(ValueCode::Nothing);
                None
            }
        })
    }

    /// Gives the lease back without a result (the call was abandoned).
    #[napi(js_name = "giveBack")]
    pub fn give_back_of(&self, m: &mut MissState) {
        m.give_back();
    }
}
