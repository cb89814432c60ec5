//! Conversions between Python arguments and the core's types, and error mapping.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString};

create_exception!(
    _native,
    ZigguratError,
    PyException,
    "Base class of ziggurat's errors."
);
create_exception!(
    _native,
    SegmentError,
    ZigguratError,
    "The segment file cannot be created, attached or used; the message says what to do. \
     Its `cause` attribute names why, stably: missing_directory, not_writable, other_owner, \
     no_space, damaged, incompatible, missing_segment, not_readable, locked (opening), closed or io."
);
create_exception!(
    _native,
    LockTimeout,
    ZigguratError,
    "A shard lock was not obtained within lock_timeout; the write was not made."
);

/// Maps a core error to the Python exception a caller expects. A
/// `SegmentError` carries the core's stable cause name in its `cause` attribute.
pub fn err(e: ziggurat_core::Error) -> PyErr {
    use ziggurat_core::Error as E;
    match e {
        E::Invalid(m) => PyValueError::new_err(m),
        E::LockTimeout => LockTimeout::new_err(e.to_string()),
        other => Python::attach(|py| {
            let pe = SegmentError::new_err(other.to_string());
            // Setting an attribute on a fresh exception instance cannot fail
            // short of memory exhaustion; the message still says everything then.
            let _ = pe.value(py).setattr("cause", other.cause());
            pe
        }),
    }
}

/// The bytes of a str (UTF-8) or bytes key.
#[inline]
pub fn key_bytes<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
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

/// A str argument with no UTF-8 form (CPython's `UnicodeEncodeError` from
/// `to_str`: a lone surrogate) as a `ValueError` whose message `message`
/// writes from the character's index. The original error is its cause.
#[cold]
fn not_utf8(py: Python<'_>, e: PyErr, message: fn(usize) -> String) -> PyErr {
    let start = e
        .value(py)
        .getattr(pyo3::intern!(py, "start"))
        .and_then(|s| s.extract::<usize>())
        .unwrap_or(0);
    let out = PyValueError::new_err(message(start));
    out.set_cause(py, Some(e));
    out
}

/// The bytes of a value (bytes only: the segment stores bytes).
pub fn value_bytes<'a>(v: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    match v.cast::<PyBytes>() {
        Ok(b) => Ok(b.as_bytes()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "value must be bytes, not {}",
            v.get_type().name()?
        ))),
    }
}

/// A TTL argument: None, or an int/float (not bool) of seconds.
pub fn ttl_arg(ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    let Some(t) = ttl else { return Ok(None) };
    if t.is_none() {
        return Ok(None);
    }
    if t.is_instance_of::<PyBool>()
        || !(t.is_instance_of::<PyInt>() || t.is_instance_of::<PyFloat>())
    {
        return Err(PyTypeError::new_err(format!(
            "ttl must be a number of seconds or None, not {}",
            t.get_type().name()?
        )));
    }
    // The value is checked by the caller's rule: a segment wants a finite TTL,
    // a cache also accepts math.inf for "never expires".
    Ok(Some(t.extract()?))
}

/// A tags argument: an iterable of non-empty str (a lone str is refused, as it
/// would silently become one tag per character).
pub fn tags_arg(tags: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Vec<u8>>> {
    let Some(tags) = tags else {
        return Ok(Vec::new());
    };
    if tags.is_none() {
        return Ok(Vec::new());
    }
    if tags.is_instance_of::<PyString>() || tags.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "tags must be an iterable of str, not a single str",
        ));
    }
    let mut out = Vec::new();
    for t in tags
        .try_iter()
        .map_err(|_| PyTypeError::new_err("tags must be an iterable of str"))?
    {
        let t = t?;
        let s = t.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "each tag must be a str, not {}",
                t.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let s = s.to_str().map_err(|e| {
            not_utf8(t.py(), e, |i| {
                format!(
                    "each tag must be valid UTF-8 (lone surrogate at index {i}); \
                     pass text without lone surrogates"
                )
            })
        })?;
        if s.is_empty() {
            return Err(PyValueError::new_err("a tag must not be empty"));
        }
        out.push(s.as_bytes().to_vec());
    }
    if out.len() > ziggurat_core::MAX_TAGS {
        return Err(PyValueError::new_err(format!(
            "at most {} tags per entry, got {}",
            ziggurat_core::MAX_TAGS,
            out.len()
        )));
    }
    Ok(out)
}

/// A size argument: int bytes, or a string such as "64MiB", "1.5GB", "4096".
pub fn size_arg(size: &Bound<'_, PyAny>) -> PyResult<u64> {
    if size.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(
            "size must be an int of bytes or a string like '64MiB'",
        ));
    }
    if let Ok(n) = size.cast::<PyInt>() {
        let n: i128 = n.extract()?;
        if n <= 0 || n > ziggurat_cache::MAX_SIZE as i128 {
            return Err(PyValueError::new_err(format!(
                "size must be a positive number of bytes, got {n}"
            )));
        }
        return Ok(n as u64);
    }
    let Ok(s) = size.cast::<PyString>() else {
        return Err(PyTypeError::new_err(
            "size must be an int of bytes or a string like '64MiB'",
        ));
    };
    ziggurat_cache::parse_size(s.to_str()?).ok_or_else(|| {
        PyValueError::new_err(format!(
            "cannot read size {:?}: use bytes (4096) or a number with a unit: KB, MB, GB, TB \
             (decimal) or KiB, MiB, GiB, TiB (binary), at most 1024TiB",
            s.to_str().unwrap_or("?")
        ))
    })
}
