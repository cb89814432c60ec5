//! A read-only attach: sees everything, writes nothing, refuses writes by name.

// The tests call libc directly to set up ownership.
#![allow(unsafe_code)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use ziggurat_core::{Error, Lease, Options, Segment};

mod common;
use common::Dir;

impl Dir {
    fn opts(&self) -> Options {
        Options {
            size: 2 << 20,
            directory: self.0.clone(),
            ..Options::default()
        }
    }
    fn ro(&self) -> Options {
        Options {
            read_only: true,
            ..self.opts()
        }
    }
}

fn stat(seg: &Segment, name: &str) -> u64 {
    seg.stats().into_iter().find(|(k, _)| *k == name).unwrap().1
}

fn assert_refused<T: std::fmt::Debug>(r: ziggurat_core::Result<T>, what: &str) {
    match r {
        Err(e @ Error::Invalid { .. }) => {
            let m = e.to_string();
            assert!(m.contains("read-only") && m.contains(what), "{what}: {m}")
        }
        other => panic!("{what} on a read-only handle must be refused, got {other:?}"),
    }
}

#[test]
fn reads_see_everything_and_write_nothing() {
    let d = Dir::new("view");
    let rw = Segment::open("v", &d.opts()).unwrap();
    rw.set(b"k", b"value", Some(3600.0), &[b"t"]).unwrap();
    for i in 0..100u32 {
        rw.set(format!("n{i}").as_bytes(), &i.to_le_bytes(), None, &[])
            .unwrap();
    }
    rw.flush_counts();
    let ro = Segment::open("v", &d.ro()).unwrap();
    assert!(ro.is_read_only() && !rw.is_read_only());
    let before = std::fs::read(rw.path()).unwrap();

    for _ in 0..3000 {
        assert_eq!(ro.get(b"k").unwrap().as_deref(), Some(&b"value"[..]));
        assert_eq!(ro.get(b"absent").unwrap(), None);
    }
    let (v, meta) = ro
        .read_with(b"n7", |n, fill| {
            let mut b = vec![0u8; n];
            fill(&mut b);
            b
        })
        .unwrap()
        .unwrap();
    assert_eq!(v, 7u32.to_le_bytes());
    assert_eq!(meta.ntags, 0);
    assert_eq!(stat(&ro, "entries"), 101);
    assert_eq!(stat(&ro, "sets"), 101);
    assert_eq!(stat(&ro, "hits"), 0, "a read-only handle counts nothing");

    // Every write is refused by name, and nothing changed in the file.
    assert_refused(ro.set(b"k", b"x", None, &[]), "set");
    assert_refused(ro.add(b"new", b"x", None, &[]), "add");
    assert_refused(ro.replace_if(b"k", b"value", b"x", None, &[]), "replace_if");
    assert_refused(ro.rewrite(b"k", |_| None), "rewrite");
    assert_refused(ro.delete(b"k"), "delete");
    assert_refused(ro.invalidate_tag(b"t"), "invalidate_tag");
    assert_refused(ro.clear(), "clear");
    assert_refused(ro.verify(false), "verify");
    assert_refused(ro.wait(b"k", 0, Duration::from_millis(1)), "wait");
    assert_refused(ro.unlink(), "unlink");
    let pid = std::process::id();
    assert!(matches!(
        ro.lease_try(&ro.hash(b"k"), pid, 5.0),
        Lease::Held { holder: 0, .. }
    ));
    assert!(!ro.lease_release(&ro.hash(b"k"), pid));
    assert!(!ro.lease_take_over(&ro.hash(b"k"), 1, pid, 5.0));
    drop(ro);
    assert_eq!(
        std::fs::read(rw.path()).unwrap(),
        before,
        "a read-only handle never writes"
    );

    // It sees later writes of others at once (the same shared pages).
    let ro = Segment::open("v", &d.ro()).unwrap();
    rw.set(b"k", b"second", None, &[]).unwrap();
    assert_eq!(ro.get(b"k").unwrap().as_deref(), Some(&b"second"[..]));
    rw.invalidate_tag(b"t").unwrap();
    rw.set(b"tagged", b"x", None, &[b"t"]).unwrap();
    rw.invalidate_tag(b"t").unwrap();
    assert_eq!(ro.get(b"tagged").unwrap(), None);
}

#[test]
fn a_read_only_open_creates_and_repairs_nothing() {
    let d = Dir::new("none");
    match Segment::open("absent", &d.ro()) {
        Err(e) => assert_eq!(e.cause(), "missing_segment", "{e}"),
        Ok(_) => panic!("a read-only open must not create"),
    }
    assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 0);
    let mut o = d.ro();
    o.directory = d.0.join("nope");
    assert_eq!(
        Segment::open("absent", &o).err().unwrap().cause(),
        "missing_directory"
    );
    let mut o = d.ro();
    o.recreate = true;
    match Segment::open("absent", &o) {
        Err(e @ Error::Invalid { .. }) => {
            let m = e.to_string();
            assert!(m.contains("read_only") && m.contains("recreate"))
        }
        other => panic!(
            "read_only with recreate must be refused, got {:?}",
            other.err()
        ),
    }

    let seg = Segment::open("dmg", &d.opts()).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let e = Segment::open("dmg", &d.ro()).err().unwrap();
    assert_eq!(e.cause(), "damaged", "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn an_operator_inspects_another_users_segment_only_through_its_group() {
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let d = Dir::new("operator");
    let seg = Segment::open("op", &d.opts()).unwrap();
    seg.set(b"k", b"v", None, &[]).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a live NUL-terminated path; chown only reads it.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    assert_eq!(
        Segment::open("op", &d.opts()).err().unwrap().cause(),
        "other_owner"
    );
    // Whoever can write a file chooses what its readers decode: even root's
    // read-only view refuses a private file of another user.
    assert_eq!(
        Segment::open("op", &d.ro()).err().unwrap().cause(),
        "other_owner"
    );
    // Shared (660) with the owner's own group, which the operator names.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).unwrap();
    let shared = Options {
        group: Some(65534),
        ..d.ro()
    };
    let ro = Segment::open("op", &shared).unwrap();
    assert_eq!(ro.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
    drop(ro);
    // The same file in a group its owner is not a member of (as a setgid
    // directory gives any user's new file) is not shared by that group.
    // SAFETY: getegid has no arguments and cannot fail.
    let gid = unsafe { libc::getegid() };
    // SAFETY: `c` is a live NUL-terminated path; chown only reads it.
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, gid) }, 0);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o660)).unwrap();
    let e = Segment::open("op", &d.ro()).err().unwrap();
    assert_eq!(e.cause(), "other_owner");
    assert!(e.to_string().contains("its owner is not a member"), "{e}");
}
