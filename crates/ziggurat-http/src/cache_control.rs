//! Cache-Control (RFC 9111 §5.2): the directives of a request or a response.

use std::collections::HashMap;

use crate::fields::latin1;

/// Cache directives: lower-case names, each with its argument (None when it has none),
/// in the order they came.
///
/// Every operation but [`Directives::iter`] takes the same time however many directives
/// there are: a client chooses how many a request holds, so adding or finding one must
/// never mean going through the others.
///
/// ```
/// use ziggurat_http::parse_cache_control;
/// let cc = parse_cache_control([&b"Public, MAX-AGE=60"[..]]);
/// assert_eq!(cc.get("max-age"), Some(Some("60")));
/// assert!(cc.contains("public") && !cc.contains("private"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Directives {
    /// In the order they came; a removed directive leaves None, so that the positions in
    /// `index` stay true without moving the ones after it.
    entries: Vec<Option<(String, Option<String>)>>,
    /// Each present name, and its place in `entries`.
    index: HashMap<String, usize>,
}

impl Directives {
    /// No directives.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether directive `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The argument of `name`: None when absent, `Some(None)` when present without one.
    pub fn get(&self, name: &str) -> Option<Option<&str>> {
        let (_, arg) = self.entries[*self.index.get(name)?].as_ref()?;
        Some(arg.as_deref())
    }

    /// Adds `name` unless it is present (the first occurrence wins, RFC 9111 §4.2.1).
    pub fn insert_first(&mut self, name: String, arg: Option<String>) {
        if !self.contains(&name) {
            self.push(name, arg);
        }
    }

    /// Adds `name` at the end, replacing an earlier occurrence (the last one wins).
    pub fn insert_last(&mut self, name: String, arg: Option<String>) {
        self.remove(&name);
        self.push(name, arg);
    }

    fn push(&mut self, name: String, arg: Option<String>) {
        self.index.insert(name.clone(), self.entries.len());
        self.entries.push(Some((name, arg)));
    }

    /// Removes `name` if present.
    pub fn remove(&mut self, name: &str) {
        if let Some(i) = self.index.remove(name) {
            self.entries[i] = None;
        }
    }

    /// The directives in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.entries
            .iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
    }

    /// How many directives there are.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// Equal when they hold the same directives in the same order (removed ones leave no
/// trace).
impl PartialEq for Directives {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Directives {}

/// Directives from `(name, argument)` pairs, in their order; the first occurrence of a
/// name wins.
///
/// ```
/// use ziggurat_http::Directives;
/// let cc: Directives = [("a".into(), None), ("a".into(), Some("1".into()))].into_iter().collect();
/// assert_eq!(cc.iter().collect::<Vec<_>>(), [("a", None)]);
/// ```
impl FromIterator<(String, Option<String>)> for Directives {
    fn from_iter<I: IntoIterator<Item = (String, Option<String>)>>(items: I) -> Self {
        let mut out = Self::new();
        for (name, arg) in items {
            out.insert_first(name, arg);
        }
        out
    }
}

/// Whether `c` is a tchar of RFC 9110 §5.6.2.
pub(crate) fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// The end of the token starting at `i` (`i` itself when there is none).
fn token_end(raw: &[u8], i: usize) -> usize {
    raw[i..]
        .iter()
        .position(|&c| !is_tchar(c))
        .map_or(raw.len(), |p| i + p)
}

fn skip(raw: &[u8], mut i: usize, set: &[u8]) -> usize {
    while i < raw.len() && set.contains(&raw[i]) {
        i += 1;
    }
    i
}

/// Past the next comma after `i` (the end when there is none).
fn skip_item(raw: &[u8], i: usize) -> usize {
    raw[i..]
        .iter()
        .position(|&c| c == b',')
        .map_or(raw.len(), |p| i + p + 1)
}

/// Cache-Control directives of a field's lines. Names are case-insensitive; quoted
/// arguments may hold commas; the first occurrence of a directive wins (RFC 9111
/// §4.2.1); items that are not `token[=token|quoted-string]` are ignored. Any bytes are
/// accepted.
///
/// ```
/// use ziggurat_http::parse_cache_control;
/// let cc = parse_cache_control([&b"private=\"set-cookie, x\", No-Store"[..], b"max-age=5"]);
/// let all: Vec<_> = cc.iter().collect();
/// assert_eq!(all, [("private", Some("set-cookie, x")), ("no-store", None), ("max-age", Some("5"))]);
/// let cc = parse_cache_control([&b"\xff, max-age==3, ok"[..]]);
/// assert_eq!(cc.iter().collect::<Vec<_>>(), [("ok", None)]);
/// ```
pub fn parse_cache_control<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Directives {
    let mut out = Directives::new();
    for raw in values {
        let n = raw.len();
        let mut i = 0;
        while i < n {
            i = skip(raw, i, b" \t,");
            let end = if i < n { token_end(raw, i) } else { i };
            if end == i {
                i = skip_item(raw, i);
                continue;
            }
            let name = String::from_utf8_lossy(&raw[i..end]).to_ascii_lowercase();
            i = skip(raw, end, b" \t");
            let mut arg = None;
            let mut ok = true;
            if i < n && raw[i] == b'=' {
                i = skip(raw, i + 1, b" \t");
                if i < n && raw[i] == b'"' {
                    let mut j = i + 1;
                    let mut buf = Vec::new();
                    while j < n && raw[j] != b'"' {
                        if raw[j] == b'\\' && j + 1 < n {
                            j += 1;
                        }
                        buf.push(raw[j]);
                        j += 1;
                    }
                    if j >= n {
                        ok = false;
                        i = n;
                    } else {
                        arg = Some(latin1(&buf));
                        i = j + 1;
                    }
                } else {
                    let end = if i < n { token_end(raw, i) } else { i };
                    if end == i {
                        ok = false;
                    } else {
                        arg = Some(String::from_utf8_lossy(&raw[i..end]).into_owned());
                        i = end;
                    }
                }
            }
            i = skip(raw, i, b" \t");
            if i < n && raw[i] != b',' {
                ok = false;
                i = skip_item(raw, i);
            }
            if ok {
                out.insert_first(name, arg);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cc(s: &[u8]) -> Vec<(String, Option<String>)> {
        parse_cache_control([s])
            .iter()
            .map(|(k, v)| (k.to_owned(), v.map(str::to_owned)))
            .collect()
    }

    fn d(items: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn module_example() {
        assert_eq!(
            cc(b"Public, MAX-AGE=60, s-maxage=\"30\""),
            d(&[
                ("public", None),
                ("max-age", Some("60")),
                ("s-maxage", Some("30"))
            ])
        );
    }

    #[test]
    fn first_occurrence_wins_across_lines() {
        let got = parse_cache_control([&b"max-age=1"[..], b"max-age=2, no-cache"]);
        assert_eq!(got.get("max-age"), Some(Some("1")));
        assert_eq!(got.get("no-cache"), Some(None));
    }

    #[test]
    fn the_last_occurrence_moves_to_the_end_and_removed_ones_leave_no_trace() {
        let mut cc = parse_cache_control([&b"a, b=1, c"[..]]);
        cc.insert_last("a".to_owned(), Some("2".to_owned()));
        cc.remove("b");
        cc.remove("absent");
        assert_eq!(
            cc.iter().collect::<Vec<_>>(),
            [("c", None), ("a", Some("2"))]
        );
        assert_eq!((cc.len(), cc.get("b"), cc.contains("b")), (2, None, false));
        assert_eq!(cc, parse_cache_control([&b"c, a=2"[..]]));
        assert_ne!(cc, parse_cache_control([&b"a=2, c"[..]]));
        cc.remove("a");
        cc.remove("c");
        assert!(cc.is_empty() && cc == Directives::new());
    }

    #[test]
    fn every_line_of_a_large_field_counts_once() {
        let lines: Vec<Vec<u8>> = (0..20_000)
            .map(|i| format!("d{}, max-age={i}", i % 5_000).into_bytes())
            .collect();
        let cc = parse_cache_control(lines.iter().map(Vec::as_slice));
        assert_eq!((cc.len(), cc.get("max-age")), (5_001, Some(Some("0"))));
        assert_eq!(cc.iter().nth(2), Some(("d1", None)));
    }

    #[test]
    fn quoted_strings() {
        assert_eq!(cc(br#"no-cache="a\"b""#), d(&[("no-cache", Some("a\"b"))]));
        // An unterminated quoted string ends the line.
        assert_eq!(cc(br#"a, b="x, c"#), d(&[("a", None)]));
        // A backslash at the very end escapes nothing.
        assert_eq!(cc(b"b=\"x\\"), d(&[]));
        // Latin-1 inside quotes is kept as text.
        assert_eq!(cc(b"x=\"\xe9\""), d(&[("x", Some("\u{e9}"))]));
    }

    #[test]
    fn malformed_items_are_skipped() {
        assert_eq!(cc(b"max-age=, a"), d(&[("a", None)]));
        assert_eq!(cc(b"max-age="), d(&[]));
        assert_eq!(
            cc(b"max-age = 5 , b"),
            d(&[("max-age", Some("5")), ("b", None)])
        );
        assert_eq!(cc(b"a b, c"), d(&[("c", None)]));
        assert_eq!(cc(b"a=\"x\" y, c"), d(&[("c", None)]));
        assert_eq!(cc(b",,, \t"), d(&[]));
        assert_eq!(cc(b"=5, c"), d(&[("c", None)]));
    }

    proptest! {
        #[test]
        fn any_bytes_parse(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let got = parse_cache_control([&raw[..]]);
            for (name, _) in got.iter() {
                prop_assert!(!name.is_empty());
                prop_assert!(name.bytes().all(is_tchar));
                prop_assert_eq!(name.to_ascii_lowercase(), name);
            }
        }

        #[test]
        fn printed_directives_round_trip(
            items in proptest::collection::vec(
                ("[a-z][a-z-]{0,8}", proptest::option::of("[ -~]{0,8}")), 0..6)
        ) {
            let mut want = Directives::new();
            let mut line = Vec::new();
            for (name, arg) in &items {
                if !line.is_empty() {
                    line.extend_from_slice(b", ");
                }
                line.extend_from_slice(name.as_bytes());
                if let Some(a) = arg {
                    line.extend_from_slice(b"=\"");
                    for c in a.bytes() {
                        if c == b'"' || c == b'\\' {
                            line.push(b'\\');
                        }
                        line.push(c);
                    }
                    line.push(b'"');
                }
                want.insert_first(name.clone(), arg.clone());
            }
            prop_assert_eq!(parse_cache_control([&line[..]]), want);
        }
    }
}
