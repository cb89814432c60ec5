//! What a fill writes, what a purge asks and answers, what leaves: the crate's
//! `save_writes`, `purge_request`/`purge_answer`, `client_headers`, `fresh_hit`,
//! `gateway_timeout`, and the settings' defaults and rules, for `ziggurat.http`.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use ziggurat_http::{Purge, Purged, Sent};

use super::convert::{pairs, slices, Bytes, Line};
use super::stored::stored;

type Owned = Vec<(Vec<u8>, Vec<u8>)>;
/// One write of a fill: key, value, ttl, tags.
type Write = (Bytes, Bytes, f64, Vec<String>);

fn owned_lines<'py>(py: Python<'py>, l: &Owned) -> Vec<Line<'py>> {
    l.iter()
        .map(|(k, v)| (PyBytes::new(py, k), PyBytes::new(py, v)))
        .collect()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|b| &b[..]).collect()
}

/// The writes that store the response `value` (its bytes) for `ttl` under `base`, in
/// order: `(key, value, ttl, tags)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the fill's facts, as the crate takes them
pub(super) fn http_save_writes(
    base: &[u8],
    value: &[u8],
    ttl: f64,
    now: f64,
    record: Option<&[u8]>,
    fresh: [u8; 6],
    guarded: bool,
) -> PyResult<Vec<Write>> {
    let s = stored(value, "save_writes")?;
    let w = ziggurat_http::save_writes(base, &s, value, ttl, now, record, fresh, guarded);
    Ok(w.into_iter()
        .map(|w| (Cow::Owned(w.key), Cow::Owned(w.value), w.ttl, w.tags))
        .collect())
}

/// What a `PURGE` asks: `(0,)` forbidden, `(1,)` bad host, `(2, tags)`, `(3, key)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the request's parts, as the crate takes them
pub(super) fn http_purge_request<'py>(
    py: Python<'py>,
    token: &[u8],
    tag_header: &[u8],
    client_allowed: bool,
    scheme: &str,
    host_raw: Option<&[u8]>,
    target: &[u8],
    headers: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let p = pairs(headers, "purge_request")?;
    let ask = ziggurat_http::purge_request(
        token,
        tag_header,
        client_allowed,
        scheme,
        host_raw,
        target,
        &slices(&p),
    );
    Ok(match ask {
        Purge::Forbidden => (0,).into_pyobject(py)?.into_any(),
        Purge::BadHost => (1,).into_pyobject(py)?.into_any(),
        Purge::Tags(tags) => (2, tags).into_pyobject(py)?.into_any(),
        Purge::Url(key) => (3, PyBytes::new(py, &key)).into_pyobject(py)?.into_any(),
    })
}

/// The answer to a purge (`what`: 0 forbidden, 1 bad host, 2 tags, 3 URL with `found`,
/// 4 failed): `(status, headers, body)`.
#[pyfunction]
pub(super) fn http_purge_answer<'py>(
    py: Python<'py>,
    what: u8,
    found: bool,
    cache_status: bool,
) -> (u16, Vec<Line<'py>>, Bound<'py, PyBytes>) {
    let p = match what {
        0 => Purged::Forbidden,
        1 => Purged::BadHost,
        2 => Purged::Tags,
        3 => Purged::Url(found),
        _ => Purged::Failed,
    };
    let (status, headers, body) = ziggurat_http::purge_answer(p, cache_status);
    (status, owned_lines(py, &headers), PyBytes::new(py, body))
}

/// The answer to `only-if-cached` with nothing usable stored: `(status, headers, body)`.
#[pyfunction]
pub(super) fn http_gateway_timeout(
    py: Python<'_>,
    cache_status: bool,
) -> (u16, Vec<Line<'_>>, Bound<'_, PyBytes>) {
    let (status, headers, body) = ziggurat_http::gateway_timeout(cache_status);
    (status, owned_lines(py, &headers), PyBytes::new(py, body))
}

/// The app's head `headers` as the client gets it (`how`: 0 passed, 1 streamed, 2 just
/// stored with `status`, `initial_age` and `body_len`), with the `Cache-Status` member.
#[pyfunction]
#[pyo3(signature = (headers, strip, how, cs, status=200, initial_age=0.0, body_len=0))]
#[allow(clippy::too_many_arguments)] // the head and how it leaves
pub(super) fn http_client_headers<'py>(
    py: Python<'py>,
    headers: &Bound<'py, PyAny>,
    strip: Vec<Vec<u8>>,
    how: u8,
    cs: Option<&[u8]>,
    status: u16,
    initial_age: f64,
    body_len: usize,
) -> PyResult<Vec<Line<'py>>> {
    let p = pairs(headers, "client_headers")?;
    let sent = match how {
        0 => Sent::Passed,
        1 => Sent::Streamed,
        _ => Sent::Stored {
            status,
            initial_age,
            body_len,
        },
    };
    let cs = cs.map(String::from_utf8_lossy);
    let out = ziggurat_http::client_headers(&slices(&p), &refs(&strip), sent, cs.as_deref());
    Ok(owned_lines(py, &out))
}

/// The stored response `value` as a plain hit at `now`: `(headers, since, until)`, or
/// None once it is not fresh.
#[pyfunction]
pub(super) fn http_fresh_hit<'py>(
    py: Python<'py>,
    value: &[u8],
    now: f64,
    hidden: Vec<Vec<u8>>,
    cache_status: bool,
) -> PyResult<Option<(Vec<Line<'py>>, f64, f64)>> {
    let s = stored(value, "fresh_hit")?;
    Ok(
        ziggurat_http::fresh_hit(&s, now, &refs(&hidden), cache_status)
            .map(|h| (owned_lines(py, &h.headers), h.since, h.until)),
    )
}

/// The key whose lease lets one background refresh of `key` run per host.
#[pyfunction]
pub(super) fn http_refresh_lock_key(key: &[u8]) -> Bytes {
    Cow::Owned(ziggurat_http::refresh_lock_key(key))
}

/// Why the text `value` of a setting (`tag_header`, `purge_token`, `key_headers`,
/// `targeted`) cannot hold: 'header', 'short', 'underscore', 'cache-control', or None.
#[pyfunction]
pub(super) fn http_setting_problem(setting: &str, value: &str) -> Option<&'static str> {
    use ziggurat_http::{Setting, SettingProblem};
    let s = match setting {
        "tag_header" => Setting::TagHeader,
        "purge_token" => Setting::PurgeToken,
        "key_headers" => Setting::KeyHeader,
        _ => Setting::Targeted,
    };
    ziggurat_http::problem(s, value).map(|p| match p {
        SettingProblem::NotHeaderName => "header",
        SettingProblem::ShortToken => "short",
        SettingProblem::Underscore => "underscore",
        SettingProblem::CacheControl => "cache-control",
        SettingProblem::Seconds => "seconds",
    })
}

/// The settings' defaults and limits (`HTTP_DEFAULTS`).
pub(super) fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use ziggurat_http as h;
    let d = PyDict::new(py);
    d.set_item("allowed_hosts", h::DEFAULT_ALLOWED_HOSTS.to_vec())?;
    d.set_item("bypass_headers", h::DEFAULT_BYPASS_HEADERS.to_vec())?;
    d.set_item("purge_clients", h::DEFAULT_PURGE_CLIENTS.to_vec())?;
    d.set_item("targeted_fields", h::DEFAULT_TARGETED_FIELDS.to_vec())?;
    d.set_item("targeted_forward", h::DEFAULT_TARGETED_FORWARD.to_vec())?;
    d.set_item("surrogate_field", h::SURROGATE_FIELD)?;
    d.set_item("max_body", h::DEFAULT_MAX_BODY)?;
    d.set_item("tag_header", h::DEFAULT_TAG_HEADER)?;
    d.set_item("hit_for_miss", h::DEFAULT_HIT_FOR_MISS)?;
    d.set_item("revalidate_keep", h::DEFAULT_REVALIDATE_KEEP)?;
    d.set_item("marker_ttl", h::MARKER_TTL)?;
    d.set_item("max_abandoned", h::MAX_ABANDONED)?;
    d.set_item("abandoned_hold", h::ABANDONED_HOLD)?;
    d.set_item("min_purge_token", h::MIN_PURGE_TOKEN)?;
    d.set_item("purge_token_header", PyBytes::new(py, h::PURGE_TOKEN))?;
    Ok(d)
}
