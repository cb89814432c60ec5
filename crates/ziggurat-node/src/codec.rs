//! The payloads Node.js shares with the Python front end (its "auto"
//! serializer): JSON text for JSON-shaped values and strings, a native
//! counter for integers, and for bytes the exact pickle CPython writes for a
//! `bytes` object (protocol 5), so that a Buffer stored here is `bytes` in
//! Python and a `bytes` stored there is a Buffer here. Any other pickle
//! (first byte 0x80) is foreign: a miss in Node.js, never an error.

use ziggurat_cache::Kind;

/// First byte of a pickle of protocol 2 or later (PROTO).
const PROTO: u8 = 0x80;
/// Opcodes of a pickled `bytes` object.
const FRAME: u8 = 0x95;
const SHORT_BINBYTES: u8 = b'C';
const BINBYTES: u8 = b'B';
const BINBYTES8: u8 = 0x8e;
const MEMOIZE: u8 = 0x94;
const STOP: u8 = b'.';
/// CPython's pickler writes payloads of this many bytes or more outside any
/// frame (its FRAME_SIZE_TARGET).
const FRAME_TARGET: usize = 64 * 1024;

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
        Kind::Value if payload.first() == Some(&PROTO) => unpickle_bytes(payload).map(View::Bytes),
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

/// The pickle (protocol 5) CPython's `pickle.dumps(data, 5)` writes for a
/// `bytes` object holding `data`, with room for the entry's trailer.
pub fn pickle_bytes(data: &[u8]) -> Vec<u8> {
    let n = data.len();
    let mut out = Vec::with_capacity(n + 32);
    out.extend_from_slice(&[PROTO, 5]);
    let mut op = Vec::with_capacity(9);
    if n < 256 {
        op.extend_from_slice(&[SHORT_BINBYTES, n as u8]);
    } else if n <= u32::MAX as usize {
        op.push(BINBYTES);
        op.extend_from_slice(&(n as u32).to_le_bytes());
    } else {
        op.push(BINBYTES8);
        op.extend_from_slice(&(n as u64).to_le_bytes());
    }
    if n < FRAME_TARGET {
        // One frame holds it all: opcode, data, MEMOIZE and STOP.
        let frame = (op.len() + n + 2) as u64;
        out.push(FRAME);
        out.extend_from_slice(&frame.to_le_bytes());
    }
    out.extend_from_slice(&op);
    out.extend_from_slice(data);
    out.extend_from_slice(&[MEMOIZE, STOP]);
    out
}

/// The data of a pickled `bytes` object, as CPython writes one (protocols 2
/// to 5, framed or not); None for any other pickle.
pub fn unpickle_bytes(p: &[u8]) -> Option<&[u8]> {
    let (&proto, rest) = p.split_first()?;
    if proto != PROTO {
        return None;
    }
    let (&version, mut rest) = rest.split_first()?;
    if !(2..=5).contains(&version) {
        return None;
    }
    if rest.first() == Some(&FRAME) {
        rest = rest.get(9..)?;
    }
    let (&op, rest) = rest.split_first()?;
    let (n, rest) = match op {
        SHORT_BINBYTES => (*rest.first()? as usize, &rest[1..]),
        BINBYTES => (
            u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize,
            &rest[4..],
        ),
        BINBYTES8 => (
            usize::try_from(u64::from_le_bytes(rest.get(..8)?.try_into().ok()?)).ok()?,
            &rest[8..],
        ),
        _ => return None,
    };
    let data = rest.get(..n)?;
    match &rest[n..] {
        [MEMOIZE, STOP] | [STOP] => Some(data),
        _ => None,
    }
}
