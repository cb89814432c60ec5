//! Segment files that lie: a header that checksums but describes offsets
//! outside the file, ring positions no writer makes, a panic inside an
//! operation. Each must end in a refusal, a repair or a contained error, never
//! in a crash, a hang or an access outside the mapping.
//!
//! The files are edited the way anyone who can write them could: fields at the
//! offsets docs/format.md gives, and the header checksum recomputed as it
//! describes (it is no secret).

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::Duration;

use ziggurat_core::failpoint::{self, Point};

mod common;
use common::Dir;
use ziggurat_core::{Error, OpenCause, Options, Segment};

// Header fields (docs/format.md).
const H_NTAGS: u64 = 36;
const H_SMALL_CAP: u64 = 40;
const H_TAGS_OFF: u64 = 96;
const H_SHARDS_OFF: u64 = 104;
const H_SHARD_STRIDE: u64 = 112;
const H_SMALL_REL: u64 = 136;
const H_CHECKSUM: u64 = 248;
// Shard header fields, from the shard's start.
const S_SMALL_HEAD: u64 = 128;
const S_SMALL_TAIL: u64 = 136;

/// The failpoint is armed for the whole process: tests here run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dir {
    fn opts(&self, shards: Option<u32>) -> Options {
        Options {
            size: 2 << 20,
            directory: self.0.clone(),
            shards,
            lock_timeout: Duration::from_secs(5),
            ..Options::default()
        }
    }

    /// A segment with a few entries, closed; returns its file.
    fn segment(&self, name: &str, shards: Option<u32>) -> PathBuf {
        let seg = Segment::open(name, &self.opts(shards)).unwrap();
        for i in 0..50 {
            seg.set(format!("k{i}").as_bytes(), &[i as u8; 100], None, &[])
                .unwrap();
        }
        seg.path().to_path_buf()
    }
}

fn get64(path: &Path, off: u64) -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, off)
        .unwrap();
    u64::from_le_bytes(b)
}

fn put(path: &Path, off: u64, bytes: &[u8]) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .write_all_at(bytes, off)
        .unwrap();
}

fn put64(path: &Path, off: u64, v: u64) {
    put(path, off, &v.to_le_bytes());
}

fn put32(path: &Path, off: u64, v: u32) {
    put(path, off, &v.to_le_bytes());
}

/// Recomputes the header checksum: seeded XXH3-64 of bytes 0..248.
fn reseal(path: &Path) {
    let mut hdr = vec![0u8; H_CHECKSUM as usize];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut hdr, 0)
        .unwrap();
    let sum = xxhash_rust::xxh3::xxh3_64_with_seed(&hdr, 0x5a49_4747_5552_4154);
    put64(path, H_CHECKSUM, sum);
}

/// A record's first word (docs/format.md): a PAD record of `len` bytes.
fn pad_word(len: u32) -> u64 {
    let v = len.to_le_bytes();
    let flags = 2u8;
    let check =
        0xA5 ^ v[0] ^ v[1].rotate_left(1) ^ v[2].rotate_left(2) ^ v[3].rotate_left(3) ^ flags;
    len as u64 | (flags as u64) << 52 | (check as u64) << 56
}

/// Runs `f` in a thread and waits for it: a call that hangs fails the test
/// (the thread is left behind, and ends with the test process).
fn finishes<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not end: it hangs"))
}

fn assert_damaged<T>(r: Result<T, Error>, path: &Path) -> String {
    match r {
        Err(Error::Open {
            cause: OpenCause::Damaged,
            message,
        }) => {
            assert!(message.contains(&path.display().to_string()), "{message}");
            message
        }
        Err(e) => panic!("expected a damaged file, got {e:?}"),
        Ok(_) => panic!("a lying header was accepted"),
    }
}

#[test]
fn a_tag_table_offset_that_wraps_is_refused_read_only() {
    let _s = serial();
    let d = Dir::new("tags-ro");
    let path = d.segment("wrap", None);
    // One tag cell at 2^64 - 4: the end of the table wraps to 0, before the
    // shards, and the cell itself lies 4 bytes below the mapping.
    put32(&path, H_NTAGS, 1);
    put64(&path, H_TAGS_OFF, u64::MAX - 3);
    reseal(&path);
    let opts = Options {
        read_only: true,
        ..d.opts(None)
    };
    let m = assert_damaged(Segment::open("wrap", &opts), &path);
    assert!(m.contains("geometry"), "{m}");
}

#[test]
fn a_tag_table_offset_that_wraps_is_refused_read_write_and_replaced_on_request() {
    let _s = serial();
    let d = Dir::new("tags-rw");
    let path = d.segment("wrap", None);
    put32(&path, H_NTAGS, 1);
    put64(&path, H_TAGS_OFF, u64::MAX - 3);
    reseal(&path);
    assert_damaged(Segment::open("wrap", &d.opts(None)), &path);
    let opts = Options {
        recreate: true,
        ..d.opts(None)
    };
    let seg = Segment::open("wrap", &opts).unwrap();
    seg.invalidate_tag(b"t").unwrap();
    seg.set(b"k", b"v", None, &[b"t"]).unwrap();
    assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_shard_stride_whose_sum_wraps_is_refused() {
    let _s = serial();
    let d = Dir::new("stride");
    let path = d.segment("stride", Some(2));
    // Two shards of 2^63 bytes end at 2^64, which wraps to the first one's
    // start: shard 1 then lies far past the mapping.
    put64(&path, H_SHARD_STRIDE, 1 << 63);
    reseal(&path);
    let seg = Segment::open("stride", &d.opts(Some(2)));
    assert_damaged(seg, &path);
}

#[test]
fn every_region_must_sit_where_the_layout_puts_it() {
    let _s = serial();
    let d = Dir::new("moved");
    let path = d.segment("moved", None);
    let shards_off = get64(&path, H_SHARDS_OFF);
    // Each lie keeps the old checks' relations (inside the file, in order)
    // but is not the layout the header's counts make.
    for (field, value) in [
        (H_TAGS_OFF, get64(&path, H_TAGS_OFF) + 64),
        (H_SHARDS_OFF, shards_off + 4096),
        (H_SMALL_REL, get64(&path, H_SMALL_REL) + 8),
    ] {
        let old = get64(&path, field);
        put64(&path, field, value);
        reseal(&path);
        assert_damaged(Segment::open("moved", &d.opts(None)), &path);
        put64(&path, field, old);
        reseal(&path);
        Segment::open("moved", &d.opts(None)).unwrap();
    }
}

#[test]
fn a_small_ring_tail_past_its_head_does_not_hang_a_write() {
    let _s = serial();
    let d = Dir::new("tail");
    let path = d.segment("tail", Some(1));
    let shard = get64(&path, H_SHARDS_OFF);
    let head = get64(&path, shard + S_SMALL_HEAD);
    put64(&path, shard + S_SMALL_TAIL, head + 64);
    let seg = Segment::open("tail", &d.opts(Some(1))).unwrap();
    let seg = finishes(
        "a write to a shard whose tail is past its head",
        move || {
            for i in 0..200 {
                seg.set(format!("new{i}").as_bytes(), &[7u8; 100], None, &[])
                    .unwrap();
            }
            seg
        },
    );
    assert_eq!(
        seg.get(b"new199").unwrap().as_deref(),
        Some(&[7u8; 100][..])
    );
    let resets = seg.stats().into_iter().find(|(k, _)| *k == "shard_resets");
    assert!(
        resets.is_some_and(|(_, n)| n >= 1),
        "the shard was not reset"
    );
    let rep = seg.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}

#[test]
fn repair_does_not_walk_past_absurd_positions() {
    let _s = serial();
    let d = Dir::new("repair");
    let path = d.segment("repair", Some(1));
    let shard = get64(&path, H_SHARDS_OFF);
    let cap = get64(&path, H_SMALL_CAP);
    let ring = shard + get64(&path, H_SMALL_REL);
    // Positions 8 bytes apart at the top of the u64 range, a 16-byte record
    // at the tail (so tail + length wraps to 0), and the rest of the ring
    // readable records, so a walk that wrapped would go on for 2^61 steps.
    let tail = u64::MAX - 15;
    let at = tail % cap;
    assert!(
        at + 16 <= cap,
        "the tail's record must fit before the ring's end"
    );
    let mut bytes = Vec::with_capacity(cap as usize);
    for _ in 0..cap / 8 {
        bytes.extend_from_slice(&pad_word(8).to_le_bytes());
    }
    bytes[at as usize..at as usize + 8].copy_from_slice(&pad_word(16).to_le_bytes());
    put(&path, ring, &bytes);
    put64(&path, shard + S_SMALL_HEAD, tail + 8);
    put64(&path, shard + S_SMALL_TAIL, tail);
    let seg = Segment::open("repair", &d.opts(Some(1))).unwrap();
    let (seg, rep) = finishes("a repair of absurd ring positions", move || {
        let rep = seg.verify(true).unwrap();
        (seg, rep)
    });
    assert!(rep.reset, "the shard was not reset: {:?}", rep.problems);
    assert!(
        rep.problems.iter().any(|p| p.contains("positions")),
        "{:?}",
        rep.problems
    );
    seg.set(b"after", b"v", None, &[]).unwrap();
    assert_eq!(seg.get(b"after").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(seg.verify(false).unwrap().problems.is_empty());
}

#[test]
fn a_shard_lock_of_a_type_no_segment_makes_is_refused() {
    let _s = serial();
    let d = Dir::new("mutex");
    let path = d.segment("mutex", Some(1));
    let shard = get64(&path, H_SHARDS_OFF);
    // The mutex's type word (glibc's `__kind`, 16 bytes in) set to a
    // priority-protected mutex: glibc aborts the process on its first lock.
    put32(&path, shard + 16, 0x40 | 0x80);
    let seg = Segment::open("mutex", &d.opts(Some(1))).unwrap();
    let m = assert_damaged(seg.set(b"k", b"v", None, &[]), &path);
    assert!(m.contains("lock of shard 0"), "{m}");
    assert_eq!(seg.get(b"k3").unwrap().as_deref(), Some(&[3u8; 100][..]));
    assert!(seg.failure().is_none(), "a refused lock is not a panic");
}

#[test]
fn a_panic_inside_a_write_is_contained_and_leaves_the_file_usable() {
    let _s = serial();
    let d = Dir::new("panic");
    let path = d.segment("panic", None);
    let seg = Segment::open("panic", &d.opts(None)).unwrap();
    failpoint::arm(Some(Point::Panic));
    let r = seg.set(b"k1", b"v", None, &[]);
    failpoint::arm(None);
    let m = assert_damaged(r, &path);
    let m = ziggurat_core::fill(&m, &ziggurat_core::RustWords);
    assert!(m.contains("set") && m.contains("unlink()"), "{m}");
    assert!(seg.failure().is_some_and(|w| w.contains("failpoint")));
    // The handle stops: reads miss, writes are refused with the same cause.
    assert_eq!(seg.get(b"k7").unwrap(), None);
    assert_damaged(seg.delete(b"k7"), &path);
    // The write that stopped left no lock held and no stamp odd: another
    // handle on the file reads, writes and verifies it clean.
    let other = Segment::open("panic", &d.opts(None)).unwrap();
    assert!(other.failure().is_none());
    assert_eq!(other.get(b"k7").unwrap().as_deref(), Some(&[7u8; 100][..]));
    other.set(b"k1", b"w", None, &[]).unwrap();
    assert_eq!(other.get(b"k1").unwrap().as_deref(), Some(&b"w"[..]));
    let rep = other.verify(false).unwrap();
    assert!(rep.problems.is_empty(), "{:?}", rep.problems);
}
