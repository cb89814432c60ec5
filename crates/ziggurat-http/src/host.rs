//! The request's host, as the cache keys it.

/// Whitespace around a Host value: the ASCII whitespace and the four information
/// separators (0x1C to 0x1F), which Unicode counts as whitespace too.
const TEXT_SPACE: &[u8] = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f";

/// A request's host, lower-case, checked for syntax (a DNS name of labels of at most 63
/// letters, digits, `_` or `-`, or a bracketed IPv6 literal; then an optional port of 1
/// to 5 digits); None when missing or malformed.
///
/// ```
/// use ziggurat_http::normalise_host;
/// assert_eq!(normalise_host(b"Example.COM:8000").as_deref(), Some("example.com:8000"));
/// assert_eq!(normalise_host(b"a b"), None);
/// assert_eq!(normalise_host(b"[::1]:80").as_deref(), Some("[::1]:80"));
/// ```
pub fn normalise_host(raw: &[u8]) -> Option<String> {
    if raw.is_empty() || raw.len() > 260 || !raw.is_ascii() {
        return None;
    }
    let host = crate::fields::strip(raw, TEXT_SPACE).to_ascii_lowercase();
    let (name, port) = if host.first() == Some(&b'[') {
        let close = host.iter().position(|&c| c == b']')?;
        let inner = &host[1..close];
        let ok = (2..=45).contains(&inner.len())
            && inner
                .iter()
                .all(|&c| c.is_ascii_digit() || matches!(c, b'a'..=b'f' | b':' | b'.'));
        if !ok {
            return None;
        }
        (None, &host[close + 1..])
    } else {
        let colon = host.iter().position(|&c| c == b':').unwrap_or(host.len());
        (Some(&host[..colon]), &host[colon..])
    };
    if let Some(name) = name {
        if !dns_name(name) {
            return None;
        }
    }
    if !port.is_empty() {
        let digits = &port[1..];
        if port[0] != b':'
            || !(1..=5).contains(&digits.len())
            || !digits.iter().all(u8::is_ascii_digit)
        {
            return None;
        }
    }
    // Checked ASCII above.
    Some(host.iter().map(|&c| char::from(c)).collect())
}

/// Labels of 1 to 63 of `[a-z0-9_-]` (the first starting with a letter or digit), one
/// trailing dot allowed.
fn dns_name(name: &[u8]) -> bool {
    let name = name.strip_suffix(b".").unwrap_or(name);
    if !name.first().is_some_and(u8::is_ascii_alphanumeric) {
        return false;
    }
    name.split(|&c| c == b'.').all(|label| {
        (1..=63).contains(&label.len())
            && label
                .iter()
                .all(|&c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(s: &[u8]) -> Option<String> {
        normalise_host(s)
    }

    #[test]
    fn accepted() {
        for (raw, want) in [
            (&b"localhost"[..], "localhost"),
            (b" Example.com. ", "example.com."),
            (b"a-_.b_:1", "a-_.b_:1"),
            (b"1.2.3.4:65535", "1.2.3.4:65535"),
            (b"[2001:DB8::1]", "[2001:db8::1]"),
            (b"\x1cx\x0b", "x"),
            (b"a:99999", "a:99999"),
        ] {
            assert_eq!(host(raw).as_deref(), Some(want), "{raw:?}");
        }
        let label = "a".repeat(63);
        assert!(host(format!("{label}.{label}").as_bytes()).is_some());
    }

    #[test]
    fn refused() {
        for raw in [
            &b""[..],
            b" ",
            b"-a",
            b"_a",
            b".a",
            b"a..b",
            b"a..",
            b".",
            b"a:",
            b"a:123456",
            b"a:1:2",
            b"a:x",
            b"[]",
            b"[:]",
            b"[::1",
            b"[::g]",
            b"[::1]x",
            b"[::1]:",
            b"a/b",
            b"a@b",
            b"\xc3\xa9.com",
            b"a b",
        ] {
            assert_eq!(host(raw), None, "{raw:?}");
        }
        assert_eq!(host("a".repeat(64).as_bytes()), None);
        assert_eq!(host(format!("a.{}", "b".repeat(64)).as_bytes()), None);
        assert_eq!(host(&[b'a'; 261]), None);
    }

    proptest! {
        #[test]
        fn any_bytes_are_safe(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Some(h) = normalise_host(&raw) {
                prop_assert_eq!(normalise_host(h.as_bytes()), Some(h.clone()));
            }
        }
    }
}
