//! The value envelope of the "auto" serializer, the same in every front end:
//! a stored value is either a pickle (protocol 5, which like every protocol
//! from 2 on starts with the PROTO opcode, byte 0x80) or compact JSON text
//! (UTF-8, so never led by 0x80). A front end that cannot read pickles (any
//! but Python's) reads the JSON values and treats a pickle as a value it
//! cannot decode: a miss, counted, never an error of the call.
//!
//! JSON is written only for values whose round trip is exact (same types,
//! same values): strings, null, booleans, integers in the signed 64-bit
//! range, finite floats (a whole one keeps its `.0`), lists, and maps with
//! string keys, nested at most [`MAX_DEPTH`] deep, with no container met
//! twice. A front end walks its own objects and writes them with
//! [`JsonText`]; anything else goes to its pickle (or is refused).

use hashbrown::HashSet;

use ziggurat_core::{Arg, Problem};

use crate::error::Error;

/// The first byte of a pickle of protocol 2 or later (the PROTO opcode).
pub const PICKLE_PROTO: u8 = 0x80;

/// The pickle protocol the "auto" serializer writes.
pub const PICKLE_PROTOCOL: u8 = 5;

/// The deepest container nesting written as JSON (orjson, which reads the
/// text back in Python, refuses more than 254 levels; a deep walk would
/// risk a front end's stack).
pub const MAX_DEPTH: u32 = 128;

/// Up to this many containers, a linear scan finds repeats faster than
/// hashing; beyond it a set keeps the walk linear in the size of the value.
const SMALL_SEEN: usize = 32;

/// What a stored value of the "auto" serializer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A pickle (only Python reads it).
    Pickle,
    /// JSON text.
    Json,
}

/// The format of `data` by its first byte; empty data is no value.
///
/// ```
/// use ziggurat_cache::{format_of, Format};
/// assert_eq!(format_of(b"{\"a\":1}").unwrap(), Format::Json);
/// assert_eq!(format_of(b"\x80\x05N.").unwrap(), Format::Pickle);
/// assert!(format_of(b"").is_err());
/// ```
pub fn format_of(data: &[u8]) -> Result<Format, Error> {
    format_by(data.first().copied())
}

/// [`format_of`] for a front end that reads only the first byte (None:
/// empty data).
pub fn format_by(first: Option<u8>) -> Result<Format, Error> {
    match first {
        None => Err(Error::invalid(Arg::Data, Problem::Empty)),
        Some(PICKLE_PROTO) => Ok(Format::Pickle),
        Some(_) => Ok(Format::Json),
    }
}

/// JSON text as the "auto" serializer writes it (the bytes orjson.dumps
/// writes), one piece at a time. Each writer returns false when the piece
/// has no exact JSON form; the text is then dropped and the value pickled.
///
/// ```
/// let mut j = ziggurat_cache::JsonText::default();
/// j.push(b'{');
/// assert!(j.str("a"));
/// j.push(b':');
/// assert!(j.float(2.0));
/// j.push(b'}');
/// assert_eq!(j.bytes(), b"{\"a\":2.0}");
/// assert!(!j.float(f64::NAN));
/// ```
pub struct JsonText {
    out: Vec<u8>,
    seen: Seen,
}

impl Default for JsonText {
    fn default() -> JsonText {
        JsonText {
            out: Vec::with_capacity(128),
            seen: Seen::new(),
        }
    }
}

impl JsonText {
    /// The text written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.out
    }

    /// The text, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// A bracket or punctuation byte (`[` `{` `,` `:` `]` `}`).
    #[inline]
    pub fn push(&mut self, b: u8) {
        self.out.push(b);
    }

    /// Whether a container at `depth`, at address `addr` (anything naming
    /// it for the walk's duration), may be written: not too deep, and not
    /// met before in this value (JSON would turn a shared container, or a
    /// cycle, into copies).
    pub fn enter(&mut self, depth: u32, addr: usize) -> bool {
        depth < MAX_DEPTH && self.seen.first_time(addr)
    }

    /// `null`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }

    /// `true` or `false`.
    pub fn bool(&mut self, b: bool) {
        self.out
            .extend_from_slice(if b { b"true" } else { b"false" });
    }

    /// An integer.
    pub fn int(&mut self, n: i64) -> bool {
        serde_json::to_writer(&mut self.out, &n).is_ok()
    }

    /// A float: finite only (JSON has no NaN or infinity); a whole one is
    /// written with its `.0`, so it reads back as a float.
    pub fn float(&mut self, f: f64) -> bool {
        f.is_finite() && serde_json::to_writer(&mut self.out, &f).is_ok()
    }

    /// A string. Most hold nothing to escape and are copied between quotes.
    pub fn str(&mut self, s: &str) -> bool {
        let out = &mut self.out;
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            out.reserve(s.len() + 2);
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
            return true;
        }
        serde_json::to_writer(&mut *out, s).is_ok()
    }
}

/// The containers met so far in one value.
struct Seen {
    // Most values hold a few containers: an array on the stack spares them an
    // allocation, which would cost as much as the rest of the walk.
    few: [usize; SMALL_SEEN],
    len: usize,
    many: Option<HashSet<usize>>,
}

impl Seen {
    fn new() -> Seen {
        Seen {
            few: [0; SMALL_SEEN],
            len: 0,
            many: None,
        }
    }

    /// Records `addr`; false when it was already recorded.
    fn first_time(&mut self, addr: usize) -> bool {
        if let Some(many) = &mut self.many {
            return many.insert(addr);
        }
        if self.few[..self.len].contains(&addr) {
            return false;
        }
        if self.len < SMALL_SEEN {
            self.few[self.len] = addr;
            self.len += 1;
        } else {
            let mut many = HashSet::with_capacity(SMALL_SEEN * 8);
            many.extend(self.few);
            many.insert(addr);
            self.many = Some(many);
        }
        true
    }
}

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

/// The pickle CPython's `pickle.dumps(data, 5)` writes for a `bytes` object
/// holding `data`, with room for an entry's trailer: what a front end
/// without pickles stores for bytes, so that Python reads them as `bytes`.
///
/// ```
/// assert_eq!(ziggurat_cache::pickle_bytes(b"abc"), b"\x80\x05\x95\x07\0\0\0\0\0\0\0C\x03abc\x94.");
/// ```
pub fn pickle_bytes(data: &[u8]) -> Vec<u8> {
    let n = data.len();
    let mut out = Vec::with_capacity(n + 32);
    out.extend_from_slice(&[PICKLE_PROTO, PICKLE_PROTOCOL]);
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

/// The data of a pickled `bytes` object as CPython writes one (protocols 4
/// and 5, framed or not); None for any other pickle.
///
/// ```
/// let p = ziggurat_cache::pickle_bytes(b"abc");
/// assert_eq!(ziggurat_cache::unpickle_bytes(&p), Some(b"abc".as_slice()));
/// assert_eq!(ziggurat_cache::unpickle_bytes(b"\x80\x05N."), None);
/// ```
pub fn unpickle_bytes(p: &[u8]) -> Option<&[u8]> {
    let (&proto, rest) = p.split_first()?;
    if proto != PICKLE_PROTO {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `pickle.dumps(data, 5).hex()` of CPython: the first 16 bytes, the last
    /// 4 and the length, for data around each opcode's and the frame's bounds.
    #[test]
    fn pickles_bytes_as_cpython_does() {
        let cases: [(&[u8], usize, &str, &str, usize); 6] = [
            (b"", 0, "80059504000000000000004300942e", "4300942e", 15),
            (b"a", 3, "80059507000000000000004303616263", "6263942e", 18),
            (
                b"x",
                255,
                "800595030100000000000043ff787878",
                "7878942e",
                270,
            ),
            (
                b"y",
                256,
                "80059507010000000000004200010000",
                "7979942e",
                274,
            ),
            (
                b"z",
                65535,
                "800595060001000000000042ffff0000",
                "7a7a942e",
                65553,
            ),
            (
                b"w",
                65536,
                "80054200000100777777777777777777",
                "7777942e",
                65545,
            ),
        ];
        for (fill, n, head, tail, len) in cases {
            let data: Vec<u8> = if n == 3 {
                b"abc".to_vec()
            } else {
                fill.repeat(n)
            };
            let p = pickle_bytes(&data);
            assert_eq!(p.len(), len, "{n} bytes");
            assert_eq!(&p[..head.len() / 2], hex(head).as_slice(), "{n} bytes");
            assert_eq!(&p[p.len() - 4..], hex(tail).as_slice(), "{n} bytes");
            assert_eq!(unpickle_bytes(&p), Some(data.as_slice()));
        }
        // Protocol 4, as pickle.dumps(b"abc", 4) writes it.
        let p4 = hex("80049507000000000000004303616263942e");
        assert_eq!(unpickle_bytes(&p4), Some(b"abc".as_slice()));
        assert_eq!(unpickle_bytes(&p4[..p4.len() - 1]), None);
    }
}
