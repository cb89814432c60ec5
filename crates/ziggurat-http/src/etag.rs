//! Entity tags (RFC 9110 §8.8.3, §13.1.2): `If-None-Match` against a stored ETag.

use crate::fields::{parse_list, strip, ASCII_SPACE};

/// Weak comparison of an `If-None-Match` value against a stored ETag (`*` matches any).
///
/// ```
/// use ziggurat_http::etag_matches;
/// assert!(etag_matches(b"\"a\", W/\"b\"", Some(b"\"b\"")));
/// assert!(etag_matches(b"*", Some(b"\"x\"")));
/// assert!(!etag_matches(b"\"a\"", None));
/// ```
pub fn etag_matches(condition: &[u8], etag: Option<&[u8]>) -> bool {
    let Some(etag) = etag else {
        return false;
    };
    if strip(condition, ASCII_SPACE) == b"*" {
        return true;
    }
    let mine = weak(strip(etag, ASCII_SPACE));
    parse_list([condition])
        .into_iter()
        .any(|item| weak(item) == mine)
}

fn weak(tag: &[u8]) -> &[u8] {
    tag.strip_prefix(b"W/").unwrap_or(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_comparison() {
        assert!(etag_matches(b"\"b\"", Some(b"W/\"b\"")));
        assert!(etag_matches(b" \n* \r", Some(b"\"b\"")));
        assert!(etag_matches(b"\"x\",\t\"b\" ", Some(b" \"b\"\n")));
        assert!(!etag_matches(b"\"B\"", Some(b"\"b\"")));
        assert!(!etag_matches(b"*, \"a\"", Some(b"\"b\"")));
        assert!(!etag_matches(b"", Some(b"")));
    }
}
