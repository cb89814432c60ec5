//! Errors of the engine. Each message says what to do about it.

use std::fmt;
use std::io;

use crate::invalid::{describe, fill, Arg, Problem, RustWords, Words};

/// Result alias of the engine.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a segment file could not be created or attached. Callers branch on
/// this (or on its [`name`](OpenCause::name)), never on the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpenCause {
    /// The directory does not exist (or a component of it is not a directory).
    MissingDirectory,
    /// The directory or the file cannot be written by this process.
    NotWritable,
    /// The file belongs to another user (and not to a group this segment shares).
    OtherOwner,
    /// The file system has no room for the segment.
    NoSpace,
    /// The file is damaged or was never completed.
    Damaged,
    /// The file is not a segment this build can use: foreign content, another
    /// layout version, not a regular file, or loose permissions.
    Incompatible,
    /// A read-only open found no segment file (it never creates one).
    MissingSegment,
    /// A read-only open may not read the file.
    NotReadable,
    /// A `recreate` open found the file locked by another process for longer
    /// than the lock timeout, and left it as it was.
    Locked,
    /// An open with huge pages required found none backing the mapping.
    NoHugePages,
    /// The system is not one the segment runs on (it needs Linux).
    Unsupported,
}

impl OpenCause {
    /// Stable short name: "missing_directory", "not_writable", "other_owner",
    /// "no_space", "damaged", "incompatible", and for read-only opens
    /// "missing_segment" or "not_readable", "locked" when a `recreate`
    /// could not lock the file to replace it, and "no_huge_pages" when huge
    /// pages were required and do not back the mapping.
    pub fn name(self) -> &'static str {
        match self {
            OpenCause::MissingDirectory => "missing_directory",
            OpenCause::NotWritable => "not_writable",
            OpenCause::OtherOwner => "other_owner",
            OpenCause::NoSpace => "no_space",
            OpenCause::Damaged => "damaged",
            OpenCause::Incompatible => "incompatible",
            OpenCause::MissingSegment => "missing_segment",
            OpenCause::NotReadable => "not_readable",
            OpenCause::Locked => "locked",
            OpenCause::NoHugePages => "no_huge_pages",
            OpenCause::Unsupported => "unsupported_platform",
        }
    }
}

/// What can go wrong with a segment.
#[derive(Debug)]
pub enum Error {
    /// Bad argument from the caller; nothing was changed. Which argument and
    /// what is wrong with it, as data each front end words ([`describe`](crate::describe)).
    Invalid {
        /// The argument.
        arg: Arg,
        /// What is wrong with it (boxed: a refusal's data never makes the
        /// results of the calls that succeed any larger).
        problem: Box<Problem>,
    },
    /// The segment file could not be created or attached: why, and a message
    /// that names the file and the remedy.
    Open {
        /// Why, as a stable value.
        cause: OpenCause,
        /// What happened and what to do, with marks where a setting or a
        /// command is named: [`Error::message`] (or [`fill`](crate::fill))
        /// says them in a front end's words.
        message: String,
    },
    /// A shard lock was not obtained within the lock timeout; nothing was changed.
    LockTimeout,
    /// The segment was closed.
    Closed,
    /// An operating-system error, with what was being done.
    Io(String, io::Error),
}

impl Error {
    /// Stable short name of the error: the [`OpenCause`] name for
    /// [`Error::Open`], else "invalid", "lock_timeout", "closed" or "io".
    pub fn cause(&self) -> &'static str {
        match self {
            Error::Invalid { .. } => "invalid",
            Error::Open { cause, .. } => cause.name(),
            Error::LockTimeout => "lock_timeout",
            Error::Closed => "closed",
            Error::Io(..) => "io",
        }
    }

    /// A refused argument.
    #[cold]
    pub fn invalid(arg: Arg, problem: Problem) -> Error {
        Error::Invalid {
            arg,
            problem: Box::new(problem),
        }
    }

    pub(crate) fn open(cause: OpenCause, message: impl Into<String>) -> Error {
        Error::Open {
            cause,
            message: message.into(),
        }
    }
}

impl Error {
    /// The message in `words`: the names a front end's users write.
    #[cold]
    pub fn message(&self, words: &dyn Words) -> String {
        match self {
            Error::Invalid { arg, problem } => describe(*arg, problem, words),
            Error::Open { message, .. } => fill(message, words),
            Error::LockTimeout => format!(
                "a shard lock was not obtained within {}; the write was not made \
                 (another process holds the lock for too long: stopped, or being debugged)",
                words.arg(Arg::LockTimeout)
            ),
            e => e.to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid { .. } | Error::Open { .. } | Error::LockTimeout => {
                f.write_str(&self.message(&RustWords))
            }
            Error::Closed => f.write_str("the segment is closed"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(_, e) => Some(e),
            _ => None,
        }
    }
}
