//! Safe wrappers over the operating-system calls the engine makes outside
//! shared memory (files, identities, clocks, randomness, fork), so that every
//! other module is free of `unsafe`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

fn last_error_if(failed: bool) -> io::Result<()> {
    if failed {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Eight bytes from the kernel's entropy pool, or `None` if it has none.
pub fn getrandom_u64() -> Option<u64> {
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is 8 writable bytes owned by this frame; getrandom writes at
    // most the 8 bytes it is told and keeps no pointer after returning.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    (n == 8).then(|| u64::from_ne_bytes(buf))
}

/// Gives the unnamed (`O_TMPFILE`) file `file` the name `path`; fails with
/// `AlreadyExists` if the name exists.
pub fn link_fd(file: &File, path: &Path) -> io::Result<()> {
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let to = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both pointers come from live CStrings (NUL-terminated, owned by
    // this frame until after the call); linkat only reads them.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    last_error_if(rc != 0)
}

/// `flock(2)` on `file`, retried on EINTR.
pub fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock takes a descriptor (valid: `file` is borrowed for the
        // call) and an integer; it touches no memory of this process.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        match last_error_if(rc != 0) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Reserves `len` bytes of `file` so later writes to its mapping cannot fail
/// for lack of space. The error carries the errno (ENOSPC, ENOMEM, ...).
pub fn fallocate(file: &File, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: a descriptor borrowed for the call and two integers; no memory
    // of this process is involved.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// This process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// Milliseconds of CLOCK_MONOTONIC_COARSE (vDSO: no system call).
#[inline]
pub fn monotonic_coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame; the call
    // only writes it.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Kills this process with SIGKILL (crash injection).
pub fn kill_self() -> ! {
    // SAFETY: kill and getpid take and return integers; SIGKILL to ourselves
    // cannot be caught, so no Rust code observes any state after it.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    // The signal is delivered before kill returns to a single-threaded caller;
    // in a threaded one, make sure nothing goes on meanwhile.
    loop {
        std::thread::park();
    }
}
