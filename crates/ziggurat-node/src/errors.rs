//! The Cache's errors as napi errors, worded as this package's users write
//! things (`negTtl`, `Infinity`, `readOnly: true`). The JavaScript package
//! gives each its exception class by its `code` (node/lib/errors.cjs) and
//! puts the public method's name in front of the message.

use napi::{Error as NapiError, Status};
use ziggurat_cache::{describe, Arg, Error, Problem, RustWords, Words};

/// The exception class JavaScript raises for an error of the addon. napi
/// carries it as the error's `code`: a status of napi's own (the only codes
/// an addon's error can have), one per class, which errors.cjs maps back.
#[derive(Clone, Copy)]
enum Class {
    /// A value out of range: `RangeError` (code "InvalidArg").
    Range,
    /// A value of the wrong kind: `TypeError` (code "ObjectExpected").
    Type,
    /// Another caller's load did not finish in time: `LoadTimeoutError` (code "Cancelled").
    LoadTimeout,
    /// A failure of the cache itself: `ZigguratError` (code "GenericFailure").
    Cache,
}

impl Class {
    fn status(self) -> Status {
        match self {
            Class::Range => Status::InvalidArg,
            Class::Type => Status::ObjectExpected,
            Class::LoadTimeout => Status::Cancelled,
            Class::Cache => Status::GenericFailure,
        }
    }
}

/// How this package's users write the arguments and values the shared
/// rules name.
pub struct NodeWords;

impl Words for NodeWords {
    fn arg(&self, arg: Arg) -> &'static str {
        match arg {
            Arg::NegTtl => "negTtl",
            Arg::StaleTtl => "staleTtl",
            Arg::DegradedTtl => "degradedTtl",
            Arg::LoaderTimeout => "loaderTimeout",
            Arg::RedisTimeout => "redisTimeout",
            Arg::RefreshAhead => "refreshAhead",
            Arg::NegSize => "negSize",
            Arg::AvgItemSize => "avgItemSize",
            Arg::LockTimeout => "lockTimeout",
            Arg::HugePages => "hugePages",
            Arg::ReadOnly => "readOnly",
            Arg::Namespace => "prefix",
            a => RustWords.arg(a),
        }
    }

    fn text(&self, s: &str) -> String {
        format!("'{s}'")
    }

    fn setting(&self, arg: Arg, value: &str) -> String {
        format!("{}: {value}", self.arg(arg))
    }

    fn infinity(&self) -> &'static str {
        "Infinity"
    }

    fn number(&self, v: f64) -> String {
        js_number(v)
    }

    fn remove(&self, handle: bool) -> String {
        if handle {
            "`cache.unlink()`".into()
        } else {
            "`rm` of the file".into()
        }
    }
}

/// `v` as JavaScript's `String(v)` writes it.
pub fn js_number(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = v.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        // Exponent form, with the sign JavaScript always writes.
        let e = format!("{v:e}");
        return match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
            _ => e,
        };
    }
    v.to_string()
}

/// The argument this package's users call `name`.
pub fn arg_named(name: &str) -> Result<Arg, NapiError> {
    Arg::ALL
        .into_iter()
        .find(|a| NodeWords.arg(*a) == name)
        .ok_or_else(|| invalid(format!("no argument is called {name:?}")))
}

/// A refused argument, worded for this package.
#[cold]
pub fn refused(arg: Arg, problem: &Problem) -> NapiError {
    NapiError::new(Class::Range.status(), describe(arg, problem, &NodeWords))
}

/// `e` as the error JavaScript receives, worded for this package.
#[cold]
pub fn to_napi(e: Error) -> NapiError {
    match &e {
        Error::Invalid { arg, problem } => refused(*arg, problem),
        Error::NotInteger => NapiError::new(Class::Type.status(), e.to_string()),
        Error::Overflow => NapiError::new(Class::Range.status(), e.to_string()),
        Error::LoadTimeout { seconds } => NapiError::new(
            Class::LoadTimeout.status(),
            format!(
                "another caller's load did not finish within loaderTimeout ({} s)",
                js_number(*seconds)
            ),
        ),
        Error::Segment(ziggurat_core::Error::Invalid { arg, problem }) => refused(*arg, problem),
        Error::Segment(s) => NapiError::new(Class::Cache.status(), s.message(&NodeWords)),
        _ => NapiError::new(Class::Cache.status(), e.to_string()),
    }
}

/// A core error as the error JavaScript receives.
#[cold]
pub fn core_to_napi(e: ziggurat_core::Error) -> NapiError {
    to_napi(e.into())
}

/// `e` for a wait on `key`: a load timeout names the key.
#[cold]
pub fn wait_err(key: &[u8], e: Error) -> NapiError {
    match e {
        Error::LoadTimeout { seconds } if !key.is_empty() => NapiError::new(
            Class::LoadTimeout.status(),
            format!(
                "another caller's load of {} did not finish within loaderTimeout ({} s)",
                key_text(key),
                js_number(seconds)
            ),
        ),
        e => to_napi(e),
    }
}

/// A key as this package's users see it: a string quoted, or a Buffer's bytes.
fn key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => format!("{s:?}"),
        Err(_) => {
            let bytes: Vec<String> = key.iter().take(50).map(|b| format!("{b:02x}")).collect();
            let more = if key.len() > 50 { " ..." } else { "" };
            format!("<Buffer {}{more}>", bytes.join(" "))
        }
    }
}

/// An argument out of range, with `message` naming it.
pub fn invalid(message: impl Into<String>) -> NapiError {
    NapiError::new(Class::Range.status(), message.into())
}

/// A call on a closed cache.
pub fn closed(name: &str) -> NapiError {
    NapiError::new(
        Status::Closing,
        format!("cache {name:?} is closed: open a new Cache to use it again"),
    )
}

/// `e` for an `incr` of `key`: an overflow names the counter.
#[cold]
pub fn incr_err(key: &[u8], e: Error) -> NapiError {
    match e {
        Error::Overflow => NapiError::new(
            Class::Range.status(),
            ziggurat_cache::incr_overflow(&key_text(key)),
        ),
        e => to_napi(e),
    }
}

/// The refusal of a cache joined to a cluster tier.
pub fn clustered(name: &str) -> napi::Error {
    napi::Error::new(
        napi::Status::GenericFailure,
        format!(
            "cache {name:?} is joined to a cluster tier (Redis) by another process: a write \
             from a cache opened without `redis` would reach this host only and leave the \
             other hosts stale. Open it with the same `redis` and `secret` as the others"
        ),
    )
}
