//! A fuzz test of the file format: segment files with random headers (their
//! checksum recomputed, as anyone who can write the file can), random shard
//! header words, index slots and record words, fed to open, get, set, delete,
//! verify, stats and a read-only open.
//!
//! Every case must end in a value, a miss or an error: no panic (not even one
//! the engine contains, which would mean a check is missing), no hang (each
//! case runs under a deadline), and no write outside the regions the engine
//! owns (the immutable header bytes are compared after the case; every access
//! to the mapping is bounds-checked in `shm`, so a stray offset panics rather
//! than touching memory, and a panic fails the case).
//!
//! `make test` runs a few thousand cases; `ZIGGURAT_STRESS=1` (`make stress`)
//! runs `PROPTEST_CASES` of them, 100000 unless set.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use ziggurat_core::{Error, Geometry, KeyHash, OpenCause, Options, Segment};

// Header fields (docs/format.md): offset and width.
const HEADER_FIELDS: [(usize, usize); 25] = [
    (16, 8),   // file_size
    (24, 4),   // nshards
    (28, 4),   // npairs
    (32, 4),   // nstamps
    (36, 4),   // ntags
    (40, 8),   // small_cap
    (48, 8),   // main_cap
    (56, 4),   // ghost_buckets
    (60, 4),   // max_key
    (64, 4),   // max_value
    (72, 8),   // seed
    (88, 8),   // stamps_off
    (96, 8),   // tags_off
    (104, 8),  // shards_off
    (112, 8),  // shard_stride
    (120, 8),  // index_rel
    (128, 8),  // ghost_rel
    (136, 8),  // small_rel
    (144, 8),  // main_rel
    (256, 4),  // state
    (264, 8),  // epoch
    (320, 8),  // tag_invalidations
    (328, 8),  // clears
    (1024, 8), // a lease cell's holder
    (1032, 4), // its release counter
];
// Shard header words, from the shard's start: intent, positions, ghost and
// eviction state, waiters, the counters.
const SHARD_FIELDS: [(usize, usize); 14] = [
    (64, 4),
    (72, 4),
    (128, 8),
    (136, 8),
    (192, 8),
    (200, 8),
    (256, 8),
    (264, 4),
    (272, 8),
    (280, 8),
    (288, 8),
    (320, 8),
    (320 + 8 * 9, 8), // entries
    (320 + 8 * 13, 8),
];
const H_CHECKSUM: usize = 248;
const CHECKSUM_SEED: u64 = 0x5a49_4747_5552_4154;
const VALID: u64 = 1 << 63;
const KEYS: usize = 300;

/// A segment file written by the engine: its bytes and its geometry.
struct Base {
    bytes: Vec<u8>,
    g: Geometry,
    seed: u64,
}

fn dir() -> PathBuf {
    PathBuf::from(format!("/dev/shm/zigfuzz-{}", std::process::id()))
}

fn opts(read_only: bool) -> Options {
    Options {
        size: 2 << 20,
        directory: dir(),
        shards: Some(2),
        // Garbage in a shard's mutex can keep it locked: each write then
        // waits this long and fails, as for a stopped writer.
        lock_timeout: Duration::from_millis(5),
        read_only,
        ..Options::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// The word at `off` (0 past the end: a layout edit may have shortened the file).
fn le(bytes: &[u8], off: usize, width: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(src) = bytes.get(off..off + width) {
        b[..width].copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

fn put(bytes: &mut [u8], off: usize, width: usize, v: u64) {
    if off + width <= bytes.len() {
        bytes[off..off + width].copy_from_slice(&v.to_le_bytes()[..width]);
    }
}

fn reseal(bytes: &mut [u8]) {
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&bytes[..H_CHECKSUM], CHECKSUM_SEED);
    put(bytes, H_CHECKSUM, 8, sum);
}

/// One file shared by every case: entries with and without expiry and tags,
/// enough writes for both rings to have wrapped and evicted.
fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let _ = std::fs::remove_dir_all(dir());
        std::fs::create_dir_all(dir()).unwrap();
        let seg = Segment::open("base", &opts(false)).unwrap();
        for round in 0..6 {
            for i in 0..KEYS {
                let v = vec![(i + round) as u8; 40 + (i * 37) % 3000];
                let ttl = (i % 3 == 0).then_some(3600.0);
                let tags: &[&[u8]] = if i % 4 == 0 { &[b"a", b"b"] } else { &[] };
                seg.set(&key(i), &v, ttl, tags).unwrap();
                if i % 5 == 0 {
                    let _ = seg.get(&key(i / 2)).unwrap();
                }
            }
        }
        let g = *seg.geometry();
        let path = seg.path().to_path_buf();
        drop(seg);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let seed = le(&bytes, 72, 8);
        Base { bytes, g, seed }
    })
}

/// A record's first word with a valid check byte (docs/format.md).
fn word0(val_len: u32, key_len: u16, ntags: u8, flags: u8) -> u64 {
    let v = val_len.to_le_bytes();
    let check = 0xA5
        ^ v[0]
        ^ v[1].rotate_left(1)
        ^ v[2].rotate_left(2)
        ^ v[3].rotate_left(3)
        ^ (key_len as u8).rotate_left(4)
        ^ ((key_len >> 8) as u8).rotate_left(5)
        ^ ((ntags & 15) << 4 | (flags & 15));
    val_len as u64
        | (key_len as u64) << 32
        | ((ntags & 15) as u64) << 48
        | ((flags & 15) as u64) << 52
        | (check as u64) << 56
}

/// A value worth trying for a word that was `old`: bounds, wraps, near misses.
fn interesting(old: u64, pick: u8, r: u64) -> u64 {
    match pick % 16 {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => u64::MAX - 3,
        4 => u64::MAX - 7 - (r % 64) * 8,
        5 => 1 << 63,
        6 => 1 << 62,
        7 => u32::MAX as u64,
        8 => old.wrapping_add(8 * (r % 16 + 1)),
        9 => old.wrapping_sub(8 * (r % 16 + 1)),
        10 => old.wrapping_mul(2),
        11 => old / 2,
        12 => old ^ (1 << (r % 64)),
        13 => old.wrapping_add(r % 4096),
        14 => r % (16 << 20),
        _ => r,
    }
}

/// What a case changes in the base file.
#[derive(Debug, Clone)]
enum Edit {
    /// A header field set to an interesting value.
    Header { field: usize, pick: u8, r: u64 },
    /// The geometry fields rewritten for another layout, the file resized to it.
    Layout { size_mib: u8, avg: u16, shards: u8 },
    /// A shard header word.
    Shard {
        shard: u8,
        field: usize,
        pick: u8,
        r: u64,
    },
    /// An index slot of a known key's pair pointing anywhere.
    Slot {
        key: usize,
        slot: u8,
        ring: bool,
        freq: u8,
        phys: u64,
        fp_of_key: bool,
    },
    /// A word of the shard bodies (index, ghost, rings) set to a record word.
    Record {
        at: u64,
        val_len: u32,
        key_len: u16,
        ntags: u8,
        flags: u8,
    },
    /// A random word anywhere past the header.
    Word { at: u64, v: u64 },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (0..HEADER_FIELDS.len(), any::<u8>(), any::<u64>())
            .prop_map(|(field, pick, r)| Edit::Header { field, pick, r }),
        1 => (1u8..6, 32u16..5000, 0u8..4)
            .prop_map(|(size_mib, avg, shards)| Edit::Layout { size_mib, avg, shards }),
        4 => (0u8..2, 0..SHARD_FIELDS.len(), any::<u8>(), any::<u64>())
            .prop_map(|(shard, field, pick, r)| Edit::Shard { shard, field, pick, r }),
        4 => (0..KEYS, 0u8..16, any::<bool>(), 0u8..4, any::<u64>(), any::<bool>()).prop_map(
            |(key, slot, ring, freq, phys, fp_of_key)| Edit::Slot {
                key, slot, ring, freq, phys, fp_of_key
            }
        ),
        4 => (any::<u64>(), prop_oneof![0u32..64, 0u32..100_000, any::<u32>()],
              prop_oneof![0u16..16, any::<u16>()], 0u8..16, 0u8..4)
            .prop_map(|(at, val_len, key_len, ntags, flags)| Edit::Record {
                at, val_len, key_len, ntags, flags
            }),
        2 => (any::<u64>(), any::<u64>()).prop_map(|(at, v)| Edit::Word { at, v }),
    ]
}

/// Applies `edits` to a copy of the base file; `reseal` recomputes the checksum.
fn build(edits: &[Edit], reseal_header: bool) -> Vec<u8> {
    let b = base();
    let g = &b.g;
    let mut bytes = b.bytes.clone();
    let body = g.shards_off() as usize;
    for e in edits {
        match *e {
            Edit::Header { field, pick, r } => {
                let (off, w) = HEADER_FIELDS[field];
                let v = interesting(le(&bytes, off, w), pick, r);
                put(&mut bytes, off, w, v);
            }
            Edit::Layout {
                size_mib,
                avg,
                shards,
            } => {
                let shards = (shards > 0).then(|| 1u32 << (shards - 1));
                let Ok(n) = Geometry::compute((size_mib as u64) << 20, avg as u64, shards) else {
                    continue;
                };
                bytes.resize(n.file_size() as usize, 0);
                for (off, w, v) in [
                    (16, 8, n.file_size()),
                    (24, 4, n.nshards() as u64),
                    (28, 4, n.npairs() as u64),
                    (32, 4, n.nstamps() as u64),
                    (36, 4, n.ntags() as u64),
                    (40, 8, n.small_cap()),
                    (48, 8, n.main_cap()),
                    (56, 4, n.ghost_buckets() as u64),
                    (64, 4, n.max_value() as u64),
                    (88, 8, n.stamps_off()),
                    (96, 8, n.tags_off()),
                    (104, 8, n.shards_off()),
                    (112, 8, n.shard_stride()),
                    (120, 8, n.index_rel()),
                    (128, 8, n.ghost_rel()),
                    (136, 8, n.small_rel()),
                    (144, 8, n.main_rel()),
                ] {
                    put(&mut bytes, off, w, v);
                }
            }
            Edit::Shard {
                shard,
                field,
                pick,
                r,
            } => {
                let (rel, w) = SHARD_FIELDS[field];
                let off = g.shard_off(shard as u32 % g.nshards()) + rel;
                let v = interesting(le(&bytes, off, w), pick, r);
                put(&mut bytes, off, w, v);
            }
            Edit::Slot {
                key: k,
                slot,
                ring,
                freq,
                phys,
                fp_of_key,
            } => {
                let kh = KeyHash::new(b.seed, &key(k));
                let s = kh.shard(g.nshards());
                let pair = kh.pair(g.npairs()) as usize;
                let off = g.shard_off(s) + g.index_rel() as usize + pair * 128 + slot as usize * 8;
                let cap = if ring { g.main_cap() } else { g.small_cap() };
                // Mostly inside the ring, on a word; sometimes anywhere.
                let phys = if phys % 4 == 0 {
                    phys
                } else {
                    phys % cap / 8 * 8
                };
                let fp = if fp_of_key {
                    kh.fingerprint() as u64
                } else {
                    phys >> 48
                };
                let w = VALID
                    | fp << 47
                    | (freq as u64 & 3) << 45
                    | (ring as u64) << 44
                    | ((phys / 8) & ((1 << 44) - 1));
                put(&mut bytes, off, 8, w);
            }
            Edit::Record {
                at,
                val_len,
                key_len,
                ntags,
                flags,
            } => {
                let span = (bytes.len() - body) as u64 / 8;
                let off = body + (at % span) as usize * 8;
                put(&mut bytes, off, 8, word0(val_len, key_len, ntags, flags));
            }
            Edit::Word { at, v } => {
                let span = (bytes.len() - 256) as u64 / 8;
                let off = 256 + (at % span) as usize * 8;
                put(&mut bytes, off, 8, v);
            }
        }
    }
    if reseal_header {
        reseal(&mut bytes);
    }
    bytes
}

/// Runs `f` under a deadline: a case that hangs or panics fails.
fn finishes<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => Err("the case hangs".into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the case panicked".into()),
    }
}

fn allowed<T>(r: ziggurat_core::Result<T>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        // A lock that garbage in the file keeps held times out: an error the
        // caller handles, as for a stopped writer. A lock whose type word is
        // garbage is refused as damaged.
        Err(
            Error::LockTimeout
            | Error::Io(..)
            | Error::Open {
                cause: OpenCause::Damaged,
                ..
            },
        ) => Ok(None),
        Err(e) => Err(format!("unexpected error: {e}")),
    }
}

/// How far a case got.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The file was refused as damaged.
    Refused,
    /// The file was opened and used.
    Used,
}

/// One case: the file written, opened, used. Err describes a failure.
fn run(bytes: Vec<u8>) -> Result<Outcome, String> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let name = format!("case{}", CASE.fetch_add(1, Ordering::Relaxed));
    let path = dir().join(format!("ziggurat.{name}.v2"));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(&bytes))
        .map_err(|e| e.to_string())?;
    let header = bytes[..H_CHECKSUM + 8].to_vec();
    let result = (|| {
        let seg = match Segment::open(&name, &opts(false)) {
            Ok(s) => s,
            Err(Error::Open {
                cause: OpenCause::Damaged,
                ..
            }) => return Ok(Outcome::Refused),
            Err(e) => return Err(format!("open failed oddly: {e}")),
        };
        for i in (0..KEYS).step_by(7) {
            if let Some(Some(v)) = allowed(seg.get(&key(i)))? {
                if v.is_empty() || v.len() > seg.geometry().max_value() as usize {
                    return Err(format!("get returned {} bytes", v.len()));
                }
            }
        }
        for i in 0..40usize {
            let v = vec![i as u8; 1 + (i * 997) % 20_000];
            let tags: &[&[u8]] = if i % 3 == 0 { &[b"a"] } else { &[] };
            if allowed(seg.set(format!("new-{i}").as_bytes(), &v, None, tags))?.is_none() {
                break; // a shard lock garbage holds: the other writes would wait too
            }
            if i % 4 == 0 {
                allowed(seg.delete(&key(i * 5)))?;
            }
        }
        allowed(seg.invalidate_tag(b"b"))?;
        let _ = seg.stats();
        allowed(seg.verify(false))?;
        if allowed(seg.verify(true))?.is_some() {
            // Repaired: the shard is whole again, and a write reads back.
            if let Some(again) = allowed(seg.verify(false))? {
                if !again.problems.is_empty() {
                    return Err(format!("a repair left problems: {:?}", again.problems));
                }
            }
            if let Some(()) = allowed(seg.set(b"after", b"value", None, &[]))? {
                let got = seg.get(b"after").map_err(|e| e.to_string())?;
                if got.as_deref() != Some(&b"value"[..]) {
                    return Err(format!("a write after the repair read back {got:?}"));
                }
            }
        }
        if let Some(why) = seg.failure() {
            return Err(format!("an operation panicked: {why}"));
        }
        drop(seg);
        let ro = match Segment::open(&name, &opts(true)) {
            Ok(s) => s,
            Err(e) => return Err(format!("the read-only open failed after a good one: {e}")),
        };
        for i in (0..KEYS).step_by(11) {
            allowed(ro.get(&key(i)))?;
        }
        let _ = ro.stats();
        if let Some(why) = ro.failure() {
            return Err(format!("a read-only operation panicked: {why}"));
        }
        Ok(Outcome::Used)
    })();
    let after = std::fs::read(&path).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&path);
    let outcome = result?;
    if after.len() != bytes.len() || after[..H_CHECKSUM + 8] != header[..] {
        return Err("the header's immutable bytes changed".into());
    }
    Ok(outcome)
}

fn cases() -> u32 {
    if std::env::var_os("ZIGGURAT_STRESS").is_some() {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(100_000)
    } else {
        2_000
    }
}

proptest! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    })]

    #[test]
    fn fuzzed_files_end_in_a_value_a_miss_or_an_error(
        edits in prop::collection::vec(edit(), 1..12),
        reseal_header in prop::bool::weighted(0.9),
    ) {
        let bytes = build(&edits, reseal_header);
        finishes(move || run(bytes)).map_err(TestCaseError::fail)?;
    }
}

/// The cases start from a file the engine accepts and uses.
#[test]
fn the_base_file_is_whole() {
    assert_eq!(run(build(&[], false)), Ok(Outcome::Used));
    assert_eq!(run(build(&[], true)), Ok(Outcome::Used));
}
