//! The life of a segment file: creating it aside and linking it into place,
//! attaching to an existing one, and refusing a file that cannot be trusted
//! (owner, mode, magic, layout version, checksum, geometry).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::error::{Error, OpenCause, Result};
use crate::hash::checksum;
use crate::huge::{HugePages, Policy};
use crate::layout::*;
use crate::lock::Mutex;
use crate::options::Options;
use crate::segment::{panic_message, Segment};
use crate::shm::Shm;
use crate::sys;

fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| Error::Io(what, e)
}

/// The longest segment name. Its file name, `ziggurat.{name}.v{layout}`, stays
/// well within NAME_MAX (255 bytes), and it leaves room for what a cache adds to
/// its name (`.ver-{version}`, `.neg`).
const MAX_NAME: usize = 200;

/// The file of the segment `name` in its directory.
fn file_name(name: &str) -> String {
    format!("ziggurat.{name}.v{LAYOUT_VERSION}")
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn random_u64() -> u64 {
    sys::getrandom_u64().unwrap_or_else(|| {
        // No entropy source: still unpredictable enough to vary per segment.
        let t = Instant::now().elapsed().as_nanos() as u64;
        xxhash_rust::xxh3::xxh3_64_with_seed(&t.to_ne_bytes(), std::process::id() as u64 ^ now_ms())
    })
}

/// Opens a new, unnamed file in `dir` (`O_TMPFILE`), or, where the file system
/// lacks that, a hidden uniquely named one (returned so it can be removed).
fn open_aside(dir: &Path) -> io::Result<(File, Option<PathBuf>)> {
    match OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir)
    {
        Ok(f) => return Ok((f, None)),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) | Some(libc::EINVAL)
            ) => {}
        Err(e) => return Err(e),
    }
    let tmp = dir.join(format!(
        ".ziggurat-new.{}.{:016x}",
        std::process::id(),
        random_u64()
    ));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    Ok((f, Some(tmp)))
}

/// Removes a temporary file name when dropped.
struct TmpName(Option<PathBuf>);

impl Drop for TmpName {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The owner, group and mode rule for sharing a segment file: whether this
/// process may use a file with `uid`, `gid` and `mode`.
enum Access {
    /// Usable.
    Ok,
    /// Owned by this user but with permissions it would not have created
    /// (replaceable with `recreate`).
    Loose(String),
    /// Owned by another user, and not shared through the configured group.
    Refused(String),
}

/// The rule is the same for read-only and read-write opens, because whoever
/// can write a file chooses the bytes every reader decodes (pickled values run
/// code): only this user's files, and files shared (mode 660) with a group this
/// process trusts, are used. A read-write open trusts the configured `group`
/// alone; a read-only view without `group` trusts a file shared with any group
/// this process is a member of (its membership is the administrator's choice),
/// and takes a file of this user that no untrusted user can write, whatever
/// else its mode allows (a view never widens who can write it).
fn judge_access(path: &Path, uid: u32, gid: u32, mode: u32, opts: &Options) -> Access {
    let group = opts.group;
    let mode = mode & 0o7777;
    let me = sys::euid();
    let trusted_group = match group {
        Some(g) => g == gid,
        None => opts.read_only && sys::in_group(gid),
    };
    let group_ok = mode == 0o660 && trusted_group;
    if uid == me {
        if group_ok {
            return Access::Ok;
        }
        // A view makes the file no more writable than it is: it needs only that
        // no untrusted user can write it (a copy made 644 for inspection is fine).
        if opts.read_only && mode & 0o002 == 0 && (mode & 0o020 == 0 || trusted_group) {
            return Access::Ok;
        }
        if mode & 0o077 == 0 {
            // A private file is fine, unless its owner asks to rebuild it
            // shared with a group (the remedy other users are told about).
            return match group {
                Some(g) if opts.recreate => Access::Loose(format!(
                    "it is private to its owner (mode {mode:o}), not shared with {}",
                    sys::describe_group(g)
                )),
                _ => Access::Ok,
            };
        }
        return Access::Loose(match group {
            Some(g) if g == gid => format!(
                "its mode is {mode:o}; a segment shared with {} must be exactly 660",
                sys::describe_group(g)
            ),
            Some(g) => format!(
                "its mode is {mode:o} and its group is {}, not the configured {}",
                sys::describe_group(gid),
                sys::describe_group(g)
            ),
            None => format!(
                "it is readable or writable by other users (mode {mode:o}; without group= \
                 a segment must be 600)"
            ),
        });
    }
    if group_ok {
        return Access::Ok;
    }
    let mut why = format!(
        "segment file {} is owned by {}, this process runs as {}",
        path.display(),
        sys::describe_user(uid),
        sys::describe_user(me)
    );
    match group {
        Some(g) if g == gid => why += &format!(
            "; it has the configured {} but mode {mode:o}, and a shared segment must be exactly 660",
            sys::describe_group(g)
        ),
        Some(g) => why += &format!(
            "; its group is {}, not the configured {}",
            sys::describe_group(gid),
            sys::describe_group(g)
        ),
        None => {}
    }
    if opts.read_only {
        why += ". Refusing to read memory another user can write (its contents could run code \
                in this process when decoded): run this process as that user, or as a member \
                of the file's group once its owner shares it (mode 660)";
    } else {
        why += ". Refusing to share memory with another user: run every process as the same \
                user, or share a group (group=<gid>, which creates the file mode 660 for that \
                group; its owner rebuilds an existing file that way by opening it with \
                group=<gid> and recreate=True), or choose another directory";
    }
    why += ". If no process of this service made that file, another user may have taken the \
            name first in a directory every user can write: give the service a directory \
            only it can write (systemd RuntimeDirectory=, $XDG_RUNTIME_DIR, a container's own \
            /dev/shm)";
    Access::Refused(why)
}

/// The process's user, for messages.
fn me() -> String {
    sys::describe_user(sys::euid())
}

/// Classifies a failure to create a file in `dir`.
fn create_failure(dir: &Path, e: io::Error) -> Error {
    let d = dir.display();
    match e.raw_os_error() {
        Some(libc::ENOENT) => Error::open(
            OpenCause::MissingDirectory,
            format!("directory {d} does not exist: create it, or pass another directory"),
        ),
        Some(libc::ENOTDIR) => Error::open(
            OpenCause::MissingDirectory,
            format!("{d} is not a directory (a part of the path is a file): pass another directory"),
        ),
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => Error::open(
            OpenCause::NotWritable,
            format!(
                "cannot create a segment file in directory {d}: {e}. This process runs as {}; \
                 give it write access to the directory, or pass another directory",
                me()
            ),
        ),
        Some(libc::ENOSPC | libc::EDQUOT) => Error::open(
            OpenCause::NoSpace,
            format!("cannot create a segment file in directory {d}: {e}. Free space there, or pass another directory"),
        ),
        _ => Error::Io(format!("cannot create a segment file in directory {d}"), e),
    }
}

/// The warning of [`Segment::directory_notice`] for `dir`, if it deserves one.
fn directory_notice(dir: &Path) -> Option<String> {
    let mode = std::fs::metadata(dir).ok()?.permissions().mode();
    if mode & 0o002 == 0 || mode & 0o1000 != 0 {
        return None;
    }
    Some(format!(
        "directory {} is writable by every user (mode {:o}) and has no sticky bit: any local \
         user can rename, replace or remove the segment files in it under running processes. \
         Give the service a directory only it can write (systemd RuntimeDirectory=, \
         $XDG_RUNTIME_DIR, a container's own /dev/shm), or set the sticky bit (chmod +t)",
        dir.display(),
        mode & 0o7777
    ))
}

/// Takes the exclusive lock that a replacement of `path` needs, waiting at most
/// `timeout`: any process that can open the file can lock it, and must not be
/// able to hold up the start of its owner's processes for longer.
fn lock_to_replace(
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
             within lock_timeout ({:.3} s); the file was left as it is. Stop that process, or \
             remove the file once no process uses it",
            path.display(),
            timeout.as_secs_f64()
        ),
    ))
}

/// Whether the mapping must refuse huge pages (`huge_pages` off) where the
/// directory offers them.
fn small_pages(opts: &Options) -> bool {
    opts.huge_pages == HugePages::Off && Policy::of(&opts.directory).offers()
}

/// Whether a file appears at `path` within `timeout`.
fn appears(path: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if std::fs::symlink_metadata(path).is_ok() {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
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

impl Segment {
    /// Creates the segment `name`, or attaches to it if it exists.
    ///
    /// A new file is built aside (an anonymous `O_TMPFILE`, or a hidden temporary
    /// name where that is not supported), fully initialised, then linked into
    /// place with `link(2)`, which fails if the name exists. So the name only
    /// ever refers to a complete segment, and when several processes open a new
    /// name at once exactly one file wins and every process attaches to it.
    ///
    /// Failures to create or attach are [`Error::Open`] with an [`OpenCause`].
    /// An open that succeeds in a directory every user may write without the
    /// sticky bit says so in [`Segment::directory_notice`].
    pub fn open(name: &str, opts: &Options) -> Result<Segment> {
        // An open stopped by a file no check foresaw (a panic) is that file refused as
        // damaged, as every other operation contains its panics (`Segment::contain`): no
        // front end ever sees one.
        let opened = catch_unwind(AssertUnwindSafe(|| Self::open_file(name, opts)));
        let mut seg = opened.unwrap_or_else(|payload| {
            Err(Error::open(
                OpenCause::Damaged,
                format!(
                    "segment file {} cannot be used: opening it stopped on data it could not \
                     handle ({}). Remove the file once no process uses it (`ziggurat rm`): the \
                     next open makes a new one",
                    opts.directory.join(file_name(name)).display(),
                    panic_message(payload)
                ),
            ))
        })?;
        seg.directory_notice = directory_notice(&opts.directory);
        if opts.huge_pages == HugePages::Require {
            let report = seg.huge_pages();
            if !report.backed() {
                // A file made only to be refused would stay behind unused.
                if seg.created {
                    let _ = seg.unlink_own();
                }
                let why = report.policy.remedy(&opts.directory).unwrap_or_else(|| {
                    "the kernel offers them here, but none could be allocated (memory too                      fragmented, or the file was made before huge pages were enabled: remove it                      once no process uses it)"
                        .into()
                });
                return Err(Error::open(
                    OpenCause::NoHugePages,
                    format!(
                        "segment file {} is not backed by huge pages, and huge_pages='require':                          {why}; or open it with huge_pages='auto'",
                        seg.path().display()
                    ),
                ));
            }
        }
        Ok(seg)
    }

    /// The path of the segment `name`'s file in `directory` (it may not exist).
    ///
    /// ```
    /// # use ziggurat_core::Segment;
    /// let p = Segment::file_path(std::path::Path::new("/dev/shm"), "app");
    /// assert!(p.starts_with("/dev/shm"));
    /// ```
    pub fn file_path(directory: &Path, name: &str) -> PathBuf {
        directory.join(file_name(name))
    }

    /// Bytes this process may still allocate in the file system holding
    /// `directory` (`statvfs`), or `None` when it cannot be read.
    ///
    /// ```
    /// # use ziggurat_core::Segment;
    /// assert!(Segment::free_space(std::path::Path::new("/dev/shm")).is_some());
    /// ```
    pub fn free_space(directory: &Path) -> Option<u64> {
        sys::free_bytes(directory)
    }

    /// Whether this open made the segment's file (it did not exist, and this
    /// process's file won the race to name it) rather than attaching to one.
    ///
    /// ```no_run
    /// # use ziggurat_core::{Options, Segment};
    /// let seg = Segment::open("app", &Options::default()).unwrap();
    /// println!("created: {}", seg.created());
    /// ```
    pub fn created(&self) -> bool {
        self.created
    }

    /// Removes the file, if its name still refers to the file this handle
    /// maps: undoes a [`Segment::created`] open whose companion failed,
    /// without ever removing a file another process put there since.
    ///
    /// ```no_run
    /// # use ziggurat_core::{Options, Segment};
    /// let seg = Segment::open("app", &Options::default()).unwrap();
    /// if seg.created() {
    ///     seg.unlink_own().unwrap();
    /// }
    /// ```
    pub fn unlink_own(&self) -> Result<bool> {
        let mine = self.file_meta()?;
        match std::fs::symlink_metadata(self.path()) {
            Ok(m) if m.dev() == mine.dev() && m.ino() == mine.ino() => {
                std::fs::remove_file(self.path())
                    .map_err(io_err(format!("cannot remove {}", self.path().display())))?;
                Ok(true)
            }
            Ok(_) => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::Io(
                format!("cannot stat {}", self.path().display()),
                e,
            )),
        }
    }

    /// A warning for the operator when the segment's directory lets any local
    /// user rename, replace or remove its files (writable by every user, no
    /// sticky bit); `None` when it does not.
    ///
    /// ```no_run
    /// # use ziggurat_core::{Options, Segment};
    /// let seg = Segment::open("app", &Options::default()).unwrap();
    /// if let Some(warning) = seg.directory_notice() {
    ///     eprintln!("{warning}");
    /// }
    /// ```
    pub fn directory_notice(&self) -> Option<&str> {
        self.directory_notice.as_deref()
    }

    /// The group the file is shared with: its gid when its mode is 660 (the
    /// `group` to pass to a read-write open of it), else `None`. Read from
    /// the attached file, not its path.
    pub fn shared_group(&self) -> Result<Option<u32>> {
        let m = self.file_meta()?;
        Ok((m.mode() & 0o7777 == 0o660).then_some(m.gid()))
    }

    /// `(device, inode)` of the attached file: two handles with the same
    /// identity map the same file, whatever its path refers to now.
    pub fn file_id(&self) -> Result<(u64, u64)> {
        let m = self.file_meta()?;
        Ok((m.dev(), m.ino()))
    }

    fn file_meta(&self) -> Result<std::fs::Metadata> {
        self.file
            .metadata()
            .map_err(io_err(format!("cannot stat {}", self.path().display())))
    }

    fn open_file(name: &str, opts: &Options) -> Result<Segment> {
        if !valid_name(name) {
            return Err(Error::Invalid(format!(
                "segment name must be 1-{MAX_NAME} characters of A-Z a-z 0-9 . _ - not starting with '.', got {name:?}"
            )));
        }
        if opts.lock_timeout.is_zero() || opts.lock_timeout > Duration::from_secs(3600) {
            return Err(Error::Invalid(
                "lock_timeout must be > 0 and at most 3600 seconds".into(),
            ));
        }
        if opts.group == Some(u32::MAX) {
            return Err(Error::Invalid(
                "group must be a group id (gid) below 4294967295".into(),
            ));
        }
        if opts.read_only && opts.recreate {
            return Err(Error::Invalid(
                "read_only and recreate exclude each other: a read-only open never replaces a file"
                    .into(),
            ));
        }
        let geom = Geometry::compute(opts.size, opts.avg_item_size, opts.shards)?;
        let path = opts.directory.join(file_name(name));
        if opts.read_only {
            return Self::open_read_only(path, opts);
        }
        for _ in 0..8 {
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(f) => f,
                // The file, or the directory, is missing; `create` tells which.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match Self::create(&path, geom, opts) {
                        Ok(Some(seg)) => return Ok(seg),
                        Ok(None) => continue, // another process linked its file first
                        // Processes that open a new name at once each build a file aside:
                        // on a full file system the ones that lose the race for the room
                        // find no space, while the winner is about to name its file. They
                        // wait for that name and attach to it.
                        Err(
                            e @ Error::Open {
                                cause: OpenCause::NoSpace,
                                ..
                            },
                        ) => {
                            if appears(&path, opts.lock_timeout) {
                                continue;
                            }
                            return Err(e);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(Self::open_failure(&path, opts, e)),
            };
            let meta = file
                .metadata()
                .map_err(io_err(format!("cannot stat {}", path.display())))?;
            if !meta.file_type().is_file() {
                return Err(Error::open(
                    OpenCause::Incompatible,
                    format!(
                        "{} is not a regular file: remove it, or choose another name or directory",
                        path.display()
                    ),
                ));
            }
            let attached = match judge_access(
                &path,
                meta.uid(),
                meta.gid(),
                meta.permissions().mode(),
                opts,
            ) {
                Access::Refused(m) => return Err(Error::open(OpenCause::OtherOwner, m)),
                Access::Loose(m) => Err(Error::open(OpenCause::Incompatible, m)),
                Access::Ok => Self::attach(&file, &path, meta.len(), false, small_pages(opts)),
            };
            match attached {
                Ok((shm, g, seed)) => return Ok(Segment::assemble(shm, file, path, g, seed, opts)),
                Err(Error::Open {
                    cause: OpenCause::Damaged | OpenCause::Incompatible,
                    ..
                }) if opts.recreate => {
                    // Replace it, unless another process already did (then the
                    // name no longer refers to the file we judged).
                    lock_to_replace(&file, &path, &meta, opts.lock_timeout)?;
                    let same = std::fs::symlink_metadata(&path)
                        .map(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
                        .unwrap_or(false);
                    if same {
                        std::fs::remove_file(&path).map_err(|e| {
                            Error::open(
                                OpenCause::NotWritable,
                                format!(
                                    "cannot remove {} to recreate it: {e}. This process runs as {}; \
                                     give it write access to the directory, or choose another directory",
                                    path.display(),
                                    me()
                                ),
                            )
                        })?;
                    }
                    continue;
                }
                Err(Error::Open {
                    cause: cause @ (OpenCause::Damaged | OpenCause::Incompatible),
                    message,
                }) => {
                    return Err(Error::open(
                        cause,
                        format!(
                            "segment file {} cannot be used: {message}. Open it with recreate=True to \
                             replace it (processes still attached to the old file keep using it \
                             until they reopen)",
                            path.display()
                        ),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Io(
            format!(
                "segment file {} keeps being replaced by another process",
                path.display()
            ),
            io::Error::from(io::ErrorKind::WouldBlock),
        ))
    }

    /// Classifies a failure to open the existing name `path`.
    fn open_failure(path: &Path, opts: &Options, e: io::Error) -> Error {
        let p = path.display();
        match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => {
                if let Ok(m) = std::fs::symlink_metadata(path) {
                    if let Access::Refused(why) =
                        judge_access(path, m.uid(), m.gid(), m.mode(), opts)
                    {
                        return Error::open(OpenCause::OtherOwner, why);
                    }
                }
                Error::open(
                    OpenCause::NotWritable,
                    format!(
                        "cannot open segment file {p} for writing: {e}. This process runs as {}; \
                         give it read and write access to the file, or choose another directory",
                        me()
                    ),
                )
            }
            Some(libc::EROFS) => Error::open(
                OpenCause::NotWritable,
                format!("segment file {p} is on a read-only file system: choose another directory"),
            ),
            Some(libc::ENOTDIR) => create_failure(&opts.directory, e),
            Some(libc::ELOOP | libc::EISDIR | libc::ENXIO) => Error::open(
                OpenCause::Incompatible,
                format!(
                    "{p} is not a regular file ({e}): remove it, or choose another name or directory"
                ),
            ),
            _ => Error::Io(format!("cannot open segment file {p}"), e),
        }
    }

    /// Builds a new segment aside and links it in at `path`. `Ok(None)` when
    /// another process linked its own first.
    fn create(path: &Path, g: Geometry, opts: &Options) -> Result<Option<Segment>> {
        let dir = &opts.directory;
        let (file, tmp) = open_aside(dir).map_err(|e| create_failure(dir, e))?;
        // A named temporary file must not outlive this call, whatever happens.
        let _cleanup = TmpName(tmp.clone());
        // The group is set before the file gets its name, so the name never
        // refers to a file with the wrong group or mode.
        let mode = match opts.group {
            Some(gid) => {
                sys::fchown_group(&file, gid).map_err(|e| {
                    Error::Invalid(format!(
                        "group={gid}: cannot give the new segment file {}: {e}. This process \
                         ({}) must be a member of that group; pass a group it belongs to",
                        sys::describe_group(gid),
                        me()
                    ))
                })?;
                0o660
            }
            None => 0o600,
        };
        // Explicitly, because the umask may have narrowed the creation mode.
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io_err(format!(
                "cannot set the mode of a new segment file in {}",
                dir.display()
            )))?;
        file.set_len(g.file_size)
            .map_err(|e| create_failure(dir, e))?;
        // On a tmpfs mounted huge=advise, only pages first touched through a
        // mapping that asked for huge pages are huge: allocate them that way
        // (the reservation below then has nothing left to do, or finds no room).
        let policy = Policy::of(dir);
        let early = if opts.huge_pages != HugePages::Off && policy.needs_advice() {
            let shm = Shm::map(&file, g.file_size as usize).map_err(|e| {
                Error::Io(
                    format!("cannot map a new segment for {}", path.display()),
                    e,
                )
            })?;
            if shm.advise_huge(true).is_ok() {
                // A failure (no room) is reported by the reservation below.
                let _ = shm.populate();
            }
            Some(shm)
        } else {
            None
        };
        // Reserve every page now, so a full tmpfs fails here with ENOSPC rather
        // than with SIGBUS on some later write.
        if let Err(e) = sys::fallocate(&file, g.file_size) {
            let no_room = matches!(
                e.raw_os_error(),
                Some(libc::ENOSPC | libc::ENOMEM | libc::EDQUOT | libc::EFBIG)
            );
            if !no_room {
                return Err(Error::Io(
                    format!(
                        "cannot reserve {} bytes for a segment in {}",
                        g.file_size,
                        dir.display()
                    ),
                    e,
                ));
            }
            let free = sys::free_bytes(dir)
                .map(|b| format!("{b} bytes are available there"))
                .unwrap_or_else(|| "the space available there is unknown".into());
            return Err(Error::open(
                OpenCause::NoSpace,
                format!(
                    "no room for the segment file {}: it needs {} bytes ({:.1} MiB) in {} ({e}), \
                     and {free}. Free space there, give a smaller size, or pick another directory",
                    path.display(),
                    g.file_size,
                    g.file_size as f64 / (1u64 << 20) as f64,
                    dir.display()
                ),
            ));
        }
        let shm = match early {
            Some(shm) => shm,
            None if small_pages(opts) => Shm::map_small_pages(&file, g.file_size as usize, false)
                .map_err(|e| {
                Error::Io(
                    format!("cannot map a new segment for {}", path.display()),
                    e,
                )
            })?,
            None => Shm::map(&file, g.file_size as usize).map_err(|e| {
                Error::Io(
                    format!("cannot map a new segment for {}", path.display()),
                    e,
                )
            })?,
        };
        let seed = random_u64();
        let put64 = |off: usize, v: u64| shm.u64_at(off).store(v, Ordering::Relaxed);
        let put32 = |off: usize, v: u32| shm.u32_at(off).store(v, Ordering::Relaxed);
        for s in 0..g.nshards {
            // No other process can see the file yet (it is not linked), so no
            // one uses these mutexes while they are initialised.
            Mutex::at(&shm, g.shard_off(s) + S_MUTEX)
                .init()
                .map_err(|e| Error::Io("cannot initialise a shard lock".into(), e))?;
        }
        shm.write(H_MAGIC, &MAGIC);
        put32(H_VERSION, LAYOUT_VERSION);
        put32(H_HEADER_SIZE, HEADER_SIZE as u32);
        put64(H_FILE_SIZE, g.file_size);
        put32(H_NSHARDS, g.nshards);
        put32(H_NPAIRS, g.npairs);
        put32(H_NSTAMPS, g.nstamps);
        put32(H_NTAGS, g.ntags);
        put64(H_SMALL_CAP, g.small_cap);
        put64(H_MAIN_CAP, g.main_cap);
        put32(H_GHOST_BUCKETS, g.ghost_buckets);
        put32(H_MAX_KEY, g.max_key);
        put32(H_MAX_VALUE, g.max_value);
        put64(H_SEED, seed);
        put64(H_INSTANCE, random_u64());
        put64(H_STAMPS_OFF, g.stamps_off);
        put64(H_TAGS_OFF, g.tags_off);
        put64(H_SHARDS_OFF, g.shards_off);
        put64(H_SHARD_STRIDE, g.shard_stride);
        put64(H_INDEX_REL, g.index_rel);
        put64(H_GHOST_REL, g.ghost_rel);
        put64(H_SMALL_REL, g.small_rel);
        put64(H_MAIN_REL, g.main_rel);
        let mut hdr = vec![0u8; H_CHECKSUM];
        shm.read_racy(0, &mut hdr);
        put64(H_CHECKSUM, checksum(&hdr));
        // Everything above must be visible before anyone sees READY.
        shm.u32_at(H_STATE).store(STATE_READY, Ordering::Release);
        let linked = match &tmp {
            Some(t) => std::fs::hard_link(t, path),
            None => sys::link_fd(&file, path),
        };
        match linked {
            Ok(()) => {
                let mut seg = Segment::assemble(shm, file, path.to_path_buf(), g, seed, opts);
                seg.created = true;
                Ok(Some(seg))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(Error::Io(
                format!("cannot link the new segment at {}", path.display()),
                e,
            )),
        }
    }

    /// Attaches read-only to the existing file `path` (see [`Options::read_only`]).
    fn open_read_only(path: PathBuf, opts: &Options) -> Result<Segment> {
        let p = path.display().to_string();
        // O_NONBLOCK: opening a FIFO put at the name for reading would wait for
        // a writer forever; the file type is refused below. (It does not
        // change how a regular file is read or mapped.)
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let dir = &opts.directory;
                return Err(match std::fs::metadata(dir) {
                    Err(e) => create_failure(dir, e),
                    Ok(m) if !m.is_dir() => {
                        create_failure(dir, io::Error::from_raw_os_error(libc::ENOTDIR))
                    }
                    Ok(_) => Error::open(
                        OpenCause::MissingSegment,
                        format!(
                            "segment file {p} does not exist, and a read-only open never creates \
                             one: check the name and the directory"
                        ),
                    ),
                });
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                return Err(Error::open(
                    OpenCause::NotReadable,
                    format!(
                        "cannot read segment file {p}: {e}. This process runs as {}; run it as \
                         the segment's owner or a member of its group",
                        me()
                    ),
                ));
            }
            Err(e) => return Err(Self::open_failure(&path, opts, e)),
        };
        let meta = file
            .metadata()
            .map_err(io_err(format!("cannot stat {p}")))?;
        if !meta.file_type().is_file() {
            return Err(Error::open(
                OpenCause::Incompatible,
                format!("{p} is not a regular file"),
            ));
        }
        // Judged on the opened file (fstat), so a name switched to another
        // file after any earlier look at it changes nothing.
        match judge_access(
            &path,
            meta.uid(),
            meta.gid(),
            meta.permissions().mode(),
            opts,
        ) {
            Access::Ok => {}
            Access::Refused(m) => return Err(Error::open(OpenCause::OtherOwner, m)),
            Access::Loose(m) => {
                return Err(Error::open(
                    OpenCause::Incompatible,
                    format!(
                        "segment file {p} cannot be used: {m}, so other users may have written \
                         it. Its owner replaces it with a read-write open with recreate=True"
                    ),
                ))
            }
        }
        match Self::attach(&file, &path, meta.len(), true, small_pages(opts)) {
            Ok((shm, g, seed)) => Ok(Segment::assemble(shm, file, path, g, seed, opts)),
            Err(Error::Open { cause, message }) => Err(Error::open(
                cause,
                format!(
                    "segment file {p} cannot be used: {message}. A read-write open with \
                     recreate=True replaces it"
                ),
            )),
            Err(e) => Err(e),
        }
    }

    fn attach(
        file: &File,
        path: &Path,
        file_len: u64,
        read_only: bool,
        small: bool,
    ) -> Result<(Shm, Geometry, u64)> {
        if file_len < HEADER_SIZE as u64 || file_len % 8 != 0 {
            return Err(Error::open(
                OpenCause::Damaged,
                format!("it is an incomplete file of {file_len} bytes"),
            ));
        }
        let map = |file: &File, len: usize| {
            if small {
                Shm::map_small_pages(file, len, read_only)
            } else if read_only {
                Shm::map_read_only(file, len)
            } else {
                Shm::map(file, len)
            }
        };
        let shm = map(file, file_len as usize)
            .map_err(|e| Error::Io(format!("cannot map {}", path.display()), e))?;
        let mut magic = [0u8; 8];
        shm.read_racy(H_MAGIC, &mut magic);
        let get64 = |off: usize| shm.u64_at(off).load(Ordering::Acquire);
        let get32 = |off: usize| shm.u32_at(off).load(Ordering::Acquire);
        if magic == [0u8; 8] && get32(H_STATE) == 0 {
            return Err(Error::open(
                OpenCause::Damaged,
                "it is empty: it was never initialised",
            ));
        }
        if magic != MAGIC {
            return Err(Error::open(
                OpenCause::Incompatible,
                "it is not a ziggurat segment (foreign magic)",
            ));
        }
        let v = get32(H_VERSION);
        if v != LAYOUT_VERSION {
            return Err(Error::open(
                OpenCause::Incompatible,
                format!("its layout version is {v}, this build reads version {LAYOUT_VERSION}"),
            ));
        }
        let mut hdr = vec![0u8; H_CHECKSUM];
        shm.read_racy(0, &mut hdr);
        if checksum(&hdr) != get64(H_CHECKSUM) {
            return Err(Error::open(
                OpenCause::Damaged,
                "its header checksum does not match (the header is damaged)",
            ));
        }
        match get32(H_STATE) {
            STATE_READY => {}
            STATE_RETIRED => return Err(Error::open(OpenCause::Damaged, "it was retired")),
            _ => return Err(Error::open(OpenCause::Damaged, "its state word is damaged")),
        }
        let g = Geometry {
            file_size: get64(H_FILE_SIZE),
            nshards: get32(H_NSHARDS),
            npairs: get32(H_NPAIRS),
            nstamps: get32(H_NSTAMPS),
            ntags: get32(H_NTAGS),
            small_cap: get64(H_SMALL_CAP),
            main_cap: get64(H_MAIN_CAP),
            ghost_buckets: get32(H_GHOST_BUCKETS),
            max_key: get32(H_MAX_KEY),
            max_value: get32(H_MAX_VALUE),
            stamps_off: get64(H_STAMPS_OFF),
            tags_off: get64(H_TAGS_OFF),
            shards_off: get64(H_SHARDS_OFF),
            shard_stride: get64(H_SHARD_STRIDE),
            index_rel: get64(H_INDEX_REL),
            ghost_rel: get64(H_GHOST_REL),
            small_rel: get64(H_SMALL_REL),
            main_rel: get64(H_MAIN_REL),
        };
        g.check(file_len)?;
        let seed = get64(H_SEED);
        Ok((shm, g, seed))
    }
}
