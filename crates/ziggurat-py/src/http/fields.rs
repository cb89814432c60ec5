//! The header rules that need no options: fields by name, Cache-Control, Vary, the
//! request's host, tags, Connection and Cache-Status, each the crate's rule on Python
//! values.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PySet, PyString, PyTuple};
use ziggurat_http::Param;

use super::convert::{bytes_items, pairs, slices, to_dict};

/// The first value of header `name`, or None.
#[pyfunction]
pub(super) fn http_field<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    name: &[u8],
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let p = pairs(headers, "field")?;
    Ok(ziggurat_http::field(&slices(&p), name).map(|v| PyBytes::new(py, v)))
}

/// Every value of header `name`, in order.
#[pyfunction]
pub(super) fn http_fields<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    name: &[u8],
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let p = pairs(headers, "fields")?;
    let v = ziggurat_http::fields(&slices(&p), name);
    Ok(v.iter().map(|v| PyBytes::new(py, v)).collect())
}

/// Cache-Control directives of a field's lines.
#[pyfunction]
pub(super) fn http_parse_cache_control<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let v = bytes_items(values, "parse_cache_control", "values")?;
    to_dict(
        py,
        &ziggurat_http::parse_cache_control(v.iter().map(|b| &b[..])),
    )
}

/// The digest of the request's values of `names`, and the values.
#[pyfunction]
pub(super) fn http_vary_digest<'py>(
    py: Python<'py>,
    names: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyTuple>)> {
    const F: &str = "vary_digest";
    let mut encoded: Vec<Vec<u8>> = Vec::new();
    for name in names.try_iter()? {
        let name = name?;
        let text = name
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err(format!("{F}(): names must be str")))?
            .to_cow()?;
        let latin1: Option<Vec<u8>> = text
            .chars()
            .map(|c| u8::try_from(u32::from(c)).ok())
            .collect();
        encoded.push(latin1.ok_or_else(|| {
            PyValueError::new_err(format!(
                "{F}(): header name {text:?} is not Latin-1; name request fields in Latin-1"
            ))
        })?);
    }
    let p = pairs(headers, F)?;
    let names: Vec<&[u8]> = encoded.iter().map(|n| &n[..]).collect();
    let values = ziggurat_http::vary_values(&names, &slices(&p));
    let digest = ziggurat_http::vary_digest(&values);
    let values = values
        .iter()
        .map(|v| v.as_ref().map(|v| PyBytes::new(py, v)));
    Ok((
        PyBytes::new(py, digest.as_bytes()),
        PyTuple::new(py, values)?,
    ))
}

/// A request's host, lower-case, checked for syntax; None when missing or malformed.
#[pyfunction]
pub(super) fn http_normalise_host(raw: Option<&[u8]>) -> Option<String> {
    raw.and_then(ziggurat_http::normalise_host)
}

/// Tags named by the tag header's lines.
#[pyfunction]
pub(super) fn http_split_tags(values: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let v = bytes_items(values, "split_tags", "values")?;
    Ok(ziggurat_http::split_tags(v.iter().map(|b| &b[..])))
}

/// The lower-case names a message's Connection field lists.
#[pyfunction]
pub(super) fn http_connection_listed<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PySet>> {
    let p = pairs(headers, "connection_listed")?;
    let names = ziggurat_http::connection_listed(&slices(&p));
    PySet::new(py, names.iter().map(|n| PyBytes::new(py, n)))
}

/// A Cache-Status member for this cache; `params` are flags (bool) or values (str, int).
#[pyfunction]
#[pyo3(signature = (kind, **params))]
pub(super) fn http_cache_status<'py>(
    py: Python<'py>,
    kind: &str,
    params: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut texts: Vec<(String, Option<String>, bool)> = Vec::new();
    if let Some(params) = params {
        for (k, v) in params.iter() {
            let k = k.extract::<String>()?;
            if let Ok(flag) = v.cast::<PyBool>() {
                texts.push((k, None, flag.is_true()));
                continue;
            }
            texts.push((k, Some(v.str()?.to_str()?.to_owned()), false));
        }
    }
    let params: Vec<(&str, Param<'_>)> = texts
        .iter()
        .map(|(k, v, flag)| {
            let p = v.as_deref().map_or(Param::Flag(*flag), Param::Value);
            (k.as_str(), p)
        })
        .collect();
    let out = ziggurat_http::cache_status(kind, &params);
    if !out.is_ascii() {
        return Err(PyValueError::new_err(format!(
            "cache_status(): {out:?} is not ASCII; give keys and values in ASCII"
        )));
    }
    Ok(PyBytes::new(py, out.as_bytes()))
}

#[pyfunction]
pub(super) fn http_host_allowed(host: &str, allowed: Vec<String>) -> bool {
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    ziggurat_http::host_allowed(host, &allowed)
}

#[pyfunction]
pub(super) fn http_overrides_method(target: &[u8]) -> bool {
    ziggurat_http::overrides_method(target)
}
