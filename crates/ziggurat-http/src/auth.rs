//! RFC 9111 §3.5: what lets a shared cache store the answer to a request with
//! `Authorization`.

use crate::cache_control::Directives;
use crate::storable::StoreOptions;

/// RFC 9111 §3.5: whether a response with directives `cc` to a request with
/// `Authorization` may be stored by a shared cache (`public`, `s-maxage`, and
/// `must-revalidate` with [`StoreOptions::store_auth_must_revalidate`]).
///
/// ```
/// use ziggurat_http::{auth_shared, parse_cache_control, StoreOptions};
/// let cc = parse_cache_control([&b"max-age=60, must-revalidate"[..]]);
/// assert!(!auth_shared(&StoreOptions::default(), &cc));
/// let opts = StoreOptions { store_auth_must_revalidate: true, ..StoreOptions::default() };
/// assert!(auth_shared(&opts, &cc));
/// ```
pub fn auth_shared(opts: &StoreOptions<'_>, cc: &Directives) -> bool {
    cc.contains("public")
        || cc.contains("s-maxage")
        || (opts.store_auth_must_revalidate && cc.contains("must-revalidate"))
}
