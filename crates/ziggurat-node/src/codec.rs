//! The payloads Node.js shares with the Python front end (its "auto"
//! serializer): JSON text for JSON-shaped values and strings, a native
//! counter for integers, and for bytes the exact pickle CPython writes for a
//! `bytes` object (protocol 5, `ziggurat_cache::pickle_bytes`), so that a
//! Buffer stored here is `bytes` in Python and a `bytes` stored there is a
//! Buffer here. Any other pickle
//! (first byte 0x80) is foreign: a miss in Node.js, never an error.

use ziggurat_cache::{unpickle_bytes, Kind, PICKLE_PROTO};

/// What a stored payload is for JavaScript.
pub enum Decoded {
    /// JSON text (JSON.parse gives the value).
    Json(String),
    /// Bytes (a Buffer).
    Bytes(Vec<u8>),
    /// A value's bytes as JavaScript encoded them, for it to decode.
    Raw(Vec<u8>),
    /// A counter.
    Int(i64),
}

/// What a stored payload is for JavaScript, seen where it lies (a read's
/// scratch), so that a read makes its JavaScript value with one copy.
pub enum View<'a> {
    /// JSON text in ASCII, as short JSON text nearly always is: the payload
    /// as it is makes a one-byte string, which V8 copies without decoding.
    Ascii,
    /// JSON text with characters beyond ASCII, in valid UTF-8.
    Utf8,
    /// Bytes (a Buffer).
    Bytes(&'a [u8]),
    /// A value's bytes as JavaScript encoded them (`raw`).
    Raw(&'a [u8]),
    /// A counter.
    Int(i64),
}

/// The value in `payload` of an entry of `kind`; None when Node.js cannot
/// read it (a pickle of anything but bytes, text that is not UTF-8). In a
/// cache whose values JavaScript encodes (`raw`: serializer 'msgpack'), a
/// value is its bytes as they are, for JavaScript's decoder.
pub fn view(kind: Kind, payload: &[u8], raw: bool) -> Option<View<'_>> {
    match kind {
        Kind::Counter => Some(View::Int(i64::from_le_bytes(payload.try_into().ok()?))),
        Kind::Value if raw => Some(View::Raw(payload)),
        Kind::Value if payload.first() == Some(&PICKLE_PROTO) => {
            unpickle_bytes(payload).map(View::Bytes)
        }
        // One scan for ASCII text, which is UTF-8 as it is.
        Kind::Value if ascii(payload) => Some(View::Ascii),
        Kind::Value => std::str::from_utf8(payload).ok().map(|_| View::Utf8),
        Kind::Negative => None,
    }
}

/// Whether `b` is ASCII: eight bytes at a time and one test at the end (the
/// standard library's check went a byte at a time on payloads this short).
fn ascii(b: &[u8]) -> bool {
    let mut words = b.chunks_exact(8);
    let mut high = 0u64;
    for w in &mut words {
        high |= u64::from_le_bytes(w.try_into().unwrap_or_default());
    }
    for &c in words.remainder() {
        high |= u64::from(c);
    }
    high & 0x8080_8080_8080_8080 == 0
}

/// The value in `payload` of an entry of `kind`, as `view` sees it, owned
/// (a value that waits in Rust, as a miss's stale value does).
pub fn decode(kind: Kind, payload: Vec<u8>, raw: bool) -> Option<Decoded> {
    Some(match view(kind, &payload, raw)? {
        View::Int(n) => Decoded::Int(n),
        View::Bytes(b) => Decoded::Bytes(b.to_vec()),
        View::Raw(_) => Decoded::Raw(payload),
        View::Ascii | View::Utf8 => Decoded::Json(String::from_utf8(payload).ok()?),
    })
}
