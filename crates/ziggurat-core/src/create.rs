//! Creating a segment file: built aside (an unnamed `O_TMPFILE`, or a hidden
//! temporary name), given its group and mode, its pages reserved, its shard
//! locks and header written, then linked into place with `link(2)`, which
//! fails if the name exists: the name only ever refers to a complete segment.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::access::me;
use crate::attach::small_pages;
use crate::clock::now_ms;
use crate::error::{Error, OpenCause, Result};
use crate::geometry::Geometry;
use crate::hash::checksum;
use crate::huge::{HugePages, Policy};
use crate::invalid::{Arg, Problem};
use crate::layout::*;
use crate::lock::Mutex;
use crate::options::Options;
use crate::segment::Segment;
use crate::shm::Shm;
use crate::sys;

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

/// Classifies a failure to create a file in `dir`.
pub(crate) fn create_failure(dir: &Path, e: io::Error) -> Error {
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

impl Segment {
    /// Builds a new segment aside and links it in at `path`. `Ok(None)` when
    /// another process linked its own first.
    pub(crate) fn create(path: &Path, g: Geometry, opts: &Options) -> Result<Option<Segment>> {
        let dir = &opts.directory;
        let (file, tmp) = open_aside(dir).map_err(|e| create_failure(dir, e))?;
        // A named temporary file must not outlive this call, whatever happens.
        let _cleanup = TmpName(tmp.clone());
        // The group is set before the file gets its name, so the name never
        // refers to a file with the wrong group or mode.
        let mode = match opts.group {
            Some(gid) => {
                sys::fchown_group(&file, gid).map_err(|e| {
                    Error::invalid(
                        Arg::Group,
                        Problem::NotMember {
                            gid,
                            group: sys::describe_group(gid),
                            process: me(),
                            error: e.to_string(),
                        },
                    )
                })?;
                0o660
            }
            None => 0o600,
        };
        // Explicitly, because the umask may have narrowed the creation mode.
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| {
                Error::Io(
                    format!(
                        "cannot set the mode of a new segment file in {}",
                        dir.display()
                    ),
                    e,
                )
            })?;
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
}
