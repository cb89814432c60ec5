//! The Cache's errors as napi errors. The JavaScript package turns each
//! status into its exception class (see node/lib/errors.cjs) and puts the
//! public method's name in front of the message.

use napi::{Error as NapiError, Status};
use ziggurat_cache::Error;

/// `e` as the error JavaScript receives: `InvalidArg` for an argument out of
/// range (RangeError), `ObjectExpected` for a value of the wrong kind
/// (TypeError), `NumberExpected` for an overflow (RangeError), `Cancelled`
/// for a load that did not finish in time (LoadTimeoutError), else a plain
/// failure of the cache (ZigguratError).
pub fn to_napi(e: Error) -> NapiError {
    let status = match &e {
        Error::Value(_) => Status::InvalidArg,
        Error::NotInteger => Status::ObjectExpected,
        Error::Overflow => Status::NumberExpected,
        Error::LoadTimeout { .. } => Status::Cancelled,
        _ => Status::GenericFailure,
    };
    NapiError::new(status, e.to_string())
}

/// An argument out of range, with `message` naming it.
pub fn invalid(message: impl Into<String>) -> NapiError {
    NapiError::new(Status::InvalidArg, message.into())
}

/// A call on a closed cache.
pub fn closed(name: &str) -> NapiError {
    NapiError::new(
        Status::Closing,
        format!("cache {name:?} is closed: open a new Cache to use it again"),
    )
}
