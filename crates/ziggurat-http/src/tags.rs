//! The tag header: the tags a response is stored under, or a PURGE names.

use crate::fields::{latin1, ASCII_SPACE};

/// Tags named by the tag header's lines: comma- or whitespace-separated, empty items
/// dropped, each once in the order it first came.
///
/// ```
/// use ziggurat_http::split_tags;
/// assert_eq!(split_tags([&b"posts, post:1 lists"[..], b"  "]), ["posts", "post:1", "lists"]);
/// ```
pub fn split_tags<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for v in values {
        for item in v.split(|c| *c == b',' || ASCII_SPACE.contains(c)) {
            if !item.is_empty() && seen.insert(item) {
                out.push(latin1(item));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_separators() {
        assert_eq!(
            split_tags([&b"a,b\tc\n a,,\x0bd\x0ce\rb"[..], b"a f"]),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(split_tags([&b"\xe9t\xe9"[..]]), ["\u{e9}t\u{e9}"]);
        assert!(split_tags([&b" , "[..]]).is_empty());
    }
}
