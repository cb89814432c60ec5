//! A write that returns while a load of its key is in flight wins over the
//! load's result: the landing after `set`, `delete`, a tag invalidation or
//! `clear` stores nothing, answers the value all the same, and gives the lease
//! back, so the next caller loads again (once).

use std::sync::Arc;

use ziggurat_cache::{Body, Cache, CacheOptions, Kind, Loaded, Miss, Read, Step, Took};

mod common;
use common::{Dir, Plain};

fn cache(d: &Dir) -> Cache {
    let (m, n) = (d.segment("m", 4 << 20), d.segment("m.neg", 1 << 20));
    Cache::new(
        Some(Arc::new(m)),
        Some(Arc::new(n)),
        CacheOptions::default(),
        false,
    )
    .unwrap()
}

fn load(c: &Cache, key: &[u8], tags: &[&str]) -> Miss<Vec<u8>> {
    let tags = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
    let plan = c.plan(None, None, None, tags).unwrap();
    match c.begin(key, plan, &mut Plain).unwrap() {
        Step::Load(m) => m,
        _ => panic!("expected to hold the lease"),
    }
}

fn land(c: &Cache, key: &[u8], miss: &Miss<Vec<u8>>, v: &[u8]) -> bool {
    let landed = c.land(
        key,
        miss,
        Took::Ns(1),
        Loaded::Value(Body::Bytes(v), Kind::Value),
    );
    let w = landed.written.unwrap().unwrap();
    assert!(
        w.stored || w.kept.is_none(),
        "an L1 keeps only what was stored"
    );
    w.stored
}

fn value(c: &Cache, key: &[u8]) -> Option<Vec<u8>> {
    match c.read(key, None, false, &mut Plain).unwrap() {
        Read::Fresh(v, _) => Some(v),
        _ => None,
    }
}

fn put(c: &Cache, key: &[u8], v: &[u8], tags: &[&str]) {
    let tags: Vec<Vec<u8>> = tags.iter().map(|t| t.as_bytes().to_vec()).collect();
    c.store(
        key,
        None,
        Body::Bytes(v),
        Kind::Value,
        60.0,
        0.0,
        &tags,
        || (),
    )
    .unwrap();
}

#[test]
fn a_set_during_the_load_wins() {
    let d = Dir::new("landing-set");
    let c = cache(&d);
    let miss = load(&c, b"k", &[]);
    put(&c, b"k", b"new", &[]);
    assert!(!land(&c, b"k", &miss, b"old"));
    assert_eq!(value(&c, b"k").as_deref(), Some(&b"new"[..]));
}

#[test]
fn a_delete_during_the_load_wins() {
    let d = Dir::new("landing-delete");
    let c = cache(&d);
    let miss = load(&c, b"k", &[]);
    c.delete(b"k").unwrap();
    assert!(!land(&c, b"k", &miss, b"old"));
    assert_eq!(value(&c, b"k"), None);
    // The lease was given back: the next caller loads, and its result lands.
    let miss = load(&c, b"k", &[]);
    assert!(land(&c, b"k", &miss, b"fresh"));
    assert_eq!(value(&c, b"k").as_deref(), Some(&b"fresh"[..]));
}

#[test]
fn a_tag_invalidation_during_the_load_wins_and_others_do_not_matter() {
    let d = Dir::new("landing-tag");
    let c = cache(&d);
    let miss = load(&c, b"k", &["post:1"]);
    c.invalidate_tags(&[b"post:1".to_vec()]).unwrap();
    assert!(!land(&c, b"k", &miss, b"old"));
    assert_eq!(value(&c, b"k"), None);
    // An invalidation of a tag the result does not carry does not void it.
    let miss = load(&c, b"k", &["post:1"]);
    c.invalidate_tags(&[b"post:2".to_vec()]).unwrap();
    assert!(land(&c, b"k", &miss, b"loaded"));
    assert_eq!(value(&c, b"k").as_deref(), Some(&b"loaded"[..]));
}

#[test]
fn a_clear_during_the_load_wins() {
    let d = Dir::new("landing-clear");
    let c = cache(&d);
    let miss = load(&c, b"k", &[]);
    c.clear().unwrap();
    assert!(!land(&c, b"k", &miss, b"old"));
    assert_eq!(value(&c, b"k"), None);
}

#[test]
fn a_write_of_another_key_does_not_void_the_landing() {
    let d = Dir::new("landing-other");
    let c = cache(&d);
    let miss = load(&c, b"k", &[]);
    put(&c, b"other", b"x", &[]);
    assert!(land(&c, b"k", &miss, b"loaded"));
    assert_eq!(value(&c, b"k").as_deref(), Some(&b"loaded"[..]));
}

#[test]
fn a_set_delayed_past_a_tag_invalidation_is_stored_live() {
    // A set whose tags were resolved, then an invalidation of one returned,
    // then the set landed: the record must be live (it was written after).
    let d = Dir::new("landing-set-tags");
    let c = cache(&d);
    c.invalidate_tags(&[b"t".to_vec()]).unwrap();
    put(&c, b"k", b"a", &["t"]);
    assert_eq!(value(&c, b"k").as_deref(), Some(&b"a"[..]));
}

#[test]
fn a_tag_invalidation_during_a_load_that_found_nothing_keeps_its_miss_out() {
    let d = Dir::new("landing-negative");
    let c = cache(&d);
    let tags = vec![b"post:1".to_vec()];
    let plan = c.plan(None, Some(60.0), None, tags.clone()).unwrap();
    let Step::Load(miss) = c.begin(b"n", plan, &mut Plain).unwrap() else {
        panic!("expected to hold the lease");
    };
    c.invalidate_tags(&tags).unwrap();
    c.land(b"n", &miss, Took::Ns(1), Loaded::Null)
        .written
        .unwrap();
    assert!(
        matches!(
            c.read(b"n", None, false, &mut Plain).unwrap(),
            Read::Miss(_)
        ),
        "a miss found before the invalidation was cached after it"
    );
    // Without a write meanwhile, the miss is cached.
    let plan = c.plan(None, Some(60.0), None, tags).unwrap();
    let Step::Load(miss) = c.begin(b"n", plan, &mut Plain).unwrap() else {
        panic!("expected to hold the lease");
    };
    c.land(b"n", &miss, Took::Ns(1), Loaded::Null)
        .written
        .unwrap();
    assert!(matches!(
        c.read(b"n", None, false, &mut Plain).unwrap(),
        Read::Negative(_)
    ));
}
