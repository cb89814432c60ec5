//! The stored-response format: what a cache entry's value bytes hold, so that every
//! front end (in any language, in any process of the host) reads what another stored.
//!
//! An entry is either a stored response ([`Stored`]) or, under a URL whose response
//! varies, the record that names the `Vary` fields and the generation of its variants
//! ([`Variants`]). Both are encoded by [`Entry::encode`] and read back by [`decode`],
//! which borrows the strings and bytes from the value (nothing is copied).
//!
//! Layout (version 1; all integers big-endian): `ZH`, the version byte, a kind byte (`R`
//! a response, `V` a variant record), then the fields in the order of the struct. A
//! number is 8 bytes (`f64`), a status 2 bytes, a byte string or text a 4-byte length and
//! its bytes, an optional one a presence byte (0 or 1) first, a list a 4-byte count and
//! its items. Nothing may follow the last field. A value written by another version, or
//! cut short, or with text that is not UTF-8, is an error ([`DecodeError`]): the front
//! end treats it as a miss. So is a response no server may send (a status outside
//! 100–599, a header name that is not a token, CR, LF or NUL in a header value or a
//! validator): whoever can write the cache can write any bytes, and a front end sends
//! what it decodes to a client as it is.

use std::fmt;

use crate::cache_control::is_tchar;

/// The version written at byte 2; [`decode`] reads only this one.
pub const FORMAT_VERSION: u8 = 1;
const MAGIC: &[u8; 2] = b"ZH";
const RESPONSE: u8 = b'R';
const VARIANTS: u8 = b'V';

/// A stored response and what its freshness and validation need.
///
/// `headers` are the stored lines; `initial_age` is the corrected initial age at
/// `response_time`; `flags` are the directives of [`crate::STALE_FORBIDDING`] it had;
/// `vary` are the request fields that selected it and `vary_values` the values they had.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stored<'a> {
    /// The status code.
    pub status: u16,
    /// The stored header lines, lower-case names.
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    /// The body.
    pub body: &'a [u8],
    /// When the request that got it was sent on.
    pub request_time: f64,
    /// When its response arrived (or the 304 that last validated it).
    pub response_time: f64,
    /// Its corrected initial age at `response_time`.
    pub initial_age: f64,
    /// Its freshness lifetime.
    pub lifetime: f64,
    /// Its `stale-while-revalidate` window.
    pub swr: f64,
    /// Its `stale-if-error` window.
    pub sie: f64,
    /// The directives that matter at reuse (see [`crate::STALE_FORBIDDING`]).
    pub flags: Vec<&'a str>,
    /// Its `ETag`.
    pub etag: Option<&'a [u8]>,
    /// Its `Last-Modified`.
    pub last_modified: Option<&'a [u8]>,
    /// The request fields it varies on, lower-case, sorted.
    pub vary: Vec<&'a str>,
    /// The values those fields had (None: absent).
    pub vary_values: Vec<Option<&'a [u8]>>,
    /// Its tags.
    pub tags: Vec<&'a str>,
}

impl Stored<'_> {
    /// Its six times in the order the format keeps them: `request_time`, `response_time`,
    /// `initial_age`, `lifetime`, `swr`, `sie`.
    ///
    /// ```
    /// let mut s = ziggurat_http::Stored::default();
    /// s.set_times([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// assert_eq!((s.response_time, s.times()[5]), (2.0, 6.0));
    /// ```
    pub fn times(&self) -> [f64; 6] {
        [
            self.request_time,
            self.response_time,
            self.initial_age,
            self.lifetime,
            self.swr,
            self.sie,
        ]
    }

    /// Sets the six times, given in [`Stored::times`]'s order.
    pub fn set_times(&mut self, times: [f64; 6]) {
        [
            self.request_time,
            self.response_time,
            self.initial_age,
            self.lifetime,
            self.swr,
            self.sie,
        ] = times;
    }

    /// Its current age at `now` (RFC 9111 §4.2.3).
    ///
    /// ```
    /// let s = ziggurat_http::Stored { response_time: 100.0, initial_age: 5.0, ..Default::default() };
    /// assert_eq!((s.age(110.0), s.age(90.0)), (15.0, 5.0));
    /// ```
    pub fn age(&self, now: f64) -> f64 {
        self.initial_age + (now - self.response_time).max(0.0)
    }

    /// Whether any stale use is allowed at all (RFC 9111 §4.2.4).
    pub fn may_serve_stale(&self) -> bool {
        crate::may_serve_stale(&self.flags)
    }

    /// Whether it carries `flag` (a directive name).
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }
}

/// The record under the key of a URL whose responses vary: the fields they vary on, the
/// generation that names its variants' keys (a purge makes a new one), and until when
/// some variant is kept.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Variants<'a> {
    /// The request fields, lower-case, sorted.
    pub names: Vec<&'a str>,
    /// The generation (hex text).
    pub generation: &'a str,
    /// The Unix time until which a variant lives.
    pub until: f64,
}

/// What a cache entry holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry<'a> {
    /// A stored response.
    Response(Stored<'a>),
    /// The record of a varying URL.
    Variants(Variants<'a>),
}

/// Why value bytes are no entry of this format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Not this format at all.
    Magic,
    /// Another version of the format.
    Version(u8),
    /// A kind byte other than `R` and `V`.
    Kind(u8),
    /// Cut short.
    Truncated,
    /// Bytes past the last field.
    Trailing,
    /// Text that is not UTF-8, or a presence byte other than 0 and 1.
    Invalid,
    /// A response no server may send: a status outside 100–599, a header name that is not
    /// a token, or CR, LF or NUL in a header value or a validator.
    Unsendable,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Magic => write!(f, "not a stored response"),
            Self::Version(v) => write!(
                f,
                "stored-response format version {v}, not {FORMAT_VERSION}"
            ),
            Self::Kind(k) => write!(f, "unknown entry kind {k}"),
            Self::Truncated => write!(f, "stored response cut short"),
            Self::Trailing => write!(f, "bytes after the stored response"),
            Self::Invalid => write!(f, "malformed field in the stored response"),
            Self::Unsendable => write!(
                f,
                "stored response with a status or header line no server may send"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Whether a server may send `s` as it is (RFC 9110 §5.1, §5.5, §15): a status of 100 to
/// 599, header names that are tokens, and no CR, LF or NUL in a value (which would end the
/// line early, or be cut there).
fn sendable(s: &Stored<'_>) -> bool {
    let value = |v: &[u8]| !v.iter().any(|c| matches!(c, b'\r' | b'\n' | 0));
    (100..=599).contains(&s.status)
        && s.headers
            .iter()
            .all(|(k, v)| !k.is_empty() && k.iter().all(|&c| is_tchar(c)) && value(v))
        && [s.etag, s.last_modified].into_iter().flatten().all(value)
}

struct Writer(Vec<u8>);

impl Writer {
    fn num(&mut self, v: f64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn len(&mut self, n: usize) {
        // A length past 4 GiB cannot be stored (a segment value is far smaller).
        self.0
            .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.0.extend_from_slice(b);
    }
    fn opt(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.0.push(0),
            Some(b) => {
                self.0.push(1);
                self.bytes(b);
            }
        }
    }
    fn texts(&mut self, items: &[&str]) {
        self.len(items.len());
        for t in items {
            self.bytes(t.as_bytes());
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn num(&mut self) -> Result<f64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_be_bytes(a))
    }
    fn len(&mut self) -> Result<usize, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.len()?;
        self.take(n)
    }
    fn text(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError::Invalid)
    }
    fn opt(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.byte()? {
            0 => Ok(None),
            1 => Ok(Some(self.bytes()?)),
            _ => Err(DecodeError::Invalid),
        }
    }
    /// A count of items each at least `least` bytes long: a count the rest cannot hold is
    /// cut short (so a corrupt count never reserves memory).
    fn count(&mut self, least: usize) -> Result<usize, DecodeError> {
        let n = self.len()?;
        if n > self.0.len() / least {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }
    fn texts(&mut self) -> Result<Vec<&'a str>, DecodeError> {
        let n = self.count(4)?;
        (0..n).map(|_| self.text()).collect()
    }
}

impl Entry<'_> {
    /// The value bytes of this entry (see the module documentation for the layout).
    ///
    /// ```
    /// use ziggurat_http::{decode, Entry, Stored};
    /// let s = Stored { status: 200, headers: vec![(b"etag", b"\"1\"")], body: b"hi",
    ///                  lifetime: 60.0, tags: vec!["posts"], ..Default::default() };
    /// let bytes = Entry::Response(s.clone()).encode();
    /// assert_eq!(decode(&bytes), Ok(Entry::Response(s)));
    /// assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    /// ```
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        w.0.extend_from_slice(MAGIC);
        w.0.push(FORMAT_VERSION);
        match self {
            Entry::Response(s) => {
                let size: usize = s.headers.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
                w.0.reserve(size + s.body.len() + 96);
                w.0.push(RESPONSE);
                w.0.extend_from_slice(&s.status.to_be_bytes());
                w.len(s.headers.len());
                for (k, v) in &s.headers {
                    w.bytes(k);
                    w.bytes(v);
                }
                w.bytes(s.body);
                for n in s.times() {
                    w.num(n);
                }
                w.texts(&s.flags);
                w.opt(s.etag);
                w.opt(s.last_modified);
                w.texts(&s.vary);
                w.len(s.vary_values.len());
                for v in &s.vary_values {
                    w.opt(*v);
                }
                w.texts(&s.tags);
            }
            Entry::Variants(v) => {
                w.0.push(VARIANTS);
                w.texts(&v.names);
                w.bytes(v.generation.as_bytes());
                w.num(v.until);
            }
        }
        w.0
    }
}

/// The entry that value bytes hold, borrowing from them; an error for bytes of another
/// format or version, cut short, or malformed (never a panic, whatever the bytes).
///
/// ```
/// use ziggurat_http::{decode, DecodeError, Entry, Variants};
/// let v = Variants { names: vec!["accept"], generation: "ab12", until: 9.0 };
/// assert_eq!(decode(&Entry::Variants(v.clone()).encode()), Ok(Entry::Variants(v)));
/// assert_eq!(decode(b"ZH\x07R"), Err(DecodeError::Version(7)));
/// assert_eq!(decode(b"\x80\x04K."), Err(DecodeError::Magic));
/// ```
pub fn decode(value: &[u8]) -> Result<Entry<'_>, DecodeError> {
    let mut r = Reader(value);
    if r.take(2).map_err(|_| DecodeError::Magic)? != MAGIC {
        return Err(DecodeError::Magic);
    }
    let version = r.byte()?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version(version));
    }
    let entry = match r.byte()? {
        RESPONSE => {
            let st = r.take(2)?;
            let status = u16::from_be_bytes([st[0], st[1]]);
            let n = r.count(8)?;
            let mut headers = Vec::with_capacity(n);
            for _ in 0..n {
                headers.push((r.bytes()?, r.bytes()?));
            }
            let body = r.bytes()?;
            let mut nums = [0.0; 6];
            for slot in &mut nums {
                *slot = r.num()?;
            }
            let flags = r.texts()?;
            let etag = r.opt()?;
            let last_modified = r.opt()?;
            let vary = r.texts()?;
            let n = r.count(1)?;
            let vary_values = (0..n).map(|_| r.opt()).collect::<Result<_, _>>()?;
            let tags = r.texts()?;
            let mut s = Stored {
                status,
                headers,
                body,
                flags,
                etag,
                last_modified,
                vary,
                vary_values,
                tags,
                ..Stored::default()
            };
            s.set_times(nums);
            if !sendable(&s) {
                return Err(DecodeError::Unsendable);
            }
            Entry::Response(s)
        }
        VARIANTS => Entry::Variants(Variants {
            names: r.texts()?,
            generation: r.text()?,
            until: r.num()?,
        }),
        k => return Err(DecodeError::Kind(k)),
    };
    if !r.0.is_empty() {
        return Err(DecodeError::Trailing);
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "\\PC{0,12}"
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..40)
    }

    /// A header name: a token.
    fn name() -> impl Strategy<Value = Vec<u8>> {
        "[-!#$%&'*+.^_`|~0-9a-z]{1,12}".prop_map(String::into_bytes)
    }

    /// A header value or validator: any bytes but CR, LF and NUL.
    fn value() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            any::<u8>().prop_filter("CR, LF, NUL", |c| !b"\r\n\0".contains(c)),
            0..40,
        )
    }

    #[allow(clippy::type_complexity)]
    fn owned() -> impl Strategy<
        Value = (
            u16,
            Vec<(Vec<u8>, Vec<u8>)>,
            Vec<u8>,
            [f64; 6],
            Vec<String>,
            (Option<Vec<u8>>, Option<Vec<u8>>),
            Vec<(String, Option<Vec<u8>>)>,
            Vec<String>,
        ),
    > {
        (
            100u16..600,
            proptest::collection::vec((name(), value()), 0..8),
            bytes(),
            proptest::array::uniform6(any::<f64>()),
            proptest::collection::vec(text(), 0..4),
            (proptest::option::of(value()), proptest::option::of(value())),
            proptest::collection::vec((text(), proptest::option::of(bytes())), 0..4),
            proptest::collection::vec(text(), 0..4),
        )
    }

    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits()
    }

    proptest! {
        #[test]
        fn a_response_round_trips((status, headers, body, nums, flags, (etag, lm), vary, tags) in owned()) {
            let s = Stored {
                status,
                headers: headers.iter().map(|(k, v)| (&k[..], &v[..])).collect(),
                body: &body,
                request_time: nums[0],
                response_time: nums[1],
                initial_age: nums[2],
                lifetime: nums[3],
                swr: nums[4],
                sie: nums[5],
                flags: flags.iter().map(String::as_str).collect(),
                etag: etag.as_deref(),
                last_modified: lm.as_deref(),
                vary: vary.iter().map(|(n, _)| n.as_str()).collect(),
                vary_values: vary.iter().map(|(_, v)| v.as_deref()).collect(),
                tags: tags.iter().map(String::as_str).collect(),
            };
            let bytes = Entry::Response(s.clone()).encode();
            let Ok(Entry::Response(back)) = decode(&bytes) else {
                panic!("not decoded");
            };
            // Compared bit for bit: NaN stays NaN, -0.0 stays -0.0.
            let got = [back.request_time, back.response_time, back.initial_age, back.lifetime, back.swr, back.sie];
            prop_assert!(got.iter().zip(nums.iter()).all(|(a, b)| same(*a, *b)));
            prop_assert_eq!(
                (back.status, &back.headers, back.body, &back.flags, back.etag, back.last_modified),
                (s.status, &s.headers, s.body, &s.flags, s.etag, s.last_modified)
            );
            prop_assert_eq!((&back.vary, &back.vary_values, &back.tags), (&s.vary, &s.vary_values, &s.tags));
            // Every proper prefix is cut short, never another entry.
            for cut in [0, 1, 3, 4, bytes.len() / 2, bytes.len() - 1] {
                prop_assert!(decode(&bytes[..cut]).is_err());
            }
        }

        #[test]
        fn a_variant_record_round_trips(names in proptest::collection::vec(text(), 0..6), g in text(), until in -1e12f64..1e12) {
            let v = Variants { names: names.iter().map(String::as_str).collect(), generation: &g, until };
            let bytes = Entry::Variants(v.clone()).encode();
            prop_assert_eq!(decode(&bytes), Ok(Entry::Variants(v)));
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert_eq!(decode(&longer), Err(DecodeError::Trailing));
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panic(mut raw in proptest::collection::vec(any::<u8>(), 0..300), framed in any::<bool>(), kind in any::<bool>()) {
            if framed && raw.len() >= 4 {
                // Past the header, so that the fields themselves are fuzzed.
                raw[..4].copy_from_slice(if kind { b"ZH\x01R" } else { b"ZH\x01V" });
            }
            if let Ok(e) = decode(&raw) {
                // What decodes encodes back to the very bytes.
                prop_assert_eq!(e.encode(), raw);
            }
        }

        #[test]
        fn flipped_bytes_never_panic(i in any::<usize>(), b in any::<u8>()) {
            let s = Stored { status: 200, headers: vec![(b"a", b"b")], body: b"body", vary: vec!["x"], vary_values: vec![None], tags: vec!["t"], flags: vec!["no-cache"], etag: Some(b"e"), ..Default::default() };
            let mut bytes = Entry::Response(s).encode();
            let i = i % bytes.len();
            bytes[i] = b;
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn a_huge_count_is_cut_short_not_allocated() {
        let mut v = b"ZH\x01R\x00\xc8".to_vec();
        v.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&v), Err(DecodeError::Truncated));
        assert_eq!(decode(b"ZH\x01X"), Err(DecodeError::Kind(b'X')));
        assert_eq!(decode(b"Z"), Err(DecodeError::Magic));
    }
}
