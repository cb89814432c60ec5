//! Argument checks shared by every method of the Cache, so the same bad input
//! gets the same exception and message wherever it is passed.

use crate::convert::{cache_err, not_utf8, ttl_arg};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use ziggurat_cache::Arg;

/// The bytes of a str (UTF-8) or bytes key.
#[inline]
pub(crate) fn key_bytes<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    // Both borrows are tied to `key`: the cast keeps its lifetime, and `to_str`
    // (the UTF-8 form CPython caches inside the str) and `as_bytes` borrow from
    // the object they are called on.
    if let Ok(s) = key.cast::<PyString>() {
        match s.to_str() {
            Ok(t) => Ok(t.as_bytes()),
            Err(e) => Err(not_utf8(key.py(), e, ziggurat_cache::not_utf8)),
        }
    } else if let Ok(b) = key.cast::<PyBytes>() {
        Ok(b.as_bytes())
    } else {
        Err(PyTypeError::new_err(format!(
            "key must be str or bytes, not {}",
            key.get_type().name()?
        )))
    }
}

/// Refuses keys no tier could store, by the Cache's one rule
/// (`ziggurat_cache::check_key`; checked on L1 misses, so the hit path stays
/// short: a key L1 holds passed it when it was stored).
pub(crate) fn check_key<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    let kb = key_bytes(key)?;
    ziggurat_cache::check_key(kb).map_err(cache_err)?;
    Ok(kb)
}

/// The hash of a key argument; a key of the wrong type is reported as such
/// (not as "unhashable").
#[inline(always)]
pub(crate) fn key_hash(key: &Bound<'_, PyAny>) -> PyResult<u64> {
    match key.hash() {
        Ok(h) => Ok(h as u64),
        Err(e) => Err(check_key(key).err().unwrap_or(e)),
    }
}

/// Puts the public method's name in front of a bad-input error, so every
/// method reports the same input the same way ("Cache.set(): ttl must be
/// ..."). Other errors pass unchanged, subclasses too: the error is rebuilt
/// from its type and one message, which only the exact types take
/// (`UnicodeEncodeError(msg)` or `json.JSONDecodeError(msg)` would raise a
/// `TypeError` about its own arguments instead).
#[inline(always)]
pub(crate) fn named<T>(py: Python<'_>, method: &str, r: PyResult<T>) -> PyResult<T> {
    r.map_err(|e| {
        let t = e.get_type(py);
        let bad_input = t.is(py.get_type::<PyTypeError>())
            || t.is(py.get_type::<PyValueError>())
            || t.is(py.get_type::<PyOverflowError>());
        if !bad_input {
            return e;
        }
        let msg = e.value(py).str().map(|m| m.to_string()).unwrap_or_default();
        if msg.starts_with("Cache.") {
            return e;
        }
        let out = PyErr::from_type(t, format!("{method}(): {msg}"));
        out.set_cause(py, e.cause(py));
        out
    })
}

/// A loader's result, unless it is an awaitable: `fetch` cannot await it, and
/// caching the coroutine object would be wrong. The coroutine is closed so
/// Python does not warn that it was never awaited.
pub(crate) fn refuse_awaitable(v: Bound<'_, PyAny>) -> PyResult<Bound<'_, PyAny>> {
    // What loaders return most is never awaitable; asking the others with
    // `hasattr` builds an AttributeError when the answer is no, which would cost
    // more than the rest of a miss if done for every value.
    let plain = v.is_none()
        || v.is_exact_instance_of::<PyDict>()
        || v.is_exact_instance_of::<PyList>()
        || v.is_exact_instance_of::<PyString>()
        || v.is_exact_instance_of::<PyInt>()
        || v.is_exact_instance_of::<PyBytes>()
        || v.is_exact_instance_of::<PyTuple>()
        || v.is_exact_instance_of::<PyFloat>()
        || v.is_exact_instance_of::<PyBool>();
    let awaitable = !plain && v.hasattr(pyo3::intern!(v.py(), "__await__"))?;
    if awaitable {
        if v.hasattr(pyo3::intern!(v.py(), "close"))? {
            let _ = v.call_method0(pyo3::intern!(v.py(), "close"));
        }
        return Err(PyTypeError::new_err(
            "loader returned an awaitable; use afetch() for async loaders",
        ));
    }
    Ok(v)
}

/// Checks the optional TTL arguments of a call (None means the cache's).
pub(crate) fn check_ttls(args: [(Option<&Bound<'_, PyAny>>, Arg); 3]) -> PyResult<()> {
    for (a, name) in args {
        if let Some(v) = ttl_arg(a)? {
            positive_ttl(v, name)?;
        }
    }
    Ok(())
}

/// A TTL argument checked by the shared rule; `what` names the argument.
pub(crate) fn positive_ttl(ttl: f64, what: Arg) -> PyResult<f64> {
    ziggurat_cache::check_ttl(ttl, what).map_err(cache_err)
}
