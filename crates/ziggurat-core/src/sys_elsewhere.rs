//! The engine's system calls on a system other than Linux, where no segment
//! runs: `Segment::open` refuses first (cause `unsupported_platform`), so the
//! calls that need a file or a mapping are never reached and say so if they
//! are. What the rules use without a segment (the clock, group names) answers
//! as it can. Built so that a front end's rules (options, keys, messages) run
//! everywhere, its cache then degraded to the process.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

/// The error of every call that needs the segment's file or mapping.
pub fn unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "the shared segment needs Linux (shared mappings, futexes and robust mutexes)",
    )
}

pub fn getrandom_u64() -> Option<u64> {
    None
}

pub fn link_fd(_file: &File, _path: &Path) -> io::Result<()> {
    Err(unsupported())
}

pub fn flock(_file: &File, _op: i32) -> io::Result<()> {
    Err(unsupported())
}

pub fn fallocate(_file: &File, _len: u64) -> io::Result<()> {
    Err(unsupported())
}

pub fn fchown_group(_file: &File, _gid: u32) -> io::Result<()> {
    Err(unsupported())
}

/// No user ids here: the value of no user (`(uid_t)-1`).
pub fn euid() -> u32 {
    u32::MAX
}

pub fn in_group(_gid: u32) -> bool {
    false
}

/// Milliseconds since this process first asked: no segment is shared with
/// another process here, so the clock only has to be monotonic within one.
pub fn monotonic_coarse_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[cfg(target_arch = "x86_64")]
pub fn tsc() -> u64 {
    0
}

#[cfg(feature = "failpoints")]
pub fn kill_self() -> ! {
    std::process::abort()
}

pub fn user_in_group(_uid: u32, _gid: u32) -> bool {
    false
}

/// No group database here.
pub fn group_id(_name: &str) -> Option<u32> {
    None
}

pub fn describe_user(uid: u32) -> String {
    format!("uid {uid}")
}

pub fn describe_group(gid: u32) -> String {
    format!("gid {gid}")
}

pub fn free_bytes(_dir: &Path) -> Option<u64> {
    None
}

/// Nothing forks a segment's holder here.
pub fn at_fork_child(_child: extern "C" fn()) -> io::Result<()> {
    Ok(())
}
