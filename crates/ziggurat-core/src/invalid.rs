//! A refused argument as data: which argument, and what is wrong with it
//! (with its limits and the value given). Each front end says it in its
//! own words ([`Words`]): the names its users write, its spelling of
//! infinity and of a read-only handle, its way of writing numbers.

/// An argument of a segment or of a cache built on segments. Front ends
/// name it as their users write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// A key.
    Key,
    /// A value to store.
    Value,
    /// The tags of an entry (each tag included).
    Tags,
    /// The freshness of an entry, in seconds.
    Ttl,
    /// The freshness of a cached miss.
    NegTtl,
    /// How long an expired entry stays servable on a loader's failure.
    StaleTtl,
    /// What a cache does without its segment.
    Degraded,
    /// The freshness of entries kept while the segment is missing.
    DegradedTtl,
    /// How long a caller waits for another caller's load.
    LoaderTimeout,
    /// The fraction of random spread on TTLs.
    Jitter,
    /// The fraction of the TTL after which a read refreshes early.
    RefreshAhead,
    /// How L1 hands out what it keeps.
    Copy,
    /// The bytes of a segment.
    Size,
    /// The bytes of the negative segment.
    NegSize,
    /// The average entry size the index is made for.
    AvgItemSize,
    /// The number of shards.
    Shards,
    /// How long a write waits for a shard lock.
    LockTimeout,
    /// The group that shares the segment file.
    Group,
    /// Whether huge pages back the mapping.
    HugePages,
    /// A read-only open.
    ReadOnly,
    /// Replacing a file made with other parameters.
    Recreate,
    /// The name of a cache.
    Name,
    /// The name of a namespace.
    Namespace,
    /// The version of a cache.
    Version,
    /// The name of a segment file.
    SegmentName,
    /// A lease stamp.
    Stamp,
    /// How long to wait, in seconds.
    Timeout,
    /// How long a call to the cluster tier's server may take.
    RedisTimeout,
    /// A word kept in the segment for a tier below.
    Word,
    /// Stored bytes to decode.
    Data,
}

impl Arg {
    /// Every argument, for a front end that looks one up by its own name.
    pub const ALL: [Arg; 30] = [
        Arg::Key,
        Arg::Value,
        Arg::Tags,
        Arg::Ttl,
        Arg::NegTtl,
        Arg::StaleTtl,
        Arg::Degraded,
        Arg::DegradedTtl,
        Arg::LoaderTimeout,
        Arg::Jitter,
        Arg::RefreshAhead,
        Arg::Copy,
        Arg::Size,
        Arg::NegSize,
        Arg::AvgItemSize,
        Arg::Shards,
        Arg::LockTimeout,
        Arg::Group,
        Arg::HugePages,
        Arg::ReadOnly,
        Arg::Recreate,
        Arg::Name,
        Arg::Namespace,
        Arg::Version,
        Arg::SegmentName,
        Arg::Stamp,
        Arg::Timeout,
        Arg::RedisTimeout,
        Arg::Word,
        Arg::Data,
    ];

    /// Whether the argument counts bytes (its range is said in bytes).
    fn in_bytes(self) -> bool {
        matches!(self, Arg::Size | Arg::NegSize | Arg::AvgItemSize)
    }
}

/// The form a name or a text argument must have, which a value did not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A name of files: 1 to `max` characters of A-Z a-z 0-9 . _ -, not starting with '.'.
    FileName {
        /// The longest name.
        max: usize,
    },
    /// A version: 1 to `max` characters of A-Z a-z 0-9 _ -.
    Version {
        /// The longest version.
        max: usize,
    },
    /// A namespace: non-empty, without ':'.
    Namespace,
    /// A duration: seconds, or a number with a unit.
    Duration,
    /// A size: bytes, or a number with a unit.
    Size,
}

/// A segment size that makes no usable layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The tables alone do not fit the address arithmetic.
    TooLarge {
        /// The bytes asked for.
        size: u64,
    },
    /// The shards' headers and minimal rings do not fit.
    TooSmallForShards {
        /// The bytes asked for.
        size: u64,
        /// The shards asked for.
        shards: u32,
    },
    /// No room is left for data at this average entry size.
    NoRoom {
        /// The bytes asked for.
        size: u64,
    },
    /// Each shard's ring would be too large to address.
    ShardsTooLarge {
        /// The shards.
        shards: u32,
        /// The bytes of each.
        stride: u64,
    },
}

/// What is wrong with an argument; the limits and the value given are data.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// Its length is not 1 to `max` bytes.
    Length {
        /// The longest allowed.
        max: usize,
        /// The length given.
        got: usize,
    },
    /// Empty (a key, a value, a tag, data to decode).
    Empty,
    /// Longer than this segment takes.
    TooLarge {
        /// The most this segment takes, in bytes.
        max: u64,
        /// The bytes given.
        got: u64,
    },
    /// More than `max` items (tags).
    TooMany {
        /// The most allowed.
        max: usize,
        /// The count given.
        got: usize,
    },
    /// Not a number of seconds > 0 (or >= 0 if `zero`), finite unless `never`
    /// (infinity then means never).
    Seconds {
        /// The value given.
        got: f64,
        /// Whether 0 is allowed.
        zero: bool,
        /// Whether infinity (never) is allowed.
        never: bool,
    },
    /// Above `max` seconds (infinity allowed if `never`).
    TooLong {
        /// The longest allowed, in seconds.
        max: f64,
        /// The value given.
        got: f64,
        /// Whether infinity (never) is allowed.
        never: bool,
    },
    /// Not in [0, 1).
    Fraction {
        /// The value given.
        got: f64,
    },
    /// Not a whole number from `min` to `max`.
    Range {
        /// The least allowed.
        min: i128,
        /// The most allowed.
        max: i128,
        /// The value given.
        got: i128,
    },
    /// Not a power of two from 1 to `max`.
    PowerOfTwo {
        /// The most allowed.
        max: u32,
        /// The value given.
        got: i128,
    },
    /// Not one of the names `allowed`.
    Choice {
        /// The names allowed.
        allowed: &'static [&'static str],
        /// The name given.
        got: String,
    },
    /// Text not of the form `rule`.
    Malformed {
        /// The rule.
        rule: Form,
        /// The text given.
        got: String,
    },
    /// Word `index` does not exist; there are `count`.
    NoSuchWord {
        /// The word asked for.
        index: usize,
        /// How many there are.
        count: usize,
    },
    /// The call `call` writes, and the handle was opened read-only.
    ReadOnly {
        /// The call, by the segment's name for it.
        call: &'static str,
    },
    /// The call `call` reads without taking, which only a read-only handle does.
    NeedsReadOnly {
        /// The call, by the segment's name for it.
        call: &'static str,
    },
    /// Not allowed together with `other`.
    Excludes {
        /// The argument it excludes.
        other: Arg,
    },
    /// The new file could not be given to group `gid`.
    NotMember {
        /// The gid asked for.
        gid: u32,
        /// The group, described.
        group: String,
        /// This process, described.
        process: String,
        /// The system's answer.
        error: String,
    },
    /// The size makes no usable layout.
    Layout(Layout),
}

/// How a front end says things in its language.
pub trait Words {
    /// `arg` as its users write it.
    fn arg(&self, arg: Arg) -> &'static str;
    /// `arg` set to `value`, as its users write it (`recreate=True`).
    fn setting(&self, arg: Arg, value: &str) -> String;
    /// Infinity, as its users write it.
    fn infinity(&self) -> &'static str;
    /// A string value, quoted as its users write one.
    fn text(&self, s: &str) -> String {
        format!("{s:?}")
    }
    /// A number as its users see it written.
    fn number(&self, v: f64) -> String {
        v.to_string()
    }
    /// A fraction as its users see it written (where floats and whole
    /// numbers differ, as a float).
    fn fraction(&self, v: f64) -> String {
        self.number(v)
    }
    /// A segment's call `call` as its users write it.
    fn call(&self, call: &str) -> String {
        call.to_string()
    }
    /// How its users remove a segment file no process uses: with a handle
    /// on it (`handle`), or without one.
    fn remove(&self, handle: bool) -> String {
        let _ = handle;
        "`unlink()`".into()
    }
}

// A message that names settings or the way to remove a file holds marks
// where they go, each filled by the front end that shows it ([`fill`]).
const MARK: char = '\u{1}';

/// The mark of `arg` in a message.
pub(crate) fn arg_mark(arg: Arg) -> String {
    format!("{MARK}a{}{MARK}", arg as usize)
}

/// The mark of `arg` set to `value` in a message.
pub(crate) fn setting_mark(arg: Arg, value: &str) -> String {
    format!("{MARK}s{}={value}{MARK}", arg as usize)
}

/// The mark of the ways to remove a segment file, with a handle on it or not.
pub(crate) fn remove_mark(handle: bool) -> String {
    format!("{MARK}r{}{MARK}", u8::from(handle))
}

/// `message` with its marks said in `words`.
///
/// ```
/// use ziggurat_core::{fill, RustWords};
/// assert_eq!(fill("no marks", &RustWords), "no marks");
/// ```
pub fn fill(message: &str, w: &dyn Words) -> String {
    if !message.contains(MARK) {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    for (i, piece) in message.split(MARK).enumerate() {
        if i % 2 == 0 {
            out.push_str(piece);
            continue;
        }
        let arg = |n: &str| {
            n.parse::<usize>()
                .ok()
                .and_then(|n| Arg::ALL.get(n).copied())
        };
        match (piece.get(..1), piece.get(1..)) {
            (Some("a"), Some(n)) => {
                if let Some(a) = arg(n) {
                    out.push_str(w.arg(a));
                }
            }
            (Some("s"), Some(rest)) => {
                if let Some((n, v)) = rest.split_once('=') {
                    if let Some(a) = arg(n) {
                        out.push_str(&w.setting(a, v));
                    }
                }
            }
            (Some("r"), Some(h)) => out.push_str(&w.remove(h == "1")),
            _ => out.push_str(piece),
        }
    }
    out
}

/// The names the Rust API itself uses (its fields and constants).
pub struct RustWords;

impl Words for RustWords {
    fn arg(&self, arg: Arg) -> &'static str {
        match arg {
            Arg::Key => "key",
            Arg::Value => "value",
            Arg::Tags => "tags",
            Arg::Ttl => "ttl",
            Arg::NegTtl => "neg_ttl",
            Arg::StaleTtl => "stale_ttl",
            Arg::Degraded => "degraded",
            Arg::DegradedTtl => "degraded_ttl",
            Arg::LoaderTimeout => "loader_timeout",
            Arg::Jitter => "jitter",
            Arg::RefreshAhead => "refresh_ahead",
            Arg::Copy => "copy",
            Arg::Size => "size",
            Arg::NegSize => "neg_size",
            Arg::AvgItemSize => "avg_item_size",
            Arg::Shards => "shards",
            Arg::LockTimeout => "lock_timeout",
            Arg::Group => "group",
            Arg::HugePages => "huge_pages",
            Arg::ReadOnly => "read_only",
            Arg::Recreate => "recreate",
            Arg::Name => "name",
            Arg::Namespace => "namespace",
            Arg::Version => "version",
            Arg::SegmentName => "segment name",
            Arg::Stamp => "stamp",
            Arg::Timeout => "timeout",
            Arg::RedisTimeout => "redis_timeout",
            Arg::Word => "word",
            Arg::Data => "data",
        }
    }

    fn setting(&self, arg: Arg, value: &str) -> String {
        format!("{} = {value}", self.arg(arg))
    }

    fn infinity(&self) -> &'static str {
        "f64::INFINITY"
    }
}

/// The message for `problem` with `arg`, in `words`.
///
/// ```
/// use ziggurat_core::{describe, Arg, Problem, RustWords};
/// let p = Problem::Seconds { got: 0.0, zero: false, never: true };
/// assert_eq!(
///     describe(Arg::NegTtl, &p, &RustWords),
///     "neg_ttl must be a number of seconds > 0 (or f64::INFINITY for never), got 0"
/// );
/// ```
#[cold]
pub fn describe(arg: Arg, problem: &Problem, w: &dyn Words) -> String {
    let a = w.arg(arg);
    let n = |v: f64| w.number(v);
    match problem {
        Problem::Length { max, got } => format!("{a} must be 1 to {max} bytes, got {got}"),
        Problem::Empty => match arg {
            Arg::Tags => "a tag must not be empty".into(),
            Arg::Data => "cannot decode empty data".into(),
            _ => format!("{a} must not be empty"),
        },
        Problem::TooLarge { max, got } => match arg {
            Arg::Tags => format!("a tag is at most {max} bytes"),
            Arg::Value => format!(
                "value is {got} bytes, the maximum for this segment is {max} bytes \
                 (max_value_size); store a smaller value, or open the segment with a larger size"
            ),
            _ => format!("{a} is {got} bytes, the maximum is {max}"),
        },
        Problem::TooMany { max, got } => format!("at most {max} tags per entry, got {got}"),
        Problem::Seconds { got, zero, never } => {
            let least = if *zero { ">= 0" } else { "> 0" };
            if *never {
                let inf = w.infinity();
                format!(
                    "{a} must be a number of seconds {least} (or {inf} for never), got {}",
                    n(*got)
                )
            } else {
                format!(
                    "{a} must be a finite number of seconds {least}, got {}",
                    n(*got)
                )
            }
        }
        Problem::TooLong { max, got, never } => {
            let max_n = n(*max);
            if *never {
                format!(
                    "{a} must be at most 100 years ({max_n} s) or {} for never, got {}",
                    w.infinity(),
                    n(*got)
                )
            } else {
                format!(
                    "{a} must be > 0 and at most {max_n} seconds, got {}",
                    n(*got)
                )
            }
        }
        Problem::Fraction { got } => format!("{a} must be in [0, 1), got {}", w.fraction(*got)),
        Problem::Range { min: 1, max, got } if arg.in_bytes() => {
            format!("{a} must be a positive number of bytes, at most {max}, got {got}")
        }
        Problem::Range { min, max, got } => {
            let unit = if arg.in_bytes() { " bytes" } else { "" };
            format!("{a} must be between {min} and {max}{unit}, got {got}")
        }
        Problem::PowerOfTwo { max, got } => {
            format!("{a} must be a power of two from 1 to {max}, got {got}")
        }
        Problem::Choice { allowed, got } => {
            let names: Vec<String> = allowed.iter().map(|s| format!("'{s}'")).collect();
            let list = match names.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            };
            format!("{a} must be {list}, got {got:?}")
        }
        Problem::Malformed { rule, got } => match rule {
            Form::FileName { max } => format!(
                "{a} must be 1-{max} characters of A-Z a-z 0-9 . _ - not starting with '.', \
                 got {got:?}"
            ),
            Form::Version { max } => {
                format!("{a} must be 1-{max} characters of A-Z a-z 0-9 _ -, got {got:?}")
            }
            Form::Namespace => format!("{a} must be a non-empty string without ':', got {got:?}"),
            Form::Duration => format!(
                "{a}: cannot read duration {got:?}: use seconds (30) or a number with a unit: \
                 ms, s, m, h, d ('500ms', '5m', '1.5h'), or 'inf' for never"
            ),
            Form::Size => format!(
                "cannot read size {got:?}: use bytes (4096) or a number with a unit: KB, MB, GB, \
                 TB (decimal) or KiB, MiB, GiB, TiB (binary), at most 1024TiB"
            ),
        },
        Problem::NoSuchWord { index, count } => {
            format!("word {index} does not exist: there are {count}")
        }
        Problem::ReadOnly { call } => {
            let c = w.call(call);
            format!(
                "{c} writes to the segment, and this handle was opened read-only ({}): open the \
                 segment without {} to {c}",
                w.setting(Arg::ReadOnly, "true"),
                w.arg(Arg::ReadOnly)
            )
        }
        Problem::NeedsReadOnly { call } => {
            let ro = w.setting(Arg::ReadOnly, "true");
            format!(
                "{} reads the lease cells without taking them, which only a {ro} handle does: \
                 open the segment with {ro}",
                w.call(call)
            )
        }
        Problem::Excludes { other } => format!(
            "{a} and {} exclude each other: a read-only open never replaces a file",
            w.arg(*other)
        ),
        Problem::NotMember {
            gid,
            group,
            process,
            error,
        } => format!(
            "{}: cannot give the new segment file {group}: {error}. This process ({process}) \
             must be a member of that group; pass a group it belongs to",
            w.setting(Arg::Group, &gid.to_string())
        ),
        Problem::Layout(l) => match l {
            Layout::TooLarge { size } => format!("{a} {size} is too large"),
            Layout::TooSmallForShards { size, shards } => format!(
                "{a} {size} is too small for {shards} shards; give more bytes or fewer shards"
            ),
            Layout::NoRoom { size } => format!(
                "{a} {size} leaves no room for data; give more bytes or a larger {}",
                w.arg(Arg::AvgItemSize)
            ),
            Layout::ShardsTooLarge { shards, stride } => {
                format!("{shards} shards of {stride} bytes are too large; ask for more shards")
            }
        },
    }
}
