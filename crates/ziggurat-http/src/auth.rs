//! RFC 9111 §3.5: what lets a shared cache store the answer to a request with
//! `Authorization`.

use crate::cache_control::Directives;

/// RFC 9111 §3.5: whether a response with directives `cc` to a request with
/// `Authorization` may be stored by a shared cache: `public`, `s-maxage`, and
/// `must-revalidate` when `must_revalidate_stores` (the cache's
/// `StoreOptions::store_auth_must_revalidate`; the option lives with the
/// other store options, the rule here).
///
/// ```
/// use ziggurat_http::{auth_shared, parse_cache_control};
/// let cc = parse_cache_control([&b"max-age=60, must-revalidate"[..]]);
/// assert!(!auth_shared(&cc, false));
/// assert!(auth_shared(&cc, true));
/// ```
pub fn auth_shared(cc: &Directives, must_revalidate_stores: bool) -> bool {
    cc.contains("public")
        || cc.contains("s-maxage")
        || (must_revalidate_stores && cc.contains("must-revalidate"))
}
