//! Races between writers, made to happen every time: a write held at a
//! failpoint while other calls run and return.

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use ziggurat_core::failpoint::{self, Point};
use ziggurat_core::{Options, Segment};

mod common;
use common::Dir;

fn open(d: &Dir, name: &str) -> Segment {
    let opts = Options {
        size: 4 << 20,
        directory: d.0.clone(),
        ..Options::default()
    };
    Segment::open(name, &opts).unwrap()
}

/// The failpoint is armed for the whole process: tests here run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on another thread, held before its shard lock until the caller
/// releases it with `failpoint::arm(None)`.
fn held<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> thread::JoinHandle<T> {
    failpoint::arm(Some(Point::Pause));
    let h = thread::spawn(f);
    while !failpoint::paused() {
        thread::sleep(Duration::from_millis(1));
    }
    h
}

#[test]
fn a_set_delayed_before_its_lock_never_stores_a_void_record_over_a_later_set() {
    let _g = serial();
    let d = Dir::new("race-void");
    let seg = Arc::new(open(&d, "void"));
    for round in 0..10 {
        let s = seg.clone();
        // A: set(k, a, tags=[t]), delayed after its tags were resolved.
        let a = held(move || s.set(b"k", b"a", None, &[b"t"]).unwrap());
        seg.invalidate_tag(b"t").unwrap();
        seg.set(b"k", b"b", None, &[]).unwrap();
        assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"b"[..]));
        failpoint::arm(None);
        a.join().unwrap();
        // A landed last, after the invalidation returned: its value is live.
        // A miss here is a write no order of the three calls explains.
        assert_eq!(
            seg.get(b"k").unwrap().as_deref(),
            Some(&b"a"[..]),
            "round {round}: a delayed set stored a record void on arrival"
        );
    }
}
