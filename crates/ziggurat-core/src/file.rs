//! The life of a segment file: creating it aside and linking it into place,
//! attaching to an existing one, and refusing a file that cannot be trusted
//! (owner, mode, magic, layout version, checksum, geometry).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::hash::checksum;
use crate::layout::*;
use crate::lock::Mutex;
use crate::segment::Segment;
use crate::shm::Shm;
use crate::sys;

/// How to open a segment.
#[derive(Clone, Debug)]
pub struct Options {
    /// Byte budget of the whole file (used when creating it).
    pub size: u64,
    /// Directory of the file.
    pub directory: PathBuf,
    /// Replace a file that cannot be used instead of refusing it.
    pub recreate: bool,
    /// Expected bytes per entry (key + value + ~16), which sizes the index.
    pub avg_item_size: u64,
    /// Number of shards (power of two); `None` picks one from the size.
    pub shards: Option<u32>,
    /// How long a writer waits for a shard lock.
    pub lock_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: 64 << 20,
            directory: PathBuf::from("/dev/shm"),
            recreate: false,
            avg_item_size: 128,
            shards: None,
            lock_timeout: Duration::from_millis(500),
        }
    }
}

fn io_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |e| Error::Io(what, e)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
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

impl Segment {
    /// Creates the segment `name`, or attaches to it if it exists.
    ///
    /// A new file is built aside (an anonymous `O_TMPFILE`, or a hidden temporary
    /// name where that is not supported), fully initialised, then linked into
    /// place with `link(2)`, which fails if the name exists. So the name only
    /// ever refers to a complete segment, and when several processes open a new
    /// name at once exactly one file wins and every process attaches to it.
    pub fn open(name: &str, opts: &Options) -> Result<Segment> {
        if !valid_name(name) {
            return Err(Error::Invalid(format!(
                "segment name must be 1-100 characters of A-Z a-z 0-9 . _ - not starting with '.', got {name:?}"
            )));
        }
        if opts.lock_timeout.is_zero() || opts.lock_timeout > Duration::from_secs(3600) {
            return Err(Error::Invalid(
                "lock_timeout must be > 0 and at most 3600 seconds".into(),
            ));
        }
        let geom = Geometry::compute(opts.size, opts.avg_item_size, opts.shards)?;
        let path = opts
            .directory
            .join(format!("ziggurat.{name}.v{LAYOUT_VERSION}"));
        for _ in 0..8 {
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match Self::create(&path, geom, opts)? {
                        Some(seg) => return Ok(seg),
                        None => continue, // another process linked its file first
                    }
                }
                Err(e) => {
                    return Err(Error::Io(
                        format!(
                            "cannot open segment file {} (does the directory exist and is it accessible?)",
                            path.display()
                        ),
                        e,
                    ))
                }
            };
            let meta = file
                .metadata()
                .map_err(io_err(format!("cannot stat {}", path.display())))?;
            let me = sys::euid();
            if meta.uid() != me {
                return Err(Error::Permission(format!(
                    "segment file {} is owned by uid {}, not by this process's uid {me}; \
                     refusing to share memory with another user (choose another name or directory)",
                    path.display(),
                    meta.uid()
                )));
            }
            if !meta.file_type().is_file() {
                return Err(Error::Permission(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
            let loose = meta.permissions().mode() & 0o077 != 0;
            let attached = if loose {
                Err(Error::Permission(format!(
                    "it is readable or writable by other users (mode {:o})",
                    meta.permissions().mode() & 0o777
                )))
            } else {
                Self::attach(&file, &path, meta.len())
            };
            match attached {
                Ok((shm, g, seed)) => return Ok(Segment::assemble(shm, file, path, g, seed, opts)),
                Err(Error::Corrupt(_) | Error::Permission(_)) if opts.recreate => {
                    // Replace it, unless another process already did (then the
                    // name no longer refers to the file we judged).
                    sys::flock(&file, libc::LOCK_EX)
                        .map_err(io_err(format!("cannot lock {}", path.display())))?;
                    let same = std::fs::symlink_metadata(&path)
                        .map(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
                        .unwrap_or(false);
                    if same {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                Err(Error::Corrupt(m) | Error::Permission(m)) => {
                    return Err(Error::Corrupt(format!(
                        "segment file {} cannot be used: {m}. Open it with recreate=True to replace it \
                         (processes still attached to the old file keep using it until they reopen)",
                        path.display()
                    )));
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

    /// Builds a new segment aside and links it in at `path`. `Ok(None)` when
    /// another process linked its own first.
    fn create(path: &Path, g: Geometry, opts: &Options) -> Result<Option<Segment>> {
        let (file, tmp) = open_aside(&opts.directory).map_err(io_err(format!(
            "cannot create a segment file in {} (does the directory exist and is it writable?)",
            opts.directory.display()
        )))?;
        // A named temporary file must not outlive this call, whatever happens.
        let _cleanup = TmpName(tmp.clone());
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        // Reserve every page now, so a full tmpfs fails here with ENOSPC rather
        // than with SIGBUS on some later write.
        if let Err(e) = sys::fallocate(&file, g.file_size) {
            let dir = opts.directory.display().to_string();
            return Err(Error::Io(
                format!(
                    "no room for a {} byte segment in {dir}: free space there, give a smaller size, \
                     or pick another directory",
                    g.file_size
                ),
                e,
            ));
        }
        let shm = Shm::map(&file, g.file_size as usize).map_err(|e| {
            Error::Io(
                format!("cannot map a new segment for {}", path.display()),
                e,
            )
        })?;
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
            Ok(()) => Ok(Some(Segment::assemble(
                shm,
                file,
                path.to_path_buf(),
                g,
                seed,
                opts,
            ))),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(Error::Io(
                format!("cannot link the new segment at {}", path.display()),
                e,
            )),
        }
    }

    fn attach(file: &File, path: &Path, file_len: u64) -> Result<(Shm, Geometry, u64)> {
        if file_len < HEADER_SIZE as u64 || file_len % 8 != 0 {
            return Err(Error::Corrupt(format!(
                "incomplete file of {file_len} bytes"
            )));
        }
        let shm = Shm::map(file, file_len as usize)
            .map_err(|e| Error::Io(format!("cannot map {}", path.display()), e))?;
        let mut magic = [0u8; 8];
        shm.read_racy(H_MAGIC, &mut magic);
        let get64 = |off: usize| shm.u64_at(off).load(Ordering::Acquire);
        let get32 = |off: usize| shm.u32_at(off).load(Ordering::Acquire);
        if magic == [0u8; 8] && get32(H_STATE) == 0 {
            return Err(Error::Corrupt(
                "it is empty: it was never initialised".into(),
            ));
        }
        if magic != MAGIC {
            return Err(Error::Corrupt(
                "it is not a ziggurat segment (foreign magic)".into(),
            ));
        }
        let v = get32(H_VERSION);
        if v != LAYOUT_VERSION {
            return Err(Error::Corrupt(format!(
                "its layout version is {v}, this build reads version {LAYOUT_VERSION}"
            )));
        }
        let mut hdr = vec![0u8; H_CHECKSUM];
        shm.read_racy(0, &mut hdr);
        if checksum(&hdr) != get64(H_CHECKSUM) {
            return Err(Error::Corrupt(
                "its header checksum does not match (the header is damaged)".into(),
            ));
        }
        match get32(H_STATE) {
            STATE_READY => {}
            STATE_RETIRED => return Err(Error::Corrupt("it was retired".into())),
            _ => return Err(Error::Corrupt("its state word is damaged".into())),
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
