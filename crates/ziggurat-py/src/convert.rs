//! Conversions between Python arguments and the core's types, and error mapping.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};
use ziggurat_core::{describe, Arg, Problem, RustWords, Words};

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
create_exception!(
    _native,
    LoadTimeout,
    ZigguratError,
    "Another caller's loader for the key did not finish within loader_timeout."
);
create_exception!(
    _native,
    MutationError,
    ZigguratError,
    "A cached object was changed by its caller (raised in debug mode)."
);

/// How Python users write the arguments and values the shared rules name.
pub(crate) struct PyWords;

impl Words for PyWords {
    fn arg(&self, arg: Arg) -> &'static str {
        match arg {
            Arg::Namespace => "name",
            a => RustWords.arg(a),
        }
    }

    fn text(&self, s: &str) -> String {
        format!("'{s}'")
    }

    fn setting(&self, arg: Arg, value: &str) -> String {
        let v = match value {
            "true" => "True",
            "false" => "False",
            v => v,
        };
        format!("{}={v}", self.arg(arg))
    }

    fn infinity(&self) -> &'static str {
        "math.inf"
    }

    fn fraction(&self, v: f64) -> String {
        // Python's repr of a float: 1.0, 0.5, inf, nan.
        match v {
            v if v.is_nan() => "nan".into(),
            v if v.is_infinite() => if v > 0.0 { "inf" } else { "-inf" }.into(),
            v => format!("{v:?}"),
        }
    }

    fn call(&self, call: &str) -> String {
        match call {
            "leases" => "Segment.leases()".into(),
            c => c.into(),
        }
    }

    fn remove(&self, handle: bool) -> String {
        if handle {
            "`unlink()`, or `ziggurat rm`".into()
        } else {
            "`ziggurat rm`".into()
        }
    }
}

/// A refused argument as the `ValueError` Python callers expect.
#[cold]
pub(crate) fn invalid(arg: Arg, problem: &Problem) -> PyErr {
    PyValueError::new_err(describe(arg, problem, &PyWords))
}

/// The argument Python users call `name`, for the rules that take its name.
pub(crate) fn arg_named(name: &str) -> PyResult<Arg> {
    Arg::ALL
        .into_iter()
        .find(|a| PyWords.arg(*a) == name)
        .ok_or_else(|| PyValueError::new_err(format!("no argument is called {name:?}")))
}

/// Maps a core error to the Python exception a caller expects. A
/// `SegmentError` carries the core's stable cause name in its `cause` attribute.
pub fn err(e: ziggurat_core::Error) -> PyErr {
    use ziggurat_core::Error as E;
    match e {
        E::Invalid { arg, problem } => invalid(arg, &problem),
        E::LockTimeout => LockTimeout::new_err(e.message(&PyWords)),
        other => Python::attach(|py| {
            let pe = SegmentError::new_err(other.message(&PyWords));
            // Setting an attribute on a fresh exception instance cannot fail
            // short of memory exhaustion; the message still says everything then.
            let _ = pe.value(py).setattr("cause", other.cause());
            pe
        }),
    }
}

/// Maps an error of the Cache's behaviour to the exception Python callers
/// expect (the errors that name the key: `fetch_err`, `store::incr_err`).
pub fn cache_err(e: ziggurat_cache::Error) -> PyErr {
    use ziggurat_cache::Error as E;
    match e {
        E::Invalid { arg, problem } => invalid(arg, &problem),
        E::Segment(e) => err(e),
        E::NoSegment => ZigguratError::new_err(e.to_string()),
        E::LoadTimeout { .. } => LoadTimeout::new_err(e.to_string()),
        E::Missing => pyo3::exceptions::PyKeyError::new_err(e.to_string()),
        E::NotInteger => PyTypeError::new_err(e.to_string()),
        E::Overflow => pyo3::exceptions::PyOverflowError::new_err(e.to_string()),
    }
}

/// `cache_err` for a miss of `key`: a load timeout names the key.
pub fn fetch_err(key: &Bound<'_, PyAny>, e: ziggurat_cache::Error) -> PyErr {
    match e {
        ziggurat_cache::Error::LoadTimeout { seconds } => {
            let k = key.repr().map(|r| r.to_string()).unwrap_or_default();
            LoadTimeout::new_err(format!(
                "another caller's load of {k} did not finish within loader_timeout ({seconds} s)"
            ))
        }
        e => cache_err(e),
    }
}

/// A str argument with no UTF-8 form (CPython's `UnicodeEncodeError` from
/// `to_str`: a lone surrogate) as a `ValueError` whose message `message`
/// writes from the character's index. The original error is its cause.
#[cold]
pub(crate) fn not_utf8(py: Python<'_>, e: PyErr, message: fn(usize) -> String) -> PyErr {
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
        out.push(s.as_bytes().to_vec());
    }
    ziggurat_cache::check_tags(&out).map_err(cache_err)?;
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
        return ziggurat_cache::size_bytes(n.extract()?).map_err(cache_err);
    }
    let Some(s) = size.cast::<PyString>().ok() else {
        return Err(PyTypeError::new_err(
            "size must be an int of bytes or a string like '64MiB'",
        ));
    };
    ziggurat_cache::size_text(s.to_str()?).map_err(cache_err)
}

/// Named figures as a dict.
pub(crate) fn fields_dict<'py>(
    py: Python<'py>,
    fields: &[(&str, u64)],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in fields {
        d.set_item(k, v)?;
    }
    Ok(d)
}
