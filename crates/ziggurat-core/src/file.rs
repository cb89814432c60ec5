//! The life of a segment file: opening it (creating it when missing,
//! attaching to it, replacing it with `recreate`), refusing a file that cannot
//! be trusted, and what a handle tells of its file (path, owner group,
//! identity). Its parts live beside it: the name rule in `name`, the access
//! rule in `access`, creation aside and linking in `create`, the header
//! checks in `attach`, the lock a replacement takes in `replace`.

#[cfg(target_os = "linux")]
use std::fs::OpenOptions;
use std::io;
#[cfg(target_os = "linux")]
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;
#[cfg(target_os = "linux")]
use std::time::Instant;

#[cfg(target_os = "linux")]
use crate::access::{judge_access, me, Access};
#[cfg(target_os = "linux")]
use crate::attach::small_pages;
#[cfg(target_os = "linux")]
use crate::create::create_failure;
use crate::error::{Error, OpenCause, Result};
use crate::failure::panic_message;
use crate::geometry::Geometry;
use crate::huge::HugePages;
use crate::invalid::{remove_mark, setting_mark, Arg, Problem};
use crate::name::{check_segment_name, file_name};
use crate::options::Options;
#[cfg(target_os = "linux")]
use crate::replace::lock_to_replace;
use crate::segment::Segment;
use crate::sys;

fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| Error::Io(what, e)
}

/// The warning of [`Segment::directory_notice`] for `dir`, if it deserves one.
#[cfg(target_os = "linux")]
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

#[cfg(not(target_os = "linux"))]
fn directory_notice(_dir: &Path) -> Option<String> {
    None
}

/// How long a process that found no room for a new segment waits for another
/// process, which took the room first, to name its file (see `open_path`).
#[cfg(target_os = "linux")]
const BUILD_WAIT: Duration = Duration::from_secs(3);

/// What a process that found no room for its new segment saw while it waited.
#[cfg(target_os = "linux")]
enum Waited {
    /// Another process named its file: attach to it.
    Named,
    /// The room is back (the processes that built files aside at once all
    /// gave theirs up): build again.
    Room,
    /// Neither, within the wait.
    Neither,
}

/// Waits at most `timeout` for a file at `path`, or for `need` bytes free in
/// `dir`. Each process polls at a pace of its own, so that processes that all
/// gave up at once do not all build again at the same moment.
#[cfg(target_os = "linux")]
fn wait_for_name_or_room(path: &Path, dir: &Path, need: u64, timeout: Duration) -> Waited {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1 + u64::from(std::process::id() % 13));
    loop {
        if std::fs::symlink_metadata(path).is_ok() {
            return Waited::Named;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Waited::Neither;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(40));
        if std::fs::symlink_metadata(path).is_err()
            && sys::free_bytes(dir).is_some_and(|free| free >= need)
        {
            return Waited::Room;
        }
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
                     handle ({}). Remove the file once no process uses it ({}): the next open \
                     makes a new one",
                    opts.directory.join(file_name(name)).display(),
                    panic_message(payload),
                    remove_mark(false)
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
                        "segment file {} is not backed by huge pages, and {}:                          {why}; or open it with {}",
                        seg.path().display(),
                        setting_mark(Arg::HugePages, "'require'"),
                        setting_mark(Arg::HugePages, "'auto'")
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
    #[cfg(target_os = "linux")]
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
    #[cfg(target_os = "linux")]
    pub fn shared_group(&self) -> Result<Option<u32>> {
        let m = self.file_meta()?;
        Ok((m.mode() & 0o7777 == 0o660).then_some(m.gid()))
    }

    /// `(device, inode)` of the attached file: two handles with the same
    /// identity map the same file, whatever its path refers to now.
    #[cfg(target_os = "linux")]
    pub fn file_id(&self) -> Result<(u64, u64)> {
        let m = self.file_meta()?;
        Ok((m.dev(), m.ino()))
    }

    #[cfg(target_os = "linux")]
    fn file_meta(&self) -> Result<std::fs::Metadata> {
        self.file
            .metadata()
            .map_err(io_err(format!("cannot stat {}", self.path().display())))
    }

    fn open_file(name: &str, opts: &Options) -> Result<Segment> {
        check_segment_name(name)?;
        if opts.lock_timeout.is_zero() || opts.lock_timeout > Duration::from_secs(3600) {
            return Err(Error::invalid(
                Arg::LockTimeout,
                Problem::TooLong {
                    max: 3600.0,
                    got: opts.lock_timeout.as_secs_f64(),
                    never: false,
                },
            ));
        }
        if opts.group == Some(u32::MAX) {
            return Err(Error::invalid(
                Arg::Group,
                Problem::Range {
                    min: 0,
                    max: u32::MAX as i128 - 1,
                    got: u32::MAX.into(),
                },
            ));
        }
        if opts.read_only && opts.recreate {
            return Err(Error::invalid(
                Arg::ReadOnly,
                Problem::Excludes {
                    other: Arg::Recreate,
                },
            ));
        }
        let geom = Geometry::compute(opts.size, opts.avg_item_size, opts.shards)?;
        let path = opts.directory.join(file_name(name));
        Self::open_path(path, geom, opts)
    }

    /// Where no segment can run: the settings were checked as everywhere,
    /// and the open is refused with the cause a front end degrades on.
    #[cfg(not(target_os = "linux"))]
    fn open_path(path: PathBuf, _geom: Geometry, _opts: &Options) -> Result<Segment> {
        Err(Error::open(
            OpenCause::Unsupported,
            format!(
                "segment file {} cannot be opened: {}",
                path.display(),
                sys::unsupported()
            ),
        ))
    }

    /// Opens, creates or replaces the checked segment file `path`.
    #[cfg(target_os = "linux")]
    fn open_path(path: PathBuf, geom: Geometry, opts: &Options) -> Result<Segment> {
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
                        // wait for that name and attach to it: as long as the winner may
                        // take to build and zero its segment on a busy host (seconds for
                        // tens of MiB when the CPUs are shared), and never less than a lock
                        // wait. When all of them lost (their files aside, each sized to the
                        // room it saw, did not fit together), the room comes back as they
                        // give up, and they build again. A process alone on a full file
                        // system waits that long once.
                        Err(
                            e @ Error::Open {
                                cause: OpenCause::NoSpace,
                                ..
                            },
                        ) => {
                            let wait = opts.lock_timeout.max(BUILD_WAIT);
                            match wait_for_name_or_room(
                                &path,
                                &opts.directory,
                                geom.file_size(),
                                wait,
                            ) {
                                Waited::Named | Waited::Room => continue,
                                Waited::Neither => return Err(e),
                            }
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
                            "segment file {} cannot be used: {message}. Open it with {} to \
                             replace it (processes still attached to the old file keep using it \
                             until they reopen)",
                            path.display(),
                            setting_mark(Arg::Recreate, "true")
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
    #[cfg(target_os = "linux")]
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

    /// Attaches read-only to the existing file `path` (see [`Options::read_only`]).
    #[cfg(target_os = "linux")]
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
                         it. Its owner replaces it with a read-write open with {}",
                        setting_mark(Arg::Recreate, "true")
                    ),
                ))
            }
        }
        match Self::attach(&file, &path, meta.len(), true, small_pages(opts)) {
            Ok((shm, g, seed)) => Ok(Segment::assemble(shm, file, path, g, seed, opts)),
            Err(Error::Open { cause, message }) => Err(Error::open(
                cause,
                format!(
                    "segment file {p} cannot be used: {message}. A read-write open with {} \
                     replaces it",
                    setting_mark(Arg::Recreate, "true")
                ),
            )),
            Err(e) => Err(e),
        }
    }
}

/// Off Linux no `Segment` is ever made (`open_path` refuses): what a handle
/// tells of its file is asked of none, and says so.
#[cfg(not(target_os = "linux"))]
impl Segment {
    fn no_file(&self) -> Error {
        Error::Io(
            format!("cannot use {}", self.path().display()),
            sys::unsupported(),
        )
    }

    /// Refused: no file (see the Linux build's doc of this method).
    pub fn unlink_own(&self) -> Result<bool> {
        Err(self.no_file())
    }

    /// Refused: no file.
    pub fn shared_group(&self) -> Result<Option<u32>> {
        Err(self.no_file())
    }

    /// Refused: no file.
    pub fn file_id(&self) -> Result<(u64, u64)> {
        Err(self.no_file())
    }
}
