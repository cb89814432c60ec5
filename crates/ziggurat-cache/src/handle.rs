//! A segment as front ends hand it to their users on its own (Python's
//! `ziggurat.Segment`): opened by name from the constructor's arguments,
//! closed once, keys and values as bytes, every argument checked before
//! anything is written, and the segment's reports as structs with named
//! fields. A front end converts arguments and results; the rules are here.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ziggurat_core::huge::Policy;
use ziggurat_core::{Arg, Error, Geometry, HugePages, Options, Problem, Result, Segment, TagRef};

use crate::front::Payload;

/// The size a segment gets when its constructor is given none.
pub const HANDLE_SIZE: u64 = 64 << 20;

/// The arguments of a segment's constructor, as the front end converted them.
#[derive(Clone, Debug)]
pub struct OpenArgs {
    /// Bytes (None: [`HANDLE_SIZE`]).
    pub size: Option<u64>,
    /// The directory of the file.
    pub directory: PathBuf,
    /// Remove and make again a file made with other parameters.
    pub recreate: bool,
    /// The average item size the index is made for (checked).
    pub avg_item_size: i128,
    /// Shards (None: the engine's choice; checked).
    pub shards: Option<i128>,
    /// Seconds a write waits for a shard lock (checked).
    pub lock_timeout: f64,
    /// The group the file is shared with.
    pub group: Option<u32>,
    /// Attach without writing.
    pub read_only: bool,
    /// `"auto"`, `"require"` or `"off"` (checked).
    pub huge_pages: String,
}

/// A write of [`Handle::write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Store the value.
    Set,
    /// Store it only if the key has no live entry.
    Add,
    /// Store it only if the key's live value is the one expected.
    ReplaceIf,
}

/// What [`Handle::inspect`] found of a key's live record.
pub struct Record<P> {
    /// The value as stored.
    pub value: P,
    /// The record's deadline on the segment's clock, or 0.
    pub expiry_ms: u64,
    /// The segment's clock now.
    pub now_ms: u64,
    /// Each tag reference: its cell, the version recorded, and the cell's
    /// version now (None for a cell outside the table, which never matches).
    pub tags: Vec<(u32, u32, Option<u32>)>,
    /// Bytes of the record in its ring.
    pub record_bytes: usize,
}

/// What the file system of a directory and the kernel offer a segment there
/// in huge pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugePolicy {
    /// The file system type (`tmpfs`, ...; empty if unknown).
    pub file_system: String,
    /// The tmpfs `huge=` mount option.
    pub mount: String,
    /// The kernel's shmem policy.
    pub kernel: String,
    /// Whether the directory offers huge pages.
    pub offered: bool,
    /// How to get them, when not offered.
    pub remedy: Option<String>,
}

impl HugePolicy {
    /// The policy for files in `dir`.
    ///
    /// ```
    /// let p = ziggurat_cache::HugePolicy::of(std::path::Path::new("/dev/shm"));
    /// assert_eq!(p.file_system, "tmpfs");
    /// ```
    pub fn of(dir: &Path) -> HugePolicy {
        HugePolicy::from(Policy::of(dir), dir)
    }

    fn from(p: Policy, dir: &Path) -> HugePolicy {
        HugePolicy {
            offered: p.offers(),
            remedy: p.remedy(dir),
            file_system: p.fs_type,
            mount: p.mount,
            kernel: p.kernel,
        }
    }
}

/// Whether huge pages back a segment's mapping in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HugeStatus {
    /// The mode the segment was opened with.
    pub mode: &'static str,
    /// Whether any of the mapping is backed by huge pages.
    pub backed: bool,
    /// Bytes mapped with huge pages.
    pub backed_bytes: u64,
    /// Bytes of the file in whole 2 MiB pages.
    pub eligible_bytes: u64,
    /// What the directory and kernel offer.
    pub policy: HugePolicy,
}

/// A segment attached by name, as a front end's segment object holds it.
///
/// ```
/// use ziggurat_cache::{Handle, OpenArgs, WriteOp};
/// let args = OpenArgs {
///     size: Some(2 << 20),
///     directory: std::env::temp_dir(),
///     recreate: false,
///     avg_item_size: 128,
///     shards: None,
///     lock_timeout: 0.5,
///     group: None,
///     read_only: false,
///     huge_pages: "auto".into(),
/// };
/// let h = Handle::open(&format!("doc-handle-{}", std::process::id()), &args).unwrap();
/// assert!(h.write(WriteOp::Set, b"k", b"", b"v", None, &[]).unwrap());
/// h.close();
/// assert!(h.segment().is_err());
/// h.inner().unlink().unwrap();
/// ```
pub struct Handle {
    seg: Arc<Segment>,
    name: String,
    closed: AtomicBool,
    /// The file size the arguments of this open would have created: differs
    /// from the file's when it was made with other parameters.
    requested_size: u64,
}

impl Handle {
    /// Opens (or creates) the segment `name` with `a`, each checked
    /// (blocking: a front end runs it off its lock).
    pub fn open(name: &str, a: &OpenArgs) -> Result<Handle> {
        let size = a.size.unwrap_or(HANDLE_SIZE);
        let opts = Options {
            size,
            directory: a.directory.clone(),
            recreate: a.recreate,
            group: a.group,
            read_only: a.read_only,
            huge_pages: HugePages::parse(&a.huge_pages)?,
            ..Options::default()
        }
        .sized(a.avg_item_size, a.shards, a.lock_timeout)?;
        let requested =
            Geometry::compute(size, opts.avg_item_size, opts.shards).map_or(0, |g| g.file_size());
        let seg = Segment::open(name, &opts)?;
        Ok(Handle::opened(seg, name.to_string(), requested))
    }

    /// A handle on a segment opened elsewhere (a cache's pair), which the
    /// options of that open would have made `requested_size` bytes.
    pub fn opened(seg: Segment, name: String, requested_size: u64) -> Handle {
        Handle {
            seg: Arc::new(seg),
            name,
            closed: AtomicBool::new(false),
            requested_size,
        }
    }

    /// The segment, closed or not (what a cache made from it shares).
    #[inline]
    pub fn inner(&self) -> &Arc<Segment> {
        &self.seg
    }

    /// The segment, or [`Error::Closed`] once [`Handle::close`] was called.
    #[inline]
    pub fn segment(&self) -> Result<&Segment> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::Closed);
        }
        Ok(&self.seg)
    }

    /// The segment, after `key`'s length is checked against it.
    fn keyed(&self, key: &[u8]) -> Result<&Segment> {
        let seg = self.segment()?;
        seg.check_key(key)?;
        Ok(seg)
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file size the constructor's arguments would have created.
    pub fn requested_size(&self) -> u64 {
        self.requested_size
    }

    /// Whether [`Handle::close`] was called.
    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Detaches this handle (once); the data stays for other processes.
    pub fn close(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            self.seg.flush_counts();
        }
    }

    /// How the handle describes itself.
    pub fn describe(&self) -> String {
        format!("{:?} at {}", self.name, self.seg.path().display())
    }

    /// The value of `key`, made by `make`, or None.
    pub fn get<P: Payload>(&self, key: &[u8], make: &mut P) -> Result<Option<P::Out>> {
        let read = self
            .keyed(key)?
            .read_with(key, |n, fill| make.written(n, fill))?;
        Ok(read.map(|(v, _)| v))
    }

    /// Writes `value` under `key` by `op` (`expected`: what
    /// [`WriteOp::ReplaceIf`] compares with); whether it stored.
    pub fn write(
        &self,
        op: WriteOp,
        key: &[u8],
        expected: &[u8],
        value: &[u8],
        ttl: Option<f64>,
        tags: &[Vec<u8>],
    ) -> Result<bool> {
        let seg = self.segment()?;
        let tags: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        match op {
            WriteOp::Set => seg.set(key, value, ttl, &tags).map(|_| true),
            WriteOp::Add => seg.add(key, value, ttl, &tags),
            WriteOp::ReplaceIf => seg.replace_if(key, expected, value, ttl, &tags),
        }
    }

    /// The version stamp of `key`.
    pub fn stamp(&self, key: &[u8]) -> Result<u32> {
        let seg = self.keyed(key)?;
        Ok(seg.stamp_word(&seg.hash(key)).load())
    }

    /// Sleeps until `key`'s stamp differs from `stamp` or `timeout` seconds
    /// pass (blocking); whether it changed. Both arguments are checked.
    pub fn wait(&self, key: &[u8], stamp: i128, timeout: f64) -> Result<bool> {
        let seg = self.keyed(key)?;
        let Ok(stamp) = u32::try_from(stamp) else {
            return Err(Error::invalid(
                Arg::Stamp,
                Problem::Range {
                    min: 0,
                    max: u32::MAX.into(),
                    got: stamp,
                },
            ));
        };
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(Error::invalid(
                Arg::Timeout,
                Problem::Seconds {
                    got: timeout,
                    zero: true,
                    never: false,
                },
            ));
        }
        seg.wait(key, stamp, Duration::from_secs_f64(timeout.min(86400.0)))
    }

    /// The live record of `key` as stored (its value made by `make`), with
    /// what the segment knows of it; None when the key has none.
    pub fn inspect<P: Payload>(&self, key: &[u8], make: &mut P) -> Result<Option<Record<P::Out>>> {
        let seg = self.keyed(key)?;
        let mut len = 0;
        let read = seg.read_with(key, |n, fill| {
            len = n;
            make.written(n, fill)
        })?;
        let Some((value, meta)) = read else {
            return Ok(None);
        };
        let ntags = seg.geometry().ntags();
        let tags = meta.tags[..meta.ntags as usize]
            .iter()
            .map(|&w| {
                let r = TagRef::unpack(w);
                (
                    r.cell,
                    r.version,
                    (r.cell < ntags).then(|| seg.tag_word(r.cell).load()),
                )
            })
            .collect();
        let expiry = if meta.expiry != 0 { 8 } else { 0 };
        let record = 8 + expiry + 8 * meta.ntags as usize + key.len() + len;
        Ok(Some(Record {
            value,
            expiry_ms: meta.expiry,
            now_ms: ziggurat_core::now_ms(),
            tags,
            record_bytes: record.div_ceil(8) * 8,
        }))
    }

    /// The tag cell of `tag` and its current version.
    pub fn tag_version(&self, tag: &[u8]) -> Result<(u32, u32)> {
        let seg = self.segment()?;
        let cell = seg.tag_cell(tag);
        Ok((cell, seg.tag_word(cell).load()))
    }

    /// The load-lease cells, `(pid, releases)` each, read without taking
    /// them: only a read-only handle can.
    pub fn leases(&self) -> Result<Vec<(u32, u32)>> {
        let seg = self.segment()?;
        if !seg.is_read_only() {
            return Err(Error::invalid(
                Arg::ReadOnly,
                Problem::NeedsReadOnly { call: "leases" },
            ));
        }
        Ok(seg.lease_cells().unwrap_or_default())
    }

    /// Word `i` of the words kept for the layers above the engine.
    pub fn app_load(&self, i: usize) -> Result<u64> {
        self.segment()?.app_load(i).ok_or_else(|| {
            Error::invalid(
                Arg::Word,
                Problem::NoSuchWord {
                    index: i,
                    count: ziggurat_core::APP_WORDS,
                },
            )
        })
    }

    /// Whether huge pages back the mapping in this process (touches one
    /// word of each 2 MiB page, then reads `/proc/self/smaps`; blocking).
    pub fn huge_pages(&self) -> Result<HugeStatus> {
        let seg = self.segment()?;
        let r = seg.huge_pages();
        let dir = seg
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(HugeStatus {
            mode: r.mode.name(),
            backed: r.backed(),
            backed_bytes: r.backed_bytes,
            eligible_bytes: r.eligible_bytes,
            policy: HugePolicy::from(r.policy, &dir),
        })
    }
}
