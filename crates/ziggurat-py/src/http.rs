//! The HTTP cache (ziggurat-http) for the Python middleware: `http_*` functions of
//! `_native` that `ziggurat.http` drives, and `HttpOptions` (its options, read once).
//! Header lists come as `[(bytes, bytes)]`, read in place; directives go back and forth
//! as `dict[str, str | None]`; a stored response crosses as its value bytes, which the
//! crate decodes in place. One file per part: the conversions (`convert`), the rules that
//! need no options (`fields`), the options (`options`), the stored format and keys
//! (`stored`), and the fill and lookup decisions (`fill`).

mod convert;
mod fields;
mod fill;
mod options;
mod stored;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use fields::*;
use fill::*;
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
        http_invalidated_keys, http_host_allowed, http_usable, http_lookup_step, http_reply,
        http_stale_if_error, http_head_step, http_head_update, http_purge_mark,
        http_purge_keys
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
