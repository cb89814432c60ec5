//! The load leases through a real pair of segments: claiming before a read.

use std::process::Command;

use ziggurat_cache::{Flight, FlightKey, Next};
use ziggurat_core::Lease;

mod common;
use common::Dir;

#[test]
fn claim_takes_a_free_lease_once_and_again_after_release() {
    let d = Dir::new("claim");
    let (main, neg) = (d.segment("m", 4 << 20), d.segment("n", 4 << 20));
    let fl = Flight::new(&main, &neg);
    let k = fl.key(b"key");
    main.set(b"key", b"v", None, &[]).unwrap();
    let stamp = main.stamp_word(k.main()).load();
    let c = fl.claim(b"key", 30.0);
    assert_eq!(
        c.next,
        Next::Load {
            main_stamp: stamp,
            recheck: false,
            took_over: false
        }
    );
    // The claim hashed the key for both segments and read both stamps.
    assert_eq!((c.keys.main(), c.keys.neg()), (k.main(), k.neg()));
    assert_eq!(c.main_stamp, stamp);
    assert_eq!(c.neg_stamp, neg.stamp_word(k.neg()).load());
    assert!(matches!(fl.claim(b"key", 30.0).next, Next::Wait { .. }));
    fl.release(&k);
    assert!(matches!(fl.claim(b"key", 30.0).next, Next::Load { .. }));
    fl.release(&k);
}

#[test]
fn claim_takes_over_from_a_holder_whose_process_is_gone() {
    let d = Dir::new("takeover");
    let (main, neg) = (d.segment("m", 4 << 20), d.segment("n", 4 << 20));
    let fl = Flight::new(&main, &neg);
    let k = fl.key(b"key");
    let mut child = Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    assert_eq!(neg.lease_try(k.neg(), gone, 30.0), Lease::Taken);
    assert!(matches!(
        fl.claim(b"key", 30.0).next,
        Next::Load {
            took_over: true,
            recheck: false,
            ..
        }
    ));
    fl.release(&k);
}

#[test]
fn from_hashes_is_the_key_hashed_by_both_segments() {
    let d = Dir::new("hashes");
    let (main, neg) = (d.segment("m", 4 << 20), d.segment("n", 4 << 20));
    let fl = Flight::new(&main, &neg);
    let k = FlightKey::from_hashes(main.hash(b"key"), neg.hash(b"key"));
    assert_eq!(k.main(), fl.key(b"key").main());
    assert_eq!(k.neg(), fl.key(b"key").neg());
    assert_ne!(k.main(), k.neg());
}
