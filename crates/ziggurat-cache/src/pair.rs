//! Opening a cache's two segments, `<name>` (entries) and `<name>.neg` (cached
//! misses and load leases), as one: both or neither.
//!
//! Two rules live here. A pair is created whole: when this open made the
//! entries' file and the second file then cannot be opened, the first is
//! removed again, so a failure never leaves a file that fills the directory for
//! every later cache. And the default size adapts to the directory: a container
//! gets a 64 MB `/dev/shm`, where the default 64 MiB + 4 MiB does not fit, so a
//! cache opened without an explicit `size` takes what fits (three quarters of
//! the free space, the rest left to the directory's other users) and says so in
//! [`Pair::notice`], with the remedy. An explicit size is never shrunk: it
//! fails as it would alone, with its cause.

use ziggurat_core::{Error, Geometry, HugePages, OpenCause, Options, Result, Segment};

/// The entries' budget of a cache opened without a size.
pub const DEFAULT_SIZE: u64 = 64 << 20;

/// The smallest cached-miss segment.
const MIN_NEG: u64 = 1 << 20;

/// The smallest entries' segment a fitted cache takes; below it, the open
/// fails for lack of room instead.
const MIN_FIT: u64 = 4 << 20;

/// Fitted sizes are whole 2 MiB pages, which huge pages can back entirely.
const STEP: u64 = 2 << 20;

/// The suffix of the cached-miss segment's name.
pub const NEG_SUFFIX: &str = ".neg";

/// The cached-miss budget that goes with `size` when none is given: a
/// sixteenth, at least 1 MiB.
///
/// ```
/// assert_eq!(ziggurat_cache::neg_size_for(64 << 20), 4 << 20);
/// assert_eq!(ziggurat_cache::neg_size_for(8 << 20), 1 << 20);
/// ```
pub fn neg_size_for(size: u64) -> u64 {
    (size / 16).max(MIN_NEG)
}

/// The longest `version` of a cache.
const MAX_VERSION: usize = 16;

/// The main segment's name of cache `name` at `version` (None: the cache
/// without one): `<name>.ver-<version>`, a segment of its own for each
/// version, so entries written by another version (an older deploy, values of
/// another shape) are never read. `version` is 1 to 16 characters of
/// `A-Z a-z 0-9 _ -` (a whole number as its decimal digits).
///
/// ```
/// use ziggurat_cache::versioned_name;
/// assert_eq!(versioned_name("blog", Some("3")).unwrap(), "blog.ver-3");
/// assert_eq!(versioned_name("blog", None).unwrap(), "blog");
/// assert!(versioned_name("blog", Some("v.2")).is_err());
/// ```
pub fn versioned_name(
    name: &str,
    version: Option<&str>,
) -> std::result::Result<String, crate::Error> {
    let Some(v) = version else {
        return Ok(name.to_owned());
    };
    let ok = (1..=MAX_VERSION).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(crate::Error::Value(format!(
            "version must be a whole number >= 0 or 1-{MAX_VERSION} characters of A-Z a-z 0-9 _ -, got {v:?}"
        )));
    }
    Ok(format!("{name}.ver-{v}"))
}

/// A cache's two open segments.
pub struct Pair {
    /// `<name>`: the entries.
    pub main: Segment,
    /// `<name>.neg`: cached misses and load leases.
    pub neg: Segment,
    /// The file sizes these options ask for, to compare with the files'
    /// (a file made earlier with other parameters is used as it is). Where the
    /// default size was fitted, the fitted sizes.
    pub requested: (u64, u64),
    /// Set when this open created the pair smaller than the default because
    /// the directory had no room for it: what it took, and how to give more.
    pub notice: Option<String>,
}

/// The options of a pair from a front end's arguments, each checked:
/// `avg_item_size` 32 B to 16 MiB, `lock_timeout` finite seconds > 0 (at most
/// an hour is waited), `huge_pages` `"auto"`, `"require"` or `"off"`.
///
/// ```
/// let o = ziggurat_cache::pair_options("/dev/shm".into(), false, 256, 0.5, None, "auto");
/// assert_eq!(o.unwrap().avg_item_size, 256);
/// assert!(ziggurat_cache::pair_options("/dev/shm".into(), false, 8, 0.5, None, "auto").is_err());
/// ```
pub fn pair_options(
    directory: std::path::PathBuf,
    recreate: bool,
    avg_item_size: i128,
    lock_timeout: f64,
    group: Option<u32>,
    huge_pages: &str,
) -> Result<Options> {
    if !(32..=1 << 24).contains(&avg_item_size) {
        return Err(Error::Invalid(format!(
            "avg_item_size must be between 32 and 16777216 bytes, got {avg_item_size}"
        )));
    }
    if !(lock_timeout.is_finite() && lock_timeout > 0.0) {
        return Err(Error::Invalid(
            "lock_timeout must be a finite number of seconds > 0".into(),
        ));
    }
    Ok(Options {
        directory,
        recreate,
        avg_item_size: avg_item_size as u64,
        lock_timeout: std::time::Duration::from_secs_f64(lock_timeout.min(3600.0)),
        group,
        huge_pages: HugePages::parse(huge_pages)?,
        ..Options::default()
    })
}

/// Opens (or creates) the segments `name` and `name.neg`. `size`: the
/// entries' budget, `None` for [`DEFAULT_SIZE`] fitted to the directory;
/// `neg_size`: the cached misses' budget, `None` for [`neg_size_for`] the
/// entries'. Every other option comes from `opts` (its `size` is ignored), with
/// `avg_item_size` for the entries (the cached-miss segment uses 64).
///
/// ```no_run
/// let opts = ziggurat_core::Options::default();
/// let pair = ziggurat_cache::open_pair("api", None, None, &opts).unwrap();
/// if let Some(n) = &pair.notice {
///     eprintln!("{n}");
/// }
/// ```
pub fn open_pair(
    name: &str,
    size: Option<u64>,
    neg_size: Option<u64>,
    opts: &Options,
) -> Result<Pair> {
    let fit = size.is_none() && !opts.read_only;
    let mut attempt = 0;
    loop {
        match open_once(name, size, neg_size, opts) {
            // Workers that start together each fit the default to the free space
            // they see and build their files aside at once: on a small directory
            // they can all run out of room, while none named a file for the others
            // to attach to. Each failed build freed its room, so try again, after a
            // pause of its own.
            Err(Error::Open {
                cause: OpenCause::NoSpace,
                ..
            }) if fit && attempt < 4 => {
                attempt += 1;
                let jitter = u64::from(std::process::id()) % 17 + 3 * attempt;
                std::thread::sleep(std::time::Duration::from_millis(jitter * 5));
            }
            done => return done.map_err(|e| remedied(e, fit)),
        }
    }
}

/// One attempt of [`open_pair`].
fn open_once(name: &str, size: Option<u64>, neg_size: Option<u64>, opts: &Options) -> Result<Pair> {
    let neg_name = format!("{name}{NEG_SUFFIX}");
    let mut main_opts = opts.clone();
    main_opts.size = size.unwrap_or(DEFAULT_SIZE);
    let mut neg_opts = opts.clone();
    neg_opts.avg_item_size = 64;
    neg_opts.size = neg_size.unwrap_or_else(|| neg_size_for(main_opts.size));
    // Huge pages matter for the large, randomly read entries; a small cached-miss
    // segment may have no whole 2 MiB page to back, so it takes them as offered.
    if neg_opts.huge_pages == HugePages::Require {
        neg_opts.huge_pages = HugePages::Auto;
    }
    let file_size =
        |o: &Options| Geometry::compute(o.size, o.avg_item_size, o.shards).map(|g| g.file_size());
    let mut requested = (file_size(&main_opts)?, file_size(&neg_opts)?);
    let fit = size.is_none() && !opts.read_only;
    let mut notice = None;
    if fit {
        if let Some(f) = fitted(name, &neg_name, neg_size, opts, requested)? {
            main_opts.size = f.main;
            neg_opts.size = f.neg;
            requested = (file_size(&main_opts)?, file_size(&neg_opts)?);
            notice = Some(f.notice);
        }
    }
    let main = Segment::open(name, &main_opts)?;
    if fit && !main.created() {
        // The first process to create the file chose its size; a smaller one
        // than the default was fitted to the directory, not another parameter.
        let actual = main.geometry().file_size();
        if actual < requested.0 {
            requested.0 = actual;
        }
        notice = None;
    }
    let neg = match Segment::open(&neg_name, &neg_opts) {
        Ok(neg) => neg,
        Err(e) => {
            if main.created() {
                // Nothing is left behind: the next open starts from no file.
                let _ = main.unlink_own();
            }
            return Err(e);
        }
    };
    if fit && !neg.created() {
        let actual = neg.geometry().file_size();
        if actual < requested.1 {
            requested.1 = actual;
        }
    }
    Ok(Pair {
        main,
        neg,
        requested,
        notice,
    })
}

/// Sizes fitted to a directory, with the notice that says so.
struct Fit {
    main: u64,
    neg: u64,
    notice: String,
}

/// The sizes to create with when the default ones (`want`: the two files'
/// sizes) do not fit in the free space of the directory with headroom; `None`
/// when they fit, when both files exist already (nothing is created), or when
/// the free space cannot be read.
fn fitted(
    name: &str,
    neg_name: &str,
    neg_size: Option<u64>,
    opts: &Options,
    want: (u64, u64),
) -> Result<Option<Fit>> {
    let dir = opts.directory.as_path();
    let exists = |n: &str| std::fs::symlink_metadata(Segment::file_path(dir, n)).is_ok();
    let (main_missing, neg_missing) = (!exists(name), !exists(neg_name));
    let missing = main_missing as u64 * want.0 + neg_missing as u64 * want.1;
    if missing == 0 {
        return Ok(None);
    }
    let Some(free) = Segment::free_space(dir) else {
        return Ok(None);
    };
    // Headroom: a quarter of the free space stays for the directory's other
    // users (other caches, other programs' shared memory).
    let room = free / 4 * 3;
    if missing <= room {
        return Ok(None);
    }
    let (main, neg) = if main_missing {
        // The entries take what is left once the cached misses have theirs,
        // in whole 2 MiB pages.
        let neg_share = |m: u64| neg_size.unwrap_or_else(|| neg_size_for(m));
        let mut main = room / 17 * 16 / STEP * STEP;
        while main >= MIN_FIT && main + neg_share(main) > room {
            main -= STEP;
        }
        if main < MIN_FIT {
            return Ok(None); // no room worth taking: the open reports it
        }
        (main, if neg_missing { neg_share(main) } else { want.1 })
    } else {
        // An entries' file whose companion is missing: the companion takes
        // what fits, as the rule above would have given it.
        let neg = want.1.min(room / STEP * STEP).max(MIN_NEG);
        (want.0, neg)
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let notice = format!(
        "the default size of cache {name:?} ({:.0} MiB of entries + {:.0} MiB of cached misses) \
         does not fit in {}, which has {:.1} MiB free: it takes {:.1} MiB + {:.1} MiB instead, \
         leaving a quarter of the free space to the directory's other users. To give it more, \
         enlarge the directory: a container's /dev/shm is 64 MB unless set (docker run \
         --shm-size=256m; Compose: shm_size: 256m; Kubernetes: mount an emptyDir with medium: \
         Memory and a sizeLimit at /dev/shm), or pass size= (an explicit size is never \
         shrunk: it fails when it does not fit)",
        mib(want.0),
        mib(want.1),
        dir.display(),
        mib(free),
        mib(main),
        mib(neg),
    );
    Ok(Some(Fit { main, neg, notice }))
}

/// `e`, with the container remedy added to a lack of room when the size was
/// the default (the default is what a container's small `/dev/shm` refuses).
fn remedied(e: Error, fit: bool) -> Error {
    match e {
        Error::Open {
            cause: OpenCause::NoSpace,
            message,
        } if fit => Error::Open {
            cause: OpenCause::NoSpace,
            message: format!(
                "{message}. In a container, /dev/shm is 64 MB unless set: docker run \
                 --shm-size=256m, Compose shm_size: 256m, or in Kubernetes an emptyDir with \
                 medium: Memory and a sizeLimit mounted at /dev/shm"
            ),
        },
        e => e,
    }
}
