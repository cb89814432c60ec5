//! The one error type of the Cache's behaviour. Every front end maps each
//! variant to its language's exception (Python: `TypeError`, `ValueError`,
//! `OverflowError`, `KeyError`, `LoadTimeout`, the segment's errors), words
//! a refused argument in the names its users write (the argument and the
//! problem are data here) and puts the public method's name in front of the
//! message, so one bad input says the same whichever front end refused it.

use std::fmt;

use ziggurat_core::{Arg, Problem, RustWords};

/// What an `incr` whose result leaves the signed 64-bit range says, after
/// the counter's key: one wording for every front end and for their stores
/// that run without a segment ([`incr_overflow`]).
pub const OVERFLOW: &str = "would leave the signed 64-bit range";

/// The message of an `incr` of the counter `key` (as the front end writes
/// the key) whose result leaves the signed 64-bit range.
///
/// ```
/// assert_eq!(
///     ziggurat_cache::incr_overflow("'hits'"),
///     "the counter 'hits' would leave the signed 64-bit range"
/// );
/// ```
#[cold]
pub fn incr_overflow(key: &str) -> String {
    format!("the counter {key} {OVERFLOW}")
}

impl Error {
    /// A refused argument.
    #[cold]
    pub fn invalid(arg: Arg, problem: Problem) -> Error {
        Error::Invalid {
            arg,
            problem: Box::new(problem),
        }
    }
}

/// Why a call of the Cache did not do what was asked.
#[derive(Debug)]
pub enum Error {
    /// An argument out of its range (key length, TTL, tags, size); nothing was
    /// changed. Which argument and what is wrong with it, as data each front
    /// end words in its own names ([`describe`](ziggurat_core::describe)).
    Invalid {
        /// The argument.
        arg: Arg,
        /// What is wrong with it (boxed, as the segment's error boxes it).
        problem: Box<Problem>,
    },
    /// `incr` of a key with no fresh entry and no default.
    Missing,
    /// `incr` of a key whose value is not an integer counter.
    NotInteger,
    /// `incr` whose result leaves the signed 64-bit range.
    Overflow,
    /// Another caller's load of the key did not finish within `loader_timeout`
    /// seconds (the front end names the key in its message).
    LoadTimeout {
        /// The cache's `loader_timeout`, in seconds.
        seconds: f64,
    },
    /// The call needs a shared segment and the cache runs without one.
    NoSegment,
    /// The segment refused (lock timeout, damaged or closed file).
    Segment(ziggurat_core::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid { arg, problem } => {
                f.write_str(&ziggurat_core::describe(*arg, problem, &RustWords))
            }
            Error::Missing => f.write_str("the key holds no value"),
            Error::NotInteger => f.write_str("the key's value is not an integer"),
            Error::Overflow => write!(f, "the counter {OVERFLOW}"),
            Error::LoadTimeout { seconds } => write!(
                f,
                "another caller's load did not finish within loader_timeout ({seconds} s)"
            ),
            Error::NoSegment => f.write_str("the cache has no shared segment"),
            Error::Segment(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {}

impl From<ziggurat_core::Error> for Error {
    fn from(e: ziggurat_core::Error) -> Self {
        match e {
            ziggurat_core::Error::Invalid { arg, problem } => Error::Invalid { arg, problem },
            e => Error::Segment(e),
        }
    }
}
