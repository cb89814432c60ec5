//! Targeted cache-control fields (RFC 9213), such as `CDN-Cache-Control`: their values
//! are Structured Field Dictionaries (RFC 8941), parsed here into [`Directives`].

use crate::cache_control::{parse_cache_control, Directives};
use crate::fields::{fields, Headers};

/// Targeted directives whose argument must be an Integer (RFC 9213 §2.2).
const DELTA_DIRECTIVES: [&str; 4] = [
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
];

/// One bare item's value, as far as directives need it.
enum Item {
    Integer(i64),
    Text(String),
    Bool(bool),
    Other,
}

fn is_key_start(c: u8) -> bool {
    c.is_ascii_lowercase() || c == b'*'
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'.' | b'*')
}

/// The end of the run of `ok` bytes from `i`.
fn run(raw: &[u8], i: usize, ok: impl Fn(u8) -> bool) -> usize {
    raw[i.min(raw.len())..]
        .iter()
        .position(|&c| !ok(c))
        .map_or(raw.len(), |p| i + p)
}

/// The end of the key at `i`, or None.
fn key(raw: &[u8], i: usize) -> Option<usize> {
    raw.get(i).copied().filter(|&c| is_key_start(c))?;
    Some(run(raw, i + 1, is_key_char))
}

/// One bare item at `raw[i..]` and its end; None if malformed.
fn item(raw: &[u8], i: usize) -> Option<(Item, usize)> {
    let c = *raw.get(i)?;
    if c == b'"' {
        let mut text = String::new();
        let mut j = i + 1;
        loop {
            match *raw.get(j)? {
                b'"' => return Some((Item::Text(text), j + 1)),
                b'\\' => {
                    let e = *raw.get(j + 1)?;
                    if e != b'"' && e != b'\\' {
                        return None;
                    }
                    text.push(char::from(e));
                    j += 2;
                }
                e @ 0x20..=0x7e => {
                    text.push(char::from(e));
                    j += 1;
                }
                _ => return None,
            }
        }
    }
    if c == b'?' {
        return match raw.get(i + 1) {
            Some(b'0') => Some((Item::Bool(false), i + 2)),
            Some(b'1') => Some((Item::Bool(true), i + 2)),
            _ => None,
        };
    }
    if let Some(n) = number(raw, i) {
        return Some(n);
    }
    if c.is_ascii_alphabetic() || c == b'*' {
        let end = run(raw, i + 1, |c| {
            crate::cache_control::is_tchar(c) || c == b':' || c == b'/'
        });
        return Some((
            Item::Text(String::from_utf8_lossy(&raw[i..end]).into_owned()),
            end,
        ));
    }
    if c == b':' {
        let end = run(raw, i + 1, |c| {
            c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=')
        });
        if raw.get(end) == Some(&b':') {
            return Some((Item::Other, end + 1));
        }
    }
    None
}

/// An Integer (up to 15 digits) or a Decimal (up to 3 more after the dot) at `i`.
fn number(raw: &[u8], i: usize) -> Option<(Item, usize)> {
    let start = if raw.get(i) == Some(&b'-') { i + 1 } else { i };
    let end = run(raw, start, |c| c.is_ascii_digit()).min(start + 15);
    if end == start {
        return None;
    }
    if raw.get(end) == Some(&b'.') {
        let frac = run(raw, end + 1, |c| c.is_ascii_digit()).min(end + 4);
        if frac > end + 1 {
            return Some((Item::Other, frac));
        }
    }
    let digits = &raw[start..end];
    let n = digits
        .iter()
        .fold(0i64, |n, &c| n * 10 + i64::from(c - b'0'));
    Some((Item::Integer(if start > i { -n } else { n }), end))
}

fn skip(raw: &[u8], mut i: usize, set: &[u8]) -> usize {
    while i < raw.len() && set.contains(&raw[i]) {
        i += 1;
    }
    i
}

/// A targeted cache-control field's lines (RFC 9213, a Structured Field Dictionary) as
/// directives in the form [`parse_cache_control`] gives; None when the field is empty or
/// not a valid Dictionary (the cache then ignores it). A directive whose argument has the
/// wrong type (`max-age="60"`) is dropped; the last occurrence of a key wins.
///
/// ```
/// use ziggurat_http::parse_targeted;
/// let cc = parse_targeted([&b"max-age=60, must-revalidate"[..]]).unwrap();
/// assert_eq!(cc.iter().collect::<Vec<_>>(), [("max-age", Some("60")), ("must-revalidate", None)]);
/// let cc = parse_targeted([&b"max-age=\"60\", no-cache"[..]]).unwrap();
/// assert_eq!(cc.iter().collect::<Vec<_>>(), [("no-cache", None)]);
/// assert_eq!(parse_targeted([&b"max-age=1, &&"[..]]), None);
/// assert_eq!(parse_targeted([&b"MaX-aGe=60"[..]]), None);
/// assert_eq!(parse_targeted([&b" "[..]]), None);
/// ```
pub fn parse_targeted<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<Directives> {
    dictionary(values, false)
}

/// The device token this cache announces to the app in `Surrogate-Capability` (the Edge
/// Architecture note), and the value of that request field.
pub const SURROGATE_DEVICE: &str = "ziggurat";
/// The `Surrogate-Capability` line a front end adds to the requests it sends the app.
pub const SURROGATE_CAPABILITY: &str = "ziggurat=\"Surrogate/1.0\"";

/// `Surrogate-Control` (the Edge Architecture note, read as a targeted field): as
/// [`parse_targeted`], but a directive with a parameter names the surrogate it is for
/// (`max-age=60;edge-1`): one for [`SURROGATE_DEVICE`] counts, one for another surrogate
/// is ignored; None when no directive is left.
///
/// ```
/// use ziggurat_http::parse_surrogate_control;
/// let cc = parse_surrogate_control([&b"max-age=60;other, no-store, foo"[..]]).unwrap();
/// assert_eq!(cc.iter().collect::<Vec<_>>(), [("no-store", None), ("foo", None)]);
/// assert_eq!(parse_surrogate_control([&b"max-age=60;other"[..]]), None);
/// let cc = parse_surrogate_control([&b"max-age=60;ziggurat"[..]]).unwrap();
/// assert_eq!(cc.get("max-age"), Some(Some("60")));
/// ```
pub fn parse_surrogate_control<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Option<Directives> {
    dictionary(values, true).filter(|d| !d.is_empty())
}

/// The Dictionary's members as directives; `skip_targeted`: drop members with parameters.
fn dictionary<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    skip_targeted: bool,
) -> Option<Directives> {
    let raw = values.into_iter().collect::<Vec<_>>().join(&b","[..]);
    let n = raw.len();
    let mut i = skip(&raw, 0, b" ");
    if i == n {
        return None;
    }
    let mut out = Directives::new();
    loop {
        let end = key(&raw, i)?;
        let name = String::from_utf8_lossy(&raw[i..end]).into_owned();
        i = end;
        let mut value = Item::Bool(true);
        if raw.get(i) == Some(&b'=') {
            (value, i) = item(&raw, i + 1)?;
        }
        // Parameters: parsed, not used (but in Surrogate-Control they name the surrogate
        // a member is for).
        let mut elsewhere = false;
        while raw.get(i) == Some(&b';') {
            i = skip(&raw, i + 1, b" ");
            let start = i;
            i = key(&raw, i)?;
            elsewhere |= &raw[start..i] != SURROGATE_DEVICE.as_bytes();
            if raw.get(i) == Some(&b'=') {
                i = item(&raw, i + 1)?.1;
            }
        }
        if skip_targeted && elsewhere {
            // Not for this cache: as if absent (an earlier occurrence stands).
        } else if DELTA_DIRECTIVES.contains(&name.as_str()) {
            out.remove(&name);
            if let Item::Integer(v) = value {
                if v >= 0 {
                    out.insert_last(name, Some(v.to_string()));
                }
            }
        } else {
            out.remove(&name);
            match value {
                Item::Bool(true) => out.insert_last(name, None),
                Item::Text(t) => out.insert_last(name, Some(t)),
                _ => {}
            }
        }
        i = skip(&raw, i, b" \t");
        if i == n {
            return Some(out);
        }
        if raw[i] != b',' {
            return None;
        }
        i = skip(&raw, i + 1, b" \t");
        if i == n {
            return None;
        }
    }
}

/// The cache directives a response gives this cache, and which targeted field they came
/// from: the first field of `targets` (its RFC 9213 target list, lower-case names) with a
/// valid, non-empty value, which overrides `Cache-Control` and `Expires`; else
/// `Cache-Control` (and None). A target named `surrogate-control` is read by
/// [`parse_surrogate_control`].
///
/// ```
/// use ziggurat_http::response_directives;
/// let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"no-store"), (b"cdn-cache-control", b"max-age=600")];
/// let (cc, from) = response_directives(h, &[b"ziggurat-cache-control", b"cdn-cache-control"]);
/// assert_eq!((cc.get("max-age"), from), (Some(Some("600")), Some(1)));
/// let bad: &[(&[u8], &[u8])] = &[(b"cdn-cache-control", b"max-age =1"), (b"cache-control", b"no-store")];
/// let (cc, from) = response_directives(bad, &[b"cdn-cache-control"]);
/// assert_eq!((cc.iter().collect::<Vec<_>>(), from), (vec![("no-store", None)], None));
/// ```
pub fn response_directives(
    headers: &Headers<'_>,
    targets: &[&[u8]],
) -> (Directives, Option<usize>) {
    for (t, name) in targets.iter().enumerate() {
        let lines = fields(headers, name);
        if !lines.is_empty() {
            let cc = if *name == b"surrogate-control" {
                parse_surrogate_control(lines)
            } else {
                parse_targeted(lines)
            };
            if let Some(cc) = cc {
                return (cc, Some(t));
            }
        }
    }
    (parse_cache_control(fields(headers, b"cache-control")), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(s: &[u8]) -> Option<Vec<(String, Option<String>)>> {
        parse_targeted([s]).map(|d| {
            d.iter()
                .map(|(k, v)| (k.to_owned(), v.map(str::to_owned)))
                .collect()
        })
    }

    fn d(items: &[(&str, Option<&str>)]) -> Option<Vec<(String, Option<String>)>> {
        Some(
            items
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_owned)))
                .collect(),
        )
    }

    #[test]
    fn module_example() {
        assert_eq!(
            t(b"max-age=600, stale-if-error=60"),
            d(&[("max-age", Some("600")), ("stale-if-error", Some("60"))])
        );
    }

    #[test]
    fn items_and_parameters() {
        assert_eq!(
            t(b"a=?1, b=?0, c=tok/en:x, d=:aGk=:, e=1.5, f=\"s\\\"\""),
            d(&[("a", None), ("c", Some("tok/en:x")), ("f", Some("s\""))])
        );
        assert_eq!(
            t(b"max-age=-1, s-maxage=007"),
            d(&[("s-maxage", Some("7"))])
        );
        assert_eq!(
            t(b"max-age=60;a=1;b, x;y=\"z\""),
            d(&[("max-age", Some("60")), ("x", None)])
        );
        assert_eq!(
            t(b"max-age=1, max-age=2, private, max-age=?1"),
            d(&[("private", None)])
        );
        assert_eq!(t(b"a, b, a"), d(&[("b", None), ("a", None)]));
        assert_eq!(t(b"*x=1.123"), d(&[]));
    }

    #[test]
    fn invalid_dictionaries() {
        for bad in [
            &b""[..],
            b"  ",
            b"a,",
            b"a, ",
            b",a",
            b"a;",
            b"a=",
            b"a=-",
            b"a=?2",
            b"a=\"\\x\"",
            b"a=\"unterminated",
            b"a=1.",
            b"a=1.2345",
            b"a=1234567890123456",
            b"a b",
            b"\ta",
            b"A",
            b"a=:x",
            b"a=\"\xe9\"",
            b"a=(1 2)",
            b"a;B",
        ] {
            assert_eq!(t(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(t(b"a=123456789012345"), d(&[]));
    }

    #[test]
    fn lines_are_joined_with_commas() {
        let got = parse_targeted([&b"max-age=5"[..], b"no-store"]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(parse_targeted([&b"max-age=5"[..], b""]), None);
    }

    proptest! {
        #[test]
        fn any_bytes_are_safe(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(cc) = parse_targeted([&raw[..]]) {
                for (name, _) in cc.iter() {
                    prop_assert!(name.bytes().all(is_key_char));
                }
            }
        }
    }
}
