//! What the crate's tests share: a scratch directory of segments, removed on
//! drop, and a front end without L1 (`Plain`).

use std::path::PathBuf;

use ziggurat_cache::{Bytes, Found, Front, Payload};
use ziggurat_core::{Options, Segment};

pub struct Dir(PathBuf);

#[allow(dead_code)] // not every test file opens segments here
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

/// A front end without L1 whose values are the stored bytes.
#[allow(dead_code)] // not every test file drives a Front
pub struct Plain;

impl Payload for Plain {
    type Out = Vec<u8>;
    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        Bytes.copied(bytes)
    }
    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        Bytes.written(len, write)
    }
}

impl Front for Plain {
    type Value = Vec<u8>;
    type Error = ziggurat_cache::Error;
    fn l1(&mut self) -> Result<Option<Option<Vec<u8>>>, Self::Error> {
        Ok(None)
    }
    fn fresh(&mut self, found: Found<Vec<u8>>) -> Result<Option<Vec<u8>>, Self::Error> {
        Ok(Some(found.payload))
    }
    fn stale(&mut self, found: Found<Vec<u8>>) -> Option<Vec<u8>> {
        Some(found.payload)
    }
    fn negative(&mut self, _: Found<()>) {}
    fn error(&mut self, e: ziggurat_cache::Error) -> Self::Error {
        e
    }
}
