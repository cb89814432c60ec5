//! The stored format and the keys: a stored response or variant record to and from its
//! value bytes, and the keys entries live under.

use std::borrow::Cow;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyFloat, PyFrozenSet, PyString, PyTuple};
use ziggurat_http::{Entry, Stored};

use super::convert::{floats, lines, opt_bytes, pairs, slices, Bytes};

/// A stored response's value bytes, decoded (they come from `Stored.value`).
pub(super) fn stored<'a>(value: &'a [u8], func: &str) -> PyResult<Stored<'a>> {
    match ziggurat_http::decode(value) {
        Ok(Entry::Response(s)) => Ok(s),
        Ok(Entry::Variants(_)) => Err(PyValueError::new_err(format!(
            "{func}(): value is a variant record, not a stored response; pass Stored.value"
        ))),
        Err(e) => Err(PyValueError::new_err(format!(
            "{func}(): value is not a stored response ({e}); pass Stored.value"
        ))),
    }
}

/// The stored response `value` as the fields of `store.Stored` (with `value` last), a
/// variant record as `(names, generation, until)`, or None for bytes of no entry.
#[pyfunction]
pub(super) fn http_decode<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Ok(raw) = value.cast::<PyBytes>() else {
        return Ok(None);
    };
    let s = match ziggurat_http::decode(raw.as_bytes()) {
        Err(_) => return Ok(None),
        Ok(Entry::Variants(v)) => {
            let until = PyFloat::new(py, v.until).into_any();
            let names = PyTuple::new(py, &v.names)?.into_any();
            return PyTuple::new(
                py,
                [names, PyString::new(py, v.generation).into_any(), until],
            )
            .map(Some);
        }
        Ok(Entry::Response(s)) => s,
    };
    let values = s.vary_values.iter().map(|v| opt_bytes(py, *v));
    let mut fields = vec![
        s.status.into_pyobject(py)?.into_any(),
        lines(py, &s.headers)?.into_any(),
    ];
    fields.push(PyBytes::new(py, s.body).into_any());
    fields.extend(floats(py, &s.times()));
    fields.extend([
        PyFrozenSet::new(py, &s.flags)?.into_any(),
        opt_bytes(py, s.etag),
        opt_bytes(py, s.last_modified),
        PyTuple::new(py, &s.vary)?.into_any(),
        PyTuple::new(py, values)?.into_any(),
        PyTuple::new(py, &s.tags)?.into_any(),
        value.clone(),
    ]);
    PyTuple::new(py, fields).map(Some)
}

/// The value bytes of a stored response: the fields of `store.Stored`, its six times
/// (`request_time` to `sie`) as one tuple.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(super) fn http_encode<'py>(
    py: Python<'py>,
    status: u16,
    headers: &Bound<'py, PyAny>,
    body: &[u8],
    times: [f64; 6],
    flags: Vec<String>,
    etag: Option<&[u8]>,
    last_modified: Option<&[u8]>,
    vary: Vec<String>,
    vary_values: Vec<Option<PyBackedBytes>>,
    tags: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let p = pairs(headers, "encode")?;
    let mut st = Stored {
        status,
        headers: slices(&p),
        body,
        flags: flags.iter().map(String::as_str).collect(),
        etag,
        last_modified,
        vary: vary.iter().map(String::as_str).collect(),
        vary_values: vary_values.iter().map(|v| v.as_deref()).collect(),
        tags: tags.iter().map(String::as_str).collect(),
        ..Stored::default()
    };
    st.set_times(times);
    Ok(PyBytes::new(py, &Entry::Response(st).encode()))
}

/// The value bytes of a variant record.
#[pyfunction]
pub(super) fn http_encode_variants(names: Vec<String>, generation: &str, until: f64) -> Bytes {
    let names = names.iter().map(String::as_str).collect();
    let v = ziggurat_http::Variants {
        names,
        generation,
        until,
    };
    Cow::Owned(Entry::Variants(v).encode())
}

#[pyfunction]
pub(super) fn http_base_key(scheme: &str, host: &str, target: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::base_key(scheme, host, target))
}

#[pyfunction]
pub(super) fn http_variant_key(base: &[u8], generation: &str, digest: &str) -> Bytes {
    Cow::Owned(ziggurat_http::variant_key(base, generation, digest))
}

#[pyfunction]
pub(super) fn http_lock_key(key: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::lock_key(key))
}

#[pyfunction]
pub(super) fn http_purge_mark(base: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::purge_mark(base))
}

#[pyfunction]
pub(super) fn http_purge_keys(base: &[u8]) -> [Bytes; 2] {
    ziggurat_http::purge_keys(base).map(Cow::Owned)
}

#[pyfunction]
pub(super) fn http_url_key(url: &str) -> Option<Bytes> {
    ziggurat_http::url_key(url).map(Cow::Owned)
}

/// The keys an unsafe request's successful response invalidates.
#[pyfunction]
pub(super) fn http_invalidated_keys(
    scheme: &str,
    host: &str,
    target: &[u8],
    headers: &Bound<'_, PyAny>,
) -> PyResult<Vec<Bytes>> {
    let p = pairs(headers, "invalidated_keys")?;
    let keys = ziggurat_http::invalidated_keys(scheme, host, target, &slices(&p));
    Ok(keys.into_iter().map(Cow::Owned).collect())
}
