//! Which statuses a shared cache stores, and on what terms (RFC 9111 §3, RFC 9110 §15).

use crate::cache_control::Directives;
use crate::not_stored::NotStored;

/// RFC 9110 §15.1: the statuses that may get heuristic (or configured default) freshness.
pub const HEURISTIC_STATUSES: [u16; 11] = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501];

/// RFC 9111 §3: whether a final status is stored when the response has explicit
/// freshness. A status RFC 9110 does not define is understood by its class (a 299 as a
/// 200). Never: 206 (ranges are not stored), 304 (it updates a stored response, §4.3.4),
/// 305 and 306 (obsolete), 407 (it speaks to the proxy in front, not to every client).
///
/// ```
/// use ziggurat_http::is_storable_status;
/// assert!(is_storable_status(599) && !is_storable_status(206) && !is_storable_status(199));
/// ```
pub fn is_storable_status(status: u16) -> bool {
    (200..600).contains(&status) && !matches!(status, 206 | 304 | 305 | 306 | 407)
}

/// Whether `status` may get heuristic or configured freshness at all (RFC 9110 §15.1).
///
/// ```
/// use ziggurat_http::is_heuristic_status;
/// assert!(is_heuristic_status(404) && !is_heuristic_status(302));
/// ```
pub fn is_heuristic_status(status: u16) -> bool {
    HEURISTIC_STATUSES.contains(&status)
}

/// RFC 9111 §5.2.2.3 (must-understand): the statuses whose caching rules this cache
/// implements beyond the general ones: the heuristically cacheable ones and the
/// redirects.
///
/// ```
/// use ziggurat_http::is_understood_status;
/// assert!(is_understood_status(307) && !is_understood_status(201));
/// ```
pub fn is_understood_status(status: u16) -> bool {
    is_heuristic_status(status) || matches!(status, 302 | 303 | 307)
}

/// Whether a response without explicit freshness may get a heuristic or configured
/// lifetime: only a status RFC 9110 §15.1 names heuristically cacheable, and never an
/// error status: an error page is stored only when the app itself gives it a lifetime
/// (a cached error served to everyone is the cache-poisoning denial of service).
///
/// ```
/// use ziggurat_http::may_use_default_freshness;
/// assert!(may_use_default_freshness(200) && !may_use_default_freshness(302));
/// assert!(!may_use_default_freshness(404) && !may_use_default_freshness(501));
/// ```
pub fn may_use_default_freshness(status: u16) -> bool {
    status < 400 && is_heuristic_status(status)
}

/// Why a response with this status and these directives cannot be stored
/// ([`NotStored::Status`] or [`NotStored::MustUnderstand`]), or None.
///
/// With `must-understand` (RFC 9111 §5.2.2.3) only the statuses this cache understands
/// may be stored (and its `no-store` is then ignored, see [`ignores_no_store`]);
/// otherwise any storable status.
///
/// ```
/// use ziggurat_http::{parse_cache_control, status_storable, Directives, NotStored};
/// let none = Directives::new();
/// assert_eq!(status_storable(302, &none), None);
/// assert_eq!(status_storable(599, &none), None);
/// assert_eq!(status_storable(206, &none), Some(NotStored::Status));
/// let mu = parse_cache_control([&b"must-understand"[..]]);
/// assert_eq!(status_storable(200, &mu), None);
/// assert_eq!(status_storable(201, &mu), Some(NotStored::MustUnderstand));
/// assert_eq!(status_storable(599, &mu), Some(NotStored::MustUnderstand));
/// ```
pub fn status_storable(status: u16, cc: &Directives) -> Option<NotStored> {
    if cc.contains("must-understand") {
        return (!is_understood_status(status)).then_some(NotStored::MustUnderstand);
    }
    (!is_storable_status(status)).then_some(NotStored::Status)
}

/// Whether `no-store` is overridden by `must-understand` on a status this cache
/// understands (RFC 9111 §5.2.2.3).
///
/// ```
/// use ziggurat_http::{ignores_no_store, parse_cache_control};
/// assert!(ignores_no_store(200, &parse_cache_control([&b"must-understand, no-store"[..]])));
/// assert!(!ignores_no_store(200, &parse_cache_control([&b"no-store"[..]])));
/// assert!(!ignores_no_store(201, &parse_cache_control([&b"must-understand"[..]])));
/// ```
pub fn ignores_no_store(status: u16, cc: &Directives) -> bool {
    cc.contains("must-understand") && is_understood_status(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storable_statuses() {
        let stored: Vec<u16> = (0..1000).filter(|&s| is_storable_status(s)).collect();
        assert_eq!(stored.len(), 400 - 5);
        for s in [100, 199, 206, 304, 305, 306, 407, 600, 999] {
            assert!(!is_storable_status(s), "{s}");
        }
    }

    #[test]
    fn understood_statuses() {
        let understood: Vec<u16> = (0..1000).filter(|&s| is_understood_status(s)).collect();
        assert_eq!(
            understood,
            [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]
        );
    }
}
