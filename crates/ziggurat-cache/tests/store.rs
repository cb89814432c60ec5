//! The plain writes through a real pair of segments: when an L1 may keep what
//! was written, and cached misses as the read below L1 finds them.

mod common;
use common::Dir;

use ziggurat_cache::{
    encode, store, store_negative, Bytes, Kept, Kind, Lifetime, Lookup, Reader, Trailer,
};
use ziggurat_core::Segment;

const MB4: u64 = 4 << 20;

fn life() -> Lifetime {
    Lifetime::from_seconds(60.0, 0.0).unwrap()
}

fn stored(payload: &[u8], life: &Lifetime) -> Vec<u8> {
    encode(payload, &Trailer::starting_now(Kind::Value, life.ttl_ms))
}

/// `store` of `payload` as the value of "k", for 60 s.
fn put(
    seg: &Segment,
    payload: &[u8],
    tags: &[&[u8]],
    l1: bool,
    written: impl FnOnce(),
) -> Option<Kept> {
    let l = life();
    store(
        seg,
        b"k",
        &seg.hash(b"k"),
        &stored(payload, &l),
        &l,
        tags,
        l1,
        None,
        written,
    )
    .unwrap()
    .1
}

fn stamp(seg: &Segment, key: &[u8]) -> u32 {
    seg.stamp_word(&seg.hash(key)).load()
}

#[test]
fn a_write_no_other_write_raced_may_be_kept_in_l1() {
    let d = Dir::new("store-kept");
    let main = d.segment("m", MB4);
    let mut ran = false;
    let kept = put(&main, b"v", &[b"t"], true, || ran = true).expect("nothing raced the write");
    assert!(ran, "`written` runs once the value is stored");
    assert_eq!(kept.watch.stamp.seen, stamp(&main, b"k"));
    assert!(kept.watch.stamp.holds() && kept.watch.epoch.holds());
    assert_eq!(kept.tags.len(), 1);
    assert!(kept.tags[0].holds());
    // The read below L1 finds what was written.
    let Lookup::Fresh(found, _) =
        Reader::new(&main, None, true).lookup(b"k", None, false, &mut Bytes)
    else {
        panic!("expected the value");
    };
    assert_eq!(found.payload, b"v");
    // Invalidating its tag voids both the L1 copy and the stored value.
    main.invalidate_tag(b"t").unwrap();
    assert!(!kept.tags[0].holds());
    assert!(matches!(
        Reader::new(&main, None, true).lookup(b"k", None, false, &mut Bytes),
        Lookup::Miss(_)
    ));
    // A front end without L1 is told nothing to keep.
    assert!(put(&main, b"w", &[], false, || {}).is_none());
}

#[test]
fn a_write_that_another_write_follows_at_once_is_not_kept() {
    let d = Dir::new("store-raced");
    let main = d.segment("m", MB4);
    // Another write of the key lands between this write and its check: the
    // stamp moved by 4, and an L1 copy of "mine" could hide "theirs".
    let theirs = stored(b"theirs", &life());
    let kept = put(&main, b"mine", &[], true, || {
        main.set(b"k", &theirs, None, &[]).unwrap();
    });
    assert!(kept.is_none());
}

#[test]
fn a_cached_miss_is_found_until_the_key_is_written() {
    let d = Dir::new("store-neg");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    let r = Reader::new(&main, Some(&neg), true);
    store_negative(&neg, b"k", stamp(&main, b"k"), &life(), &[], None).unwrap();
    let Lookup::Negative(found) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected the cached miss");
    };
    assert_eq!(found.trailer.kind, Kind::Negative);
    assert_eq!(found.trailer.ttl_ms, 60_000);
    main.delete(b"k").unwrap();
    assert!(matches!(
        r.lookup(b"k", None, false, &mut Bytes),
        Lookup::Miss(_)
    ));
}
