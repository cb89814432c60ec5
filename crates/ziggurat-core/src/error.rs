//! Errors of the engine. Each message says what to do about it.

use std::fmt;
use std::io;

/// Result alias of the engine.
pub type Result<T> = std::result::Result<T, Error>;

/// What can go wrong with a segment.
#[derive(Debug)]
pub enum Error {
    /// Bad argument from the caller; nothing was changed.
    Invalid(String),
    /// The file exists but cannot be used as is (foreign, incompatible or damaged).
    Corrupt(String),
    /// The file belongs to someone else or has loose permissions.
    Permission(String),
    /// A shard lock was not obtained within the lock timeout; nothing was changed.
    LockTimeout,
    /// The segment was closed.
    Closed,
    /// An operating-system error, with what was being done.
    Io(String, io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(m) | Error::Corrupt(m) | Error::Permission(m) => f.write_str(m),
            Error::LockTimeout => f.write_str(
                "a shard lock was not obtained within lock_timeout; the write was not made \
                 (another process holds the lock for too long: stopped, or being debugged)",
            ),
            Error::Closed => f.write_str("the segment is closed"),
            Error::Io(what, e) => write!(f, "{what}: {e}"),
        }
    }
}

impl std::error::Error for Error {}
