//! Trust boundaries of a segment file: whose files a read-only view uses, how long
//! another process's lock can hold up a `recreate`, and the directory notice.

// The tests call libc directly to lock files.
#![allow(unsafe_code)]

use std::os::unix::io::AsRawFd;
use std::sync::mpsc;
use std::time::Duration;

use ziggurat_core::{Error, OpenCause, Options, Segment};

mod common;
use common::{is_root, set_mode, Dir};

impl Dir {
    /// A directory only this user may enter (the notice tests change its mode).
    fn private(tag: &str) -> Dir {
        let d = Dir::new(tag);
        set_mode(&d.0, 0o700);
        d
    }
    fn opts(&self) -> Options {
        Options {
            size: 2 << 20,
            directory: self.0.clone(),
            ..Options::default()
        }
    }
}

fn open_cause<T>(r: ziggurat_core::Result<T>) -> (OpenCause, String) {
    match r {
        Err(Error::Open { cause, message }) => (cause, message),
        Err(e) => panic!("expected an open error, got {e:?}"),
        Ok(_) => panic!("expected an open error, the open succeeded"),
    }
}

#[test]
fn a_read_only_view_refuses_a_file_another_user_can_write() {
    if !is_root() {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let d = Dir::private("ro-owner");
    let seg = Segment::open("s", &d.opts()).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    set_mode(&path, 0o644);
    let ro = Options {
        read_only: true,
        ..d.opts()
    };
    let (cause, msg) = open_cause(Segment::open("s", &ro));
    assert_eq!(cause, OpenCause::OtherOwner);
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("uid 65534"),
        "{msg}"
    );
    // Shared, exactly 660, with a group of its owner that the view trusts: allowed.
    set_mode(&path, 0o660);
    let shared = Options {
        group: Some(65534),
        ..ro.clone()
    };
    let view = Segment::open("s", &shared).unwrap();
    assert_eq!(view.shared_group().unwrap(), Some(65534));
    drop(view);
    // The same file in this process's group, which its owner is not in: refused.
    // SAFETY: getegid has no arguments and cannot fail.
    let gid = unsafe { libc::getegid() };
    std::os::unix::fs::chown(&path, Some(65534), Some(gid)).unwrap();
    let (cause, msg) = open_cause(Segment::open("s", &ro));
    assert_eq!(cause, OpenCause::OtherOwner);
    assert!(msg.contains("its owner is not a member"), "{msg}");
}

#[test]
fn recreate_waits_for_another_processs_lock_at_most_lock_timeout() {
    let d = Dir::private("lock");
    let seg = Segment::open("s", &d.opts()).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    set_mode(&path, 0o644); // loose: a recreate replaces it
    let held = std::fs::File::open(&path).unwrap();
    // SAFETY: a descriptor owned by `held`, alive for the call, and a flag.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_SH) }, 0);
    let opts = Options {
        recreate: true,
        lock_timeout: Duration::from_millis(100),
        ..d.opts()
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = Segment::open("s", &opts).map(|_| ());
        let _ = tx.send(r);
    });
    // Generous: the bound is lock_timeout; without it the open never returns.
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("recreate of a locked file must give up after lock_timeout");
    let (cause, msg) = open_cause(r);
    assert_eq!(cause, OpenCause::Locked);
    assert_eq!(cause.name(), "locked");
    assert!(
        msg.contains(&format!("pid {}", std::process::id())),
        "{msg}"
    );
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

#[test]
fn a_directory_every_user_may_rewrite_is_noticed() {
    for (mode, noticed) in [(0o777, true), (0o1777, false), (0o700, false)] {
        let d = Dir::private(&format!("notice-{mode:o}"));
        set_mode(&d.0, mode);
        let seg = Segment::open("s", &d.opts()).unwrap();
        let notice = seg.directory_notice();
        assert_eq!(notice.is_some(), noticed, "mode {mode:o}: {notice:?}");
        if let Some(n) = notice {
            assert!(
                n.contains("no sticky bit") && n.contains("RuntimeDirectory="),
                "{n}"
            );
        }
    }
}
