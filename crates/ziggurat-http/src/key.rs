//! The key scheme: which cache key a response lives under.
//!
//! A key is `zh2:` + scheme + `://` + host + a space + the raw path and query. The space
//! cannot occur in a normalised host ([`crate::normalise_host`]), so no host and target
//! can make the key of another host and target. `GET` and `HEAD` share a key. A URL
//! whose responses vary keeps a variant record ([`crate::Variants`]) under its key; each
//! variant lives under [`variant_key`]. A key longer than [`MAX_URL_KEY`] is replaced by a
//! digest of it. [`lock_key`] names the lease that coalesces the fills of a key.

use crate::host::normalise_host;
use blake2::digest::consts::U32;
use blake2::{Blake2b, Digest};

/// The longest key kept as it is (a segment key is at most 4096 bytes); a longer one is
/// named by its digest.
pub const MAX_URL_KEY: usize = 2048;
const PREFIX: &[u8] = b"zh2:";

/// `key` itself, or, past [`MAX_URL_KEY`], `zh2:#` and 64 hex digits of its BLAKE2b-256.
fn bound(key: Vec<u8>) -> Vec<u8> {
    if key.len() <= MAX_URL_KEY {
        return key;
    }
    let mut out = PREFIX.to_vec();
    out.push(b'#');
    for c in Blake2b::<U32>::digest(&key) {
        out.extend_from_slice(format!("{c:02x}").as_bytes());
    }
    out
}

/// The key of a URL: `scheme`, a normalised `host`, the raw `target` (path and query).
///
/// ```
/// use ziggurat_http::base_key;
/// assert_eq!(base_key("https", "example.com", b"/a?b=1"), b"zh2:https://example.com /a?b=1");
/// assert_ne!(base_key("http", "h", b":8443/x"), base_key("http", "h:8443", b"/x"));
/// assert_eq!(base_key("http", "h", &[b'/'; 4000]).len(), 69);
/// ```
pub fn base_key(scheme: &str, host: &str, target: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(PREFIX.len() + scheme.len() + host.len() + target.len() + 4);
    k.extend_from_slice(PREFIX);
    k.extend_from_slice(scheme.as_bytes());
    k.extend_from_slice(b"://");
    k.extend_from_slice(host.as_bytes());
    k.push(b' ');
    k.extend_from_slice(target);
    bound(k)
}

/// The key of one `Vary` variant of `base`: its record's `generation` and the
/// [`crate::vary_digest`] of the request's values.
///
/// ```
/// use ziggurat_http::variant_key;
/// assert_eq!(variant_key(b"zh2:http://h /x", "ab12", "d1"), b"zh2:http://h /x\x00vab12:d1");
/// ```
pub fn variant_key(base: &[u8], generation: &str, digest: &str) -> Vec<u8> {
    let mut k = base.to_vec();
    k.extend_from_slice(b"\x00v");
    k.extend_from_slice(generation.as_bytes());
    k.push(b':');
    k.extend_from_slice(digest.as_bytes());
    bound(k)
}

/// The key whose stamp only a purge of the URL keyed `base` moves (a purge
/// deletes it, then the URL's entry): a fill snapshots it before calling the
/// app and stores only while it holds, so a page rendered before a purge
/// returned never lands after it, while the fills of the URL's other
/// variants, which rewrite `base` itself, leave it alone.
///
/// ```
/// use ziggurat_http::purge_mark;
/// assert_eq!(purge_mark(b"zh2:http://h /x"), b"zh2P:http://h /x");
/// ```
pub fn purge_mark(base: &[u8]) -> Vec<u8> {
    let mut k = b"zh2P:".to_vec();
    k.extend_from_slice(base.strip_prefix(PREFIX).unwrap_or(base));
    k
}

/// The keys a purge of the URL keyed `base` deletes, in order: its purge
/// mark first, so that a fill rendering meanwhile finds it moved and stores
/// nothing, then its entry (every variant goes with the record naming them).
///
/// ```
/// use ziggurat_http::purge_keys;
/// assert_eq!(purge_keys(b"zh2:http://h /x"), [b"zh2P:http://h /x".to_vec(), b"zh2:http://h /x".to_vec()]);
/// ```
pub fn purge_keys(base: &[u8]) -> [Vec<u8>; 2] {
    [purge_mark(base), base.to_vec()]
}

/// The key whose lease lets one background refresh (stale-while-revalidate) of `key`
/// run per host.
///
/// ```
/// use ziggurat_http::refresh_lock_key;
/// assert_eq!(refresh_lock_key(b"zh2:http://h /x"), b"zh2L:http://h /x\x00refresh");
/// ```
pub fn refresh_lock_key(key: &[u8]) -> Vec<u8> {
    let mut k = lock_key(key);
    k.extend_from_slice(b"\x00refresh");
    k
}

/// The key whose lease coalesces the fills of `key` (across processes).
///
/// ```
/// use ziggurat_http::lock_key;
/// assert_eq!(lock_key(b"zh2:http://h /x"), b"zh2L:http://h /x");
/// assert_eq!(lock_key(b"other"), b"zh2L:other");
/// ```
pub fn lock_key(key: &[u8]) -> Vec<u8> {
    let mut k = b"zh2L".to_vec();
    match key.strip_prefix(PREFIX) {
        Some(rest) => {
            k.push(b':');
            k.extend_from_slice(rest);
        }
        None => {
            k.push(b':');
            k.extend_from_slice(key);
        }
    }
    k
}

/// The parts of a URL reference as the WHATWG-tolerant split of RFC 3986 gives them:
/// scheme (lower-case, empty when none), authority (None when none), path, query (None
/// when there is no `?`). Leading spaces and control characters are dropped, tabs and
/// line breaks removed anywhere, the fragment ignored. None for an authority with
/// unbalanced brackets.
struct Url {
    scheme: String,
    netloc: Option<String>,
    path: String,
    query: Option<String>,
}

fn split_url(raw: &str) -> Option<Url> {
    let s: String = raw
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
        .collect();
    let mut rest = s.as_str();
    let mut scheme = String::new();
    if let Some(i) = rest.find(':') {
        let head = &rest[..i];
        let first_alpha = head.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
        if first_alpha
            && head
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            scheme = head.to_ascii_lowercase();
            rest = &rest[i + 1..];
        }
    }
    let mut netloc = None;
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let n = &after[..end];
        if n.contains('[') != n.contains(']') {
            return None;
        }
        netloc = Some(n.to_owned());
        rest = &after[end..];
    }
    let rest = rest.split('#').next().unwrap_or("");
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q.to_owned())),
        None => (rest, None),
    };
    Some(Url {
        scheme,
        netloc,
        path: path.to_owned(),
        query,
    })
}

/// Text as Latin-1 bytes; a character past U+00FF becomes `?`.
fn latin1(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

/// The key of an absolute `http`/`https` URL, as a request for it is keyed (what a purge
/// by URL deletes); None when `url` is not one or its host is not valid.
///
/// ```
/// use ziggurat_http::url_key;
/// assert_eq!(url_key("https://Example.com/a?b").unwrap(), b"zh2:https://example.com /a?b");
/// assert_eq!(url_key("http://h").unwrap(), b"zh2:http://h /");
/// assert_eq!(url_key("ftp://h/x"), None);
/// ```
pub fn url_key(url: &str) -> Option<Vec<u8>> {
    let u = split_url(url)?;
    if u.scheme != "http" && u.scheme != "https" {
        return None;
    }
    let host = normalise_host(&latin1(u.netloc.as_deref().unwrap_or("")))?;
    let mut target = if u.path.is_empty() {
        b"/".to_vec()
    } else {
        latin1(&u.path)
    };
    if let Some(q) = u.query {
        target.push(b'?');
        target.extend_from_slice(&latin1(&q));
    }
    Some(base_key(&u.scheme, &host, &target))
}

/// RFC 9111 §4.4: the keys an unsafe request's successful response invalidates: its
/// target's, and those of the `Location` and `Content-Location` of the response when
/// they name the same origin (`host` normalised). A relative reference is resolved
/// against the target's path.
///
/// ```
/// use ziggurat_http::invalidated_keys;
/// let h: &[(&[u8], &[u8])] = &[(b"location", b"b?x=1"), (b"content-location", b"http://other/c")];
/// assert_eq!(invalidated_keys("http", "h", b"/d/a", h), [&b"zh2:http://h /d/a"[..], b"zh2:http://h /d/b?x=1"]);
/// ```
pub fn invalidated_keys(
    scheme: &str,
    host: &str,
    target: &[u8],
    headers: &crate::Headers<'_>,
) -> Vec<Vec<u8>> {
    let mut out = vec![base_key(scheme, host, target)];
    for name in [&b"location"[..], b"content-location"] {
        let Some(loc) = crate::field(headers, name) else {
            continue;
        };
        let text: String = loc.iter().map(|&c| char::from(c)).collect();
        let text = text.trim_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c));
        if text.is_empty() {
            continue;
        }
        let Some(u) = split_url(text) else {
            continue;
        };
        if !u.scheme.is_empty() {
            let other = u.scheme != scheme
                || normalise_host(&latin1(u.netloc.as_deref().unwrap_or(""))).as_deref()
                    != Some(host);
            if other {
                continue;
            }
        }
        if u.netloc.as_deref().is_some_and(|n| !n.is_empty()) && u.scheme.is_empty() {
            continue;
        }
        let mut path = latin1(&u.path);
        if path.first() != Some(&b'/') {
            let base_path = target.split(|&c| c == b'?').next().unwrap_or(b"");
            let dir = match base_path.iter().rposition(|&c| c == b'/') {
                Some(i) => &base_path[..i],
                None => base_path,
            };
            let mut p = dir.to_vec();
            p.push(b'/');
            p.extend_from_slice(&path);
            path = p;
        }
        if let Some(q) = u.query.filter(|q| !q.is_empty()) {
            path.push(b'?');
            path.extend_from_slice(&latin1(&q));
        }
        out.push(base_key(scheme, host, &path));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_as_a_browser_would() {
        let u = split_url(" \tHTTP://h:1/a?b?c#d?e").unwrap();
        assert_eq!(
            (
                u.scheme.as_str(),
                u.netloc.as_deref(),
                u.path.as_str(),
                u.query.as_deref()
            ),
            ("http", Some("h:1"), "/a", Some("b?c"))
        );
        assert!(split_url("http://[::1/x").is_none());
        let u = split_url("/x:y").unwrap();
        assert_eq!((u.scheme.as_str(), u.path.as_str()), ("", "/x:y"));
        assert_eq!(url_key("http://h/a?").unwrap(), b"zh2:http://h /a?");
        assert_eq!(url_key("http://user@h/a"), None);
    }

    #[test]
    fn long_keys_are_digests_of_the_whole_key() {
        let a = base_key("http", "h", &vec![b'a'; 3000]);
        let b = base_key("http", "h", &vec![b'b'; 3000]);
        assert!(a.starts_with(b"zh2:#") && a != b);
        let v = variant_key(&vec![b'x'; 2046], "g", "d");
        assert_eq!(v.len(), 69);
    }
}
