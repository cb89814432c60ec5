//! The HTTP cache (ziggurat-http) for the Python middleware: `http_*` functions of
//! `_native` that `ziggurat.http` drives, and `HttpOptions` (its options, read once).
//! Header lists come as `[(bytes, bytes)]`, read in place; directives go back and forth
//! as `dict[str, str | None]`; a stored response crosses as its value bytes, which the
//! crate decodes in place. One file per part: the conversions (`convert`), the rules that
//! need no options (`fields`), the options (`options`), the stored format and keys
//! (`stored`), one request's fill (`exchange`), and what a fill writes, a purge asks
//! and a response sends (`answers`).

mod answers;
mod convert;
mod exchange;
mod fields;
mod options;
mod stored;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use answers::*;
use exchange::*;
use fields::*;
use options::HttpOptions;
use stored::*;

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
        http_invalidated_keys, http_host_allowed, http_decide, http_purge_mark, http_purge_keys,
        http_overrides_method, http_save_writes, http_purge_request, http_purge_answer,
        http_gateway_timeout, http_client_headers, http_fresh_hit, http_refresh_lock_key,
        http_setting_problem
    );
    m.add_class::<HttpOptions>()?;
    m.add_class::<HttpExchange>()?;
    let py = m.py();
    m.add("HTTP_DEFAULTS", defaults(py)?)?;
    let names = |n: &[&[u8]]| PyTuple::new(py, n.iter().map(|n| PyBytes::new(py, n)));
    m.add("HTTP_HOP_BY_HOP", names(&ziggurat_http::HOP_BY_HOP)?)?;
    m.add(
        "HTTP_STALE_FORBIDDING",
        PyTuple::new(py, ziggurat_http::STALE_FORBIDDING)?,
    )?;
    m.add("MAX_HTTP_TTL", ziggurat_http::MAX_HTTP_TTL)?;
    m.add(
        "HTTP_ERROR_STATUSES",
        PyTuple::new(py, ziggurat_http::ERROR_STATUSES)?,
    )?;
    m.add("MAX_URL_KEY", ziggurat_http::MAX_URL_KEY)?;
    m.add(
        "HTTP_CLIENT_CONDITIONALS",
        names(&ziggurat_http::CLIENT_CONDITIONALS)?,
    )?;
    m.add(
        "HTTP_PASS_CONDITIONALS",
        names(&ziggurat_http::PASS_CONDITIONALS)?,
    )?;
    m.add(
        "HTTP_SURROGATE_CAPABILITY",
        ziggurat_http::SURROGATE_CAPABILITY,
    )?;
    Ok(())
}
