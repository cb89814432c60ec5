//! The HTTP cache (ziggurat-http) for the Python middleware: `http_*` functions of
//! `_native` that `ziggurat.http` drives, and `HttpOptions` (its options, read once).
//! Header lists come as `[(bytes, bytes)]`, read in place; directives go back and forth
//! as `dict[str, str | None]`; a stored response crosses as its value bytes, which the
//! crate decodes in place.

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple,
};
use ziggurat_http::{
    Action, ClassifyOptions, Directives, Entry, FillRequest, HeadStep, HeadUpdate, LookupStep,
    Meta, Param, StoreOptions, StoreRequest, Stored,
};

type Pairs = Vec<(PyBackedBytes, PyBackedBytes)>;
type Line<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>);
/// Bytes made here, handed to Python as `bytes`.
type Bytes = Cow<'static, [u8]>;

/// Adds the functions and constants to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    macro_rules! add {
        ($($f:ident),*) => { $(m.add_function(wrap_pyfunction!($f, m)?)?;)* };
    }
    #[rustfmt::skip]
    add!(
        http_field, http_fields, http_parse_cache_control, http_vary_digest, http_normalise_host,
        http_split_tags, http_connection_listed, http_cache_status, http_decode, http_encode,
        http_encode_variants, http_base_key, http_variant_key, http_lock_key, http_url_key,
        http_invalidated_keys, http_host_allowed, http_usable, http_lookup_step, http_reply,
        http_stale_if_error, http_head_step, http_head_update
    );
    m.add_class::<HttpOptions>()?;
    let py = m.py();
    let hop = ziggurat_http::HOP_BY_HOP
        .iter()
        .map(|n| PyBytes::new(py, n));
    m.add("HTTP_HOP_BY_HOP", PyTuple::new(py, hop)?)?;
    m.add(
        "HTTP_STALE_FORBIDDING",
        PyTuple::new(py, ziggurat_http::STALE_FORBIDDING)?,
    )?;
    m.add("HTTP_MAX_TTL", ziggurat_http::MAX_TTL)?;
    m.add(
        "HTTP_SURROGATE_CAPABILITY",
        ziggurat_http::SURROGATE_CAPABILITY,
    )?;
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
fn one(o: Bound<'_, PyAny>) -> Option<PyBackedBytes> {
    o.cast_into::<PyBytes>().ok().map(PyBackedBytes::from)
}

fn slices(p: &Pairs) -> Vec<(&[u8], &[u8])> {
    p.iter().map(|(k, v)| (&k[..], &v[..])).collect()
}

/// Field values (an iterable of bytes), read in place.
fn bytes_items(v: &Bound<'_, PyAny>, func: &str, what: &str) -> PyResult<Vec<PyBackedBytes>> {
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
    let v = ziggurat_http::fields(&slices(&p), name);
    Ok(v.iter().map(|v| PyBytes::new(py, v)).collect())
}

/// Cache-Control directives of a field's lines.
#[pyfunction]
fn http_parse_cache_control<'py>(
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

/// A request's host, lower-case, checked for syntax; None when missing or malformed.
#[pyfunction]
fn http_normalise_host(raw: Option<&[u8]>) -> Option<String> {
    raw.and_then(ziggurat_http::normalise_host)
}

/// Tags named by the tag header's lines.
#[pyfunction]
fn http_split_tags(values: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    let v = bytes_items(values, "split_tags", "values")?;
    Ok(ziggurat_http::split_tags(v.iter().map(|b| &b[..])))
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

/// The options of one middleware, read once (`Options.native`).
#[pyclass(frozen)]
struct HttpOptions {
    targeted_fields: Vec<Vec<u8>>,
    heuristic: bool,
    default_ttl: Option<f64>,
    stale_if_error: f64,
    revalidate_keep: f64,
    tag_header: Vec<u8>,
    store_set_cookie: bool,
    max_body: u64,
    request_directives: bool,
    bypass_headers: Vec<Vec<u8>>,
    bypass_cookies: Vec<Vec<u8>>,
    allowed_hosts: Vec<String>,
    purge: bool,
}

impl HttpOptions {
    fn store<R>(&self, f: impl FnOnce(&StoreOptions<'_>) -> R) -> R {
        let targets: Vec<&[u8]> = self.targeted_fields.iter().map(|t| &t[..]).collect();
        f(&StoreOptions {
            targeted_fields: &targets,
            heuristic: self.heuristic,
            default_ttl: self.default_ttl,
            stale_if_error: self.stale_if_error,
            revalidate_keep: self.revalidate_keep,
            tag_header: &self.tag_header,
            store_set_cookie: self.store_set_cookie,
            max_body: self.max_body,
            max_tags: ziggurat_core::MAX_TAGS,
            request_directives: self.request_directives,
        })
    }
}

#[pymethods]
impl HttpOptions {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        targeted_fields: Vec<Vec<u8>>,
        heuristic: bool,
        default_ttl: Option<f64>,
        stale_if_error: f64,
        revalidate_keep: f64,
        tag_header: Vec<u8>,
        store_set_cookie: bool,
        max_body: u64,
        request_directives: bool,
        bypass_headers: Vec<Vec<u8>>,
        bypass_cookies: Vec<Vec<u8>>,
        allowed_hosts: Vec<String>,
        purge: bool,
    ) -> Self {
        #[rustfmt::skip]
        return Self { targeted_fields, heuristic, default_ttl, stale_if_error, revalidate_keep,
            tag_header, store_set_cookie, max_body, request_directives, bypass_headers,
            bypass_cookies, allowed_hosts, purge };
    }

    /// `(0, host, base, directives, has_auth, conditional)` to look up, `(1,)` a purge,
    /// `(2, cache_status, invalidates)` to pass.
    fn classify<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        scheme: &str,
        host_raw: Option<&[u8]>,
        target: &[u8],
        headers: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let p = pairs(headers, "classify")?;
        let bh: Vec<&[u8]> = self.bypass_headers.iter().map(|v| &v[..]).collect();
        let bc: Vec<&[u8]> = self.bypass_cookies.iter().map(|v| &v[..]).collect();
        let ah: Vec<&str> = self.allowed_hosts.iter().map(String::as_str).collect();
        let o = ClassifyOptions {
            bypass_headers: &bh,
            bypass_cookies: &bc,
            request_directives: self.request_directives,
            purge: self.purge,
            allowed_hosts: &ah,
        };
        match ziggurat_http::classify(&o, method, scheme, host_raw, target, &slices(&p)) {
            Action::Purge => PyTuple::new(py, [1]),
            Action::Pass {
                status,
                invalidates,
            } => (2, PyBytes::new(py, status.as_bytes()), invalidates).into_pyobject(py),
            Action::Lookup(l) => {
                let base = PyBytes::new(py, &l.base);
                let cc = to_dict(py, &l.directives)?;
                (0, l.host, base, cc, l.has_auth, l.conditional).into_pyobject(py)
            }
        }
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

fn floats<'py>(py: Python<'py>, nums: &[f64]) -> Vec<Bound<'py, PyAny>> {
    nums.iter()
        .map(|n| PyFloat::new(py, *n).into_any())
        .collect()
}

fn opt_bytes<'py>(py: Python<'py>, v: Option<&[u8]>) -> Bound<'py, PyAny> {
    v.map_or_else(
        || py.None().into_bound(py),
        |v| PyBytes::new(py, v).into_any(),
    )
}

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

/// A stored response's value bytes, decoded (they come from `Stored.value`).
fn stored<'a>(value: &'a [u8], func: &str) -> PyResult<Stored<'a>> {
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

/// What storing needs of the request, from the attributes of `storable.Request`, and
/// the options, as the crate's structs.
fn with_request<R>(
    opts: &HttpOptions,
    req: &Req<'_>,
    f: impl FnOnce(&StoreOptions<'_>, &StoreRequest<'_>) -> R,
) -> PyResult<R> {
    const F: &str = "decide";
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
    Ok(opts.store(|o| f(o, &request)))
}

/// The stored response `value` as the fields of `store.Stored` (with `value` last), a
/// variant record as `(names, generation, until)`, or None for bytes of no entry.
#[pyfunction]
fn http_decode<'py>(
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
    let nums = [
        s.request_time,
        s.response_time,
        s.initial_age,
        s.lifetime,
        s.swr,
        s.sie,
    ];
    fields.extend(floats(py, &nums));
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
fn http_encode<'py>(
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
    let [request_time, response_time, initial_age, lifetime, swr, sie] = times;
    let st = Stored {
        status,
        headers: slices(&p),
        body,
        request_time,
        response_time,
        initial_age,
        lifetime,
        swr,
        sie,
        flags: flags.iter().map(String::as_str).collect(),
        etag,
        last_modified,
        vary: vary.iter().map(String::as_str).collect(),
        vary_values: vary_values.iter().map(|v| v.as_deref()).collect(),
        tags: tags.iter().map(String::as_str).collect(),
    };
    Ok(PyBytes::new(py, &Entry::Response(st).encode()))
}

/// The value bytes of a variant record.
#[pyfunction]
fn http_encode_variants(names: Vec<String>, generation: &str, until: f64) -> Bytes {
    let names = names.iter().map(String::as_str).collect();
    let v = ziggurat_http::Variants {
        names,
        generation,
        until,
    };
    Cow::Owned(Entry::Variants(v).encode())
}

#[pyfunction]
fn http_base_key(scheme: &str, host: &str, target: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::base_key(scheme, host, target))
}

#[pyfunction]
fn http_variant_key(base: &[u8], generation: &str, digest: &str) -> Bytes {
    Cow::Owned(ziggurat_http::variant_key(base, generation, digest))
}

#[pyfunction]
fn http_lock_key(key: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::lock_key(key))
}

#[pyfunction]
fn http_url_key(url: &str) -> Option<Bytes> {
    ziggurat_http::url_key(url).map(Cow::Owned)
}

/// The keys an unsafe request's successful response invalidates.
#[pyfunction]
fn http_invalidated_keys(
    scheme: &str,
    host: &str,
    target: &[u8],
    headers: &Bound<'_, PyAny>,
) -> PyResult<Vec<Bytes>> {
    let p = pairs(headers, "invalidated_keys")?;
    let keys = ziggurat_http::invalidated_keys(scheme, host, target, &slices(&p));
    Ok(keys.into_iter().map(Cow::Owned).collect())
}

#[pyfunction]
fn http_host_allowed(host: &str, allowed: Vec<String>) -> bool {
    let allowed: Vec<&str> = allowed.iter().map(String::as_str).collect();
    ziggurat_http::host_allowed(host, &allowed)
}

/// Whether the stored response may answer a request with `directives` unvalidated.
#[pyfunction]
fn http_usable(value: &[u8], age: f64, directives: &Bound<'_, PyDict>) -> PyResult<bool> {
    let cc = from_dict(directives, "usable")?;
    Ok(ziggurat_http::usable(&stored(value, "usable")?, age, &cc))
}

/// `(0, cache_status, refresh)` serve; `(1,)` 504; `(2, cache_status, head_update)` pass;
/// `(3, stale, coalesce)` fill.
#[pyfunction]
fn http_lookup_step<'py>(
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
fn http_reply<'py>(
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
fn http_stale_if_error<'py>(
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
fn http_head_step<'py>(
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
fn http_head_update<'py>(
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
