//! The load leases through a real pair of segments: claiming before a read.

use std::path::PathBuf;
use std::process::Command;

use ziggurat_cache::{Flight, FlightKey, Next};
use ziggurat_core::{Lease, Options, Segment};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = PathBuf::from(format!("/dev/shm/zigflight-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    fn segment(&self, name: &str) -> Segment {
        let opts = Options {
            size: 4 << 20,
            directory: self.0.clone(),
            ..Options::default()
        };
        Segment::open(name, &opts).unwrap()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn claim_takes_a_free_lease_once_and_again_after_release() {
    let d = Dir::new("claim");
    let (main, neg) = (d.segment("m"), d.segment("n"));
    let fl = Flight::new(&main, &neg);
    let k = fl.key(b"key");
    main.set(b"key", b"v", None, &[]).unwrap();
    let stamp = main
        .stamp_word(k.main())
        .load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(
        fl.claim(&k, 30.0),
        Next::Load {
            main_stamp: stamp,
            recheck: false,
            took_over: false
        }
    );
    assert!(matches!(fl.claim(&k, 30.0), Next::Wait { .. }));
    fl.release(&k);
    assert!(matches!(fl.claim(&k, 30.0), Next::Load { .. }));
    fl.release(&k);
}

#[test]
fn claim_takes_over_from_a_holder_whose_process_is_gone() {
    let d = Dir::new("takeover");
    let (main, neg) = (d.segment("m"), d.segment("n"));
    let fl = Flight::new(&main, &neg);
    let k = fl.key(b"key");
    let mut child = Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    assert_eq!(neg.lease_try(k.neg(), gone, 30.0), Lease::Taken);
    assert!(matches!(
        fl.claim(&k, 30.0),
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
    let (main, neg) = (d.segment("m"), d.segment("n"));
    let fl = Flight::new(&main, &neg);
    let k = FlightKey::from_hashes(main.hash(b"key"), neg.hash(b"key"));
    assert_eq!(k.main(), fl.key(b"key").main());
    assert_eq!(k.neg(), fl.key(b"key").neg());
    assert_ne!(k.main(), k.neg());
}
