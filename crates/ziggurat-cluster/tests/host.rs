//! What the tier keeps in the host's segment, on a real segment: notes only
//! rise, even when threads note one key at once with different write times
//! (a later note is never replaced by an earlier one read before it).

use std::sync::Arc;

use ziggurat_cache::{Cache, CacheOptions};
use ziggurat_cluster::{now_us, Host, Noted};
use ziggurat_core::{Options, Segment};

struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cache(tag: &str) -> (Dir, Cache) {
    let d = std::path::PathBuf::from(format!("/dev/shm/zigcluster-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let seg = |name: &str| {
        let o = Options {
            size: 4 << 20,
            directory: d.clone(),
            ..Options::default()
        };
        Arc::new(Segment::open(name, &o).unwrap())
    };
    let c = Cache::new(
        Some(seg("m")),
        Some(seg("m.neg")),
        CacheOptions::default(),
        false,
    )
    .unwrap();
    (Dir(d), c)
}

#[test]
fn notes_written_at_once_keep_the_latest() {
    let (_d, c) = cache("notes");
    let c = Arc::new(c);
    let base = now_us();
    for round in 0..20u64 {
        let key = format!("k{round}");
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (c, key) = (c.clone(), key.clone());
                std::thread::spawn(move || {
                    let h = Host { cache: &c };
                    // Each thread notes every time up to its own last; the highest is 4*50+t.
                    for i in 0..50u64 {
                        h.note(Noted::Key(key.as_bytes()), base + (i * 4 + t) * 10);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let h = Host { cache: &c };
        assert_eq!(
            h.known(Noted::Key(key.as_bytes())),
            base + (49 * 4 + 3) * 10,
            "round {round}"
        );
        // An earlier note never lowers it; a tag's note is its own.
        h.note(Noted::Key(key.as_bytes()), base);
        assert_eq!(h.known(Noted::Key(key.as_bytes())), base + 1990);
        assert_eq!(h.known(Noted::Tag(&key)), 0);
    }
}

#[test]
fn a_body_older_than_a_note_is_not_fresh() {
    let (_d, c) = cache("fresh");
    let h = Host { cache: &c };
    let w = now_us();
    h.note(Noted::Key(b"k"), w);
    h.note(Noted::Tag("t"), w + 10);
    assert!(h.fresh(b"k", w, &[]));
    assert!(!h.fresh(b"k", w - 1, &[]));
    assert!(!h.fresh(b"k", w + 5, &["t".to_string()]));
    assert!(h.fresh(b"other", w + 10, &["t".to_string()]));
}
