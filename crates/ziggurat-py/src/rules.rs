//! The argument rules of `ziggurat-cache` for the checks written in Python
//! (the options object, the methods of the degraded and clustered modes, the
//! CLI), and the metric families it reports: each rule stays in Rust, and
//! Python only adds its type checks and the public method's name.

use pyo3::prelude::*;

use crate::{args, convert};

/// Bytes in a size given as an int or a string such as "64MiB" or "1.5GB".
#[pyfunction]
pub fn parse_size(size: &Bound<'_, PyAny>) -> PyResult<u64> {
    convert::size_arg(size)
}

/// Checks `key` by the rule every method of the Cache applies (str or bytes, 1 to
/// `MAX_KEY` bytes of UTF-8), raising the error `method` would raise: for the
/// methods written in Python, so that the rule has one home.
///
/// ```python
/// >>> check_key("a\udc80", "Cache.get_many")
/// Traceback (most recent call last):
/// ValueError: Cache.get_many(): key is not valid UTF-8 (lone surrogate at index 1); ...
/// ```
#[pyfunction]
pub fn check_key(key: &Bound<'_, PyAny>, method: &str) -> PyResult<()> {
    args::named(key.py(), method, args::check_key(key).map(|_| ()))
}

/// `ttl` if it is a TTL the Cache takes, else a `ValueError` naming the
/// argument `what` of `method`.
///
/// ```python
/// >>> check_ttl(0.0, "ttl", "Cache.set")
/// Traceback (most recent call last):
/// ValueError: Cache.set(): ttl must be a number of seconds > 0 (or math.inf for never), got 0
/// ```
#[pyfunction]
pub fn check_ttl(py: Python<'_>, ttl: f64, what: &str, method: &str) -> PyResult<f64> {
    let arg = convert::arg_named(what)?;
    args::named(
        py,
        method,
        ziggurat_cache::check_ttl(ttl, arg).map_err(convert::cache_err),
    )
}

/// The message of an `incr` of the counter `key` (its repr) whose result
/// leaves the signed 64-bit range: the Cache's, for the store that runs
/// without a segment.
///
/// ```python
/// >>> incr_overflow("'hits'")
/// "the counter 'hits' would leave the signed 64-bit range"
/// ```
#[pyfunction]
pub fn incr_overflow(key: &str) -> String {
    ziggurat_cache::incr_overflow(key)
}

/// (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) as passed from Python.
pub(crate) type FetchDefaults = (f64, Option<f64>, Option<f64>, f64, f64);

/// The Cache's options from what Python passes, unchecked (`CacheCore::new`
/// and `check_defaults` both build them here).
pub(crate) fn cache_options(
    fetch_defaults: FetchDefaults,
    refresh_ahead: f64,
    degraded_ttl: Option<f64>,
) -> ziggurat_cache::CacheOptions {
    let (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) = fetch_defaults;
    ziggurat_cache::CacheOptions {
        ttl,
        neg_ttl,
        stale_ttl,
        jitter,
        loader_timeout,
        refresh_ahead,
        degraded_ttl,
    }
}

/// Checks a cache's defaults by `CacheOptions::checked` (TTLs, jitter,
/// refresh-ahead, loader timeout), raising a `ValueError` naming the first
/// option out of its range; `fetch_defaults` as `Cache` takes them.
///
/// ```python
/// >>> check_defaults((60.0, None, None, 1.5, 10.0), 0.0, None)
/// Traceback (most recent call last):
/// ValueError: jitter must be in [0, 1), got 1.5
/// ```
#[pyfunction]
pub fn check_defaults(
    fetch_defaults: FetchDefaults,
    refresh_ahead: f64,
    degraded_ttl: Option<f64>,
) -> PyResult<()> {
    cache_options(fetch_defaults, refresh_ahead, degraded_ttl)
        .checked()
        .map(|_| ())
        .map_err(convert::cache_err)
}

/// The segment of the cache `name` at `version` (`name.ver-{version}`), or a
/// `ValueError` naming the option that breaks the rule.
///
/// ```python
/// >>> segment_name("api", "2")
/// 'api.ver-2'
/// ```
#[pyfunction]
#[pyo3(signature = (name, version = None))]
pub fn segment_name(name: &str, version: Option<&str>) -> PyResult<String> {
    ziggurat_cache::segment_name(name, version).map_err(convert::cache_err)
}

/// The name and version a segment name holds (`"api.ver-2"`: `("api", "2")`).
///
/// ```python
/// >>> name_and_version("api")
/// ('api', None)
/// ```
#[pyfunction]
pub fn name_and_version(segment: &str) -> (String, Option<String>) {
    let (name, version) = ziggurat_cache::name_and_version(segment);
    (name.to_string(), version.map(str::to_string))
}

/// Checks that `name` may name a segment (the engine's rule, checked before
/// a path is made from it), raising a `ValueError` that says the rule.
///
/// ```python
/// >>> check_segment_name("../x")  # doctest: +ELLIPSIS
/// Traceback (most recent call last):
/// ValueError: segment name must be 1-200 characters of A-Z a-z 0-9 . _ - not starting ...
/// ```
#[pyfunction]
pub fn check_segment_name(name: &str) -> PyResult<()> {
    ziggurat_core::check_segment_name(name).map_err(convert::err)
}

/// The key prefix and hidden tag of the namespace `name`, or a `ValueError`
/// that says the rule.
///
/// ```python
/// >>> namespace_parts("posts")
/// ('posts:', '\x00ns:posts')
/// ```
#[pyfunction]
pub fn namespace_parts(name: &str) -> PyResult<(String, String)> {
    let ns = ziggurat_cache::Namespace::new(name).map_err(convert::cache_err)?;
    Ok((ns.key_prefix, ns.tag))
}

/// The metric families both front ends report (`ziggurat_cache::FAMILIES`),
/// each a dict of `group` ("cache", "host" or "process"), `key`, `prom`,
/// `otel`, `kind` ("counter" or "gauge"), `unit`, `help` and `scope` ("host":
/// one figure for the host; "process": this process's own, summed over
/// processes).
///
/// ```python
/// >>> [f["prom"] for f in metric_families() if f["key"] == "sets"]
/// ['ziggurat_sets_total']
/// ```
#[pyfunction]
pub fn metric_families() -> Vec<std::collections::HashMap<&'static str, &'static str>> {
    ziggurat_cache::FAMILIES
        .iter()
        .map(|f| {
            std::collections::HashMap::from([
                ("group", f.group.name()),
                ("key", f.key),
                ("prom", f.prom),
                ("otel", f.otel),
                ("kind", f.kind.name()),
                ("unit", f.unit),
                ("help", f.help),
                ("scope", f.scope.name()),
            ])
        })
        .collect()
}

/// Every rule of `ziggurat_cache::rules` by its dotted name: an int, a float,
/// a str or a tuple of str (`ziggurat.rules` reads it once, at import).
///
/// ```python
/// >>> rules()["tags.max"], rules()["defaults.ttl"], rules()["modes.copy"]
/// (8, 300.0, ('shared', 'copy', 'decode'))
/// ```
#[pyfunction]
pub fn rules(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let out = pyo3::types::PyDict::new(py);
    for r in ziggurat_cache::rules() {
        match r.value {
            ziggurat_cache::RuleValue::Int(n) => out.set_item(r.name, n)?,
            ziggurat_cache::RuleValue::Float(x) => out.set_item(r.name, x)?,
            ziggurat_cache::RuleValue::Text(t) => out.set_item(r.name, t)?,
            ziggurat_cache::RuleValue::Names(ns) => {
                out.set_item(r.name, pyo3::types::PyTuple::new(py, ns)?)?
            }
        }
    }
    Ok(out)
}
