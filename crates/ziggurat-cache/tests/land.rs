//! The end of a load through a real pair of segments: `Cache::land` stores
//! what the loader gave and gives the lease back in the same call, unless a
//! tier below is joined; a handed-off step is ended once.

use std::sync::Arc;

use ziggurat_cache::{
    Body, Cache, CacheOptions, Claim, Flight, Handoff, Kind, Loaded, Next, Read, Step, StepKind,
    Took,
};

mod common;
use common::{Dir, Plain};

fn cache(d: &Dir) -> Cache {
    let (m, n) = (d.segment("m", 4 << 20), d.segment("m.neg", 1 << 20));
    let opts = CacheOptions {
        neg_ttl: Some(60.0),
        ..CacheOptions::default()
    };
    Cache::new(Some(Arc::new(m)), Some(Arc::new(n)), opts, false).unwrap()
}

/// Another caller's claim of `key` now (this process's own load of the key
/// makes it wait while the lease is held).
fn claim(c: &Cache, key: &[u8]) -> Claim {
    let fl = Flight::new(c.main().unwrap(), c.neg().unwrap());
    fl.claim(key, 30.0)
}

fn load(c: &Cache, key: &[u8]) -> ziggurat_cache::Miss<Vec<u8>> {
    let plan = c.plan(None, None, None, Vec::new()).unwrap();
    match c.begin(key, plan, &mut Plain).unwrap() {
        Step::Load(m) => m,
        _ => panic!("expected to hold the lease"),
    }
}

#[test]
fn land_stores_the_value_and_gives_the_lease_back_in_one_call() {
    let d = Dir::new("land");
    let c = cache(&d);
    let miss = load(&c, b"k");
    assert!(matches!(claim(&c, b"k").next, Next::Wait { .. }));
    let landed = c.land(
        b"k",
        &miss,
        Took::Ns(5),
        Loaded::Value(Body::Bytes(b"v"), Kind::Value),
    );
    assert!(!landed.held);
    assert!(landed.written.unwrap().is_some());
    match c.read(b"k", None, false, &mut Plain).unwrap() {
        Read::Fresh(v, _) => assert_eq!(v, b"v"),
        _ => panic!("the value was not stored"),
    }
    // The lease is free again: the next claim takes it.
    let next = claim(&c, b"k");
    assert!(matches!(next.next, Next::Load { .. }));
    Flight::new(c.main().unwrap(), c.neg().unwrap()).release(&next.keys);
    assert_eq!(c.loader_stats().calls, 1);
}

#[test]
fn land_of_a_null_stores_a_cached_miss_and_unstored_stores_nothing() {
    let d = Dir::new("land-null");
    let c = cache(&d);
    let miss = load(&c, b"n");
    let landed = c.land(b"n", &miss, Took::Ns(1), Loaded::Null);
    assert!(landed.written.unwrap().is_none());
    assert!(matches!(
        c.read(b"n", None, false, &mut Plain).unwrap(),
        Read::Negative(_)
    ));
    let miss = load(&c, b"u");
    let landed = c.land(b"u", &miss, Took::Ns(1), Loaded::Unstored);
    assert!(landed.written.unwrap().is_none());
    assert!(matches!(
        c.read(b"u", None, false, &mut Plain).unwrap(),
        Read::Miss(_)
    ));
    assert!(matches!(claim(&c, b"u").next, Next::Load { .. }));
}

#[test]
fn with_a_tier_below_the_lease_is_held_until_given_back() {
    let d = Dir::new("land-tier");
    let c = cache(&d);
    assert!(c.join_tier_below());
    let miss = load(&c, b"k");
    let landed = c.land(
        b"k",
        &miss,
        Took::Ns(1),
        Loaded::Value(Body::Bytes(b"v"), Kind::Value),
    );
    assert!(
        landed.held,
        "the tier below may count on the lease until told"
    );
    assert!(matches!(claim(&c, b"k").next, Next::Wait { .. }));
    c.give_back(b"k", &miss);
    assert!(matches!(claim(&c, b"k").next, Next::Load { .. }));
}

#[test]
fn a_handed_off_load_is_ended_once() {
    let d = Dir::new("handoff");
    let c = cache(&d);
    let h = Handoff::new(Step::Load(load(&c, b"k")));
    assert_eq!((h.kind(), h.label()), (StepKind::Load, "LOAD"));
    assert!(h.miss_of(StepKind::Wait).is_none());
    assert!(h.take_load().is_some());
    assert!(h.take_load().is_none(), "a second end finds it ended");
    // Ended already: giving back does nothing, and the lease is still held.
    h.give_back(&c, b"k");
    assert!(matches!(claim(&c, b"k").next, Next::Wait { .. }));
    c.give_back(b"k", h.miss_of(StepKind::Load).unwrap());
    assert!(matches!(claim(&c, b"k").next, Next::Load { .. }));
}
