//! Replacing a segment file under its lock: the exclusive `flock` a
//! `recreate` takes before it removes a file, waited for at most
//! `lock_timeout`, and the processes named when it is not released.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, OpenCause, Result};
use crate::invalid::{arg_mark, Arg};
use crate::sys;

/// Takes the exclusive lock that a replacement of `path` needs, waiting at most
/// `timeout`: any process that can open the file can lock it, and must not be
/// able to hold up the start of its owner's processes for longer.
pub(crate) fn lock_to_replace(
    file: &File,
    path: &Path,
    meta: &std::fs::Metadata,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match sys::flock(file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(Error::Io(format!("cannot lock {}", path.display()), e)),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    let holders = lock_holders(meta);
    let who = if holders.is_empty() {
        "another process".to_string()
    } else {
        holders
            .iter()
            .map(|&pid| describe_process(pid))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Error::open(
        OpenCause::Locked,
        format!(
            "cannot replace segment file {}: {who} holds a lock on it and did not release it \
             within {} ({:.3} s); the file was left as it is. Stop that process, or \
             remove the file once no process uses it",
            path.display(),
            arg_mark(Arg::LockTimeout),
            timeout.as_secs_f64()
        ),
    ))
}

/// The processes holding a `flock` on the file of `meta`, as `/proc/locks`
/// lists them (empty where it cannot be read).
fn lock_holders(meta: &std::fs::Metadata) -> Vec<u32> {
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    let dev = meta.dev();
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(dev),
        libc::minor(dev),
        meta.ino()
    );
    let mut pids: Vec<u32> = locks
        .lines()
        .filter_map(|line| {
            // "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; waiters have "->".
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&id.as_str()))
                .then(|| f.get(4)?.parse().ok())
                .flatten()
        })
        // 0: a holder outside this process's PID namespace.
        .filter(|&pid| pid != 0)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// `pid N (command)`, or `pid N` when its command cannot be read.
fn describe_process(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        // The holder names itself (prctl): no control characters into a log line.
        Ok(c) => format!(
            "pid {pid} ({})",
            c.trim_end_matches('\n')
                .chars()
                .map(|ch| if ch.is_control() { '?' } else { ch })
                .collect::<String>()
        ),
        Err(_) => format!("pid {pid}"),
    }
}
