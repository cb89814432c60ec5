//! add, incr and touch through a real segment, with threads racing on one key.

use std::sync::Arc;

use ziggurat_cache::{add, incr, split, touch, Error, Kind, Lifetime};

mod common;
use common::Dir;

fn life(ttl: f64) -> Lifetime {
    Lifetime::from_seconds(ttl, 0.0).unwrap()
}

#[test]
fn add_stores_only_when_absent() {
    let d = Dir::new("add");
    let seg = d.segment("t", 8 << 20);
    assert!(add(&seg, b"k", b"one", Kind::Value, &life(60.0), &[]).unwrap());
    assert!(!add(&seg, b"k", b"two", Kind::Value, &life(60.0), &[]).unwrap());
    let stored = seg.get(b"k").unwrap().unwrap();
    assert_eq!(split(&stored).unwrap().0, b"one");
}

#[test]
fn add_replaces_a_stale_entry() {
    let d = Dir::new("add-stale");
    let seg = d.segment("t", 8 << 20);
    // Fresh for 1 ms, kept 60 s more for fail-safe reads: stale, but present.
    let short = Lifetime::from_seconds(0.001, 60.0).unwrap();
    assert!(add(&seg, b"k", b"old", Kind::Value, &short, &[]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert!(seg.get(b"k").unwrap().is_some());
    assert!(add(&seg, b"k", b"new", Kind::Value, &life(60.0), &[]).unwrap());
    assert_eq!(split(&seg.get(b"k").unwrap().unwrap()).unwrap().0, b"new");
}

#[test]
fn one_adder_wins_among_threads() {
    let d = Dir::new("add-race");
    let seg = Arc::new(d.segment("t", 8 << 20));
    let wins: usize = (0..8)
        .map(|i| {
            let seg = seg.clone();
            std::thread::spawn(move || {
                add(&seg, b"k", &[i as u8 + 1], Kind::Value, &life(60.0), &[]).unwrap()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap() as usize)
        .sum();
    assert_eq!(wins, 1);
}

#[test]
fn incr_counts_exactly_across_threads() {
    let d = Dir::new("incr");
    let seg = Arc::new(d.segment("t", 8 << 20));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let seg = seg.clone();
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    incr(&seg, b"n", 1, Some((0, &life(60.0), &[]))).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(incr(&seg, b"n", 0, None).unwrap(), 8000);
    assert_eq!(incr(&seg, b"n", -8001, None).unwrap(), -1);
}

#[test]
fn incr_refuses_missing_values_non_integers_and_overflow() {
    let d = Dir::new("incr-bad");
    let seg = d.segment("t", 8 << 20);
    assert!(matches!(incr(&seg, b"none", 1, None), Err(Error::Missing)));
    assert!(
        seg.get(b"none").unwrap().is_none(),
        "a refused incr stores nothing"
    );
    add(&seg, b"s", b"text", Kind::Value, &life(60.0), &[]).unwrap();
    assert!(matches!(incr(&seg, b"s", 1, None), Err(Error::NotInteger)));
    incr(&seg, b"big", 0, Some((i64::MAX, &life(60.0), &[]))).unwrap();
    assert!(matches!(incr(&seg, b"big", 1, None), Err(Error::Overflow)));
    assert_eq!(incr(&seg, b"big", 0, None).unwrap(), i64::MAX);
}

#[test]
fn incr_keeps_tags_so_invalidation_still_voids_the_counter() {
    let d = Dir::new("incr-tags");
    let seg = d.segment("t", 8 << 20);
    incr(&seg, b"n", 1, Some((0, &life(60.0), &[b"t".as_slice()]))).unwrap();
    incr(&seg, b"n", 1, None).unwrap();
    seg.invalidate_tag(b"t").unwrap();
    assert!(matches!(incr(&seg, b"n", 1, None), Err(Error::Missing)));
}

#[test]
fn touch_extends_a_fresh_entry_only() {
    let d = Dir::new("touch");
    let seg = d.segment("t", 8 << 20);
    assert!(!touch(&seg, b"k", &life(60.0)).unwrap());
    add(&seg, b"k", b"v", Kind::Value, &life(0.05), &[]).unwrap();
    assert!(touch(&seg, b"k", &life(60.0)).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(120));
    let stored = seg
        .get(b"k")
        .unwrap()
        .expect("touched entry outlives its first TTL");
    let (payload, t) = split(&stored).unwrap();
    assert_eq!(payload, b"v");
    assert_eq!(t.ttl_ms, 60_000);
    let never = Lifetime::from_seconds(f64::INFINITY, 0.0).unwrap();
    assert!(touch(&seg, b"k", &never).unwrap());
    assert_eq!(split(&seg.get(b"k").unwrap().unwrap()).unwrap().1.soft, 0);
}
