//! What the engine's test files share: a scratch directory of segments, removed on drop,
//! and the file-mode helpers of the ownership tests.

// Each test file is a crate of its own and uses only part of this.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A fresh directory under /dev/shm, named after the test and this process; a test file
/// adds the options it needs with an `impl Dir` of its own.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let p = PathBuf::from(format!("/dev/shm/zigcore-{tag}-{}", std::process::id()));
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

// The one libc call here; the files that include this need not allow unsafe code.
#[allow(unsafe_code)]
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
