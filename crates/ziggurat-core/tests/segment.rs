//! Engine tests through the public API: behaviour, eviction, repair.

// The tests map the file themselves to damage it on purpose.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::time::Duration;

use ziggurat_core::{Error, Options, Segment};

mod common;
use common::Dir;

impl Dir {
    fn opts(&self, size: u64) -> Options {
        Options {
            size,
            directory: self.0.clone(),
            ..Options::default()
        }
    }
}

fn stat(seg: &Segment, name: &str) -> u64 {
    seg.stats().into_iter().find(|(k, _)| *k == name).unwrap().1
}

#[test]
fn set_get_overwrite_delete() {
    let d = Dir::new("basic");
    let seg = Segment::open("basic", &d.opts(4 << 20)).unwrap();
    assert_eq!(seg.get(b"a").unwrap(), None);
    seg.set(b"a", b"one", None, &[]).unwrap();
    assert_eq!(seg.get(b"a").unwrap().as_deref(), Some(&b"one"[..]));
    seg.set(b"a", b"a much longer value than before", None, &[])
        .unwrap();
    assert_eq!(
        seg.get(b"a").unwrap().as_deref(),
        Some(&b"a much longer value than before"[..])
    );
    seg.set(b"a", b"x", None, &[]).unwrap();
    assert_eq!(seg.get(b"a").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(stat(&seg, "entries"), 1);
    assert!(seg.delete(b"a").unwrap());
    assert!(!seg.delete(b"a").unwrap());
    assert_eq!(seg.get(b"a").unwrap(), None);
    assert_eq!(stat(&seg, "entries"), 0);
    assert!(seg.add(b"b", b"1", None, &[]).unwrap());
    assert!(!seg.add(b"b", b"2", None, &[]).unwrap());
    assert_eq!(seg.get(b"b").unwrap().as_deref(), Some(&b"1"[..]));
    let rep = seg.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    seg.unlink().unwrap();
}

#[test]
fn stamps_move_by_two_per_write() {
    let d = Dir::new("stamps");
    let seg = Segment::open("stamps", &d.opts(4 << 20)).unwrap();
    let kh = seg.hash(b"k");
    let s0 = seg.stamp_word(&kh).load();
    seg.set(b"k", b"v", None, &[]).unwrap();
    assert_eq!(seg.stamp_word(&kh).load(), s0 + 2);
    seg.delete(b"k").unwrap();
    assert_eq!(seg.stamp_word(&kh).load(), s0 + 4);
}

/// Whether this process still maps the file with inode `ino` (the maps list
/// shows the name the file was created under, not the one it was linked to).
fn mapped(ino: u64) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .any(|l| l.split_whitespace().nth(4) == Some(&ino.to_string()))
}

fn inode(seg: &Segment) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(seg.path()).unwrap().ino()
}

#[test]
fn word_handles_follow_writes_and_stay_loadable_after_the_segment() {
    let d = Dir::new("watch");
    let seg = Segment::open("watch", &d.opts(4 << 20)).unwrap();
    let kh = seg.hash(b"k");
    let stamp = seg.stamp_watch(&kh);
    let tag = seg.tag_watch(seg.tag_cell(b"t"));
    let epoch = seg.epoch_watch();
    let (s0, t0, e0) = (stamp.load(), tag.load(), epoch.load());
    seg.set(b"k", b"v", None, &[b"t"]).unwrap();
    seg.invalidate_tag(b"t").unwrap();
    seg.clear().unwrap();
    // Handles are Send: another thread sees the same words.
    let seen = std::thread::spawn(move || (stamp.load(), tag.load(), epoch.load()))
        .join()
        .unwrap();
    // A clear moves the epoch twice: before it empties the shards (for loads
    // in flight) and after (for L1 copies filled meanwhile).
    assert_eq!(seen, (s0 + 2, t0 + 1, e0 + 2));
    let ino = inode(&seg);
    assert!(mapped(ino));
    seg.unlink().unwrap();
    drop(seg);
    // The file's pages are released, yet the handles still load (zero pages).
    assert!(!mapped(ino));
    assert_eq!((stamp.load(), tag.load(), epoch.load()), (0, 0, 0));
}

#[test]
fn a_segment_without_handles_is_unmapped_on_drop() {
    let d = Dir::new("unmap");
    let seg = Segment::open("unmap", &d.opts(4 << 20)).unwrap();
    seg.set(b"k", b"v", None, &[]).unwrap();
    let ino = inode(&seg);
    assert!(mapped(ino));
    drop(seg);
    assert!(!mapped(ino));
}

#[test]
fn ttl_tags_clear() {
    let d = Dir::new("ttl");
    let seg = Segment::open("ttl", &d.opts(4 << 20)).unwrap();
    seg.set(b"short", b"v", Some(0.03), &[]).unwrap();
    seg.set(b"long", b"v", Some(100.0), &[b"t1", b"t2"])
        .unwrap();
    seg.set(b"other", b"v", None, &[b"t2"]).unwrap();
    assert!(seg.get(b"short").unwrap().is_some());
    std::thread::sleep(Duration::from_millis(60));
    assert!(seg.get(b"short").unwrap().is_none());
    seg.invalidate_tag(b"t1").unwrap();
    assert!(seg.get(b"long").unwrap().is_none());
    assert!(seg.get(b"other").unwrap().is_some());
    let e0 = seg.epoch().load();
    seg.clear().unwrap();
    assert!(seg.get(b"other").unwrap().is_none());
    assert_eq!(seg.epoch().load(), e0 + 2);
    assert!(matches!(
        seg.set(b"x", b"v", Some(0.0), &[]),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        seg.set(b"x", b"v", Some(f64::NAN), &[]),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        seg.set(b"", b"v", None, &[]),
        Err(Error::Invalid { .. })
    ));
    assert!(matches!(
        seg.set(b"x", b"", None, &[]),
        Err(Error::Invalid { .. })
    ));
}

#[test]
fn any_value_up_to_the_maximum_fits_and_model_agrees() {
    let d = Dir::new("evict");
    let seg = Segment::open("evict", &d.opts(2 << 20)).unwrap();
    let max = seg.geometry().max_value() as usize;
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut x: u64 = 12345;
    for i in 0..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("k{}", x % 3000).into_bytes();
        let size = match i % 100 {
            0 => max,
            1..=5 => (x % max as u64) as usize + 1,
            _ => (x % 300) as usize + 1,
        };
        let val: Vec<u8> = (0..size).map(|j| (j as u64 ^ x) as u8).collect();
        seg.set(&key, &val, None, &[]).unwrap();
        model.insert(key.clone(), val.clone());
        assert_eq!(
            seg.get(&key).unwrap().as_deref(),
            Some(&val[..]),
            "fresh write must read back"
        );
    }
    // Whatever survived eviction must be the newest value.
    let mut kept = 0;
    for (k, v) in &model {
        if let Some(got) = seg.get(k).unwrap() {
            assert_eq!(&got, v);
            kept += 1;
        }
    }
    assert!(kept > 100, "kept {kept}");
    assert!(stat(&seg, "evictions") > 0);
    let rep = seg.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
    assert_eq!(rep.entries, stat(&seg, "entries"));
}

#[test]
fn reopen_attaches_and_refuses_damage() {
    let d = Dir::new("attach");
    let a = Segment::open("att", &d.opts(4 << 20)).unwrap();
    a.set(b"k", b"v", None, &[]).unwrap();
    let b = Segment::open("att", &d.opts(8 << 20)).unwrap();
    assert_eq!(b.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    let path = a.path().to_path_buf();
    drop(a);
    drop(b);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    match Segment::open("att", &d.opts(4 << 20)) {
        Err(e @ Error::Open { .. }) => {
            assert_eq!(e.cause(), "damaged");
            assert!(e.to_string().contains("recreate"), "{e}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a damaged header must be refused"),
    }
    let mut o = d.opts(4 << 20);
    o.recreate = true;
    let c = Segment::open("att", &o).unwrap();
    assert_eq!(c.get(b"k").unwrap(), None);
}

#[test]
fn damaged_index_is_found_and_repaired() {
    let d = Dir::new("index");
    let seg = Segment::open("idx", &d.opts(4 << 20)).unwrap();
    for i in 0..2000 {
        seg.set(
            format!("key{i}").as_bytes(),
            format!("value{i}").as_bytes(),
            None,
            &[],
        )
        .unwrap();
    }
    let g = *seg.geometry();
    // Scribble over part of shard 0's index through a second mapping.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(seg.path())
        .unwrap();
    // SAFETY: a second shared mapping of the test's own file; only this test writes it.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&f).unwrap() };
    let start = (g.shards_off() + g.index_rel()) as usize;
    let mut x = 99u64;
    for b in &mut map[start..start + 4096] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    for i in 0..2000 {
        if let Some(v) = seg.get(format!("key{i}").as_bytes()).unwrap() {
            assert_eq!(v, format!("value{i}").into_bytes());
        }
    }
    let rep = seg.verify(true).unwrap();
    assert!(!rep.problems.is_empty());
    let rep2 = seg.verify(false).unwrap();
    assert!(rep2.problems.is_empty(), "{:?}", rep2.problems);
    seg.set(b"after", b"ok", None, &[]).unwrap();
    assert_eq!(seg.get(b"after").unwrap().as_deref(), Some(&b"ok"[..]));
}

#[test]
fn frequently_read_entries_survive_a_scan() {
    // S3-FIFO: entries read since they were written move to the main ring;
    // a long run of one-hit keys only churns the small ring.
    let d = Dir::new("scan");
    let seg = Segment::open("scan", &d.opts(2 << 20)).unwrap();
    let val = [7u8; 100];
    for i in 0..500 {
        seg.set(format!("hot{i}").as_bytes(), &val, None, &[])
            .unwrap();
    }
    for _ in 0..3 {
        for i in 0..500 {
            assert!(seg.get(format!("hot{i}").as_bytes()).unwrap().is_some());
        }
    }
    for i in 0..100_000 {
        seg.set(format!("scan{i}").as_bytes(), &val, None, &[])
            .unwrap();
        if i % 2000 == 0 {
            for j in 0..500 {
                let _ = seg.get(format!("hot{j}").as_bytes()).unwrap();
            }
        }
    }
    let kept = (0..500)
        .filter(|i| seg.get(format!("hot{i}").as_bytes()).unwrap().is_some())
        .count();
    assert!(
        kept >= 475,
        "only {kept} of 500 hot entries survived the scan"
    );
    let scanned = (99_000..100_000)
        .filter(|i| seg.get(format!("scan{i}").as_bytes()).unwrap().is_some())
        .count();
    assert!(
        scanned > 0,
        "recent one-hit entries should still be in the small ring"
    );
    assert!(stat(&seg, "promotions") >= 500);
}

#[test]
fn only_reads_well_after_the_write_promote() {
    // A read that follows its write within the newest eighth of the small
    // ring is a correlated reference (the same block read again by the next
    // request), not reuse: such keys leave through the ghost table. A read
    // further back in the small ring promotes as before.
    let val = [7u8; 100];
    let n = 20_000;
    let mut attempt = 0;
    let (_d, seg) = loop {
        attempt += 1;
        let d = Dir::new(&format!("correlated{attempt}"));
        let seg = Segment::open("correlated", &d.opts(2 << 20)).unwrap();
        // Fill both rings with unread keys, so promotions below are not the
        // cold start's (which promotes while the main ring has room).
        for i in 0..40_000 {
            seg.set(format!("fill{i}").as_bytes(), &val, None, &[])
                .unwrap();
        }
        let before = stat(&seg, "promotions");
        for i in 0..n {
            let k = format!("burst{i}");
            seg.set(k.as_bytes(), &val, None, &[]).unwrap();
            assert!(seg.get(k.as_bytes()).unwrap().is_some());
            assert!(seg.get(k.as_bytes()).unwrap().is_some());
        }
        let bursts = stat(&seg, "promotions") - before;
        // A ghost hit (a 23-bit fingerprint's false match: a few runs in a
        // hundred see one among this many ghosts, depending on the random
        // hash seed) writes a key straight into the full main ring, which
        // drops an unread entry for it; main may then take unread entries
        // from the small ring (`main_takes_cold`), read or not. Such a run
        // says nothing of reads: start again with another seed.
        if stat(&seg, "ghost_hits") > 0 && attempt < 6 {
            continue;
        }
        assert!(
            bursts < n / 100,
            "{bursts} of {n} keys read only right after their write were promoted"
        );
        break (d, seg);
    };
    // The small ring holds well over 1,000 of these entries: a read 500 writes
    // later is outside the newest eighth and still in the small ring.
    let lag = 500;
    let before = stat(&seg, "promotions");
    for i in 0..n + lag {
        if i < n {
            seg.set(format!("later{i}").as_bytes(), &val, None, &[])
                .unwrap();
        }
        if i >= lag {
            // A full index pair may have dropped the key meanwhile: no assert
            let _ = seg.get(format!("later{}", i - lag).as_bytes()).unwrap();
        }
    }
    let later = stat(&seg, "promotions") - before;
    assert!(
        later > n * 8 / 10,
        "only {later} of {n} keys read after {lag} more writes were promoted"
    );
}

#[test]
fn a_crashed_writer_leaves_a_repairable_shard() {
    // Simulates the state a writer killed between "stamp odd" and "stamp even"
    // leaves behind, then checks the repair a later locker runs.
    let d = Dir::new("repair");
    let seg = Segment::open("rep", &d.opts(2 << 20)).unwrap();
    seg.set(b"k", b"v", None, &[]).unwrap();
    let kh = seg.hash(b"k");
    ziggurat_core::failpoint::tear_stamp(&seg, &kh, true);
    let odd = seg.stamp_word(&kh).load();
    assert_eq!(odd % 2, 1);
    // An intent naming that stamp, as the dead writer would have left it.
    let g = *seg.geometry();
    let shard = kh.shard(g.nshards());
    let base = g.shard_off(shard);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(seg.path())
        .unwrap();
    // SAFETY: a second shared mapping of the test's own file; only this test writes it.
    let mut map = unsafe { memmap2::MmapMut::map_mut(&f).unwrap() };
    let idx = seg.stamp_index(&kh);
    map[base + 72..base + 76].copy_from_slice(&idx.to_le_bytes());
    map[base + 64..base + 68].copy_from_slice(&1u32.to_le_bytes());
    let rep = seg.verify(true).unwrap();
    assert!(
        rep.problems.iter().any(|p| p.contains("left odd")),
        "{:?}",
        rep.problems
    );
    assert_eq!(seg.stamp_word(&kh).load(), odd + 1);
    assert!(seg.verify(false).unwrap().problems.is_empty());
    assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn processes_opening_a_new_name_at_once_share_one_file() {
    let d = Dir::new("race");
    for round in 0..20 {
        let name = format!("race{round}");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let b = barrier.clone();
                let o = d.opts(2 << 20);
                let n = name.clone();
                std::thread::spawn(move || {
                    b.wait();
                    Segment::open(&n, &o).unwrap()
                })
            })
            .collect();
        let segs: Vec<Segment> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        segs[0].set(b"who", b"first", None, &[]).unwrap();
        for s in &segs {
            assert_eq!(
                s.get(b"who").unwrap().as_deref(),
                Some(&b"first"[..]),
                "round {round}"
            );
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(&d.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ziggurat-new"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
}

/// Two handles on one new segment (as two processes would have).
fn two_handles(name: &str) -> (Dir, Segment, Segment) {
    let d = Dir::new(name);
    let a = Segment::open("l", &d.opts(4 << 20)).unwrap();
    let b = Segment::open("l", &d.opts(4 << 20)).unwrap();
    (d, a, b)
}

/// `n` keys whose load lease is the cell of `key`'s: with the cell held by
/// one pid, the keys another pid finds held (a free cell is taken and given
/// back). Leaves every cell free.
fn cell_mates(seg: &Segment, key: &[u8], n: usize) -> Vec<Vec<u8>> {
    use ziggurat_core::Lease;
    assert_eq!(seg.lease_try(&seg.hash(key), 1, 10.0), Lease::Taken);
    let mates: Vec<Vec<u8>> = (0..100_000)
        .map(|j| format!("mate{j}").into_bytes())
        .filter(|k| match seg.lease_try(&seg.hash(k), 999, 10.0) {
            Lease::Held { .. } => true,
            _ => {
                assert!(seg.lease_release(&seg.hash(k), 999));
                false
            }
        })
        .take(n)
        .collect();
    assert_eq!(mates.len(), n, "too few keys share the cell");
    assert!(seg.lease_release(&seg.hash(key), 1));
    mates
}

#[test]
fn lease_take_busy_release_and_take_over() {
    use ziggurat_core::{holder_pid, Lease};
    let (_d, a, b) = two_handles("lease");
    assert_eq!(a.lease_try(&a.hash(b"k"), 100, 10.0), Lease::Taken);
    // Another handle (another process) sees it held by pid 100.
    let Lease::Held { holder, seq } = b.lease_try(&b.hash(b"k"), 200, 10.0) else {
        panic!("the lease was taken twice");
    };
    assert_eq!(holder_pid(holder), 100);
    // Only the holder releases; a release wakes the waiter's seq.
    assert!(!b.lease_release(&b.hash(b"k"), 200));
    assert!(a.lease_release(&a.hash(b"k"), 100));
    assert!(
        b.lease_wait(&b.hash(b"k"), seq, Duration::ZERO),
        "seq did not move on release"
    );
    assert_eq!(b.lease_try(&b.hash(b"k"), 200, 10.0), Lease::Taken);
    // Take-over is a compare-and-set on the holder seen: one winner.
    let Lease::Held { holder, .. } = a.lease_try(&a.hash(b"k"), 300, 10.0) else {
        panic!("held by 200");
    };
    assert!(a.lease_take_over(&a.hash(b"k"), holder, 300, 10.0));
    assert!(
        !b.lease_take_over(&b.hash(b"k"), holder, 400, 10.0),
        "two take-overs won"
    );
    assert!(
        !b.lease_release(&b.hash(b"k"), 200),
        "the old holder released the new one's lease"
    );
    assert!(a.lease_release(&a.hash(b"k"), 300));
}

#[test]
fn a_process_never_waits_for_its_own_lease_of_another_key() {
    use ziggurat_core::Lease;
    let (_d, a, b) = two_handles("lease-busy");
    let other = cell_mates(&a, b"k1", 1).remove(0);
    assert_eq!(a.lease_try(&a.hash(b"k1"), 100, 10.0), Lease::Taken);
    let k2 = a.hash(&other);
    // The holding process (pid 100, this handle) misses k2: told to load it
    // without the lease, not to wait for its own load of k1.
    assert_eq!(a.lease_try(&k2, 100, 10.0), Lease::Busy);
    // The same key still waits: one load per key among the process's threads.
    assert!(matches!(
        a.lease_try(&a.hash(b"k1"), 100, 10.0),
        Lease::Held { .. }
    ));
    // Another process waits for the cell, whatever the key.
    assert!(matches!(
        b.lease_try(&b.hash(&other), 200, 10.0),
        Lease::Held { .. }
    ));
    // A second caller of k2 in the holding process waits for the first.
    assert!(matches!(a.lease_try(&k2, 100, 10.0), Lease::Held { .. }));
    // The load of k1 ends first: the cell stays held for the load of k2 beside
    // it, or the other process would load k2 a second time.
    assert!(a.lease_release(&a.hash(b"k1"), 100));
    assert!(matches!(
        b.lease_try(&b.hash(&other), 200, 10.0),
        Lease::Held { .. }
    ));
    // Meanwhile k1 again rides on the cell too.
    assert_eq!(a.lease_try(&a.hash(b"k1"), 100, 10.0), Lease::Busy);
    assert!(a.lease_release(&a.hash(b"k1"), 100));
    assert!(
        !a.lease_release(&a.hash(b"k1"), 100),
        "a load gave back twice"
    );
    // The last load beside it ends: the cell is free.
    assert!(a.lease_release(&k2, 100));
    assert_eq!(b.lease_try(&b.hash(&other), 200, 10.0), Lease::Taken);
    // A handle releases only what it took.
    assert!(!a.lease_release(&a.hash(&other), 200));
    assert!(b.lease_release(&b.hash(&other), 200));
}

#[test]
fn a_lease_given_back_before_its_loads_beside_it_waits_for_them() {
    use ziggurat_core::Lease;
    let (_d, a, b) = two_handles("lease-ride");
    let mates = cell_mates(&a, b"m0", 2);
    let keys = [b"m0".to_vec(), mates[0].clone(), mates[1].clone()];
    assert_eq!(a.lease_try(&a.hash(&keys[0]), 100, 10.0), Lease::Taken);
    assert_eq!(a.lease_try(&a.hash(&keys[1]), 100, 10.0), Lease::Busy);
    assert_eq!(a.lease_try(&a.hash(&keys[2]), 100, 10.0), Lease::Busy);
    // Whatever order the three loads end in, the cell is held until the last.
    for (n, k) in [&keys[1], &keys[0], &keys[2]].into_iter().enumerate() {
        let Lease::Held { seq, .. } = b.lease_try(&b.hash(k), 200, 10.0) else {
            panic!("the cell was free with {} loads running", 3 - n);
        };
        assert!(a.lease_release(&a.hash(k), 100));
        let freed = b.lease_wait(&b.hash(k), seq, Duration::ZERO);
        assert_eq!(freed, n == 2, "the cell was given back after load {n}");
    }
    assert_eq!(b.lease_try(&b.hash(&keys[2]), 200, 10.0), Lease::Taken);
}

#[test]
fn a_lease_held_by_another_handle_of_the_process_is_ridden_uncounted() {
    use ziggurat_core::Lease;
    let (_d, a, a2) = two_handles("lease-two-handles");
    assert_eq!(a.lease_try(&a.hash(b"k"), 100, 10.0), Lease::Taken);
    // A second handle of the same process (pid 100) cannot wait for the first.
    assert_eq!(a2.lease_try(&a2.hash(b"k"), 100, 10.0), Lease::Busy);
    assert!(!a2.lease_release(&a2.hash(b"k"), 100));
    assert!(a.lease_release(&a.hash(b"k"), 100));
}

#[test]
fn lease_lapses_at_its_deadline() {
    use ziggurat_core::Lease;
    let d = Dir::new("lease-lapse");
    let a = Segment::open("l", &d.opts(4 << 20)).unwrap();
    assert_eq!(a.lease_try(&a.hash(b"k"), 100, 0.001), Lease::Taken);
    assert!(matches!(
        a.lease_try(&a.hash(b"k"), 200, 10.0),
        Lease::Held { .. }
    ));
    // At least 1 s and at most 3 s (whole coarse seconds, rounded up).
    std::thread::sleep(Duration::from_millis(3100));
    assert_eq!(
        a.lease_try(&a.hash(b"k"), 200, 10.0),
        Lease::Taken,
        "a lapsed lease held"
    );
}

#[test]
fn lease_wait_wakes_on_release_from_another_thread() {
    use ziggurat_core::Lease;
    let d = Dir::new("lease-wait");
    let a = std::sync::Arc::new(Segment::open("l", &d.opts(4 << 20)).unwrap());
    assert_eq!(a.lease_try(&a.hash(b"k"), 100, 10.0), Lease::Taken);
    let Lease::Held { seq, .. } = a.lease_try(&a.hash(b"k"), 200, 10.0) else {
        panic!("taken twice");
    };
    let a2 = a.clone();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        assert!(a2.lease_release(&a2.hash(b"k"), 100));
    });
    let t0 = std::time::Instant::now();
    assert!(a.lease_wait(&a.hash(b"k"), seq, Duration::from_secs(5)));
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "woken late: {:?}",
        t0.elapsed()
    );
    releaser.join().unwrap();
    // Nothing released since: a wait with the current seq times out.
    let Lease::Held { seq, .. } = ({
        assert_eq!(a.lease_try(&a.hash(b"k"), 100, 10.0), Lease::Taken);
        a.lease_try(&a.hash(b"k"), 200, 10.0)
    }) else {
        panic!("taken twice");
    };
    assert!(!a.lease_wait(&a.hash(b"k"), seq, Duration::from_millis(20)));
}

#[test]
fn a_value_of_an_eighth_of_the_segment_is_stored() {
    let d = Dir::new("eighth");
    let size = 64u64 << 20;
    let seg = Segment::open("eighth", &d.opts(size)).unwrap();
    let max = stat(&seg, "max_value_size");
    assert!(max >= size / 8, "max_value_size {max} < {}", size / 8);
    for i in 0..50u32 {
        seg.set(format!("small{i}").as_bytes(), b"v", None, &[])
            .unwrap();
    }
    let big: Vec<u8> = (0..size / 8).map(|i| (i * 7 + i / 251) as u8).collect();
    seg.set(b"big", &big, None, &[]).unwrap();
    assert_eq!(seg.get(b"big").unwrap().as_deref(), Some(&big[..]));
    // Overwriting it with another value of the same size works, too.
    let big2: Vec<u8> = big.iter().map(|b| b ^ 0x5a).collect();
    seg.set(b"big", &big2, None, &[]).unwrap();
    assert_eq!(seg.get(b"big").unwrap().as_deref(), Some(&big2[..]));
    let max_v = vec![1u8; max as usize];
    seg.set(b"max", &max_v, None, &[]).unwrap();
    assert_eq!(
        seg.get(b"max").unwrap().map(|v| v.len()),
        Some(max as usize)
    );
    match seg.set(b"over", &vec![0u8; max as usize + 1], None, &[]) {
        Err(e @ Error::Invalid { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains(&(max + 1).to_string()) && m.contains(&max.to_string()),
                "{m}"
            )
        }
        other => panic!("a value above the maximum must be refused, got {other:?}"),
    }
    let rep = seg.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}

#[test]
fn rewrite_reads_and_writes_under_one_lock() {
    use ziggurat_core::Rewrite;
    let d = Dir::new("rewrite");
    let seg = Segment::open("rw", &d.opts(2 << 20)).unwrap();
    let bump = |seg: &Segment| {
        seg.rewrite(b"n", |cur| {
            let n = cur.map_or(0, |(v, _)| u64::from_le_bytes(v.try_into().unwrap()));
            Some(Rewrite {
                value: (n + 1).to_le_bytes().to_vec(),
                expiry: 0,
                tags: None,
            })
        })
        .unwrap()
    };
    assert!(bump(&seg));
    assert!(bump(&seg));
    assert_eq!(seg.get(b"n").unwrap().unwrap(), 2u64.to_le_bytes());

    // Tags: None keeps the entry's own, so invalidating the tag still works.
    seg.set(b"t", b"a", None, &[b"tag"]).unwrap();
    let stamp = seg.stamp_word(&seg.hash(b"t")).load();
    assert!(seg
        .rewrite(b"t", |cur| {
            assert_eq!(cur.map(|(v, e)| (v.to_vec(), e)), Some((b"a".to_vec(), 0)));
            Some(Rewrite {
                value: b"b".to_vec(),
                expiry: 0,
                tags: None,
            })
        })
        .unwrap());
    assert_eq!(seg.stamp_word(&seg.hash(b"t")).load(), stamp + 2);
    assert_eq!(seg.get(b"t").unwrap().as_deref(), Some(&b"b"[..]));
    seg.invalidate_tag(b"tag").unwrap();
    assert_eq!(seg.get(b"t").unwrap(), None);

    // Declining, or a bad record, changes nothing and leaves no write open.
    assert!(!seg.rewrite(b"n", |_| None).unwrap());
    let max = seg.geometry().max_value() as usize;
    for bad in [Vec::new(), vec![0u8; max + 1]] {
        let r = seg.rewrite(b"n", |_| {
            Some(Rewrite {
                value: bad.clone(),
                expiry: 0,
                tags: None,
            })
        });
        assert!(matches!(r, Err(Error::Invalid { .. })), "{r:?}");
    }
    assert_eq!(seg.get(b"n").unwrap().unwrap(), 2u64.to_le_bytes());
    assert_eq!(seg.stamp_word(&seg.hash(b"n")).load() % 2, 0);
    let rep = seg.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}

#[test]
fn shard_empty_follows_the_entries_of_the_keys_shard() {
    let d = Dir::new("shardempty");
    let seg = Segment::open("t", &d.opts(4 << 20)).unwrap();
    let kh = seg.hash(b"k");
    assert!(seg.shard_empty(&kh));
    seg.set(b"k", b"v", None, &[]).unwrap();
    assert!(!seg.shard_empty(&kh));
    assert!(seg.delete(b"k").unwrap());
    assert!(seg.shard_empty(&kh));
    seg.set(b"k", b"v", None, &[]).unwrap();
    seg.clear().unwrap();
    assert!(seg.shard_empty(&kh));
}
