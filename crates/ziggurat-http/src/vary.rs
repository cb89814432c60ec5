//! Vary (RFC 9111 §4.1): which request fields select a stored response.

use std::collections::HashMap;

use crate::fields::{fields, parse_list, Headers};
use blake2::digest::consts::U16;
use blake2::{Blake2b, Digest};

/// The request field names a response varies on, lower-case, each once, sorted; None
/// for `*` (it matches no later request).
///
/// ```
/// use ziggurat_http::parse_vary;
/// assert_eq!(parse_vary(&[(b"vary", b"Accept-Encoding, accept-language"), (b"vary", b" * ")]), None);
/// assert_eq!(parse_vary(&[(b"vary", b"Accept-Encoding, ,Cookie")]).unwrap(), ["accept-encoding", "cookie"]);
/// ```
pub fn parse_vary(headers: &Headers<'_>) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for item in parse_list(fields(headers, b"vary")) {
        if item == b"*" {
            return None;
        }
        // Latin-1 text, lower-cased as text (a byte above 127 is a letter of Latin-1).
        let name: String = item
            .iter()
            .flat_map(|&c| char::from(c).to_lowercase())
            .collect();
        names.push(name);
    }
    names.sort_unstable();
    names.dedup();
    Some(names)
}

/// A request's values of the fields `names` (lower-case bytes): each field's lines
/// joined as one list, whitespace around items dropped (RFC 9111 §4.1 allows it); None
/// for an absent field, which differs from an empty one.
///
/// ```
/// use ziggurat_http::vary_values;
/// let h: &[(&[u8], &[u8])] = &[(b"accept", b" a ,b"), (b"accept", b""), (b"cookie", b"")];
/// assert_eq!(vary_values(&[b"accept", b"cookie", b"x"], h), [Some(b"a,b".to_vec()), Some(vec![]), None]);
/// ```
pub fn vary_values(names: &[&[u8]], headers: &Headers<'_>) -> Vec<Option<Vec<u8>>> {
    // One pass over the request's lines, however many names the response varies on.
    let mut lines: HashMap<&[u8], Vec<&[u8]>> = names.iter().map(|n| (*n, Vec::new())).collect();
    for (k, v) in headers {
        if let Some(found) = lines.get_mut(k) {
            found.push(v);
        }
    }
    names
        .iter()
        .map(|name| {
            let found = &lines[name];
            (!found.is_empty()).then(|| parse_list(found.iter().copied()).join(&b","[..]))
        })
        .collect()
}

/// The digest that names a variant: 32 hex digits of a BLAKE2b-128 over `values` (as
/// [`vary_values`] gives them).
///
/// ```
/// use ziggurat_http::{vary_digest, vary_values};
/// let one = vary_values(&[b"accept"], &[(b"accept", b"a, b")]);
/// let two = vary_values(&[b"accept"], &[(b"accept", b"a"), (b"accept", b"b")]);
/// assert_eq!(one, [Some(b"a,b".to_vec())]);
/// assert_eq!(vary_digest(&one), vary_digest(&two));
/// assert_ne!(vary_digest(&[None]), vary_digest(&[Some(Vec::new())]));
/// ```
pub fn vary_digest(values: &[Option<Vec<u8>>]) -> String {
    let mut data = Vec::new();
    for v in values {
        match v {
            None => data.push(0),
            Some(v) => {
                data.push(1);
                // A value longer than 4 GiB cannot come in a request line.
                data.extend_from_slice(&u32::try_from(v.len()).unwrap_or(u32::MAX).to_be_bytes());
                data.extend_from_slice(v);
            }
        }
    }
    // A digest an attacker cannot collide: two variants never share a key.
    Blake2b::<U16>::digest(&data)
        .iter()
        .map(|c| format!("{c:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_latin1_text() {
        let got = parse_vary(&[(b"vary", b"\xc0B, b,A")]).unwrap();
        assert_eq!(got, ["a", "b", "\u{e0}b"]);
        assert_eq!(parse_vary(&[]).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn digest_is_pythons() {
        // hashlib.blake2b(b"\x01\x00\x00\x00\x03a,b" + b"\x00", digest_size=16).hexdigest()
        let values = [Some(b"a,b".to_vec()), None];
        assert_eq!(vary_digest(&values), "c51e8c41cf22490cbbd47ab19599fedf");
    }
}
