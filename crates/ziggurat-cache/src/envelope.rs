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
