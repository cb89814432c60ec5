//! The end of a load: a front end hands back how its loader ended, once, and
//! this stores the result and gives the lease back, so a front end enters the
//! crate a single time after its loader returns.

use crate::cache::Cache;
use crate::counts::Took;
use crate::entry::Kind;
use crate::error::Error;
use crate::miss::Miss;
use crate::store::{Body, Written};

/// What a loader that returned gave the front end, for [`Cache::land`].
pub enum Loaded<'a> {
    /// The value, as the front end encoded it (a 64-bit int as a
    /// [`Kind::Counter`]'s little-endian bytes).
    Value(Body<'a>, Kind),
    /// The language's null (`None`, `null`): a cached miss, if the plan
    /// caches misses.
    Null,
    /// A value that is not stored below L1: the front end could not encode
    /// it, or the cache has no segment (its L1 alone keeps the value, for
    /// [`Miss::ttl`] capped by [`Cache::degraded_trailer`]).
    Unstored,
}

/// What [`Cache::land`] did.
pub struct Landed {
    /// For a value: what the write left for an L1 entry (keep the object in
    /// L1 as after a write, see [`Written::kept`]), or why it failed (the
    /// value is still answered). `Ok(None)` for anything else.
    pub written: Result<Option<Written>, Error>,
    /// The lease is still held, because a tier below is joined: tell it how
    /// the load ended (with [`Miss::ttl`]), then [`Cache::give_back`].
    pub held: bool,
}

impl Cache {
    /// The loader returned after `took`: stores what it gave (`loaded`) as
    /// the miss's plan says, the value for [`Miss::ttl`], and gives the
    /// lease back as soon as the segment holds it (waiters find it there
    /// from then on), unless a tier below is joined: that tier may count on
    /// the lease until the front end told it ([`Landed::held`]).
    pub fn land<V>(&self, key: &[u8], miss: &Miss<V>, took: Took, loaded: Loaded<'_>) -> Landed {
        self.counts().loaded(took, true);
        let held = miss.held && self.has_tier_below();
        let early = miss.held && !held;
        let mut released = false;
        let plan = &miss.plan;
        let written = match loaded {
            Loaded::Value(body, kind) if self.main().is_some() => {
                let stale = plan.stale_ttl.unwrap_or(0.0);
                let kh = miss.keys.map(|k| k.main);
                let landing = miss.landing.as_ref();
                let tags = &plan.tags;
                let r =
                    self.store_from(key, kh, body, kind, miss.ttl, stale, tags, landing, || {
                        if let (true, Some(fl)) = (early, self.flight()) {
                            fl.end_load(key, miss.refreshing, miss.keys);
                            released = true;
                        }
                    });
                r.map(Some)
            }
            Loaded::Null => match plan.neg_ttl {
                Some(t) => self
                    .store_negative(
                        key,
                        t,
                        miss.stamp,
                        &plan.tags,
                        miss.landing_negative.as_ref(),
                    )
                    .map(|()| None),
                None => Ok(None),
            },
            _ => Ok(None),
        };
        if early && !released {
            self.give_back(key, miss);
        }
        Landed { written, held }
    }

    /// The loader raised after `took`: gives the lease back; the stale value
    /// to answer with instead, if fail-safe allows one (the front end then
    /// reports the error rather than raising it).
    pub fn failed<'a, V>(&self, key: &[u8], miss: &'a Miss<V>, took: Took) -> Option<&'a V> {
        self.counts().loaded(took, false);
        self.give_back(key, miss);
        let stale = miss.stale.as_ref()?;
        self.counts().stale_served.bump();
        Some(stale)
    }

    /// Gives back the lease the miss holds (a load abandoned, answered by
    /// the tier below, or landed while a tier below is joined), waking the
    /// waiters.
    pub fn give_back<V>(&self, key: &[u8], miss: &Miss<V>) {
        if let (true, Some(fl)) = (miss.held, self.flight()) {
            fl.end_load(key, miss.refreshing, miss.keys);
        }
    }
}
