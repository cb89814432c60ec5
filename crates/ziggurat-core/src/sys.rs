//! Safe wrappers over the operating-system calls the engine makes outside
//! shared memory (files, identities, clocks, randomness, fork), so that every
//! other module is free of `unsafe`.

use std::ffi::{CStr, CString};
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

/// Whether this process belongs to group `gid` (its effective group or one
/// of its supplementary groups).
pub fn in_group(gid: u32) -> bool {
    // SAFETY: getegid has no arguments and cannot fail.
    if unsafe { libc::getegid() } == gid {
        return true;
    }
    // SAFETY: with a size of 0, getgroups only returns the count and writes
    // nothing (the null pointer is allowed by POSIX for this call).
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    let Ok(len) = usize::try_from(n) else {
        return false;
    };
    let mut groups = vec![0 as libc::gid_t; len];
    // SAFETY: `groups` is a live, writable buffer of `n` gids owned by this
    // frame; getgroups writes at most that many.
    let got = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    let Ok(got) = usize::try_from(got) else {
        return false;
    };
    groups.truncate(got);
    groups.contains(&gid)
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

/// The CPU's time-stamp counter, read without waiting for earlier
/// instructions to finish.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn tsc() -> u64 {
    // SAFETY: RDTSC only reads a counter register: no memory is touched, and
    // every x86_64 CPU has the instruction.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Kills this process with SIGKILL (crash injection).
#[cfg(feature = "failpoints")]
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
/// Changes the group of `file` (the owner stays).
pub fn fchown_group(file: &File, gid: u32) -> io::Result<()> {
    // SAFETY: a descriptor borrowed for the call and plain integers (uid -1
    // means "leave the owner"); no memory of this process is involved.
    let rc = unsafe { libc::fchown(file.as_raw_fd(), u32::MAX, gid) };
    last_error_if(rc != 0)
}

/// The name of user `uid` from the password database, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero `passwd` is a valid value of this plain C struct
    // (null pointers and zero integers).
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `pw`, `buf` (with its true length) and `out` are live, writable
    // and owned by this frame; getpwuid_r writes only into them, and the
    // strings it points `pw` at live inside `buf`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: on success `pw_name` points to a NUL-terminated string inside
    // `buf`, which is still alive and unmodified here.
    let name = unsafe { CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The name of group `gid` from the group database, if it has one.
pub fn group_name(gid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: an all-zero `group` is a valid value of this plain C struct.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `user_name`: every pointer refers to live, writable memory
    // of this frame, and `buf.len()` is its true length.
    let rc = unsafe { libc::getgrgid_r(gid, &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || gr.gr_name.is_null() {
        return None;
    }
    // SAFETY: on success `gr_name` points to a NUL-terminated string in `buf`.
    let name = unsafe { CStr::from_ptr(gr.gr_name) };
    Some(name.to_string_lossy().into_owned())
}

/// Whether user `uid` belongs to group `gid`: as its primary group, or listed
/// among the group's members. An unknown user belongs to no group.
pub fn user_in_group(uid: u32, gid: u32) -> bool {
    let mut pbuf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero `passwd` is a valid value of this plain C struct.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut pout: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as in `user_name`: every pointer refers to live, writable memory
    // of this frame, and `pbuf.len()` is its true length.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, pbuf.as_mut_ptr(), pbuf.len(), &mut pout) };
    if rc != 0 || pout.is_null() || pw.pw_name.is_null() {
        return false;
    }
    if pw.pw_gid == gid {
        return true;
    }
    // SAFETY: on success `pw_name` points to a NUL-terminated string in `pbuf`.
    let name = unsafe { CStr::from_ptr(pw.pw_name) };
    let mut gbuf = vec![0 as libc::c_char; 65536];
    // SAFETY: an all-zero `group` is a valid value of this plain C struct.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut gout: *mut libc::group = std::ptr::null_mut();
    // SAFETY: as in `group_name`.
    let rc = unsafe { libc::getgrgid_r(gid, &mut gr, gbuf.as_mut_ptr(), gbuf.len(), &mut gout) };
    if rc != 0 || gout.is_null() || gr.gr_mem.is_null() {
        return false;
    }
    let mut member = gr.gr_mem;
    loop {
        // SAFETY: `gr_mem` is a null-terminated array of pointers into `gbuf`,
        // which is alive; `member` walks it and stops at the null entry.
        let m = unsafe { *member };
        if m.is_null() {
            return false;
        }
        // SAFETY: each entry points to a NUL-terminated string in `gbuf`.
        if unsafe { CStr::from_ptr(m) } == name {
            return true;
        }
        // SAFETY: the entry just read was not the terminator, so the next one
        // is still inside the array.
        member = unsafe { member.add(1) };
    }
}

/// The gid of group `name` from the group database, if it has one (the rule
/// of a front end's `group` option given as a name).
pub fn group_id(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16384];
    // SAFETY: an all-zero `group` is a valid value of this plain C struct.
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: `c` is a live NUL-terminated string; `gr`, `buf` (with its true
    // length) and `out` are live, writable and owned by this frame, and
    // getgrnam_r writes only into them.
    let rc =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(gr.gr_gid)
}

/// `'name' (uid N)`, or `uid N` when the user has no name.
pub fn describe_user(uid: u32) -> String {
    match user_name(uid) {
        Some(n) => format!("user '{n}' (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// `'name' (gid N)`, or `gid N` when the group has no name.
pub fn describe_group(gid: u32) -> String {
    match group_name(gid) {
        Some(n) => format!("group '{n}' (gid {gid})"),
        None => format!("gid {gid}"),
    }
}

/// Bytes available to this process in the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a live NUL-terminated path and `st` a writable struct,
    // both owned by this frame; statvfs reads the one and writes the other.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Registers `child` to run in the child of every later `fork()`.
pub fn at_fork_child(child: extern "C" fn()) -> io::Result<()> {
    // SAFETY: `child` is a plain function with no captured state, valid for
    // the life of the process; the null handlers are allowed by POSIX.
    let rc = unsafe { libc::pthread_atfork(None, None, Some(child)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

/// Runs `f` in a child forked from this process and says whether the child
/// ended well: None if it was still running after `timeout` (it is killed).
/// For tests of what a fork leaves behind.
#[cfg(test)]
pub(crate) fn in_child(timeout: std::time::Duration, f: impl FnOnce()) -> Option<bool> {
    // SAFETY: the child runs only `f` and leaves with `_exit`, running no
    // destructor and none of the parent's other threads' code.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
        // SAFETY: ends the child at once, as a forked child of a threaded
        // process must.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        // SAFETY: waits for the child forked above; `status` is writable.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            return Some(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
        if std::time::Instant::now() > deadline {
            // SAFETY: the child is ours and still running; reaped at once.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
