//! A front end's contract, driven from plain Rust across real processes: the
//! test binary spawns itself as children (`ZIGCACHE_ROLE` names the child's
//! part, `ZIGCACHE_DIR` the segments' directory), and every process drives
//! the Cache as the crate's doc says a front end must.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ziggurat_cache::{Body, Cache, CacheOptions, Error, Kind, Loaded, Read, Step, Took};
use ziggurat_core::{Options, Segment};

mod common;
use common::Plain;

/// The cache named `name` in `dir`, as every process of the test opens it.
fn open(dir: &Path, name: &str, opts: CacheOptions) -> Cache {
    let seg = |n: &str| {
        let o = Options {
            size: 4 << 20,
            directory: dir.to_path_buf(),
            ..Options::default()
        };
        Arc::new(Segment::open(n, &o).unwrap())
    };
    let neg = format!("{name}.neg");
    Cache::new(Some(seg(name)), Some(seg(&neg)), opts, false).unwrap()
}

/// `fetch` as a front end drives it: the steps until a value (None: a cached
/// miss), calling `loader` when this process holds the lease.
fn fetch(
    c: &Cache,
    key: &[u8],
    loader: impl FnOnce() -> Result<Option<Vec<u8>>, String>,
) -> Result<Option<Vec<u8>>, Error> {
    let plan = c.plan(None, None, None, Vec::new())?;
    let mut step = c.begin(key, plan, &mut Plain)?;
    loop {
        match step {
            Step::Value(v, refresh) => {
                if let Some(r) = refresh {
                    c.give_back(key, &r); // no background refreshes here
                }
                return Ok(Some(v));
            }
            Step::Negative => return Ok(None),
            Step::Wait(miss) => {
                c.sleep(key, &miss)?.run();
                step = c.after_wait(key, miss, &mut Plain)?;
            }
            Step::Load(miss) | Step::NoSegment(miss) => {
                return match loader() {
                    Ok(v) => {
                        let loaded = match &v {
                            Some(b) => Loaded::Value(Body::Bytes(b), Kind::Value),
                            None => Loaded::Null,
                        };
                        let landed = c.land(key, &miss, Took::Ns(0), loaded);
                        // No tier below joined: the lease is given back.
                        assert!(!landed.held);
                        landed.written?;
                        Ok(v)
                    }
                    Err(_) => match c.failed(key, &miss, Took::Ns(0)) {
                        Some(stale) => Ok(Some(stale.clone())),
                        // The loader's own error is the front end's to raise.
                        None => Err(Error::Missing),
                    },
                };
            }
        }
    }
}

fn read(c: &Cache, key: &[u8]) -> Option<Vec<u8>> {
    match c.read(key, None, false, &mut Plain).unwrap() {
        Read::Fresh(v, _) => Some(v),
        _ => None,
    }
}

/// A scratch directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = PathBuf::from(format!("/dev/shm/zigcontract-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This test binary run as a child in `role`, reading the cache in `dir`.
fn spawn(role: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env("ZIGCACHE_ROLE", role)
        .env("ZIGCACHE_DIR", dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for `child` to print `word` at the end of a line (the test
/// runner's own "test child ... " may come first).
fn said(child: &mut Child, word: &str) {
    let out = child.stdout.as_mut().unwrap();
    for line in BufReader::new(out).lines() {
        if line.unwrap().trim_end().ends_with(word) {
            return;
        }
    }
    let _ = child.kill();
    panic!("the child ended without saying {word:?}");
}

/// The loader of the shared-load test: counts its calls in the cache itself
/// (a counter every process changes atomically), then takes its time.
fn counted_load(c: &Cache) -> Result<Option<Vec<u8>>, String> {
    c.incr(b"loads", 1, Some(0), &[]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    Ok(Some(b"loaded".to_vec()))
}

/// What a child does, by `ZIGCACHE_ROLE`; without it, nothing (the test
/// runner's own run of this function).
#[test]
fn child() {
    let Ok(role) = std::env::var("ZIGCACHE_ROLE") else {
        return;
    };
    let dir = PathBuf::from(std::env::var("ZIGCACHE_DIR").unwrap());
    let c = open(&dir, "c", CacheOptions::default());
    match role.as_str() {
        "fetch" => {
            let v = fetch(&c, b"k", || counted_load(&c)).unwrap();
            assert_eq!(v.as_deref(), Some(&b"loaded"[..]));
        }
        "hold" => {
            // Take the key's lease as a loader would, say so, then hang.
            let plan = c.plan(None, None, None, Vec::new()).unwrap();
            let step = c.begin(b"k", plan, &mut Plain).unwrap();
            assert!(matches!(step, Step::Load(_)), "the lease was free");
            println!("\nheld");
            std::io::stdout().flush().unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("no role {other}"),
    }
}

#[test]
fn set_get_delete_across_processes() {
    let d = Dir::new("basic");
    let c = open(&d.0, "c", CacheOptions::default());
    c.store(
        b"k",
        None,
        Body::Bytes(b"v1"),
        Kind::Value,
        60.0,
        0.0,
        &[],
        || (),
    )
    .unwrap();
    assert_eq!(read(&c, b"k").as_deref(), Some(&b"v1"[..]));
    let other = open(&d.0, "c", CacheOptions::default());
    assert_eq!(read(&other, b"k").as_deref(), Some(&b"v1"[..]));
    assert!(other.delete(b"k").unwrap());
    assert_eq!(read(&c, b"k"), None);
    assert!(!c.delete(b"k").unwrap());
}

#[test]
fn a_fetch_miss_loads_once_among_processes_and_threads() {
    let d = Dir::new("once");
    let c = Arc::new(open(&d.0, "c", CacheOptions::default()));
    let children: Vec<Child> = (0..3).map(|_| spawn("fetch", &d.0)).collect();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let c = Arc::clone(&c);
            std::thread::spawn(move || fetch(&c, b"k", || counted_load(&c)).unwrap())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap().as_deref(), Some(&b"loaded"[..]));
    }
    for mut ch in children {
        assert!(ch.wait().unwrap().success());
    }
    assert_eq!(c.incr(b"loads", 0, None, &[]).unwrap(), 1);
    assert_eq!(read(&c, b"k").as_deref(), Some(&b"loaded"[..]));
}

#[test]
fn a_failed_load_is_answered_with_the_stale_value() {
    let d = Dir::new("stale");
    let opts = CacheOptions {
        ttl: 0.05,
        stale_ttl: Some(60.0),
        ..CacheOptions::default()
    };
    let c = open(&d.0, "c", opts);
    let v = fetch(&c, b"k", || Ok(Some(b"old".to_vec()))).unwrap();
    assert_eq!(v.as_deref(), Some(&b"old"[..]));
    std::thread::sleep(Duration::from_millis(120));
    let v = fetch(&c, b"k", || Err("the source is down".into())).unwrap();
    assert_eq!(v.as_deref(), Some(&b"old"[..]));
    assert_eq!(c.counts().stale_served.get(), 1);
    assert_eq!(c.counts().load_errors.get(), 1);
    // Without fail-safe the failure is the caller's.
    let strict = open(
        &d.0,
        "c",
        CacheOptions {
            ttl: 0.05,
            ..CacheOptions::default()
        },
    );
    std::thread::sleep(Duration::from_millis(120));
    assert!(fetch(&strict, b"k", || Err("down".into())).is_err());
}

#[test]
fn a_dead_lease_holder_is_taken_over() {
    let d = Dir::new("takeover");
    let c = open(&d.0, "c", CacheOptions::default());
    let mut holder = spawn("hold", &d.0);
    said(&mut holder, "held");
    holder.kill().unwrap(); // SIGKILL, lease held
    holder.wait().unwrap();
    let v = fetch(&c, b"k", || Ok(Some(b"mine".to_vec()))).unwrap();
    assert_eq!(v.as_deref(), Some(&b"mine"[..]));
    assert_eq!(c.counts().takeovers.get(), 1);
}

#[test]
fn a_cached_miss_answers_until_the_key_is_written() {
    let d = Dir::new("negative");
    let c = open(&d.0, "c", CacheOptions::default());
    assert_eq!(fetch(&c, b"k", || Ok(None)).unwrap(), None);
    // The cached miss answers: the loader does not run again.
    assert_eq!(fetch(&c, b"k", || panic!("loaded twice")).unwrap(), None);
    assert_eq!(c.counts().neg_hits.get(), 1);
    c.store(
        b"k",
        None,
        Body::Bytes(b"v"),
        Kind::Value,
        60.0,
        0.0,
        &[],
        || (),
    )
    .unwrap();
    assert_eq!(
        fetch(&c, b"k", || panic!("loaded")).unwrap().as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn tags_and_clear_void_entries_in_every_process() {
    let d = Dir::new("tags");
    let c = open(&d.0, "c", CacheOptions::default());
    let other = open(&d.0, "c", CacheOptions::default());
    let tag = vec![b"user:1".to_vec()];
    for k in [&b"a"[..], b"b"] {
        c.store(
            k,
            None,
            Body::Bytes(b"v"),
            Kind::Value,
            60.0,
            0.0,
            &tag,
            || (),
        )
        .unwrap();
    }
    c.store(
        b"c",
        None,
        Body::Bytes(b"v"),
        Kind::Value,
        60.0,
        0.0,
        &[],
        || (),
    )
    .unwrap();
    other.invalidate_tags(&tag).unwrap();
    assert_eq!(read(&c, b"a"), None);
    assert_eq!(read(&c, b"b"), None);
    assert_eq!(read(&c, b"c").as_deref(), Some(&b"v"[..]));
    other.clear().unwrap();
    assert_eq!(read(&c, b"c"), None);
}

#[test]
fn counters_add_and_incr_for_every_process() {
    let d = Dir::new("counters");
    let c = open(&d.0, "c", CacheOptions::default());
    let other = open(&d.0, "c", CacheOptions::default());
    assert!(c.add(b"once", b"first", Kind::Value, None, &[]).unwrap());
    assert!(!other
        .add(b"once", b"second", Kind::Value, None, &[])
        .unwrap());
    assert_eq!(read(&c, b"once").as_deref(), Some(&b"first"[..]));
    assert!(matches!(c.incr(b"n", 1, None, &[]), Err(Error::Missing)));
    assert_eq!(c.incr(b"n", 5, Some(10), &[]).unwrap(), 15);
    assert_eq!(other.incr(b"n", -3, None, &[]).unwrap(), 12);
    assert!(matches!(
        c.incr(b"once", 1, None, &[]),
        Err(Error::NotInteger)
    ));
    assert!(matches!(
        c.incr(b"n", i64::MAX, None, &[]),
        Err(Error::Overflow)
    ));
    assert!(c.touch(b"n", Some(120.0)).unwrap());
    assert!(!c.touch(b"absent", None).unwrap());
}

#[test]
fn bad_arguments_are_one_error_naming_the_argument() {
    let d = Dir::new("args");
    let c = open(&d.0, "c", CacheOptions::default());
    let msg = |e: Error| e.to_string();
    assert!(msg(c.plan(Some(0.0), None, None, Vec::new()).unwrap_err()).starts_with("ttl must be"));
    assert!(msg(c.plan(None, Some(-1.0), None, Vec::new()).unwrap_err()).starts_with("neg_ttl"));
    assert_eq!(
        msg(c.plan(None, None, None, vec![Vec::new()]).unwrap_err()),
        "a tag must not be empty"
    );
    let nine = vec![b"t".to_vec(); 9];
    assert_eq!(
        msg(c.plan(None, None, None, nine).unwrap_err()),
        "at most 8 tags per entry, got 9"
    );
    let bad = CacheOptions {
        jitter: 1.0,
        ..CacheOptions::default()
    };
    assert!(Cache::new(None, None, bad, false).is_err());
    assert!(matches!(
        Cache::new(None, None, CacheOptions::default(), false)
            .unwrap()
            .incr(b"k", 1, None, &[]),
        Err(Error::NoSegment)
    ));
}
