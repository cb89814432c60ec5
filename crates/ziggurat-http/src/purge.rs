//! `PURGE`, the cache's own method: who may send it, what it names, and what the
//! cache answers. The app never sees one (nor its token).

use crate::cache_status::{cache_status, Param};
use crate::fields::{field, fields, Headers};
use crate::host::normalise_host;
use crate::key::base_key;
use crate::sent::Lines;
use crate::tags::split_tags;

/// The header that carries the purge token.
pub const PURGE_TOKEN: &[u8] = b"purge-token";

/// The shortest purge token accepted, in characters.
pub const MIN_PURGE_TOKEN: usize = 16;

/// What a `PURGE` asks, once its sender is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purge {
    /// Not from an allowed client, or without the token: answered 403.
    Forbidden,
    /// Invalidate these tags (the tag header's), then answer [`Purged::Tags`].
    Tags(Vec<String>),
    /// Delete the URL keyed so ([`crate::purge_keys`], in order), then answer
    /// [`Purged::Url`] with whether something was stored.
    Url(Vec<u8>),
    /// The Host is not one a key can be made of: answered 400.
    BadHost,
}

/// What came of a purge, for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purged {
    /// [`Purge::Forbidden`].
    Forbidden,
    /// [`Purge::BadHost`].
    BadHost,
    /// The tags were invalidated.
    Tags,
    /// The URL was purged; whether something was stored.
    Url(bool),
    /// The cache failed while purging.
    Failed,
}

fn same(a: &[u8], b: &[u8]) -> bool {
    // Compared in time that depends on the lengths alone: the token is a secret.
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What a `PURGE` of `target` on `host_raw` (its header lines `headers`, sent from an
/// address `client_allowed` or not) asks when the configured token is `token` and the
/// tag header is `tag_header`.
///
/// ```
/// use ziggurat_http::{purge_request, Purge};
/// let h: &[(&[u8], &[u8])] = &[(b"purge-token", b"0123456789abcdef"), (b"cache-tag", b"posts")];
/// let p = purge_request(b"0123456789abcdef", b"cache-tag", true, "http", Some(b"h"), b"/", h);
/// assert_eq!(p, Purge::Tags(vec!["posts".into()]));
/// assert_eq!(purge_request(b"another-token-xx", b"cache-tag", true, "http", Some(b"h"), b"/", h),
///            Purge::Forbidden);
/// ```
#[allow(clippy::too_many_arguments)] // the request's parts, each its own
pub fn purge_request(
    token: &[u8],
    tag_header: &[u8],
    client_allowed: bool,
    scheme: &str,
    host_raw: Option<&[u8]>,
    target: &[u8],
    headers: &Headers<'_>,
) -> Purge {
    let given = field(headers, PURGE_TOKEN).unwrap_or(b"");
    if !client_allowed || token.is_empty() || !same(given, token) {
        return Purge::Forbidden;
    }
    let tags = split_tags(fields(headers, tag_header));
    if !tags.is_empty() {
        return Purge::Tags(tags);
    }
    match host_raw.and_then(normalise_host) {
        Some(host) => Purge::Url(base_key(scheme, &host, target)),
        None => Purge::BadHost,
    }
}

/// The cache's answer to a purge: status, header lines (with the `Cache-Status` member
/// when `cache_status`), body.
///
/// ```
/// use ziggurat_http::{purge_answer, Purged};
/// let (status, _, body) = purge_answer(Purged::Url(false), true);
/// assert_eq!((status, body), (404, &b"purged\n"[..]));
/// ```
pub fn purge_answer(p: Purged, cache_status_on: bool) -> (u16, Lines, &'static [u8]) {
    let (status, body): (u16, &'static [u8]) = match p {
        Purged::Forbidden => (403, b"purge not allowed\n"),
        Purged::BadHost => (400, b"bad host\n"),
        Purged::Tags => (200, b"purged tags\n"),
        Purged::Url(true) => (200, b"purged\n"),
        Purged::Url(false) => (404, b"purged\n"),
        Purged::Failed => (503, b"purge failed\n"),
    };
    let mut headers = vec![(b"content-type".to_vec(), b"text/plain".to_vec())];
    if cache_status_on {
        let cs = cache_status(
            "fwd",
            &[
                ("fwd", Param::Value("method")),
                ("detail", Param::Value("purge")),
            ],
        );
        headers.push((b"cache-status".to_vec(), cs.into_bytes()));
    }
    (status, headers, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[u8] = b"0123456789abcdef";

    #[test]
    fn the_sender_is_checked_first() {
        let h: &[(&[u8], &[u8])] = &[(b"purge-token", T)];
        let p = |allowed, token: &[u8]| {
            purge_request(token, b"cache-tag", allowed, "http", Some(b"H"), b"/x", h)
        };
        assert_eq!(p(false, T), Purge::Forbidden);
        assert_eq!(p(true, b""), Purge::Forbidden);
        assert_eq!(p(true, b"0123456789abcdeF"), Purge::Forbidden);
        assert_eq!(p(true, T), Purge::Url(b"zh2:http://h /x".to_vec()));
        let bad = purge_request(T, b"cache-tag", true, "http", Some(b"a b"), b"/", h);
        assert_eq!(bad, Purge::BadHost);
        assert_eq!(purge_answer(Purged::Failed, false).0, 503);
    }
}
