//! The fill and lookup decisions: whether a stored response may answer, what a lookup
//! does, the reply, stale-if-error, and what a response's head does to the entry.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyTuple};
use ziggurat_http::{Entry, FillRequest, HeadStep, HeadUpdate, LookupStep, Meta};

use super::convert::{floats, from_dict, lines, opt_bytes, pairs, slices, status, Line};
use super::options::{with_request, HttpOptions, Req};
use super::stored::stored;

/// The fields of `storable.Meta`.
fn meta<'py>(py: Python<'py>, m: &Meta<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let values = m.vary_values.iter().map(|v| opt_bytes(py, v.as_deref()));
    let mut fields = vec![lines(py, &m.headers)?.into_any()];
    fields.extend(floats(py, &[m.lifetime, m.initial_age, m.swr, m.sie]));
    fields.extend([
        PyFrozenSet::new(py, &m.flags)?.into_any(),
        opt_bytes(py, m.etag),
        opt_bytes(py, m.last_modified),
        PyTuple::new(py, &m.vary)?.into_any(),
        PyTuple::new(py, values)?.into_any(),
        PyTuple::new(py, &m.tags)?.into_any(),
        PyFloat::new(py, m.ttl).into_any(),
    ]);
    PyTuple::new(py, fields)
}

/// Whether the stored response may answer a request with `directives` unvalidated.
#[pyfunction]
pub(super) fn http_usable(
    value: &[u8],
    age: f64,
    directives: &Bound<'_, PyDict>,
) -> PyResult<bool> {
    let cc = from_dict(directives, "usable")?;
    Ok(ziggurat_http::usable(&stored(value, "usable")?, age, &cc))
}

/// `(0, cache_status, refresh)` serve; `(1,)` 504; `(2, cache_status, head_update)` pass;
/// `(3, stale, coalesce)` fill.
#[pyfunction]
pub(super) fn http_lookup_step<'py>(
    py: Python<'py>,
    value: Option<&[u8]>,
    method: &str,
    directives: &Bound<'py, PyDict>,
    has_auth: bool,
    now: f64,
) -> PyResult<Bound<'py, PyTuple>> {
    const F: &str = "lookup_step";
    let cc = from_dict(directives, F)?;
    let s = value.map(|v| stored(v, F)).transpose()?;
    let req = FillRequest {
        method,
        directives: &cc,
        has_auth,
    };
    let b = |s: String| PyBytes::new(py, s.as_bytes());
    match ziggurat_http::lookup_step(s.as_ref(), &req, now) {
        LookupStep::Serve { status, refresh } => (0, b(status), refresh).into_pyobject(py),
        LookupStep::GatewayTimeout => PyTuple::new(py, [1]),
        LookupStep::Pass {
            status,
            head_update,
        } => (2, b(status), head_update).into_pyobject(py),
        LookupStep::Fill { stale, coalesce } => (3, stale, coalesce).into_pyobject(py),
    }
}

/// `(status, headers, with_body)` of the stored response as an answer.
#[pyfunction]
pub(super) fn http_reply<'py>(
    py: Python<'py>,
    value: &[u8],
    age: f64,
    hidden: Vec<Vec<u8>>,
    headers: &Bound<'py, PyAny>,
    head: bool,
    status: Option<&str>,
) -> PyResult<(u16, Vec<Line<'py>>, bool)> {
    const F: &str = "reply";
    let s = stored(value, F)?;
    let p = pairs(headers, F)?;
    let hidden: Vec<&[u8]> = hidden.iter().map(|h| &h[..]).collect();
    let r = ziggurat_http::reply(&s, age, &hidden, &slices(&p), head, status);
    let lines = r
        .headers
        .iter()
        .map(|(k, v)| (PyBytes::new(py, k), PyBytes::new(py, v)));
    Ok((r.status, lines.collect(), r.body))
}

/// The Cache-Status member to serve the stored response stale for a failed app, or None.
#[pyfunction]
pub(super) fn http_stale_if_error<'py>(
    py: Python<'py>,
    value: &[u8],
    opts: PyRef<'py, HttpOptions>,
    req_cc: &Bound<'py, PyDict>,
    app_status: u16,
    detail: &str,
    now: f64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    const F: &str = "stale_if_error";
    let s = stored(value, F)?;
    let cc = from_dict(req_cc, F)?;
    let cs = opts.store(|o| ziggurat_http::stale_if_error(&s, o, &cc, app_status, detail, now));
    Ok(cs.map(|c| PyBytes::new(py, c.as_bytes())))
}

/// `(0, value, ttl, cache_status)` refreshed; `(1, cache_status)` validator mismatch;
/// `(2, cache_status)` stale; `(3, detail)` pass; `(4, meta)` store.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(super) fn http_head_step<'py>(
    py: Python<'py>,
    opts: PyRef<'py, HttpOptions>,
    req: Req<'py>,
    value: Option<&[u8]>,
    validated: bool,
    status_code: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    now: f64,
) -> PyResult<Bound<'py, PyTuple>> {
    const F: &str = "head_step";
    let code = status(status_code, F)?;
    let p = pairs(headers, F)?;
    let h = slices(&p);
    let s = value.map(|v| stored(v, F)).transpose()?;
    let b = |s: &str| PyBytes::new(py, s.as_bytes());
    with_request(&opts, &req, |o, r| {
        match ziggurat_http::head_step(o, r, s.as_ref(), validated, code, &h, now) {
            HeadStep::Refreshed {
                stored,
                ttl,
                status,
            } => {
                let v = PyBytes::new(py, &Entry::Response(stored).encode());
                (0, v, ttl, b(&status)).into_pyobject(py)
            }
            HeadStep::Mismatch { status } => (1, b(&status)).into_pyobject(py),
            HeadStep::Stale { status } => (2, b(&status)).into_pyobject(py),
            HeadStep::Pass(why) => (3, why).into_pyobject(py),
            HeadStep::Store(m) => (4, meta(py, &m)?).into_pyobject(py),
        }
    })?
}

/// None (ignore), False (invalidate) or `(value, ttl)` (refresh) for a HEAD's 200.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(super) fn http_head_update<'py>(
    py: Python<'py>,
    opts: PyRef<'py, HttpOptions>,
    value: &[u8],
    headers: &Bound<'py, PyAny>,
    has_auth: bool,
    auth_shared: Vec<String>,
    request_time: f64,
    now: f64,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "head_update";
    let s = stored(value, F)?;
    let p = pairs(headers, F)?;
    let auth: Vec<&str> = auth_shared.iter().map(String::as_str).collect();
    let h = slices(&p);
    let step =
        opts.store(|o| ziggurat_http::head_update(o, &s, &h, has_auth, &auth, request_time, now));
    Ok(match step {
        HeadUpdate::Ignore => py.None().into_bound(py),
        HeadUpdate::Invalidate => PyBool::new(py, false).to_owned().into_any(),
        HeadUpdate::Refresh(fresh, ttl) => {
            let value = PyBytes::new(py, &Entry::Response(*fresh).encode());
            (value, ttl).into_pyobject(py)?.into_any()
        }
    })
}
