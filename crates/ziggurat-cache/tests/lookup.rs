//! The read below L1 through a real pair of segments (main and cached misses):
//! what it returns for each kind of entry, and the words an L1 fill watches.

mod common;
use common::Dir;

use ziggurat_cache::{encode, snapshot, Bytes, Flight, Kind, Lookup, Payload, Reader, Trailer};
use ziggurat_core::failpoint::tear_stamp;
use ziggurat_core::{now_ms, Segment};

const MB4: u64 = 4 << 20;

fn value(payload: &[u8], soft: u64) -> Vec<u8> {
    let t = Trailer {
        kind: Kind::Value,
        soft,
        ttl_ms: 60_000,
    };
    encode(payload, &t)
}

fn stamp(seg: &Segment, key: &[u8]) -> u32 {
    seg.stamp_word(&seg.hash(key)).load()
}

/// A cached miss of `key` stored under the main stamp `of`.
fn negative(neg: &Segment, key: &[u8], of: u32, soft: u64) {
    let t = Trailer {
        kind: Kind::Negative,
        soft,
        ttl_ms: 60_000,
    };
    neg.set(key, &encode(&of.to_le_bytes(), &t), None, &[])
        .unwrap();
}

/// What `r` finds of `k` when stale values are not asked for: "fresh",
/// "negative" or "miss".
fn finds(r: &Reader<'_>) -> &'static str {
    match r.lookup(b"k", None, false, &mut Bytes) {
        Lookup::Fresh(..) => "fresh",
        Lookup::Stale(..) => "stale",
        Lookup::Negative(_) => "negative",
        Lookup::Miss(_) => "miss",
    }
}

#[test]
fn a_fresh_value_comes_with_the_words_an_l1_entry_watches() {
    let d = Dir::new("lookup-fresh");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    main.set(b"k", &value(b"payload", now_ms() + 60_000), None, &[b"t"])
        .unwrap();
    let r = Reader::new(&main, Some(&neg), true);
    let Lookup::Fresh(found, _) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a fresh value");
    };
    assert_eq!(found.payload, b"payload");
    assert_eq!(found.trailer.kind, Kind::Value);
    let fill = found
        .keep
        .expect("no write raced the read: an L1 may keep it");
    assert_eq!(fill.stamp.seen, stamp(&main, b"k"));
    assert!(fill.stamp.holds() && fill.epoch.holds());
    assert_eq!(found.tags.len(), 1);
    assert!(found.tags[0].holds());
    // A tag invalidation moves the tag's word; a write moves the key's stamp.
    main.invalidate_tag(b"t").unwrap();
    assert!(!found.tags[0].holds());
    main.set(b"k", &value(b"other", 0), None, &[]).unwrap();
    assert!(!fill.stamp.holds());
    assert!(fill.epoch.holds());
    let Lookup::Fresh(found, _) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a fresh value");
    };
    // A clear moves the epoch, which every entry watches.
    main.clear().unwrap();
    assert!(!found.keep.unwrap().epoch.holds());
    main.set(b"k", &value(b"other", 0), None, &[]).unwrap();
    // A reader for a front end without L1 is not given a fill.
    let r = Reader::new(&main, Some(&neg), false);
    let Lookup::Fresh(found, _) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a fresh value");
    };
    assert!(found.keep.is_none());
    assert_eq!(found.payload, b"other");
}

#[test]
fn a_stale_value_is_returned_only_when_asked_for() {
    let d = Dir::new("lookup-stale");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    // Past its soft deadline (1 ms of the monotonic clock), still stored.
    main.set(b"k", &value(b"old", 1), None, &[]).unwrap();
    // Both stamps take part in the snapshot: move the cached-miss one too.
    neg.set(b"k", b"x", None, &[]).unwrap();
    assert_ne!(stamp(&neg, b"k"), 0);
    let r = Reader::new(&main, Some(&neg), true);
    let want = snapshot(stamp(&main, b"k"), stamp(&neg, b"k"));
    let Lookup::Miss(m) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("a stale value the caller did not allow is a miss");
    };
    assert_eq!(m.stamps, want);
    let Lookup::Stale(found, m) = r.lookup(b"k", None, true, &mut Bytes) else {
        panic!("expected the stale value");
    };
    assert_eq!(found.payload, b"old");
    assert!(found.keep.is_none(), "a stale value is never kept in L1");
    assert_eq!(m.stamps, want);
    let keys = m.keys.expect("hashed for both segments");
    let fk = Flight::new(&main, &neg).key(b"k");
    assert_eq!((keys.main(), keys.neg()), (fk.main(), fk.neg()));
}

#[test]
fn a_cached_miss_counts_only_under_the_main_stamp_it_was_stored_with() {
    let d = Dir::new("lookup-neg");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    let r = Reader::new(&main, Some(&neg), true);
    assert_eq!(finds(&r), "miss");
    let s = stamp(&main, b"k");
    negative(&neg, b"k", s, now_ms() + 60_000);
    let Lookup::Negative(found) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected the cached miss");
    };
    assert_eq!(found.trailer.kind, Kind::Negative);
    assert_eq!(found.keep.map(|f| f.stamp.seen), Some(s));
    // Stored under another stamp (a write of the key came after it): a miss.
    negative(&neg, b"k", s + 2, now_ms() + 60_000);
    assert_eq!(finds(&r), "miss");
    // Past its deadline: a miss.
    negative(&neg, b"k", s, 1);
    assert_eq!(finds(&r), "miss");
    // While a write of the key is in progress (its main stamp odd), no cached
    // miss counts.
    negative(&neg, b"k", s, now_ms() + 60_000);
    let kh = main.hash(b"k");
    tear_stamp(&main, &kh, true);
    let Lookup::Miss(m) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("no cached miss while a write is in progress");
    };
    assert_eq!(m.stamps, None, "a snapshot of an odd stamp is none");
    tear_stamp(&main, &kh, false);
    assert_eq!(finds(&r), "negative");
    // A record of kind 2 in the main segment is not a value.
    negative(&main, b"k", s, now_ms() + 60_000);
    neg.delete(b"k").unwrap();
    assert_eq!(finds(&r), "miss");
    // A reader without L1 is given no fill for a cached miss either.
    negative(&neg, b"k", stamp(&main, b"k"), now_ms() + 60_000);
    let Lookup::Negative(found) =
        Reader::new(&main, Some(&neg), false).lookup(b"k", None, false, &mut Bytes)
    else {
        panic!("expected the cached miss");
    };
    assert!(found.keep.is_none());
    // Without a cached-miss segment, a miss has no hashes to hand on.
    let Lookup::Miss(m) = Reader::new(&main, None, true).lookup(b"k", None, false, &mut Bytes)
    else {
        panic!("expected a miss");
    };
    assert!(m.keys.is_none());
}

#[test]
fn a_reader_without_l1_reads_the_stamp_after_its_probe_and_hands_on_no_snapshot() {
    let d = Dir::new("lookup-nol1");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    let r = Reader::new(&main, Some(&neg), false);
    // A miss (no entry, or a stale one) carries no snapshot: the stamps were
    // read after the probe, so a lease holder must read the key again.
    let Lookup::Miss(m) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a miss");
    };
    assert_eq!(m.stamps, None);
    assert!(m.keys.is_some(), "the hashes are still handed on");
    main.set(b"k", &value(b"old", 1), None, &[]).unwrap();
    let Lookup::Stale(_, m) = r.lookup(b"k", None, true, &mut Bytes) else {
        panic!("expected the stale value");
    };
    assert_eq!(m.stamps, None);
    // A cached miss still counts only under the stamp it was stored with,
    // read after the main probe.
    main.delete(b"k").unwrap();
    let s = stamp(&main, b"k");
    negative(&neg, b"k", s, now_ms() + 60_000);
    assert_eq!(finds(&r), "negative");
    negative(&neg, b"k", s.wrapping_sub(2), now_ms() + 60_000);
    assert_eq!(finds(&r), "miss");
    negative(&neg, b"k", s, now_ms() + 60_000);
    let kh = main.hash(b"k");
    tear_stamp(&main, &kh, true);
    assert_eq!(
        finds(&r),
        "miss",
        "no cached miss while a write of the key is in progress"
    );
    tear_stamp(&main, &kh, false);
    // A fresh value needs no stamp at all; one the front end cannot decode
    // becomes a miss without a snapshot too.
    main.set(b"k", &value(b"new", now_ms() + 60_000), None, &[])
        .unwrap();
    let Lookup::Fresh(found, before) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a fresh value");
    };
    assert_eq!(found.payload, b"new");
    assert_eq!(r.missing(&before, b"k").stamps, None);
}

#[test]
fn a_record_not_written_by_a_cache_is_a_miss_and_an_undecodable_value_becomes_one() {
    let d = Dir::new("lookup-raw");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    main.set(b"raw", b"short", None, &[]).unwrap();
    // Long enough for a trailer, but its kind byte is none of a cache's.
    let mut odd = value(b"payload", 0);
    let kind_at = odd.len() - 13;
    odd[kind_at] = 9;
    main.set(b"odd", &odd, None, &[]).unwrap();
    let r = Reader::new(&main, Some(&neg), true);
    for key in [&b"raw"[..], b"odd"] {
        assert!(matches!(
            r.lookup(key, None, false, &mut Bytes),
            Lookup::Miss(_)
        ));
    }
    // A value larger than the stack copy is written in place.
    let big = vec![7u8; 10_000];
    main.set(b"k", &value(&big, 0), None, &[]).unwrap();
    let Lookup::Fresh(found, before) = r.lookup(b"k", None, false, &mut Bytes) else {
        panic!("expected a fresh value");
    };
    assert_eq!(found.payload, big);
    // The front end could not decode it: a load starts from the stamps seen
    // before the probe.
    neg.set(b"k", b"x", None, &[]).unwrap();
    assert_ne!(stamp(&neg, b"k"), 0);
    let m = r.missing(&before, b"k");
    assert_eq!(m.stamps, snapshot(stamp(&main, b"k"), stamp(&neg, b"k")));
}

/// Writes the key once, from inside the read (between its probe and its
/// check), as another process's write could land.
struct WritesOnce<'a> {
    seg: &'a Segment,
    written: bool,
}

impl Payload for WritesOnce<'_> {
    type Out = Vec<u8>;

    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        if !self.written {
            self.written = true;
            self.seg
                .set(b"k", &value(b"new", now_ms() + 60_000), None, &[])
                .unwrap();
        }
        bytes.to_vec()
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        Bytes.written(len, write)
    }
}

#[test]
fn a_value_written_during_the_read_is_returned_but_not_kept_in_l1() {
    let d = Dir::new("lookup-race");
    let (main, neg) = (d.segment("m", MB4), d.segment("n", MB4));
    main.set(b"k", &value(b"old", now_ms() + 60_000), None, &[])
        .unwrap();
    let r = Reader::new(&main, Some(&neg), true);
    let mut racing = WritesOnce {
        seg: &main,
        written: false,
    };
    let Lookup::Fresh(found, _) = r.lookup(b"k", None, false, &mut racing) else {
        panic!("expected a fresh value");
    };
    assert!(racing.written);
    // The copy of "old" was dropped when its check failed; the read went on
    // to the new record. Its stamp moved since the read began: an L1 copy
    // could not be told from a newer value, so none is offered.
    assert_eq!(found.payload, b"new");
    assert!(found.keep.is_none());
}
