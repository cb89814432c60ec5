//! A cache's two segments open as one: when this open made the entries' file and
//! the cached-miss file then cannot be opened, the entries' file is removed again;
//! a file another open made is never removed.

mod common;

use common::Dir;
use ziggurat_cache::open_pair;
use ziggurat_core::{Error, OpenCause, Options, Segment};

fn opts(dir: &Dir) -> Options {
    Options {
        directory: dir.path().to_path_buf(),
        ..Options::default()
    }
}

#[test]
fn a_failed_second_file_takes_the_first_away() {
    let dir = Dir::new("pair-whole");
    let o = opts(&dir);
    // Something that is no segment file holds the cached-miss name.
    std::fs::create_dir(Segment::file_path(dir.path(), "p.neg")).unwrap();
    let e = open_pair("p", Some(4 << 20), None, &o)
        .err()
        .expect("refused");
    assert!(
        matches!(
            e,
            Error::Open {
                cause: OpenCause::Incompatible,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        !Segment::file_path(dir.path(), "p").exists(),
        "the entries' file stayed"
    );
}

#[test]
fn a_file_made_by_another_open_stays() {
    let dir = Dir::new("pair-other");
    let o = opts(&dir);
    let earlier = dir.segment("q", 4 << 20);
    std::fs::create_dir(Segment::file_path(dir.path(), "q.neg")).unwrap();
    assert!(open_pair("q", Some(4 << 20), None, &o).is_err());
    assert!(Segment::file_path(dir.path(), "q").exists());
    drop(earlier);
}

#[test]
fn both_files_with_their_sizes_and_created_once() {
    let dir = Dir::new("pair-sizes");
    let o = opts(&dir);
    let first = open_pair("r", Some(8 << 20), None, &o).unwrap();
    assert!(first.main.created() && first.neg.created());
    assert_eq!(first.requested.0, first.main.geometry().file_size());
    assert_eq!(first.neg.geometry().file_size(), 1 << 20);
    assert!(first.notice.is_none());
    let second = open_pair("r", Some(8 << 20), None, &o).unwrap();
    assert!(!second.main.created() && !second.neg.created());
    assert_eq!(
        second.main.file_id().unwrap(),
        first.main.file_id().unwrap()
    );
}
