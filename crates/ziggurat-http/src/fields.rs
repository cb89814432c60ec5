//! Header lists: the lines of one field, and the items of a list-valued field.

/// A header list: `(name, value)` pairs of bytes, names in lower case (as ASGI gives
/// them; a front end that has another form converts once).
pub type Headers<'a> = [(&'a [u8], &'a [u8])];

/// The first value of header `name` (lower-case bytes).
///
/// ```
/// use ziggurat_http::field;
/// let h: &[(&[u8], &[u8])] = &[(b"age", b"5"), (b"age", b"7")];
/// assert_eq!(field(h, b"age"), Some(&b"5"[..]));
/// ```
pub fn field<'a>(headers: &Headers<'a>, name: &[u8]) -> Option<&'a [u8]> {
    headers.iter().find(|(k, _)| *k == name).map(|&(_, v)| v)
}

/// Every value of header `name`, in order.
///
/// ```
/// use ziggurat_http::fields;
/// let h: &[(&[u8], &[u8])] = &[(b"vary", b"a"), (b"x", b"1"), (b"vary", b"b")];
/// assert_eq!(fields(h, b"vary"), [&b"a"[..], &b"b"[..]]);
/// ```
pub fn fields<'a>(headers: &Headers<'a>, name: &[u8]) -> Vec<&'a [u8]> {
    headers
        .iter()
        .filter(|(k, _)| *k == name)
        .map(|&(_, v)| v)
        .collect()
}

/// The items of a comma-separated list field, stripped of spaces and tabs, empty items
/// dropped.
///
/// ```
/// use ziggurat_http::parse_list;
/// assert_eq!(parse_list([&b" a, ,b "[..], b"c"]), [&b"a"[..], b"b", b"c"]);
/// ```
pub fn parse_list<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for v in values {
        for item in v.split(|&c| c == b',') {
            let item = strip(item, b" \t");
            if !item.is_empty() {
                out.push(item);
            }
        }
    }
    out
}

/// `s` without the leading and trailing bytes of `set`.
pub(crate) fn strip<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|c| !set.contains(c)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|c| !set.contains(c))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// ASCII whitespace: space, tab, line feed, carriage return, vertical tab, form feed.
pub(crate) const ASCII_SPACE: &[u8] = b" \t\n\r\x0b\x0c";

/// Latin-1 bytes as text: every byte is the code point of the same value.
pub(crate) fn latin1(s: &[u8]) -> String {
    s.iter().map(|&c| char::from(c)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_keeps_the_middle() {
        assert_eq!(strip(b"  a b \t", b" \t"), b"a b");
        assert_eq!(strip(b" \t ", b" \t"), b"");
        assert_eq!(strip(b"", b" \t"), b"");
    }

    #[test]
    fn parse_list_drops_empty_items() {
        assert!(parse_list([&b" , ,\t"[..]]).is_empty());
        assert_eq!(
            parse_list([&b"a,b"[..], b"", b" c "]),
            [&b"a"[..], b"b", b"c"]
        );
    }

    #[test]
    fn latin1_maps_every_byte() {
        assert_eq!(latin1(b"a\xe9"), "a\u{e9}");
    }
}
