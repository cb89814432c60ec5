//! The miss path: what happens after L1 missed a key, as a state machine of
//! [`Step`]s that every front end drives the same way (see the crate's doc
//! for the order of calls). At most one loader per key runs on the host:
//! the caller that holds the key's load lease loads, the others wait on it
//! and find the value once it lands; a dead holder is replaced by one
//! waiter, a slow one holds the others at most `loader_timeout`. On the way:
//! refresh-ahead (a hit late in its life takes a refresh lease and reloads in
//! the background), fail-safe (a failed load answers with a stale value),
//! jitter of the loaded value's TTL, cached misses, and the points where a
//! tier below the host is asked first and told how a load ended.

use std::time::{Duration, Instant};

use crate::cache::Cache;
use crate::entry::Trailer;
use crate::error::Error;
use crate::flight::{Flight, FlightKey, Next};
use crate::front::{Front, Read};
use crate::tags::check_tags;
use crate::ttl::check_ttl;
use ziggurat_core::{Arg, Snapshot};

/// The longest single sleep of a waiter: after it, the holder's liveness is
/// checked again (a dead holder is replaced at once).
const SLICE: Duration = Duration::from_millis(250);

/// What a missed load stores its result with: the call's options resolved
/// against the cache's ([`Cache::plan`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Seconds the loaded value lives (before jitter).
    pub ttl: f64,
    /// Seconds a loader's None is cached (None: not cached).
    pub neg_ttl: Option<f64>,
    /// Seconds a stale value may answer a failed load (None: fail-safe off).
    pub stale_ttl: Option<f64>,
    /// The tags of what the load stores.
    pub tags: Vec<Vec<u8>>,
}

/// One miss of one key, carried from step to step: its plan, its lease and
/// what a failed load may answer with.
pub struct Miss<V> {
    pub(crate) plan: Plan,
    /// The TTL a loaded value is stored with: the plan's, jittered when the
    /// miss became a load.
    pub(crate) ttl: f64,
    /// The key's main stamp before the load (a cached miss counts only while
    /// the stamp still has it).
    pub(crate) stamp: u32,
    /// WAIT: the lease's release counter seen.
    seq: u32,
    /// When waiting gives up: set by the first wait, so an uncontended miss
    /// never reads the clock.
    deadline: Option<Instant>,
    /// A stale value a failed load may be answered with.
    pub(crate) stale: Option<V>,
    /// This process holds a lease for the key (the load lease, or the
    /// refresh lease of an early refresh).
    pub(crate) held: bool,
    pub(crate) refreshing: bool,
    /// The key hashed for both segments, once per miss.
    pub(crate) keys: Option<FlightKey>,
    /// What the segment held when this process took the lease, before its
    /// loader ran: the loaded value lands only while all of it still holds.
    pub(crate) landing: Option<Snapshot>,
    /// The same in the cached-miss segment, when a loader's null is cached:
    /// a tag invalidation or clear during the load keeps its miss out.
    pub(crate) landing_negative: Option<Snapshot>,
}

impl<V> Miss<V> {
    fn new(plan: Plan) -> Miss<V> {
        Miss {
            plan,
            ttl: 0.0,
            stamp: 0,
            seq: 0,
            deadline: None,
            stale: None,
            held: false,
            refreshing: false,
            keys: None,
            landing: None,
            landing_negative: None,
        }
    }

    /// The miss's plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The TTL a loaded value is stored with (the plan's, jittered): what a
    /// cache without segment keeps it for in L1, and the tier below is told.
    pub fn ttl(&self) -> f64 {
        self.ttl
    }

    /// What the loader said of its own result (the loader context's `set_ttl` and
    /// `set_tags`): it is stored for `ttl` seconds, as given (no jitter), and with `tags`
    /// instead of the plan's, a cached miss too. Each is checked as a write's argument;
    /// a refused one changes nothing. Tags chosen after the load are safe to land: the
    /// landing is refused when any tag invalidation came since the lease was taken.
    pub fn override_with(
        &mut self,
        ttl: Option<f64>,
        tags: Option<Vec<Vec<u8>>>,
    ) -> Result<(), Error> {
        let ttl = ttl.map(|t| check_ttl(t, Arg::Ttl)).transpose()?;
        if let Some(tags) = &tags {
            check_tags(tags)?;
        }
        if let Some(t) = ttl {
            self.ttl = t;
        }
        if let Some(tags) = tags {
            self.plan.tags = tags;
            // The snapshots knew the plan's tags: now any invalidation since counts.
            for s in [&mut self.landing, &mut self.landing_negative]
                .into_iter()
                .flatten()
            {
                s.forget_tags();
            }
        }
        Ok(())
    }

    /// Whether this load is an early refresh (which reloads from the source
    /// and never asks the tier below).
    pub fn is_refresh(&self) -> bool {
        self.refreshing
    }

    /// Whether this process holds a lease for the key.
    pub fn holds_lease(&self) -> bool {
        self.held
    }

    /// A copy to continue from (a front end whose step objects are shared
    /// copies the state it moves on from); `clone` copies the stale value.
    pub fn successor(&self, clone: impl Fn(&V) -> V) -> Miss<V> {
        Miss {
            plan: self.plan.clone(),
            ttl: self.ttl,
            stamp: self.stamp,
            seq: self.seq,
            deadline: self.deadline,
            stale: self.stale.as_ref().map(clone),
            held: self.held,
            refreshing: self.refreshing,
            keys: self.keys,
            landing: self.landing.clone(),
            landing_negative: self.landing_negative.clone(),
        }
    }
}

/// Where a miss stands; the front end acts on each as the crate's doc says.
pub enum Step<V> {
    /// A value: done. With a [`Miss`], this process took the key's refresh
    /// lease: run the loader in the background and end that miss like a
    /// [`Step::Load`].
    Value(V, Option<Miss<V>>),
    /// A cached miss: done (the caller's default).
    Negative,
    /// This process holds the key's load lease: ask the tier below if
    /// [`Cache::asks_tier_below`] says so, else run the loader, then
    /// [`Cache::land`] its value or [`Cache::failed`].
    Load(Miss<V>),
    /// Another caller loads: [`Cache::sleep`] (off the front end's lock),
    /// then [`Cache::after_wait`].
    Wait(Miss<V>),
    /// The cache has no segment: the front end shares one load among its
    /// own threads, and lands it like a [`Step::Load`] (no lease is held).
    NoSegment(Miss<V>),
}

/// A sleep of a waiter, made under the front end's lock and run off it.
pub struct Sleep<'a> {
    flight: Option<(Flight<'a>, FlightKey)>,
    seq: u32,
    slice: Duration,
}

impl Sleep<'_> {
    /// Sleeps until the lease holder releases, a slice passes, or the deadline.
    pub fn run(self) {
        if let Some((fl, fk)) = self.flight {
            fl.wait(&fk, self.seq, self.slice);
        }
    }

    /// The same sleep as a handle that borrows nothing, for a front end that
    /// watches many waits from one thread instead of sleeping a thread on
    /// each: it asks [`Cache::released`] until that says so or
    /// [`Parked::slice`] has passed.
    pub fn park(self) -> Parked {
        Parked {
            keys: self.flight.map(|(_, fk)| fk),
            seq: self.seq,
            slice: self.slice,
        }
    }
}

/// A [`Sleep`] that borrows nothing ([`Sleep::park`]).
#[derive(Clone, Copy, Debug)]
pub struct Parked {
    keys: Option<FlightKey>,
    seq: u32,
    slice: Duration,
}

impl Parked {
    /// How long the sleep lasts at most; after it, the front end goes on as
    /// after a [`Sleep::run`] that timed out.
    pub fn slice(&self) -> Duration {
        self.slice
    }
}

impl Cache {
    /// A call's options resolved against the cache's, each checked (before
    /// any loader runs). `tags` as the front end converted them.
    pub fn plan(
        &self,
        ttl: Option<f64>,
        neg_ttl: Option<f64>,
        stale_ttl: Option<f64>,
        tags: Vec<Vec<u8>>,
    ) -> Result<Plan, Error> {
        let o = self.options();
        let opt = |v: Option<f64>, what: Arg| v.map(|v| check_ttl(v, what)).transpose();
        let ttl = opt(ttl, Arg::Ttl)?.unwrap_or(o.ttl);
        let neg_ttl = opt(neg_ttl, Arg::NegTtl)?.or(o.neg_ttl);
        let stale_ttl = opt(stale_ttl, Arg::StaleTtl)?.or(o.stale_ttl);
        check_tags(&tags)?;
        Ok(Plan {
            ttl,
            neg_ttl,
            stale_ttl,
            tags,
        })
    }

    /// The step of a value found in L1 (or anywhere above the leases): done,
    /// and when `due` (see [`Cache::refresh_due`]) with the refresh this
    /// process runs, if it takes the key's refresh lease (one per host).
    pub fn hit<V>(&self, key: &[u8], value: V, due: bool, plan: impl FnOnce() -> Plan) -> Step<V> {
        let refresh = if due { self.refresh(key, plan()) } else { None };
        Step::Value(value, refresh)
    }

    /// The early refresh of `key`, if this process takes its refresh lease
    /// (one per key per host): run the loader in the background and end the
    /// miss as a [`Step::Load`]'s.
    pub fn refresh<V>(&self, key: &[u8], plan: Plan) -> Option<Miss<V>> {
        let fl = self.flight()?;
        if !fl.begin_refresh(key, self.options().loader_timeout) {
            return None;
        }
        self.counts().refreshes.bump();
        let mut r = Miss::new(plan);
        r.refreshing = true;
        r.held = true;
        r.ttl = self.jittered(r.plan.ttl);
        let fk = fl.key(key);
        r.stamp = fl.main_stamp(&fk);
        (r.landing, r.landing_negative) = self.landing(&fk, &r.plan);
        r.keys = Some(fk);
        Some(r)
    }

    /// The first step after L1 missed `key` (checked): the lease first, then
    /// the read below L1 (the lease's compare-and-set then does not wait for
    /// the read's loads from memory), the cached misses and, when nothing is
    /// fresh, load or wait. Without a segment, the read alone.
    pub fn begin<F: Front>(
        &self,
        key: &[u8],
        plan: Plan,
        f: &mut F,
    ) -> Result<Step<F::Value>, F::Error> {
        let Some(fl) = self.flight() else {
            let r = self.read(key, None, plan.stale_ttl.is_some(), f)?;
            return self.begin_from(key, plan, r, f);
        };
        let claim = fl.claim(key, self.options().loader_timeout);
        let (fk, next) = (claim.keys, claim.next);
        let read = self.read(key, Some(&claim), plan.stale_ttl.is_some(), f);
        let holds = matches!(next, Next::Load { .. });
        let r = match read {
            Ok(r) => r,
            Err(e) => {
                if holds {
                    fl.release(&fk);
                }
                return Err(e);
            }
        };
        let mut miss = Miss::new(plan);
        miss.keys = Some(fk);
        match r {
            Read::Fresh(..) | Read::Negative(_) => {
                if holds {
                    fl.release(&fk);
                }
                self.begin_from(key, miss.plan, r, f)
            }
            Read::Stale(v, t, _) => {
                miss.stale = self.usable_stale(&miss.plan, v, &t);
                self.leased(key, miss, &fl, &fk, next, true, f)
            }
            Read::Miss(_) => self.leased(key, miss, &fl, &fk, next, true, f),
        }
    }

    /// The first step from what a read below L1 found (made before the lease).
    fn begin_from<F: Front>(
        &self,
        key: &[u8],
        plan: Plan,
        r: Read<F::Value>,
        f: &mut F,
    ) -> Result<Step<F::Value>, F::Error> {
        let mut miss = Miss::new(plan);
        let missing = match r {
            Read::Fresh(v, t) => {
                let due = self.refresh_due(t.soft, t.ttl_ms);
                return Ok(self.hit(key, v, due, || miss.plan));
            }
            Read::Negative(_) => return Ok(Step::Negative),
            Read::Stale(v, t, missing) => {
                miss.stale = self.usable_stale(&miss.plan, v, &t);
                missing
            }
            Read::Miss(missing) => missing,
        };
        miss.keys = miss.keys.or(missing.keys);
        self.lease(key, miss, missing.stamps, f)
    }

    /// The stale value a read found, if `plan` lets a failed load answer with it.
    fn usable_stale<V>(&self, plan: &Plan, v: V, t: &Trailer) -> Option<V> {
        let since = ziggurat_core::now_ms().saturating_sub(t.soft) as f64 / 1000.0;
        plan.stale_ttl.is_some_and(|s| since < s).then_some(v)
    }

    /// Takes the lease for the miss's key, or finds who holds it. `snap`:
    /// the stamps the read before saw.
    fn lease<F: Front>(
        &self,
        key: &[u8],
        mut miss: Miss<F::Value>,
        snap: Option<u64>,
        f: &mut F,
    ) -> Result<Step<F::Value>, F::Error> {
        let Some(fl) = self.flight() else {
            miss.ttl = self.jittered(miss.plan.ttl);
            return Ok(Step::NoSegment(miss));
        };
        let fk = *miss.keys.get_or_insert_with(|| fl.key(key));
        let next = fl.begin(&fk, snap, self.options().loader_timeout);
        self.leased(key, miss, &fl, &fk, next, false, f)
    }

    /// Where the miss stands after the leases answered `next`. `claimed`:
    /// the lease was asked for before a read that found nothing, so a WAIT
    /// needs no second look and the lines a write touches are on their way.
    #[allow(clippy::too_many_arguments)]
    fn leased<F: Front>(
        &self,
        key: &[u8],
        mut miss: Miss<F::Value>,
        fl: &Flight<'_>,
        fk: &FlightKey,
        next: Next,
        claimed: bool,
        f: &mut F,
    ) -> Result<Step<F::Value>, F::Error> {
        match next {
            Next::Load {
                main_stamp,
                recheck,
                took_over,
            } => {
                if took_over {
                    self.counts().takeovers.bump();
                }
                if recheck {
                    if let Some(found) = self.find_now(key, f)? {
                        fl.release(fk);
                        return Ok(done(found));
                    }
                }
                miss.stamp = main_stamp;
                (miss.landing, miss.landing_negative) = self.landing(fk, &miss.plan);
                miss.held = true;
                miss.ttl = self.jittered(miss.plan.ttl);
                // The value will be written: start loading what the write
                // touches now, so that overlaps the loader.
                if let (false, Some(m)) = (claimed, self.main()) {
                    m.prefetch_write(fk.main());
                }
                Ok(Step::Load(miss))
            }
            Next::Wait { seq, .. } => {
                // The holder may have stored the value between the read and now.
                if !claimed {
                    if let Some(found) = self.find_now(key, f)? {
                        return Ok(done(found));
                    }
                }
                miss.seq = seq;
                if miss.deadline.is_none() {
                    miss.deadline = deadline(self.options().loader_timeout);
                }
                Ok(Step::Wait(miss))
            }
        }
    }

    /// What a load of the key must find unchanged to land, taken with its
    /// lease and before its loader runs (see [`Snapshot`]): in the main
    /// segment, and in the cached-miss one when the plan caches a null.
    fn landing(&self, fk: &FlightKey, plan: &Plan) -> (Option<Snapshot>, Option<Snapshot>) {
        let tags: Vec<&[u8]> = plan.tags.iter().map(Vec::as_slice).collect();
        let main = self
            .main()
            .and_then(|m| m.snapshot(fk.main(), Some(&tags)).ok());
        let neg = match (plan.neg_ttl, self.neg()) {
            (Some(_), Some(n)) => n.snapshot(&fk.neg, Some(&tags)).ok(),
            _ => None,
        };
        (main, neg)
    }

    /// L1, then below it: the value or cached miss of `key` if one is there now.
    fn find_now<F: Front>(
        &self,
        key: &[u8],
        f: &mut F,
    ) -> Result<Option<Option<F::Value>>, F::Error> {
        if let Some(found) = f.l1()? {
            return Ok(Some(found));
        }
        Ok(match self.read(key, None, false, f)? {
            Read::Fresh(v, _) => Some(Some(v)),
            Read::Negative(_) => Some(None),
            _ => None,
        })
    }

    /// WAIT: the sleep to run off the front end's lock, or
    /// [`Error::LoadTimeout`] past the deadline.
    pub fn sleep<V>(&self, key: &[u8], miss: &Miss<V>) -> Result<Sleep<'_>, Error> {
        // No deadline: a loader_timeout longer than any clock can count.
        let left = miss
            .deadline
            .map_or(SLICE, |d| d.saturating_duration_since(Instant::now()));
        if left.is_zero() {
            return Err(self.timed_out());
        }
        self.counts().waits.bump();
        let flight = self.flight().map(|fl| {
            let fk = miss.keys.unwrap_or_else(|| fl.key(key));
            (fl, fk)
        });
        Ok(Sleep {
            flight,
            seq: miss.seq,
            slice: left.min(SLICE),
        })
    }

    /// Whether the lease a [`Parked`] sleep waits on was released (or it has
    /// none to wait on), without waiting.
    pub fn released(&self, p: &Parked) -> bool {
        match (self.flight(), p.keys) {
            (Some(fl), Some(fk)) => fl.released(&fk, p.seq),
            _ => true,
        }
    }

    fn timed_out(&self) -> Error {
        Error::LoadTimeout {
            seconds: self.options().loader_timeout,
        }
    }

    /// The step after a wait: the value if it landed, else the lease again.
    pub fn after_wait<F: Front>(
        &self,
        key: &[u8],
        miss: Miss<F::Value>,
        f: &mut F,
    ) -> Result<Step<F::Value>, F::Error> {
        if let Some(found) = self.find_now(key, f)? {
            return Ok(done(found));
        }
        if miss.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(f.error(self.timed_out()));
        }
        self.lease(key, miss, None, f)
    }

    /// Whether a LOAD step asks the tier below before its loader (a refresh
    /// reloads from the source instead). When the tier has the value, the
    /// front end answers with it and [`Cache::give_back`]s the lease.
    pub fn asks_tier_below<V>(&self, miss: &Miss<V>) -> bool {
        self.has_tier_below() && !miss.refreshing
    }
}

/// The step of something found: a value or a cached miss.
fn done<V>(found: Option<V>) -> Step<V> {
    match found {
        Some(v) => Step::Value(v, None),
        None => Step::Negative,
    }
}

/// `seconds` from now; None when that is past any instant (never gives up).
fn deadline(seconds: f64) -> Option<Instant> {
    Duration::try_from_secs_f64(seconds)
        .ok()
        .and_then(|d| Instant::now().checked_add(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_overrides_its_ttl_and_tags_checked_as_a_write() {
        let plan = Plan {
            ttl: 60.0,
            neg_ttl: None,
            stale_ttl: None,
            tags: vec![b"posts".to_vec()],
        };
        let mut m: Miss<()> = Miss::new(plan);
        m.ttl = 57.0;
        m.override_with(None, None).unwrap();
        assert_eq!(m.ttl(), 57.0);
        m.override_with(Some(30.0), Some(vec![b"author:7".to_vec()]))
            .unwrap();
        assert_eq!(
            (m.ttl(), &m.plan().tags[..]),
            (30.0, &[b"author:7".to_vec()][..])
        );
        // A refused value changes nothing, the other one given with it included.
        assert!(m.override_with(Some(-1.0), Some(vec![])).is_err());
        assert!(m.override_with(Some(5.0), Some(vec![Vec::new()])).is_err());
        assert!(m.override_with(None, Some(vec![b"t".to_vec(); 9])).is_err());
        assert_eq!((m.ttl(), m.plan().tags.len()), (30.0, 1));
    }
}
