//! Opening a segment: every refusal has a stable cause and a message that
//! names the file and the remedy; sharing through a group.

// The tests call libc directly to set up ownership and read free space.
#![allow(unsafe_code)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ziggurat_core::{Error, OpenCause, Options, Segment};

mod common;
use common::{is_root, set_mode, Dir};

impl Dir {
    fn opts(&self) -> Options {
        Options {
            size: 2 << 20,
            directory: self.0.clone(),
            ..Options::default()
        }
    }
}

/// Opens and expects a refusal; returns (cause name, message).
fn refused(name: &str, opts: &Options) -> (&'static str, String) {
    match Segment::open(name, opts) {
        Ok(_) => panic!("{name} was opened, a refusal was expected"),
        Err(e) => {
            let m = e.to_string();
            (e.cause(), m)
        }
    }
}

fn chown(path: &Path, uid: u32, gid: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a live NUL-terminated path; chown only reads it.
    let rc = unsafe { libc::chown(c.as_ptr(), uid, gid) };
    assert_eq!(rc, 0, "chown {}", std::io::Error::last_os_error());
}

#[test]
fn cause_names_are_stable() {
    let names: Vec<_> = [
        OpenCause::MissingDirectory,
        OpenCause::NotWritable,
        OpenCause::OtherOwner,
        OpenCause::NoSpace,
        OpenCause::Damaged,
        OpenCause::Incompatible,
    ]
    .iter()
    .map(|c| c.name())
    .collect();
    assert_eq!(
        names,
        [
            "missing_directory",
            "not_writable",
            "other_owner",
            "no_space",
            "damaged",
            "incompatible"
        ]
    );
    let e = Error::invalid(ziggurat_core::Arg::Key, ziggurat_core::Problem::Empty);
    assert_eq!(e.cause(), "invalid");
}

#[test]
fn a_missing_directory_is_named() {
    let d = Dir::new("missing");
    let mut o = d.opts();
    o.directory = d.0.join("absent");
    let (cause, m) = refused("m", &o);
    assert_eq!(cause, "missing_directory", "{m}");
    assert!(m.contains("does not exist") && m.contains("absent"), "{m}");
    assert!(matches!(
        Segment::open("m", &o),
        Err(Error::Open {
            cause: OpenCause::MissingDirectory,
            ..
        })
    ));
    // A "directory" that is a regular file.
    let file = d.0.join("plain");
    std::fs::write(&file, b"x").unwrap();
    o.directory = file;
    let (cause, m) = refused("m", &o);
    assert_eq!(cause, "missing_directory", "{m}");
    assert!(m.contains("not a directory"), "{m}");
}

#[test]
fn a_directory_that_cannot_be_written_is_named() {
    // Root bypasses permission bits, but not sysfs, which refuses new files
    // (EACCES) to everyone; other users get the same from a read-only directory.
    let d = Dir::new("ro");
    let mut o = d.opts();
    if is_root() {
        o.directory = PathBuf::from("/sys");
    } else {
        set_mode(&d.0, 0o500);
    }
    let (cause, m) = refused("ro", &o);
    if !is_root() {
        set_mode(&d.0, 0o700);
    }
    assert_eq!(cause, "not_writable", "{m}");
    assert!(m.contains("runs as") && m.contains("write access"), "{m}");
    assert!(!m.contains("does the directory exist"), "{m}");
}

#[test]
fn a_file_of_another_user_is_refused_naming_both_users() {
    if !is_root() {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let d = Dir::new("owner");
    let seg = Segment::open("own", &d.opts()).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    chown(&path, 65534, 65534);
    let before = std::fs::read(&path).unwrap();
    let (cause, m) = refused("own", &d.opts());
    assert_eq!(cause, "other_owner", "{m}");
    assert!(m.contains("(uid 65534)") && m.contains("(uid 0)"), "{m}");
    assert!(m.contains("user 'root'"), "{m}");
    assert!(
        m.contains("group = <gid>") && m.contains("recreate = true") && m.contains("directory"),
        "{m}"
    );
    // recreate does not override another user's file.
    let mut o = d.opts();
    o.recreate = true;
    assert_eq!(refused("own", &o).0, "other_owner");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a refusal changes nothing"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), 65534);
}

#[test]
fn no_room_says_how_much_and_where() {
    let d = Dir::new("space");
    let c = std::ffi::CString::new(d.0.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a live path and `st` a writable struct owned by this frame.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    let total = st.f_blocks as u64 * st.f_frsize as u64;
    let size = 128u64 << 30;
    if total >= size {
        eprintln!("skipped: the file system holds {total} bytes, more than the largest segment");
        return;
    }
    let mut o = d.opts();
    o.size = size;
    let (cause, m) = refused("big", &o);
    assert_eq!(cause, "no_space", "{m}");
    assert!(m.contains(&d.0.display().to_string()), "{m}");
    assert!(m.contains("needs") && m.contains(" bytes"), "{m}");
    assert_eq!(
        std::fs::read_dir(&d.0).unwrap().count(),
        0,
        "nothing is left behind"
    );
}

#[test]
fn damaged_and_incompatible_files_name_recreate() {
    let d = Dir::new("damage");
    let seg = Segment::open("dmg", &d.opts()).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    let good = std::fs::read(&path).unwrap();

    let mut bytes = good.clone();
    bytes[100] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let (cause, m) = refused("dmg", &d.opts());
    assert_eq!(cause, "damaged", "{m}");
    assert!(
        m.contains("recreate = true") && m.contains("checksum"),
        "{m}"
    );

    let mut bytes = good.clone();
    bytes[..8].copy_from_slice(b"SQLite f");
    std::fs::write(&path, &bytes).unwrap();
    let (cause, m) = refused("dmg", &d.opts());
    assert_eq!(cause, "incompatible", "{m}");
    assert!(m.contains("recreate = true"), "{m}");

    std::fs::write(&path, &good).unwrap();
    set_mode(&path, 0o644);
    let (cause, m) = refused("dmg", &d.opts());
    assert_eq!(cause, "incompatible", "{m}");
    assert!(m.contains("644"), "{m}");

    let mut o = d.opts();
    o.recreate = true;
    let seg = Segment::open("dmg", &o).unwrap();
    let meta = std::fs::metadata(seg.path()).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
}

#[test]
fn a_group_shares_the_file() {
    if !is_root() {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let d = Dir::new("group");
    let mut o = d.opts();
    o.group = Some(65534);
    let seg = Segment::open("grp", &o).unwrap();
    seg.set(b"k", b"v", None, &[]).unwrap();
    let path = seg.path().to_path_buf();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o660);
    assert_eq!(meta.gid(), 65534);
    assert_eq!(meta.uid(), 0);
    drop(seg);
    // The owner reopens it with the group...
    assert!(Segment::open("grp", &o).is_ok());
    // ...but without it, a 660 file is not what it would have created.
    assert_eq!(refused("grp", &d.opts()).0, "incompatible");

    // Another user's file is accepted through the configured group and mode 660.
    chown(&path, 65534, 65534);
    let seg = Segment::open("grp", &o).unwrap();
    assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(seg);
    // Not without the group, nor with another one.
    assert_eq!(refused("grp", &d.opts()).0, "other_owner");
    let mut other = o.clone();
    other.group = Some(65533);
    let (cause, m) = refused("grp", &other);
    assert_eq!(cause, "other_owner", "{m}");
    assert!(m.contains("not the configured"), "{m}");
    // World bits make it another user's private file again.
    set_mode(&path, 0o664);
    let (cause, m) = refused("grp", &o);
    assert_eq!(cause, "other_owner", "{m}");
    assert!(m.contains("664") && m.contains("660"), "{m}");
    set_mode(&path, 0o640);
    assert_eq!(refused("grp", &o).0, "other_owner");
}

#[test]
fn a_bad_group_is_refused_naming_the_argument() {
    let d = Dir::new("badgroup");
    let mut o = d.opts();
    o.group = Some(u32::MAX);
    match Segment::open("bg", &o) {
        Err(e @ Error::Invalid { .. }) => assert!(e.to_string().contains("group"), "{e}"),
        Err(e) => panic!("unexpected {e}"),
        Ok(_) => panic!("gid -1 must be refused"),
    }
    assert_eq!(std::fs::read_dir(&d.0).unwrap().count(), 0);
}

#[test]
fn its_owner_rebuilds_a_private_file_for_a_group() {
    if !is_root() {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let d = Dir::new("regroup");
    let seg = Segment::open("rg", &d.opts()).unwrap();
    seg.set(b"k", b"v", None, &[]).unwrap();
    let path = seg.path().to_path_buf();
    drop(seg);
    let mut o = d.opts();
    o.group = Some(65534);
    // Without recreate, the owner keeps using its private file as it is.
    let seg = Segment::open("rg", &o).unwrap();
    assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(seg);
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    // With it, the file is rebuilt for the group.
    o.recreate = true;
    let seg = Segment::open("rg", &o).unwrap();
    assert_eq!(seg.get(b"k").unwrap(), None);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.gid()), (0o660, 65534));
    // Once shared, recreate leaves it alone.
    seg.set(b"k", b"w", None, &[]).unwrap();
    drop(seg);
    let seg = Segment::open("rg", &o).unwrap();
    assert_eq!(seg.get(b"k").unwrap().as_deref(), Some(&b"w"[..]));
}
