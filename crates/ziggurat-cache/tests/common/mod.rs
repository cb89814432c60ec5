//! A scratch directory of segments for the crate's tests, removed on drop.

use std::path::PathBuf;

use ziggurat_core::{Options, Segment};

pub struct Dir(PathBuf);

impl Dir {
    /// A fresh directory under /dev/shm, named after the test and this process.
    pub fn new(tag: &str) -> Dir {
        let p = PathBuf::from(format!("/dev/shm/zigcache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    /// The directory's path.
    #[allow(dead_code)]
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// The segment `name` of `size` bytes in this directory.
    pub fn segment(&self, name: &str, size: u64) -> Segment {
        let opts = Options {
            size,
            directory: self.0.clone(),
            ..Options::default()
        };
        Segment::open(name, &opts).unwrap()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
