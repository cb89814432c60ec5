//! The HTTP cache's rules (ziggurat-http) for the Python middleware: `http_*`
//! functions of `_native` that `ziggurat.http.rules` and `ziggurat.http.targeted`
//! wrap under their Python names. Header lists come as `[(bytes, bytes)]`, read in
//! place; directives go back and forth as `dict[str, str | None]`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFrozenSet, PyInt, PySet, PyString, PyTuple};
use ziggurat_http::{Directives, Param, StoreOptions, StoreRequest};

type Pairs = Vec<(PyBackedBytes, PyBackedBytes)>;

/// Adds the functions and constants to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(http_field, m)?)?;
    m.add_function(wrap_pyfunction!(http_fields, m)?)?;
    m.add_function(wrap_pyfunction!(http_parse_list, m)?)?;
    m.add_function(wrap_pyfunction!(http_parse_cache_control, m)?)?;
    m.add_function(wrap_pyfunction!(http_parse_targeted, m)?)?;
    m.add_function(wrap_pyfunction!(http_response_directives, m)?)?;
    m.add_function(wrap_pyfunction!(http_delta_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(http_date, m)?)?;
    m.add_function(wrap_pyfunction!(http_expires_time, m)?)?;
    m.add_function(wrap_pyfunction!(http_may_use_default_freshness, m)?)?;
    m.add_function(wrap_pyfunction!(http_freshness_lifetime, m)?)?;
    m.add_function(wrap_pyfunction!(http_initial_age, m)?)?;
    m.add_function(wrap_pyfunction!(http_parse_vary, m)?)?;
    m.add_function(wrap_pyfunction!(http_vary_digest, m)?)?;
    m.add_function(wrap_pyfunction!(http_etag_matches, m)?)?;
    m.add_function(wrap_pyfunction!(http_normalise_host, m)?)?;
    m.add_function(wrap_pyfunction!(http_split_tags, m)?)?;
    m.add_function(wrap_pyfunction!(http_status_storable, m)?)?;
    m.add_function(wrap_pyfunction!(http_ignores_no_store, m)?)?;
    m.add_function(wrap_pyfunction!(http_connection_listed, m)?)?;
    m.add_function(wrap_pyfunction!(http_cache_status, m)?)?;
    m.add_function(wrap_pyfunction!(http_decide, m)?)?;
    m.add_function(wrap_pyfunction!(http_entry_ttl, m)?)?;
    m.add_function(wrap_pyfunction!(http_stale_flags, m)?)?;
    m.add_function(wrap_pyfunction!(http_stale_if_error_window, m)?)?;
    m.add_function(wrap_pyfunction!(http_stored_headers, m)?)?;
    m.add_function(wrap_pyfunction!(http_never_stored, m)?)?;
    let py = m.py();
    let statuses = |keep: fn(u16) -> bool| {
        PyTuple::new(py, (0..1000u16).filter(|&s| keep(s)).collect::<Vec<_>>())
    };
    m.add(
        "HTTP_STORABLE_STATUSES",
        statuses(ziggurat_http::is_storable_status)?,
    )?;
    m.add(
        "HTTP_HEURISTIC_STATUSES",
        statuses(ziggurat_http::is_heuristic_status)?,
    )?;
    m.add(
        "HTTP_UNDERSTOOD_STATUSES",
        statuses(ziggurat_http::is_understood_status)?,
    )?;
    let hop = ziggurat_http::HOP_BY_HOP
        .iter()
        .map(|n| PyBytes::new(py, n));
    m.add("HTTP_HOP_BY_HOP", PyTuple::new(py, hop)?)?;
    m.add(
        "HTTP_STALE_FORBIDDING",
        PyTuple::new(py, ziggurat_http::STALE_FORBIDDING)?,
    )?;
    m.add("HTTP_MAX_TTL", ziggurat_http::MAX_TTL)?;
    Ok(())
}

/// A header list's lines, read in place (bytes are not copied).
fn pairs(headers: &Bound<'_, PyAny>, func: &str) -> PyResult<Pairs> {
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
        let pair = match line.extract::<(PyBackedBytes, PyBackedBytes)>() {
            Ok(pair) => pair,
            Err(_) => match line.extract::<Vec<PyBackedBytes>>() {
                Ok(two) if two.len() == 2 => {
                    let mut two = two.into_iter();
                    match (two.next(), two.next()) {
                        (Some(k), Some(v)) => (k, v),
                        _ => return Err(bad()),
                    }
                }
                _ => return Err(bad()),
            },
        };
        out.push(pair);
    }
    Ok(out)
}

fn slices(p: &Pairs) -> Vec<(&[u8], &[u8])> {
    p.iter().map(|(k, v)| (&k[..], &v[..])).collect()
}

/// Field values (an iterable of bytes), read in place.
fn values(v: &Bound<'_, PyAny>, func: &str, what: &str) -> PyResult<Vec<PyBackedBytes>> {
    let bad = || PyTypeError::new_err(format!("{func}(): {what} must be an iterable of bytes"));
    let mut out = Vec::new();
    for item in v.try_iter().map_err(|_| bad())? {
        out.push(item?.extract::<PyBackedBytes>().map_err(|_| bad())?);
    }
    Ok(out)
}

fn to_dict<'py>(py: Python<'py>, cc: &Directives) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in cc.iter() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

fn from_dict(cc: &Bound<'_, PyDict>, func: &str) -> PyResult<Directives> {
    let mut out = Directives::new();
    for (k, v) in cc.iter() {
        let bad = || {
            PyTypeError::new_err(format!(
                "{func}(): cc must map directive names (str) to arguments (str or None), \
                 as parse_cache_control gives them"
            ))
        };
        let k = k.extract::<String>().map_err(|_| bad())?;
        let v = if v.is_none() {
            None
        } else {
            Some(v.extract::<String>().map_err(|_| bad())?)
        };
        out.insert_first(k, v);
    }
    Ok(out)
}

/// A status code; an int outside 0..=65535 is no status any rule names.
fn status(s: &Bound<'_, PyAny>, func: &str) -> PyResult<u16> {
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

fn bytes_list<'py>(py: Python<'py>, items: &[&[u8]]) -> Vec<Bound<'py, PyBytes>> {
    items.iter().map(|v| PyBytes::new(py, v)).collect()
}

/// The first value of header `name`, or None.
#[pyfunction]
fn http_field<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    name: &[u8],
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let p = pairs(headers, "field")?;
    Ok(ziggurat_http::field(&slices(&p), name).map(|v| PyBytes::new(py, v)))
}

/// Every value of header `name`, in order.
#[pyfunction]
fn http_fields<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    name: &[u8],
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let p = pairs(headers, "fields")?;
    Ok(bytes_list(py, &ziggurat_http::fields(&slices(&p), name)))
}

/// The items of a comma-separated list field.
#[pyfunction]
fn http_parse_list<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let v = values_arg(values, "parse_list")?;
    Ok(bytes_list(
        py,
        &ziggurat_http::parse_list(v.iter().map(|b| &b[..])),
    ))
}

fn values_arg(v: &Bound<'_, PyAny>, func: &str) -> PyResult<Vec<PyBackedBytes>> {
    values(v, func, "values")
}

/// Cache-Control directives of a field's lines.
#[pyfunction]
fn http_parse_cache_control<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let v = values_arg(values, "parse_cache_control")?;
    to_dict(
        py,
        &ziggurat_http::parse_cache_control(v.iter().map(|b| &b[..])),
    )
}

/// A targeted field's lines as directives, or None.
#[pyfunction]
fn http_parse_targeted<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let v = values_arg(values, "parse_targeted")?;
    ziggurat_http::parse_targeted(v.iter().map(|b| &b[..]))
        .map(|cc| to_dict(py, &cc))
        .transpose()
}

/// The directives a response gives this cache, and the targeted field they came from.
#[pyfunction]
fn http_response_directives<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    targets: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyDict>, Option<Bound<'py, PyAny>>)> {
    let p = pairs(headers, "response_directives")?;
    let t = values(targets, "response_directives", "targets")?;
    let names: Vec<&[u8]> = t.iter().map(|b| &b[..]).collect();
    let (cc, from) = ziggurat_http::response_directives(&slices(&p), &names);
    let from = match from {
        Some(i) => Some(t[i].clone_ref(py).into_pyobject(py)?.into_any()),
        None => None,
    };
    Ok((to_dict(py, &cc)?, from))
}

/// A delta-seconds argument as int, or None.
#[pyfunction]
fn http_delta_seconds(arg: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    let Some(arg) = arg.filter(|a| !a.is_none()) else {
        return Ok(None);
    };
    let s = arg.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err("delta_seconds(): arg must be a str (a directive's argument) or None")
    })?;
    // A str that is not UTF-8 (a lone surrogate) is no delta-seconds.
    Ok(s.to_str()
        .ok()
        .and_then(|a| ziggurat_http::delta_seconds(Some(a))))
}

/// An HTTP-date as a Unix time, or None.
#[pyfunction]
fn http_date(value: Option<&[u8]>) -> Option<f64> {
    value.and_then(ziggurat_http::http_date)
}

/// Whether the response has Expires, and its time (None when invalid).
#[pyfunction]
fn http_expires_time(headers: &Bound<'_, PyAny>) -> PyResult<(bool, Option<f64>)> {
    let p = pairs(headers, "expires_time")?;
    Ok(ziggurat_http::expires_time(&slices(&p)))
}

/// Whether a response without explicit freshness may get a default lifetime.
#[pyfunction]
fn http_may_use_default_freshness(status_code: &Bound<'_, PyAny>) -> PyResult<bool> {
    let s = status(status_code, "may_use_default_freshness")?;
    Ok(ziggurat_http::may_use_default_freshness(s))
}

/// Seconds a response is fresh for, and whether it said so explicitly.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn http_freshness_lifetime(
    cc: &Bound<'_, PyDict>,
    headers: &Bound<'_, PyAny>,
    status_code: &Bound<'_, PyAny>,
    response_time: f64,
    heuristic: bool,
    default_ttl: Option<f64>,
    expires: bool,
) -> PyResult<(f64, bool)> {
    const F: &str = "freshness_lifetime";
    let cc = from_dict(cc, F)?;
    let p = pairs(headers, F)?;
    let s = status(status_code, F)?;
    Ok(ziggurat_http::freshness_lifetime(
        &cc,
        &slices(&p),
        s,
        response_time,
        heuristic,
        default_ttl,
        expires,
    ))
}

/// The corrected initial age of a response.
#[pyfunction]
fn http_initial_age(
    headers: &Bound<'_, PyAny>,
    request_time: f64,
    response_time: f64,
) -> PyResult<f64> {
    let p = pairs(headers, "initial_age")?;
    Ok(ziggurat_http::initial_age(
        &slices(&p),
        request_time,
        response_time,
    ))
}

/// The request header names a response varies on, or None for `*`.
#[pyfunction]
fn http_parse_vary<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let p = pairs(headers, "parse_vary")?;
    ziggurat_http::parse_vary(&slices(&p))
        .map(|names| PyTuple::new(py, names))
        .transpose()
}

/// The digest of the request's values of `names`, and the values.
#[pyfunction]
fn http_vary_digest<'py>(
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

/// Weak comparison of an If-None-Match value against a stored ETag.
#[pyfunction]
fn http_etag_matches(condition: &[u8], etag: Option<&[u8]>) -> bool {
    ziggurat_http::etag_matches(condition, etag)
}

/// A request's host, lower-case, checked for syntax; None when missing or malformed.
#[pyfunction]
fn http_normalise_host(raw: Option<&[u8]>) -> Option<String> {
    raw.and_then(ziggurat_http::normalise_host)
}

/// Tags named by the tag header's lines.
#[pyfunction]
fn http_split_tags(values: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let v = values_arg(values, "split_tags")?;
    Ok(ziggurat_http::split_tags(v.iter().map(|b| &b[..])))
}

/// Why a response with this status and these directives cannot be stored, or None.
#[pyfunction]
fn http_status_storable(
    status_code: &Bound<'_, PyAny>,
    cc: &Bound<'_, PyDict>,
) -> PyResult<Option<&'static str>> {
    const F: &str = "status_storable";
    Ok(ziggurat_http::status_storable(
        status(status_code, F)?,
        &from_dict(cc, F)?,
    ))
}

/// Whether must-understand overrides no-store for this status.
#[pyfunction]
fn http_ignores_no_store(status_code: &Bound<'_, PyAny>, cc: &Bound<'_, PyDict>) -> PyResult<bool> {
    const F: &str = "ignores_no_store";
    Ok(ziggurat_http::ignores_no_store(
        status(status_code, F)?,
        &from_dict(cc, F)?,
    ))
}

/// The lower-case names a message's Connection field lists.
#[pyfunction]
fn http_connection_listed<'py>(
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
fn http_cache_status<'py>(
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

/// The options storing reads, from the attributes of `ziggurat.http.options.Options`.
#[derive(FromPyObject)]
struct Opts {
    #[pyo3(attribute)]
    targeted_fields: Vec<PyBackedBytes>,
    #[pyo3(attribute)]
    heuristic: bool,
    #[pyo3(attribute)]
    default_ttl: Option<f64>,
    #[pyo3(attribute)]
    stale_if_error: Option<f64>,
    #[pyo3(attribute)]
    revalidate_keep: f64,
    #[pyo3(attribute)]
    tag_header: PyBackedBytes,
    #[pyo3(attribute)]
    store_set_cookie: bool,
    #[pyo3(attribute)]
    max_body: u64,
    #[pyo3(attribute)]
    request_directives: bool,
}

impl Opts {
    fn view<'a>(&'a self, targets: &'a [&'a [u8]]) -> StoreOptions<'a> {
        StoreOptions {
            targeted_fields: targets,
            heuristic: self.heuristic,
            default_ttl: self.default_ttl,
            stale_if_error: self.stale_if_error.unwrap_or(0.0),
            revalidate_keep: self.revalidate_keep,
            tag_header: &self.tag_header,
            store_set_cookie: self.store_set_cookie,
            max_body: self.max_body,
            max_tags: ziggurat_core::MAX_TAGS,
            request_directives: self.request_directives,
        }
    }

    fn targets(&self) -> Vec<&[u8]> {
        self.targeted_fields.iter().map(|t| &t[..]).collect()
    }
}

/// What storing needs of the request, from the attributes of `storable.Request`.
#[derive(FromPyObject)]
struct Req<'py> {
    #[pyo3(attribute)]
    method: String,
    #[pyo3(attribute)]
    headers: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    directives: Bound<'py, PyDict>,
    #[pyo3(attribute)]
    has_auth: bool,
    #[pyo3(attribute)]
    auth_shared: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    key_headers: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    time: f64,
}

fn flags_set<'py>(py: Python<'py>, flags: &[&str]) -> PyResult<Bound<'py, PyFrozenSet>> {
    PyFrozenSet::new(py, flags)
}

fn flags_arg(flags: &Bound<'_, PyAny>, func: &str) -> PyResult<Vec<String>> {
    names_arg(flags, func, "flags")
}

/// An iterable of str (directive or field names).
fn names_arg(names: &Bound<'_, PyAny>, func: &str, what: &str) -> PyResult<Vec<String>> {
    let bad = || PyTypeError::new_err(format!("{func}(): {what} must be an iterable of str"));
    let mut out = Vec::new();
    for f in names.try_iter().map_err(|_| bad())? {
        out.push(f?.extract::<String>().map_err(|_| bad())?);
    }
    Ok(out)
}

fn lines<'py>(py: Python<'py>, h: &[(&[u8], &[u8])]) -> PyResult<Bound<'py, PyTuple>> {
    let items = h
        .iter()
        .map(|(k, v)| PyTuple::new(py, [PyBytes::new(py, k), PyBytes::new(py, v)]))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// Why the response cannot be stored (a str), or the fields of `storable.Meta`.
#[pyfunction]
fn http_decide<'py>(
    py: Python<'py>,
    opts: Opts,
    status_code: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    req: Req<'py>,
    now: f64,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "decide";
    let s = status(status_code, F)?;
    let p = pairs(headers, F)?;
    let rp = pairs(&req.headers, F)?;
    let req_cc = from_dict(&req.directives, F)?;
    let auth = names_arg(&req.auth_shared, F, "req.auth_shared")?;
    let auth: Vec<&str> = auth.iter().map(String::as_str).collect();
    let keys = names_arg(&req.key_headers, F, "req.key_headers")?;
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let req_lines = slices(&rp);
    let request = StoreRequest {
        method: &req.method,
        headers: &req_lines,
        directives: &req_cc,
        has_auth: req.has_auth,
        auth_shared: &auth,
        key_headers: &keys,
        time: req.time,
    };
    let targets = opts.targets();
    let m = match ziggurat_http::decide(&opts.view(&targets), s, &slices(&p), &request, now) {
        Err(why) => return Ok(PyString::new(py, why).into_any()),
        Ok(m) => m,
    };
    let bytes = |v: Option<&[u8]>| v.map(|v| PyBytes::new(py, v));
    let values = m.vary_values.iter().map(|v| bytes(v.as_deref()));
    let fields: [Bound<'py, PyAny>; 12] = [
        lines(py, &m.headers)?.into_any(),
        m.lifetime.into_pyobject(py)?.into_any(),
        m.initial_age.into_pyobject(py)?.into_any(),
        m.swr.into_pyobject(py)?.into_any(),
        m.sie.into_pyobject(py)?.into_any(),
        flags_set(py, &m.flags)?.into_any(),
        bytes(m.etag).into_pyobject(py)?.into_any(),
        bytes(m.last_modified).into_pyobject(py)?.into_any(),
        PyTuple::new(py, &m.vary)?.into_any(),
        PyTuple::new(py, values)?.into_any(),
        PyTuple::new(py, &m.tags)?.into_any(),
        m.ttl.into_pyobject(py)?.into_any(),
    ];
    Ok(PyTuple::new(py, fields)?.into_any())
}

/// How long the cache keeps a stored response.
#[pyfunction]
fn http_entry_ttl(
    opts: Opts,
    lifetime: f64,
    initial_age: f64,
    window: f64,
    flags: &Bound<'_, PyAny>,
    keep: bool,
) -> PyResult<f64> {
    let flags = flags_arg(flags, "entry_ttl")?;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let targets = opts.targets();
    Ok(ziggurat_http::entry_ttl(
        &opts.view(&targets),
        lifetime,
        initial_age,
        window,
        &flags,
        keep,
    ))
}

/// The directives of STALE_FORBIDDING a response has.
#[pyfunction]
fn http_stale_flags<'py>(
    py: Python<'py>,
    cc: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyFrozenSet>> {
    flags_set(
        py,
        &ziggurat_http::stale_flags(&from_dict(cc, "stale_flags")?),
    )
}

/// Seconds past its freshness a stored response may answer for an app that failed.
#[pyfunction]
fn http_stale_if_error_window(
    flags: &Bound<'_, PyAny>,
    sie: f64,
    opts: Opts,
    req_cc: &Bound<'_, PyDict>,
) -> PyResult<f64> {
    const F: &str = "stale_if_error_window";
    let flags = flags_arg(flags, F)?;
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let targets = opts.targets();
    Ok(ziggurat_http::stale_if_error_window(
        &flags,
        sie,
        &opts.view(&targets),
        &from_dict(req_cc, F)?,
    ))
}

/// The header lines stored of a response.
#[pyfunction]
fn http_stored_headers<'py>(
    py: Python<'py>,
    opts: Opts,
    headers: &Bound<'py, PyAny>,
    strip: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    const F: &str = "stored_headers";
    let p = pairs(headers, F)?;
    let strip: Vec<Vec<u8>> = values(strip, F, "strip")?
        .iter()
        .map(|s| s.to_vec())
        .collect();
    let targets = opts.targets();
    lines(
        py,
        &ziggurat_http::stored_headers(&opts.view(&targets), &slices(&p), &strip),
    )
}

/// The field names never stored.
#[pyfunction]
fn http_never_stored<'py>(py: Python<'py>, opts: Opts) -> PyResult<Bound<'py, PyFrozenSet>> {
    let targets = opts.targets();
    let names = ziggurat_http::never_stored(&opts.view(&targets));
    PyFrozenSet::new(py, names.iter().map(|n| PyBytes::new(py, n)))
}
