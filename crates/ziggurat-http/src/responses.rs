//! How responses live on a cache, as the reads and writes a front end makes through its
//! own cache (whose L1, degraded store or cluster tier the crate knows nothing of).
//!
//! A URL's key holds either its response or, when its responses vary, a [`Variants`]
//! record. Each variant lives under the URL's key, the record's generation and the
//! digest of the request's values of the `Vary` fields ([`variant_key`]); the values
//! stored with the response confirm what the digest picked. A purge deletes the
//! record: the old generation's variants can no longer be reached, and the next record
//! gets a new generation.

use crate::fields::Headers;
use crate::key::variant_key;
use crate::stored::{decode, Entry, Stored, Variants};
use crate::vary::{vary_digest, vary_values};

/// Where the response matching a request is, given the value under the URL's key.
#[derive(Debug, Clone, PartialEq)]
pub enum Found<'a> {
    /// The URL's own response (it does not vary).
    Response(Stored<'a>),
    /// Read the variant under `key`; it answers when [`answers`] says so for `values`.
    Variant {
        /// The variant's key.
        key: Vec<u8>,
        /// The request's values of the record's fields.
        values: Vec<Option<Vec<u8>>>,
    },
    /// Nothing: fill the URL's key.
    Miss,
}

fn latin1(name: &str) -> Vec<u8> {
    // Vary names are Latin-1 text (see parse_vary): one byte per char.
    name.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

/// The variant of the record `v` (under the URL's key `base`) that a request with
/// header lines `headers` selects: its key, and the request's values of the fields.
pub fn variant_of(base: &[u8], v: &Variants<'_>, headers: &Headers<'_>) -> Found<'static> {
    let names: Vec<Vec<u8>> = v.names.iter().map(|n| latin1(n)).collect();
    let refs: Vec<&[u8]> = names.iter().map(|n| &n[..]).collect();
    let values = vary_values(&refs, headers);
    let key = variant_key(base, v.generation, &vary_digest(&values));
    Found::Variant { key, values }
}

/// What the value under the URL's key `base` (None: nothing there, or nothing this
/// format reads) says of a request with header lines `headers`.
///
/// ```
/// use ziggurat_http::{find, Entry, Found, Stored, Variants};
/// let s = Stored { status: 200, body: b"hi", ..Default::default() };
/// let v = Entry::Response(s.clone()).encode();
/// assert_eq!(find(b"zh2:http://h /", Some(&v), &[]), Found::Response(s));
/// let r = Entry::Variants(Variants { names: vec!["accept"], generation: "ab", until: 9.0 }).encode();
/// assert!(matches!(find(b"zh2:http://h /", Some(&r), &[]), Found::Variant { .. }));
/// assert_eq!(find(b"zh2:http://h /", None, &[]), Found::Miss);
/// ```
pub fn find<'a>(base: &[u8], value: Option<&'a [u8]>, headers: &Headers<'_>) -> Found<'a> {
    match value.map(decode) {
        Some(Ok(Entry::Response(s))) if s.vary.is_empty() => Found::Response(s),
        Some(Ok(Entry::Variants(v))) => variant_of(base, &v, headers),
        _ => Found::Miss,
    }
}

/// Whether the variant `s` read under the key [`find`] gave answers the request whose
/// values of the record's fields are `values`: the digest picked it, and the values
/// stored with it confirm it.
pub fn answers(s: &Stored<'_>, values: &[Option<Vec<u8>>]) -> bool {
    !s.vary.is_empty()
        && s.vary_values.len() == values.len()
        && s.vary_values
            .iter()
            .zip(values)
            .all(|(a, b)| *a == b.as_deref())
}

/// One write of a fill, made in order: the front end stops at the first that does not
/// store.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// The key.
    pub key: Vec<u8>,
    /// The value bytes.
    pub value: Vec<u8>,
    /// Seconds to keep it.
    pub ttl: f64,
    /// Its tags.
    pub tags: Vec<String>,
}

/// The writes that store `s` (its value bytes `value`) for `ttl` seconds under the URL's
/// key `base`, at `now`: the response itself, or its variant then the record that makes
/// it reachable. `record`: the value under `base` now; `fresh`: random bytes for a new
/// generation; `guarded`: each write is checked against the fill's snapshot (a purge may
/// have deleted the record since it was read, so it is written again even when current).
///
/// A record already naming the same fields keeps its generation, and lives as long as
/// its longest variant.
///
/// ```
/// use ziggurat_http::{save_writes, Stored};
/// let s = Stored { status: 200, body: b"hi", tags: vec!["posts"], ..Default::default() };
/// let w = save_writes(b"zh2:http://h /", &s, b"v", 60.0, 0.0, None, [1; 6], true);
/// assert_eq!((w.len(), &w[0].key[..], &w[0].tags[..]), (1, &b"zh2:http://h /"[..], &["posts".to_string()][..]));
/// let s = Stored { vary: vec!["accept"], vary_values: vec![Some(b"a")], ..s };
/// let w = save_writes(b"zh2:http://h /", &s, b"v", 60.0, 0.0, None, [1; 6], true);
/// assert_eq!((w.len(), w[1].key.len()), (2, 14));
/// ```
#[allow(clippy::too_many_arguments)] // the fill's facts, each its own
pub fn save_writes(
    base: &[u8],
    s: &Stored<'_>,
    value: &[u8],
    ttl: f64,
    now: f64,
    record: Option<&[u8]>,
    fresh: [u8; 6],
    guarded: bool,
) -> Vec<Write> {
    let tags: Vec<String> = s.tags.iter().map(|t| (*t).to_owned()).collect();
    if s.vary.is_empty() {
        return vec![Write {
            key: base.to_vec(),
            value: value.to_vec(),
            ttl,
            tags,
        }];
    }
    let old = match record.map(decode) {
        Some(Ok(Entry::Variants(v))) if v.names == s.vary => {
            Some((v.generation.to_owned(), v.until))
        }
        _ => None,
    };
    let (generation, until) = match &old {
        Some((g, u)) => (g.clone(), *u),
        None => (fresh.iter().map(|c| format!("{c:02x}")).collect(), 0.0),
    };
    let values: Vec<Option<Vec<u8>>> = s
        .vary_values
        .iter()
        .map(|v| v.map(<[u8]>::to_vec))
        .collect();
    let key = variant_key(base, &generation, &vary_digest(&values));
    let mut out = vec![Write {
        key,
        value: value.to_vec(),
        ttl,
        tags,
    }];
    if guarded || old.is_none() || until < now + ttl {
        let until = until.max(now + ttl);
        let rec = Variants {
            names: s.vary.clone(),
            generation: &generation,
            until,
        };
        out.push(Write {
            key: base.to_vec(),
            value: Entry::Variants(rec).encode(),
            ttl: until - now,
            tags: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varying<'a>(value: &'a [u8]) -> Stored<'a> {
        Stored {
            status: 200,
            vary: vec!["accept"],
            vary_values: vec![Some(value)],
            ..Default::default()
        }
    }

    #[test]
    fn a_saved_variant_is_found_and_confirmed() {
        let base = b"zh2:http://h /x";
        let s = varying(b"text/html");
        let w = save_writes(base, &s, b"body", 60.0, 100.0, None, [7; 6], false);
        let rec = &w[1].value;
        let h: &[(&[u8], &[u8])] = &[(b"accept", b"text/html")];
        let Found::Variant { key, values } = find(base, Some(rec), h) else {
            panic!("a record")
        };
        assert_eq!(key, w[0].key);
        assert!(answers(&s, &values));
        let other: &[(&[u8], &[u8])] = &[(b"accept", b"text/plain")];
        let Found::Variant {
            key: k2,
            values: v2,
        } = find(base, Some(rec), other)
        else {
            panic!("a record")
        };
        assert_ne!(k2, key);
        assert!(!answers(&s, &v2));
    }

    #[test]
    fn a_record_keeps_its_generation_and_its_longest_life() {
        let base = b"zh2:http://h /x";
        let first = save_writes(base, &varying(b"a"), b"1", 600.0, 0.0, None, [1; 6], true);
        let rec = first[1].value.clone();
        // Unguarded and still long enough: the record is not written again.
        let w = save_writes(
            base,
            &varying(b"b"),
            b"2",
            60.0,
            0.0,
            Some(&rec),
            [2; 6],
            false,
        );
        assert_eq!(w.len(), 1);
        // Guarded: written again, with the same generation and the longer life.
        let w = save_writes(
            base,
            &varying(b"b"),
            b"2",
            60.0,
            0.0,
            Some(&rec),
            [2; 6],
            true,
        );
        assert_eq!(w[1].ttl, 600.0);
        let Ok(Entry::Variants(v)) = decode(&w[1].value) else {
            panic!("a record")
        };
        assert_eq!(v.generation, "010101010101");
        // Fields changed: a new generation.
        let s = Stored {
            vary: vec!["cookie"],
            ..varying(b"c")
        };
        let w = save_writes(base, &s, b"3", 60.0, 0.0, Some(&rec), [2; 6], false);
        let Ok(Entry::Variants(v)) = decode(&w[1].value) else {
            panic!("a record")
        };
        assert_eq!(v.generation, "020202020202");
    }
}
