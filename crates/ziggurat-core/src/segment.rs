//! A segment: create or attach the file, and the operations on it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::arena::{record_len, Header, HAS_EXPIRY};
use crate::clock::{deadline_ms, now_ms};
use crate::error::{Error, Result};
use crate::failpoint::{self, Point};
use crate::hash::{checksum, KeyHash};
use crate::index::{self, RingId};
use crate::layout::*;
use crate::lock::{self, LockError, Locked};
use crate::recovery::Report;
use crate::shard::{Found, Probe, Shard};
use crate::shm::Shm;
use crate::stamps;
use crate::tags::{self, TagRef};

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

/// What a successful read returns besides the value.
#[derive(Clone, Copy, Debug)]
pub struct ReadMeta {
    /// Absolute monotonic deadline in ms (0 = none).
    pub expiry: u64,
    /// Tag references of the entry (cell, version).
    pub ntags: u8,
    pub tags: [u64; MAX_TAGS],
}

/// An attached segment. Cheap to share between threads of one process; every
/// process maps the same file.
pub struct Segment {
    pub(crate) shm: Shm,
    _file: File,
    path: PathBuf,
    g: Geometry,
    seed: u64,
    lock_timeout: Duration,
    local_hits: AtomicU64,
    local_misses: AtomicU64,
    /// Process that owns the pending counts (a forked child must not add its
    /// parent's pending counts a second time).
    local_pid: AtomicU32,
}

/// Attempts before a read that keeps seeing writes is reported as a miss.
const READ_TRIES: usize = 4;
/// Reads between flushes of this process's hit/miss counts into the segment.
const FLUSH_EVERY: u64 = 1024;

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
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is 8 writable bytes; getrandom writes at most that many.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), 8, 0) };
    if n == 8 {
        u64::from_ne_bytes(buf)
    } else {
        // No entropy source: still unpredictable enough to vary per segment.
        let t = Instant::now().elapsed().as_nanos() as u64;
        xxhash_rust::xxh3::xxh3_64_with_seed(&t.to_ne_bytes(), std::process::id() as u64 ^ now_ms())
    }
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

/// Gives the unnamed file `file` the name `path` (fails if the name exists).
fn link_fd(file: &File, path: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL");
    let to = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both arguments are valid NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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

fn flock(file: &File, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: a valid open descriptor; flock has no memory arguments.
        let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
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
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
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
                    flock(&file, libc::LOCK_EX)
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

    fn assemble(
        shm: Shm,
        file: File,
        path: PathBuf,
        g: Geometry,
        seed: u64,
        opts: &Options,
    ) -> Segment {
        Segment {
            shm,
            _file: file,
            path,
            g,
            seed,
            lock_timeout: opts.lock_timeout,
            local_hits: AtomicU64::new(0),
            local_misses: AtomicU64::new(0),
            local_pid: AtomicU32::new(std::process::id()),
        }
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
        // SAFETY: a valid descriptor; posix_fallocate has no memory arguments.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, g.file_size as libc::off_t) };
        if rc != 0 {
            let dir = opts.directory.display().to_string();
            return Err(Error::Io(
                format!(
                    "no room for a {} byte segment in {dir}: free space there, give a smaller size, \
                     or pick another directory",
                    g.file_size
                ),
                io::Error::from_raw_os_error(rc),
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
            let m = shm.addr(g.shard_off(s) + S_MUTEX) as *mut libc::pthread_mutex_t;
            // SAFETY: the mutex area is 64 zeroed, 64-aligned bytes of a file no
            // other process can see yet (it is not linked into the directory).
            unsafe { lock::init(m) }
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
            None => link_fd(&file, path),
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

    /// Path of the segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The segment's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.g
    }

    /// Hashes a key with this segment's seed.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> KeyHash {
        KeyHash::new(self.seed, key)
    }

    #[inline]
    fn shard(&self, s: u32) -> Shard<'_> {
        Shard {
            shm: &self.shm,
            g: &self.g,
            seed: self.seed,
            id: s,
            base: self.g.shard_off(s),
        }
    }

    #[inline]
    fn shard_of(&self, kh: &KeyHash) -> Shard<'_> {
        self.shard(kh.shard(self.g.nshards))
    }

    /// The version stamp word of a key (see `stamps`).
    #[inline]
    pub fn stamp_word(&self, kh: &KeyHash) -> &AtomicU32 {
        self.stamp_at(kh.stamp(self.g.nstamps, self.g.nshards))
    }

    /// Starts loading `kh`'s index pair, so that miss overlaps the load of its
    /// stamp that a read does first.
    #[inline]
    pub fn prefetch_read(&self, kh: &KeyHash) {
        let sh = self.shard_of(kh);
        let pair = kh.pair(self.g.npairs);
        self.shm.prefetch(sh.slot_off(pair, 0));
        self.shm.prefetch(sh.slot_off(pair, 8));
    }

    /// Starts loading everything a write of `kh` touches: its index pair,
    /// stamp and ghost bucket, and the shard's ring ends. Call it before work
    /// that does not touch the segment (encoding the value).
    #[inline]
    pub fn prefetch_write(&self, kh: &KeyHash) {
        self.prefetch_read(kh);
        self.shm
            .prefetch(self.g.stamps_off as usize + 4 * self.stamp_index(kh) as usize);
        let sh = self.shard_of(kh);
        sh.prefetch_ghost(kh);
        sh.prefetch_ends();
    }

    /// Index of a key's stamp.
    #[inline]
    pub fn stamp_index(&self, kh: &KeyHash) -> u32 {
        kh.stamp(self.g.nstamps, self.g.nshards)
    }

    /// Stamp word by index (`idx < nstamps`).
    #[inline]
    pub fn stamp_at(&self, idx: u32) -> &AtomicU32 {
        self.shm
            .u32_at(self.g.stamps_off as usize + 4 * idx as usize)
    }

    /// Version word of a tag cell (`cell < ntags`).
    #[inline]
    pub fn tag_word(&self, cell: u32) -> &AtomicU32 {
        self.shm
            .u32_at(self.g.tags_off as usize + 4 * cell as usize)
    }

    /// The tag cell of a tag name.
    #[inline]
    pub fn tag_cell(&self, tag: &[u8]) -> u32 {
        tags::cell(self.seed, self.g.ntags, tag)
    }

    /// The segment epoch: bumped by `clear` and by shard resets.
    #[inline]
    pub fn epoch(&self) -> &AtomicU64 {
        self.shm.u64_at(H_EPOCH)
    }

    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(Error::Invalid("key must not be empty".into()));
        }
        if key.len() > self.g.max_key as usize {
            return Err(Error::Invalid(format!(
                "key is {} bytes, the maximum is {}",
                key.len(),
                self.g.max_key
            )));
        }
        Ok(())
    }

    /// Finds a key without locking. Returns the record to copy from, or `None`.
    /// The caller copies with [`Segment::copy_value`] and then must call
    /// [`Segment::confirm`]; if that fails the copy is garbage: probe again.
    #[inline]
    pub fn probe(&self, kh: &KeyHash, key: &[u8]) -> Option<std::result::Result<Found, ()>> {
        match self.shard_of(kh).probe(kh, key, now_ms()) {
            Probe::Hit(f) => Some(Ok(f)),
            Probe::Miss => None,
            Probe::Unstable => Some(Err(())),
        }
    }

    /// Copies the value of `f` into `dst` (`dst.len() == f.val_len`).
    #[inline]
    pub fn copy_value(&self, f: &Found, dst: &mut [u8]) {
        self.shm.read_racy(f.val_off, dst);
    }

    /// Whether the copy from `f` was stable; if so, counts the hit.
    #[inline]
    pub fn confirm(&self, kh: &KeyHash, f: &Found) -> bool {
        let sh = self.shard_of(kh);
        if sh.stable(f) {
            sh.touch(f);
            self.count(true);
            true
        } else {
            false
        }
    }

    /// Counts a hit or a miss in this process, flushing to the segment now and then.
    #[inline]
    pub fn count(&self, hit: bool) {
        let c = if hit {
            &self.local_hits
        } else {
            &self.local_misses
        };
        // Only this process touches these; a plain load+store is enough.
        let n = c.load(Ordering::Relaxed) + 1;
        c.store(n, Ordering::Relaxed);
        if n >= FLUSH_EVERY {
            self.flush_counts();
        }
    }

    /// Moves this process's pending hit/miss counts into the segment.
    pub fn flush_counts(&self) {
        let sh = self.shard(0);
        let h = self.local_hits.swap(0, Ordering::Relaxed);
        let m = self.local_misses.swap(0, Ordering::Relaxed);
        let pid = std::process::id();
        if self.local_pid.swap(pid, Ordering::Relaxed) != pid {
            return; // inherited through fork: the parent counts these
        }
        if h > 0 {
            sh.bump(Stat::Hits, h);
        }
        if m > 0 {
            sh.bump(Stat::Misses, m);
        }
    }

    /// Reads a key's value with a caller-provided buffer maker. `make` gets the
    /// value length and a filler; it must call the filler on a buffer of that
    /// length and return the buffer. Returns the value and its metadata.
    pub fn read_with<T>(
        &self,
        key: &[u8],
        mut make: impl FnMut(usize, &dyn Fn(&mut [u8])) -> T,
    ) -> Result<Option<(T, ReadMeta)>> {
        self.check_key(key)?;
        let kh = self.hash(key);
        for _ in 0..READ_TRIES {
            match self.probe(&kh, key) {
                None => break,
                Some(Err(())) => continue,
                Some(Ok(f)) => {
                    let v = make(f.val_len, &|dst: &mut [u8]| self.copy_value(&f, dst));
                    if self.confirm(&kh, &f) {
                        let meta = ReadMeta {
                            expiry: f.expiry,
                            ntags: f.ntags,
                            tags: f.tags,
                        };
                        return Ok(Some((v, meta)));
                    }
                }
            }
        }
        self.count(false);
        Ok(None)
    }

    /// Reads a key's value into a new vector.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self
            .read_with(key, |n, fill| {
                let mut v = vec![0u8; n];
                fill(&mut v);
                v
            })?
            .map(|(v, _)| v))
    }

    /// Resolves tag names to references with their current versions.
    pub fn tag_refs(&self, tags: &[&[u8]]) -> Result<Vec<u64>> {
        if tags.len() > MAX_TAGS {
            return Err(Error::Invalid(format!(
                "at most {MAX_TAGS} tags per entry, got {}",
                tags.len()
            )));
        }
        let mut out = Vec::with_capacity(tags.len());
        for t in tags {
            if t.is_empty() {
                return Err(Error::Invalid("a tag must not be empty".into()));
            }
            if t.len() > self.g.max_key as usize {
                return Err(Error::Invalid(format!(
                    "a tag is at most {} bytes",
                    self.g.max_key
                )));
            }
            let cell = self.tag_cell(t);
            let version = self.tag_word(cell).load(Ordering::Acquire);
            let r = TagRef { cell, version }.pack();
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Checks a TTL in seconds: finite and > 0.
    pub fn check_ttl(ttl: Option<f64>) -> Result<()> {
        match ttl {
            Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::Invalid(format!(
                "ttl must be a finite number of seconds > 0, got {t}"
            ))),
            Some(t) if t > 100.0 * 365.0 * 86400.0 => {
                Err(Error::Invalid("ttl must be at most 100 years".into()))
            }
            _ => Ok(()),
        }
    }

    fn lock(&self, s: u32) -> Result<Guard<'_>> {
        let sh = self.shard(s);
        // SAFETY: the mutex was initialised at creation and lives in our mapping.
        match unsafe { lock::lock(sh.mutex(), self.lock_timeout) } {
            Ok(Locked::Clean) => Ok(Guard {
                sh,
                owner_died: false,
            }),
            Ok(Locked::OwnerDied) => {
                let mut g = Guard {
                    sh,
                    owner_died: true,
                };
                let rep = sh.repair(true);
                sh.bump(Stat::LockRepairs, 1);
                if rep.reset {
                    sh.bump(Stat::ShardResets, 1);
                    self.epoch().fetch_add(1, Ordering::SeqCst);
                }
                // SAFETY: we hold the mutex after EOWNERDEAD and just repaired the shard.
                if unsafe { lock::make_consistent(sh.mutex()) }.is_ok() {
                    g.owner_died = false;
                }
                Ok(g)
            }
            Err(LockError::Timeout) => {
                sh.bump(Stat::LockTimeouts, 1);
                Err(Error::LockTimeout)
            }
            Err(LockError::Os(e)) => Err(Error::Io(format!("cannot lock shard {s}"), e)),
        }
    }

    /// Takes the key's shard lock and records the write's intent (its stamp), so
    /// that a repair after a crash knows which stamp may be left odd.
    fn begin(&self, kh: &KeyHash) -> Result<(Guard<'_>, u32)> {
        let guard = self.lock(kh.shard(self.g.nshards))?;
        let stamp_idx = self.stamp_index(kh);
        guard.sh.intent_stamp().store(stamp_idx, Ordering::Relaxed);
        guard.sh.intent_active().store(1, Ordering::Release);
        failpoint::hit(Point::Locked);
        Ok((guard, stamp_idx))
    }

    /// Makes a stamp odd before a publish. The release fence orders it before
    /// the slot store, so a reader that sees the new slot sees the odd stamp.
    fn stamp_odd(&self, stamp_idx: u32) -> &AtomicU32 {
        let stamp = self.stamp_at(stamp_idx);
        stamp.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::Release);
        failpoint::hit(Point::StampOdd);
        stamp
    }

    /// Makes a stamp even after a publish, wakes waiters, and ends the intent.
    fn stamp_even(sh: &Shard<'_>, stamp: &AtomicU32) {
        failpoint::hit(Point::Published);
        stamp.fetch_add(1, Ordering::SeqCst);
        if sh.waiters().load(Ordering::SeqCst) != 0 {
            stamps::futex_wake(stamp);
        }
        sh.intent_active().store(0, Ordering::Release);
    }

    /// Stores `value` under `key`. `ttl` in seconds (None: no expiry).
    pub fn set(&self, key: &[u8], value: &[u8], ttl: Option<f64>, tags: &[&[u8]]) -> Result<()> {
        self.write(key, None, value, ttl, tags, Cond::Always)
            .map(|_| ())
    }

    /// [`Segment::set`] for a caller that already hashed `key` with [`Segment::hash`].
    pub fn set_hashed(
        &self,
        key: &[u8],
        kh: &KeyHash,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
    ) -> Result<()> {
        self.write(key, Some(kh), value, ttl, tags, Cond::Always)
            .map(|_| ())
    }

    /// Stores `value` only if `key` has no live entry. Returns whether it did.
    pub fn add(&self, key: &[u8], value: &[u8], ttl: Option<f64>, tags: &[&[u8]]) -> Result<bool> {
        self.write(key, None, value, ttl, tags, Cond::Absent)
    }

    /// Stores `value` only if `key`'s live value is `expected`; returns whether it did.
    pub fn replace_if(
        &self,
        key: &[u8],
        expected: &[u8],
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
    ) -> Result<bool> {
        self.write(key, None, value, ttl, tags, Cond::Equals(expected))
    }

    fn write(
        &self,
        key: &[u8],
        kh: Option<&KeyHash>,
        value: &[u8],
        ttl: Option<f64>,
        tags: &[&[u8]],
        cond: Cond<'_>,
    ) -> Result<bool> {
        self.check_key(key)?;
        if value.is_empty() {
            return Err(Error::Invalid("value must not be empty".into()));
        }
        if value.len() > self.g.max_value as usize {
            return Err(Error::Invalid(format!(
                "value is {} bytes, the maximum for this segment is {} (max_value_size)",
                value.len(),
                self.g.max_value
            )));
        }
        Self::check_ttl(ttl)?;
        let tag_refs = self.tag_refs(tags)?;
        let kh = kh.copied().unwrap_or_else(|| self.hash(key));
        let expiry = deadline_ms(ttl);
        let (guard, stamp_idx) = self.begin(&kh)?;
        let sh = guard.sh;
        let current = sh
            .locate(&kh, key)
            .found
            .filter(|&(_, w)| self.live(&sh, w));
        let go = match cond {
            Cond::Always => true,
            Cond::Absent => current.is_none(),
            Cond::Equals(expected) => current.is_some_and(|(_, w)| self.value_is(&sh, w, expected)),
        };
        if !go {
            sh.intent_active().store(0, Ordering::Release);
            return Ok(false);
        }
        self.append(&sh, stamp_idx, &kh, key, value, expiry, &tag_refs);
        Ok(true)
    }

    /// Rewrites `key`'s entry under its shard lock, so no other write can come
    /// between the read and the write: `f` gets the live value and its expiry
    /// (absolute, ms of [`now_ms`]; 0 never), or None when there is none, and
    /// returns the new record, or None to leave the key as it is. Returns
    /// whether a record was written. `f` runs with the lock held: it must be
    /// short and must not call into this segment.
    pub fn rewrite(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u64)>) -> Option<Rewrite>,
    ) -> Result<bool> {
        self.check_key(key)?;
        let kh = self.hash(key);
        let (guard, stamp_idx) = self.begin(&kh)?;
        let sh = guard.sh;
        let current = sh
            .locate(&kh, key)
            .found
            .filter(|&(_, w)| self.live(&sh, w))
            .map(|(_, w)| self.record_of(&sh, w));
        let out = f(current.as_ref().map(|(v, e, _)| (v.as_slice(), *e)));
        let Some(rw) = out else {
            sh.intent_active().store(0, Ordering::Release);
            return Ok(false);
        };
        let tags = match rw.tags {
            Some(t) => t,
            None => current.map(|(_, _, t)| t).unwrap_or_default(),
        };
        if rw.value.is_empty() || rw.value.len() > self.g.max_value as usize {
            sh.intent_active().store(0, Ordering::Release);
            return Err(Error::Invalid(format!(
                "value is {} bytes, the maximum for this segment is {} (max_value_size)",
                rw.value.len(),
                self.g.max_value
            )));
        }
        self.append(&sh, stamp_idx, &kh, key, &rw.value, rw.expiry, &tags);
        Ok(true)
    }

    /// The value, expiry and tag references of the record a slot word points
    /// to (writers, under the shard lock).
    fn record_of(&self, sh: &Shard<'_>, w: u64) -> (Vec<u8>, u64, Vec<u64>) {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        let Some((h, expiry)) = ring.header(&self.shm, phys) else {
            return (Vec::new(), 0, Vec::new());
        };
        let mut v = vec![0u8; h.val_len as usize];
        self.shm
            .read_racy(ring.at(phys) + h.meta_len() + h.key_len as usize, &mut v);
        let tags = (0..h.ntags as usize)
            .map(|t| ring.tag(&self.shm, phys, &h, t))
            .collect();
        (v, expiry, tags)
    }

    /// Appends a record and publishes it (the shard lock held, the intent set).
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        sh: &Shard<'_>,
        stamp_idx: u32,
        kh: &KeyHash,
        key: &[u8],
        value: &[u8],
        expiry: u64,
        tag_refs: &[u64],
    ) {
        let h = Header {
            val_len: value.len() as u32,
            key_len: key.len() as u16,
            ntags: tag_refs.len() as u8,
            flags: if expiry != 0 { HAS_EXPIRY } else { 0 },
        };
        let len = record_len(h.meta_len(), key.len(), value.len());
        let target = if len > self.g.small_cap / 4 || sh.ghost_take(kh) {
            if len <= self.g.small_cap / 4 {
                sh.bump(Stat::GhostHits, 1);
            }
            RingId::Main
        } else {
            RingId::Small
        };
        let at = sh.reserve(target, len, true);
        let ring = sh.ring(target);
        ring.write_record(&self.shm, at, &h, expiry, tag_refs, key, value);
        let head = ring.head(&self.shm).load(Ordering::Relaxed);
        ring.head(&self.shm).store(head + len, Ordering::Release);
        failpoint::hit(Point::Appended);
        // Locate after reserving: eviction may have moved or dropped the old record.
        let loc = sh.locate(kh, key);
        let stamp = self.stamp_odd(stamp_idx);
        let word = index::pack(kh.fingerprint(), 0, target, at);
        match (loc.found, loc.empty, loc.victim) {
            (Some((off, _)), _, _) => sh.publish(off, word),
            (None, Some(off), _) => {
                sh.publish(off, word);
                sh.bump(Stat::Entries, 1);
            }
            (None, None, Some((off, _))) => {
                sh.publish(off, word);
                sh.bump(Stat::IndexEvictions, 1);
                sh.bump(Stat::Evictions, 1);
            }
            (None, None, None) => unreachable!("a full pair always has a victim"),
        }
        Self::stamp_even(sh, stamp);
        sh.bump(Stat::Sets, 1);
    }

    /// Whether the value of the record a slot word points to equals `expected`
    /// (writers, under the shard lock, so the bytes cannot change meanwhile).
    fn value_is(&self, sh: &Shard<'_>, w: u64, expected: &[u8]) -> bool {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        let Some((h, _)) = ring.header(&self.shm, phys) else {
            return false;
        };
        if h.val_len as usize != expected.len() {
            return false;
        }
        let mut v = vec![0u8; expected.len()];
        self.shm
            .read_racy(ring.at(phys) + h.meta_len() + h.key_len as usize, &mut v);
        v == expected
    }

    /// Whether the entry a slot word points to is live (not expired, tags current).
    fn live(&self, sh: &Shard<'_>, w: u64) -> bool {
        let ring = sh.ring(index::ring(w));
        let phys = index::phys(w);
        let Some((h, expiry)) = ring.header(&self.shm, phys) else {
            return false;
        };
        if expiry != 0 && expiry <= now_ms() {
            return false;
        }
        let tags: Vec<u64> = (0..h.ntags as usize)
            .map(|t| ring.tag(&self.shm, phys, &h, t))
            .collect();
        sh.tags_current(&tags)
    }

    /// Removes `key`. Returns whether a live entry was removed. Always bumps the
    /// key's stamp, so a copy held in any process's L1 stops validating.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.check_key(key)?;
        let kh = self.hash(key);
        let (guard, stamp_idx) = self.begin(&kh)?;
        let sh = guard.sh;
        let found = sh.locate(&kh, key).found;
        let stamp = self.stamp_odd(stamp_idx);
        let mut was_live = false;
        if let Some((off, w)) = found {
            was_live = self.live(&sh, w);
            sh.publish(off, 0);
            sh.drop_one(Stat::Entries);
        }
        Self::stamp_even(&sh, stamp);
        if was_live {
            sh.bump(Stat::Deletes, 1);
        }
        Ok(was_live)
    }

    /// Makes every entry carrying `tag` a miss, in every process, at once. Lock-free.
    pub fn invalidate_tag(&self, tag: &[u8]) -> Result<()> {
        if tag.is_empty() {
            return Err(Error::Invalid("a tag must not be empty".into()));
        }
        let cell = self.tag_cell(tag);
        self.tag_word(cell).fetch_add(1, Ordering::SeqCst);
        self.shm
            .u64_at(H_TAG_INVALIDATIONS)
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes every entry. Shards are emptied one by one under their locks,
    /// then the epoch is bumped so every L1 copy stops validating.
    pub fn clear(&self) -> Result<()> {
        for s in 0..self.g.nshards {
            let guard = self.lock(s)?;
            guard.sh.reset();
        }
        self.epoch().fetch_add(1, Ordering::SeqCst);
        self.shm.u64_at(H_CLEARS).fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Sleeps until `key`'s stamp differs from `seen` or `timeout` passes.
    /// Returns whether it changed.
    pub fn wait(&self, key: &[u8], seen: u32, timeout: Duration) -> Result<bool> {
        self.check_key(key)?;
        let kh = self.hash(key);
        let sh = self.shard_of(&kh);
        let stamp = self.stamp_word(&kh);
        let deadline = Instant::now() + timeout;
        sh.waiters().fetch_add(1, Ordering::SeqCst);
        let changed = loop {
            let cur = stamp.load(Ordering::SeqCst);
            if cur != seen {
                break true;
            }
            let now = Instant::now();
            if now >= deadline {
                break false;
            }
            stamps::futex_wait(stamp, seen, deadline - now);
        };
        sh.waiters().fetch_sub(1, Ordering::SeqCst);
        Ok(changed)
    }

    /// Host-wide counters and sizes.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        self.flush_counts();
        let mut out: Vec<(&'static str, u64)> = Stat::ALL.iter().map(|s| (s.name(), 0)).collect();
        let mut used = 0u64;
        for s in 0..self.g.nshards {
            let sh = self.shard(s);
            for (i, st) in Stat::ALL.iter().enumerate() {
                out[i].1 += sh.stat(*st).load(Ordering::Relaxed);
            }
            for id in [RingId::Small, RingId::Main] {
                let r = sh.ring(id);
                let h = r.head(&self.shm).load(Ordering::Relaxed);
                let t = r.tail(&self.shm).load(Ordering::Relaxed);
                used += h.saturating_sub(t).min(r.cap);
            }
        }
        let g = &self.g;
        out.extend([
            ("bytes_used", used),
            (
                "bytes_capacity",
                (g.small_cap + g.main_cap) * g.nshards as u64,
            ),
            ("file_size", g.file_size),
            ("shards", g.nshards as u64),
            ("index_slots", g.npairs as u64 * 16 * g.nshards as u64),
            ("index_offset", (g.shards_off + g.index_rel)),
            ("index_bytes", g.npairs as u64 * 128),
            ("shard_stride", g.shard_stride),
            ("max_value_size", g.max_value as u64),
            ("epoch", self.epoch().load(Ordering::Relaxed)),
            (
                "tag_invalidations",
                self.shm.u64_at(H_TAG_INVALIDATIONS).load(Ordering::Relaxed),
            ),
            ("clears", self.shm.u64_at(H_CLEARS).load(Ordering::Relaxed)),
        ]);
        out
    }

    /// Checks every shard under its lock; with `repair`, fixes what it finds.
    pub fn verify(&self, repair: bool) -> Result<Report> {
        let mut rep = Report::default();
        for s in 0..self.g.nshards {
            let guard = self.lock(s)?;
            let r = guard.sh.repair(repair);
            if r.reset && repair {
                guard.sh.bump(Stat::ShardResets, 1);
                self.epoch().fetch_add(1, Ordering::SeqCst);
            }
            rep.merge(r);
        }
        Ok(rep)
    }

    /// Removes the file (attached processes keep their mapping until they close).
    pub fn unlink(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::Io(
                format!("cannot remove {}", self.path.display()),
                e,
            )),
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        self.flush_counts();
    }
}

/// A record [`Segment::rewrite`] writes: the value, its absolute expiry (ms of
/// [`now_ms`], 0 never) and its tag references (None keeps the current ones).
pub struct Rewrite {
    /// The new value.
    pub value: Vec<u8>,
    /// Absolute expiry in ms of [`now_ms`]; 0 never expires.
    pub expiry: u64,
    /// Tag references from [`Segment::tag_refs`]; None keeps the entry's own.
    pub tags: Option<Vec<u64>>,
}

/// When a write goes ahead.
#[derive(Clone, Copy)]
enum Cond<'a> {
    Always,
    /// Only if the key has no live entry.
    Absent,
    /// Only if the key's live value equals this.
    Equals(&'a [u8]),
}

/// Holds a shard lock; unlocks on drop (marking the mutex consistent first if a
/// repair was cut short, so it never becomes unrecoverable).
struct Guard<'a> {
    sh: Shard<'a>,
    owner_died: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // SAFETY: this guard holds the mutex.
        unsafe {
            if self.owner_died {
                let _ = lock::make_consistent(self.sh.mutex());
            }
            lock::unlock(self.sh.mutex());
        }
    }
}
