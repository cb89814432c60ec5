//! Python values to and from the shapes the ziggurat-http rules read: header lists as
//! `[(bytes, bytes)]` read in place, directives as `dict[str, str | None]`, name lists, and
//! the tuples the answers go back as. Every `http_*` function converts through these, so a
//! bad argument gets the same message whichever function it was given to.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyList, PyTuple};
use ziggurat_http::Directives;

pub(super) type Pairs = Vec<(PyBackedBytes, PyBackedBytes)>;
pub(super) type Line<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);
/// Bytes made here, handed to Python as `bytes`.
pub(super) type Bytes = Cow<'static, [u8]>;

/// A header list's lines, read in place (bytes are not copied).
pub(super) fn pairs(headers: &Bound<'_, PyAny>, func: &str) -> PyResult<Pairs> {
    let bad = || {
        PyTypeError::new_err(format!(
            "{func}(): headers must be a sequence of (name, value) pairs of bytes; \
             convert the framework's header list first"
        ))
    };
    let mut out = Vec::with_capacity(headers.len().unwrap_or(0));
    for line in headers.try_iter().map_err(|_| bad())? {
        let line = line?;
        // ASGI lets a line be any pair: a tuple mostly, a list in some servers and apps.
        let pair = match (line.cast::<PyTuple>(), line.cast::<PyList>()) {
            (Ok(t), _) if t.len() == 2 => (t.get_item(0)?, t.get_item(1)?),
            (_, Ok(l)) if l.len() == 2 => (l.get_item(0)?, l.get_item(1)?),
            _ => return Err(bad()),
        };
        out.push((one(pair.0).ok_or_else(bad)?, one(pair.1).ok_or_else(bad)?));
    }
    Ok(out)
}

/// A header name or value: bytes only (the rules read them in place).
pub(super) fn one(o: Bound<'_, PyAny>) -> Option<PyBackedBytes> {
    o.cast_into::<PyBytes>().ok().map(PyBackedBytes::from)
}

pub(super) fn slices(p: &Pairs) -> Vec<(&[u8], &[u8])> {
    p.iter().map(|(k, v)| (&k[..], &v[..])).collect()
}

/// Field values (an iterable of bytes), read in place.
pub(super) fn bytes_items(
    v: &Bound<'_, PyAny>,
    func: &str,
    what: &str,
) -> PyResult<Vec<PyBackedBytes>> {
    let bad = || PyTypeError::new_err(format!("{func}(): {what} must be an iterable of bytes"));
    let mut out = Vec::new();
    for item in v.try_iter().map_err(|_| bad())? {
        out.push(item?.extract::<PyBackedBytes>().map_err(|_| bad())?);
    }
    Ok(out)
}

pub(super) fn to_dict<'py>(py: Python<'py>, cc: &Directives) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in cc.iter() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

pub(super) fn from_dict(cc: &Bound<'_, PyDict>, func: &str) -> PyResult<Directives> {
    let bad = || {
        PyTypeError::new_err(format!(
            "{func}(): cc must map directive names (str) to arguments (str or None), \
             as parse_cache_control gives them"
        ))
    };
    cc.iter()
        .map(|(k, v)| {
            let k = k.extract::<String>().map_err(|_| bad())?;
            if v.is_none() {
                return Ok((k, None));
            }
            Ok((k, Some(v.extract::<String>().map_err(|_| bad())?)))
        })
        .collect()
}

/// A status code; an int outside 0..=65535 is no status any rule names.
pub(super) fn status(s: &Bound<'_, PyAny>, func: &str) -> PyResult<u16> {
    if let Ok(n) = s.extract::<u16>() {
        return Ok(n);
    }
    if s.is_instance_of::<PyInt>() {
        return Ok(0);
    }
    Err(PyTypeError::new_err(format!(
        "{func}(): status must be an int, such as 200"
    )))
}

/// An iterable of str (directive or field names).
pub(super) fn names_arg(names: &Bound<'_, PyAny>, func: &str, what: &str) -> PyResult<Vec<String>> {
    let bad = || PyTypeError::new_err(format!("{func}(): {what} must be an iterable of str"));
    let mut out = Vec::new();
    for f in names.try_iter().map_err(|_| bad())? {
        out.push(f?.extract::<String>().map_err(|_| bad())?);
    }
    Ok(out)
}

pub(super) fn lines<'py>(py: Python<'py>, h: &[(&[u8], &[u8])]) -> PyResult<Bound<'py, PyTuple>> {
    let items = h
        .iter()
        .map(|(k, v)| PyTuple::new(py, [PyBytes::new(py, k), PyBytes::new(py, v)]))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

pub(super) fn floats<'py>(py: Python<'py>, nums: &[f64]) -> Vec<Bound<'py, PyAny>> {
    nums.iter()
        .map(|n| PyFloat::new(py, *n).into_any())
        .collect()
}

pub(super) fn opt_bytes<'py>(py: Python<'py>, v: Option<&[u8]>) -> Bound<'py, PyAny> {
    v.map_or_else(
        || py.None().into_bound(py),
        |v| PyBytes::new(py, v).into_any(),
    )
}
