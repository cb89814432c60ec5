//! An attached segment: its handle, the views and words the operations share,
//! and the whole-segment operations (clear, stats, verify). Reads are in
//! `read`, writes in `write`, the file's life in `file`, the shard locks in
//! `shard_lock`, contained panics in `failure`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::KeyHash;
use crate::holds::Holds;
use crate::huge::{HugePages, HugeReport};
use crate::index::FREQ_MAX;
use crate::invalid::{Arg, Problem};
use crate::layout::*;
use crate::options::Options;
use crate::read_only_view::ReadOnlyView;
use crate::recovery::Report;
use crate::shard::Shard;
use crate::shm::{Shm, Word32, Word64};
use crate::stamps;
use crate::tags::{self, TagRef};
use crate::view::{View32, View64};

/// An attached segment. Cheap to share between threads of one process; every
/// process maps the same file.
pub struct Segment {
    pub(crate) shm: Shm,
    /// The attached file (its identity and owner are read from it, never from
    /// the path, which another process may have pointed elsewhere since).
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    pub(crate) g: Geometry,
    seed: u64,
    pub(crate) lock_timeout: Duration,
    /// Attached with [`Options::read_only`]: the mapping is read-only.
    pub(crate) read_only: bool,
    /// Highest slot frequency a read raises a slot to: 0 when read-only.
    pub(crate) freq_cap: u8,
    /// Pending hit and miss counts of this process (see `read::count`).
    pub(crate) local_hits: AtomicU64,
    pub(crate) local_misses: AtomicU64,
    /// What this handle holds in each lease cell (see `lease`).
    pub(crate) holds: Holds,
    /// A warning about the directory, set by `open` (see `directory_notice`).
    pub(crate) directory_notice: Option<String>,
    /// Why an operation of this handle stopped (a panic it contained): from
    /// then on the handle neither reads nor writes the file (see `contain`).
    pub(crate) failure: OnceLock<String>,
    /// The huge-page mode it was opened with (see `huge`).
    pub(crate) huge_pages: HugePages,
    /// Whether this open made the file (rather than attaching to one).
    pub(crate) created: bool,
}

impl Segment {
    pub(crate) fn assemble(
        shm: Shm,
        file: File,
        path: PathBuf,
        g: Geometry,
        seed: u64,
        opts: &Options,
    ) -> Segment {
        crate::fork::track_forks();
        crate::huge::advise(&shm, opts.huge_pages, &opts.directory);
        Segment {
            shm,
            file,
            path,
            g,
            seed,
            lock_timeout: opts.lock_timeout,
            read_only: opts.read_only,
            freq_cap: if opts.read_only { 0 } else { FREQ_MAX },
            local_hits: AtomicU64::new(0),
            local_misses: AtomicU64::new(0),
            holds: Holds::new(),
            directory_notice: None,
            failure: OnceLock::new(),
            huge_pages: opts.huge_pages,
            created: false,
        }
    }

    /// Whether this handle was attached read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Refuses an operation that would write to a read-only handle.
    #[inline]
    pub(crate) fn check_writable(&self, what: &'static str) -> Result<()> {
        if self.read_only {
            return Err(Self::read_only_error(what));
        }
        Ok(())
    }

    #[cold]
    fn read_only_error(what: &'static str) -> Error {
        Error::invalid(Arg::ReadOnly, Problem::ReadOnly { call: what })
    }

    /// Whether huge pages back this segment's mapping in this process, with
    /// what the directory offers. Touches (reads) one word of every 2 MiB page
    /// of the mapping first, so that each is mapped as the kernel backs it, then
    /// reads the mapping's counts in `/proc/self/smaps` (a few milliseconds).
    ///
    /// ```no_run
    /// # use ziggurat_core::{Options, Segment};
    /// let seg = Segment::open("app", &Options::default()).unwrap();
    /// let r = seg.huge_pages();
    /// println!("{} of {} bytes in huge pages", r.backed_bytes, r.eligible_bytes);
    /// ```
    pub fn huge_pages(&self) -> HugeReport {
        let dir = self.path().parent().unwrap_or(Path::new("/"));
        crate::huge::report(&self.shm, self.huge_pages, dir)
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
    pub(crate) fn shard(&self, s: u32) -> Shard<'_> {
        Shard {
            shm: &self.shm,
            g: &self.g,
            seed: self.seed,
            id: s,
            base: self.g.shard_off(s),
        }
    }

    #[inline]
    pub(crate) fn shard_of(&self, kh: &KeyHash) -> Shard<'_> {
        self.shard(kh.shard(self.g.nshards))
    }

    /// The version stamp word of a key (see `stamps`), to load.
    #[inline]
    pub fn stamp_word(&self, kh: &KeyHash) -> View32<'_> {
        View32::of(self.stamp_at(kh.stamp(self.g.nstamps, self.g.nshards)))
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

    /// Hashes `key` and starts loading the lines a read of it touches and its
    /// stamp (with `write`, all that a write of it touches: see
    /// [`Segment::prefetch_write`]): what a miss does first with a key, in one
    /// call.
    #[inline]
    pub fn hash_prefetch(&self, key: &[u8], write: bool) -> KeyHash {
        let kh = self.hash(key);
        if write {
            self.prefetch_write(&kh);
        } else {
            self.prefetch_read(&kh);
            self.prefetch_stamp(&kh);
        }
        kh
    }

    /// Starts loading `kh`'s stamp word.
    #[inline]
    pub fn prefetch_stamp(&self, kh: &KeyHash) {
        self.shm
            .prefetch(self.g.stamps_off as usize + 4 * self.stamp_index(kh) as usize);
    }

    /// Starts loading everything a write of `kh` touches: its index pair,
    /// stamp and ghost bucket, and the shard's ring ends. Call it before work
    /// that does not touch the segment (encoding the value).
    #[inline]
    pub fn prefetch_write(&self, kh: &KeyHash) {
        self.prefetch_read(kh);
        self.prefetch_stamp(kh);
        let sh = self.shard_of(kh);
        sh.prefetch_ghost(kh);
        sh.prefetch_ends();
    }

    /// Starts loading the record a write of `kh` will compare its key with
    /// (the key's current version). Call it some time after `prefetch_write`,
    /// whose index line it reads: just before the write, after the encoding.
    #[inline]
    pub fn prefetch_current(&self, kh: &KeyHash) {
        self.shard_of(kh).prefetch_matches(kh);
    }

    /// Index of a key's stamp.
    #[inline]
    pub fn stamp_index(&self, kh: &KeyHash) -> u32 {
        kh.stamp(self.g.nstamps, self.g.nshards)
    }

    /// Stamp word by index (`idx < nstamps`).
    #[inline]
    pub(crate) fn stamp_at(&self, idx: u32) -> &AtomicU32 {
        self.shm
            .u32_at(self.g.stamps_off as usize + 4 * idx as usize)
    }

    /// Version word of a tag cell (`cell < ntags`), to load.
    #[inline]
    pub fn tag_word(&self, cell: u32) -> View32<'_> {
        View32::of(self.tag_atomic(cell))
    }

    #[inline]
    pub(crate) fn tag_atomic(&self, cell: u32) -> &AtomicU32 {
        self.shm
            .u32_at(self.g.tags_off as usize + 4 * cell as usize)
    }

    /// A handle on a key's stamp word that may be kept without borrowing the
    /// segment: what a process-local cache stores to validate an entry.
    #[inline]
    pub fn stamp_watch(&self, kh: &KeyHash) -> Word32 {
        self.shm
            .word32(self.g.stamps_off as usize + 4 * self.stamp_index(kh) as usize)
    }

    /// Like [`Segment::stamp_watch`], for the version word of a tag cell.
    #[inline]
    pub fn tag_watch(&self, cell: u32) -> Word32 {
        self.shm
            .word32(self.g.tags_off as usize + 4 * cell as usize)
    }

    /// Like [`Segment::stamp_watch`], for the segment epoch.
    #[inline]
    pub fn epoch_watch(&self) -> Word64 {
        self.shm.word64(H_EPOCH)
    }

    /// A read-only second mapping of the file's header, stamp table and tag
    /// table (everything before the shards), for a front end whose runtime
    /// loads those words through pointers of its own: see [`ReadOnlyView`].
    /// The words lie at the offsets [`Geometry::stamps_off`],
    /// [`Geometry::tags_off`] and [`Segment::EPOCH_OFFSET`].
    pub fn words_view(&self) -> io::Result<ReadOnlyView> {
        ReadOnlyView::map(
            &self.file,
            self.g.shards_off as usize,
            self.shm.small_pages(),
        )
    }

    /// Where the segment epoch (8 bytes) lies in the file.
    pub const EPOCH_OFFSET: usize = H_EPOCH;

    /// The tag cell of a tag name.
    #[inline]
    pub fn tag_cell(&self, tag: &[u8]) -> u32 {
        tags::cell(self.seed, self.g.ntags, tag)
    }

    /// Word `i` of the words kept for the layers above the engine (see
    /// [`APP_WORDS`](crate::APP_WORDS)); zero in a new file. `None` past the end.
    pub fn app_load(&self, i: usize) -> Option<u64> {
        (i < APP_WORDS).then(|| self.shm.u64_at(H_APP + 8 * i).load(Ordering::Acquire))
    }

    /// Compares word `i` with `old` and, if equal, replaces it with `new`, in
    /// one atomic step across processes. Returns whether it did.
    pub fn app_cas(&self, i: usize, old: u64, new: u64) -> Result<bool> {
        self.check_writable("app_cas")?;
        if i >= APP_WORDS {
            return Err(Error::invalid(
                Arg::Word,
                Problem::NoSuchWord {
                    index: i,
                    count: APP_WORDS,
                },
            ));
        }
        Ok(self
            .shm
            .u64_at(H_APP + 8 * i)
            .compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire)
            .is_ok())
    }

    /// How many tag invalidations the segment has seen: a reader that copies
    /// an entry from elsewhere compares it before and after, since any of them
    /// may have voided the entry's tags meanwhile.
    #[inline]
    pub fn tag_invalidations(&self) -> u64 {
        self.shm.u64_at(H_TAG_INVALIDATIONS).load(Ordering::Acquire)
    }

    /// The segment epoch (bumped by `clear` and by shard resets), to load.
    #[inline]
    pub fn epoch(&self) -> View64<'_> {
        View64::of(self.epoch_atomic())
    }

    #[inline]
    pub(crate) fn epoch_atomic(&self) -> &AtomicU64 {
        self.shm.u64_at(H_EPOCH)
    }

    /// `Ok` for a key this segment can store (1 to `max_key` bytes).
    pub fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(Error::invalid(Arg::Key, Problem::Empty));
        }
        if key.len() > self.g.max_key as usize {
            return Err(Error::invalid(
                Arg::Key,
                Problem::TooLarge {
                    max: self.g.max_key.into(),
                    got: key.len() as u64,
                },
            ));
        }
        Ok(())
    }

    /// Resolves tag names to references with their current versions.
    pub fn tag_refs(&self, tags: &[&[u8]]) -> Result<Vec<u64>> {
        Ok(self.tag_versions(&self.tag_cells(tags)?))
    }

    /// The distinct cells of tag names, each checked: what a write resolves
    /// before its shard lock, so that only the versions are read under it.
    pub(crate) fn tag_cells(&self, tags: &[&[u8]]) -> Result<Vec<u32>> {
        if tags.len() > MAX_TAGS {
            return Err(Error::invalid(
                Arg::Tags,
                Problem::TooMany {
                    max: MAX_TAGS,
                    got: tags.len(),
                },
            ));
        }
        let mut out = Vec::with_capacity(tags.len());
        for t in tags {
            if t.is_empty() {
                return Err(Error::invalid(Arg::Tags, Problem::Empty));
            }
            if t.len() > self.g.max_key as usize {
                return Err(Error::invalid(
                    Arg::Tags,
                    Problem::TooLarge {
                        max: self.g.max_key.into(),
                        got: t.len() as u64,
                    },
                ));
            }
            let cell = self.tag_cell(t);
            if !out.contains(&cell) {
                out.push(cell);
            }
        }
        Ok(out)
    }

    /// References to `cells` at their versions now.
    pub(crate) fn tag_versions(&self, cells: &[u32]) -> Vec<u64> {
        cells
            .iter()
            .map(|&cell| {
                let version = self.tag_atomic(cell).load(Ordering::SeqCst);
                TagRef { cell, version }.pack()
            })
            .collect()
    }

    /// Checks a TTL in seconds: finite and > 0.
    pub fn check_ttl(ttl: Option<f64>) -> Result<()> {
        match ttl {
            Some(t) if !(t.is_finite() && t > 0.0) => Err(Error::invalid(
                Arg::Ttl,
                Problem::Seconds {
                    got: t,
                    zero: false,
                    never: false,
                },
            )),
            Some(t) if t > 100.0 * 365.0 * 86400.0 => Err(Error::invalid(
                Arg::Ttl,
                Problem::TooLong {
                    max: 100.0 * 365.0 * 86400.0,
                    got: t,
                    never: false,
                },
            )),
            _ => Ok(()),
        }
    }

    /// Removes every entry. The epoch is bumped, the shards are emptied one by
    /// one under their locks, then the epoch is bumped again so that every L1
    /// copy, even one filled while the shards were emptied, stops validating.
    pub fn clear(&self) -> Result<()> {
        self.check_writable("clear")?;
        self.contain("clear", || {
            // First: a load that began before this clear checks the epoch under a
            // shard lock as it lands (`Segment::land`), and a shard this clear has
            // already emptied must not take a value read before it.
            self.epoch_atomic().fetch_add(1, Ordering::SeqCst);
            let mut emptied = false;
            let done = (0..self.g.nshards).try_for_each(|s| {
                let guard = self.lock(s)?;
                guard.sh.reset();
                emptied = true;
                Ok(())
            });
            // A clear that stops at a shard it cannot lock has still emptied the ones
            // before it: their entries' L1 copies must stop validating all the same.
            if emptied {
                self.epoch_atomic().fetch_add(1, Ordering::SeqCst);
            }
            done?;
            self.shm.u64_at(H_CLEARS).fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    /// Sleeps until `key`'s stamp differs from `seen` or `timeout` passes.
    /// Returns whether it changed.
    pub fn wait(&self, key: &[u8], seen: u32, timeout: Duration) -> Result<bool> {
        // A waiter registers itself in the shard header.
        self.check_writable("wait")?;
        self.check_key(key)?;
        let kh = self.hash(key);
        let sh = self.shard_of(&kh);
        let stamp = self.stamp_at(self.stamp_index(&kh));
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
            // Counters are words of the file: a damaged one must not wrap the sum.
            for (i, st) in Stat::ALL.iter().enumerate() {
                out[i].1 = out[i]
                    .1
                    .saturating_add(sh.stat(*st).load(Ordering::Relaxed));
            }
            for id in [RingId::Small, RingId::Main] {
                let r = sh.ring(id);
                used += r.ends(&self.shm).map_or(0, |(h, t)| h - t);
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
            ("epoch", self.epoch().load()),
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
        // Even a check takes the shard locks, so that it sees no write half done.
        self.check_writable("verify")?;
        self.contain("verify", || {
            let mut rep = Report::default();
            for s in 0..self.g.nshards {
                let guard = self.lock(s)?;
                let r = guard.sh.repair(repair);
                if r.reset && repair {
                    guard.sh.note_reset();
                }
                rep.merge(r);
            }
            Ok(rep)
        })
    }

    /// Removes the file (attached processes keep their mapping until they close).
    pub fn unlink(&self) -> Result<()> {
        self.check_writable("unlink")?;
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::error::Error;
    use crate::options::Options;
    use crate::segment::Segment;

    #[test]
    fn a_clear_stopped_by_a_held_lock_still_voids_what_it_emptied() {
        let dir = PathBuf::from(format!("/dev/shm/zigclear-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let opts = Options {
            size: 4 << 20,
            directory: dir.clone(),
            shards: Some(2),
            lock_timeout: Duration::from_millis(100),
            ..Options::default()
        };
        let seg = Segment::open("c", &opts).unwrap();
        let before = seg.epoch().load();
        let (held_tx, held_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        std::thread::scope(|t| {
            // Another thread holds shard 1's lock: the clear empties shard 0, then times out.
            let seg = &seg;
            t.spawn(move || {
                let _guard = seg.lock(1).unwrap();
                held_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            });
            held_rx.recv().unwrap();
            assert!(matches!(seg.clear(), Err(Error::LockTimeout)));
            go_tx.send(()).unwrap();
        });
        assert!(seg.epoch().load() > before);
        drop(seg);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
