//! The bodies the tier stores in Redis, and the prefix the scripts keep before
//! them.
//!
//! A value's body is `Z2 ‖ MAC ‖ expiry ‖ written ‖ tags ‖ kind ‖ data`:
//! expiry in ms since the epoch (0: none) and the write time in µs, each u64
//! big-endian; tags as a count (u8) and each tag's length (u16 BE) and UTF-8;
//! kind `P` for the front end's serialized bytes, or `I` for an integer in
//! decimal (which `incr` can turn into a counter). The MAC signs everything
//! after it, with the key ([`Signer::value_mac`]).
//!
//! A counter made by `incr` is `N ‖ mark ‖ written ‖ tags ‖ ':' ‖ decimal`:
//! the server-side script adds to it, so its count cannot be signed; the mark
//! ([`Signer::counter_mac`]) signs the key with the write time of its last
//! `incr`, so only a key a host made a counter reads as one. The count is read
//! as an integer, never deserialized.
//!
//! A body is valid for at most [`MAX_AGE_US`] after its signed write time,
//! whatever its TTL, and one stamped more than [`MAX_SKEW_US`] ahead of the
//! reader's clock is refused (see `docs/cluster.md`, write times).

use crate::mac::{Signer, MAC_LEN};

/// The longest a body is valid after its write time, in µs (a day), whatever
/// its TTL: it bounds how long an older signed value put back into Redis can
/// be served by a host that knows no later write of its key.
pub const MAX_AGE_US: u64 = 86_400_000_000;

/// How far ahead of a host's wall clock a write time may be, in µs (five
/// minutes): hosts' clocks are expected within seconds of each other.
pub const MAX_SKEW_US: u64 = 300_000_000;

/// Integers within ±this are stored as such (kind `I`, which `incr` adds to,
/// and every language reads): the range Redis's Lua counts exactly. A front
/// end encodes any other integer with its serializer.
pub const EXACT_INT: i64 = 1 << 53;

/// Whether `n` is stored as an integer (within ±[`EXACT_INT`], bounds
/// excluded, as every front end decides).
///
/// ```
/// assert!(ziggurat_cluster::exact_int(41) && !ziggurat_cluster::exact_int(1 << 53));
/// ```
pub fn exact_int(n: i64) -> bool {
    n > -EXACT_INT && n < EXACT_INT
}

/// The tag every value in Redis carries: a cluster-wide clear moves its version.
pub const ALL: &str = "\u{0}all";

const VALUE: &[u8; 2] = b"Z2";
const COUNTER: u8 = b'N';

/// What a value's body holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Data<'a> {
    /// The front end's serialized bytes (kind `P`).
    Encoded(&'a [u8]),
    /// An integer within ±[`EXACT_INT`] (kind `I`), which `incr` may add to.
    Int(i64),
}

/// The signed body of a value under `key` (see the module), expiring at
/// `expiry_ms` (ms since the epoch; 0: never) and written at `w` (µs).
///
/// ```
/// use ziggurat_cluster::{decode, encode_value, Data, Found, Signer};
/// let s = Signer::new(b"doc", &[b"0123456789abcdef".to_vec()]).unwrap();
/// let now_us = 1_700_000_000_000_000;
/// let body = encode_value(&s, b"k", Data::Encoded(b"v"), now_us / 1000 + 60_000, now_us, &["t"]);
/// let got = decode(&s, b"k", &body, -1, now_us).unwrap();
/// assert_eq!(got.found, Found::Encoded(b"v"));
/// assert_eq!((got.left_s, got.tags), (60.0, vec!["t".to_string()]));
/// ```
pub fn encode_value(
    signer: &Signer,
    key: &[u8],
    data: Data<'_>,
    expiry_ms: u64,
    w: u64,
    tags: &[&str],
) -> Vec<u8> {
    let (kind, bytes): (u8, std::borrow::Cow<'_, [u8]>) = match data {
        Data::Encoded(b) => (b'P', b.into()),
        Data::Int(i) => (b'I', i.to_string().into_bytes().into()),
    };
    let mut rest = Vec::with_capacity(18 + bytes.len() + tags.len() * 8);
    rest.extend_from_slice(&expiry_ms.to_be_bytes());
    rest.extend_from_slice(&w.to_be_bytes());
    tag_list(&mut rest, tags);
    rest.push(kind);
    rest.extend_from_slice(&bytes);
    let mut body = Vec::with_capacity(2 + MAC_LEN + rest.len());
    body.extend_from_slice(VALUE);
    body.extend_from_slice(&signer.value_mac(key, &rest));
    body.extend_from_slice(&rest);
    body
}

/// What a counter's body holds before its tags once `incr` at `w` leaves it:
/// the mark that signs `key` with `w`, then `w` (24 bytes; the script puts
/// `N` before it and the tags and count after).
pub fn counter_head(signer: &Signer, key: &[u8], w: u64) -> [u8; MAC_LEN + 8] {
    let wb = w.to_be_bytes();
    let mut head = [0u8; MAC_LEN + 8];
    head[..MAC_LEN].copy_from_slice(&signer.counter_mac(key, &wb));
    head[MAC_LEN..].copy_from_slice(&wb);
    head
}

/// What a body that checks holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found<'a> {
    /// The front end's serialized bytes.
    Encoded(&'a [u8]),
    /// An integer set as one.
    Int(i64),
    /// A counter's count.
    Counter(i64),
}

/// A body read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded<'a> {
    /// What it holds.
    pub found: Found<'a>,
    /// Seconds it stays valid: to its expiry, its write time plus
    /// [`MAX_AGE_US`], or (a counter) the time Redis keeps it, whichever is first.
    pub left_s: f64,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its signed write time, µs (a counter's: its last `incr`'s).
    pub written: u64,
}

/// Why a body is not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Its MAC does not check, or it does not parse: tampered, written with
    /// another secret, or junk. Never decoded further.
    Bad,
    /// Past its expiry or its write time plus [`MAX_AGE_US`] (its write time).
    Expired(u64),
    /// Stamped more than [`MAX_SKEW_US`] ahead of this host's clock (its write
    /// time, which the host's warning gives).
    Ahead(u64),
}

/// The body stored under `key`, checked and read, at `now_us` (the wall
/// clock, µs since the epoch); `pttl_ms` is the time Redis keeps a counter
/// (-1: no expiry), which its body does not hold.
///
/// ```
/// use ziggurat_cluster::{counter_head, decode, Found, Refused, Signer};
/// let s = Signer::new(b"doc", &[b"0123456789abcdef".to_vec()]).unwrap();
/// let now = 1_700_000_000_000_000;
/// let mut body = vec![b'N'];
/// body.extend_from_slice(&counter_head(&s, b"hits", now));
/// body.extend_from_slice(b"\x00:41");
/// assert_eq!(decode(&s, b"hits", &body, 5000, now).unwrap().found, Found::Counter(41));
/// assert_eq!(decode(&s, b"other", &body, 5000, now), Err(Refused::Bad));
/// ```
pub fn decode<'a>(
    signer: &Signer,
    key: &[u8],
    body: &'a [u8],
    pttl_ms: i64,
    now_us: u64,
) -> Result<Decoded<'a>, Refused> {
    if body.first() == Some(&COUNTER) {
        let mark = body.get(1..1 + MAC_LEN).ok_or(Refused::Bad)?;
        let wb = body.get(1 + MAC_LEN..9 + MAC_LEN).ok_or(Refused::Bad)?;
        if !signer.counter_ok(key, wb, mark) {
            return Err(Refused::Bad);
        }
        let written = u64::from_be_bytes(wb.try_into().map_err(|_| Refused::Bad)?);
        let (tags, pos) = read_tags(body, 9 + MAC_LEN)?;
        if body.get(pos) != Some(&b':') {
            return Err(Refused::Bad);
        }
        let count = int(&body[pos + 1..])?;
        let mut left = seconds_left(written, now_us);
        if pttl_ms >= 0 {
            left = left.min(pttl_ms as f64 / 1000.0);
        }
        judge(left, written, now_us)?;
        return Ok(Decoded {
            found: Found::Counter(count),
            left_s: left,
            tags,
            written,
        });
    }
    if body.len() < 2 + MAC_LEN + 18 || &body[..2] != VALUE {
        return Err(Refused::Bad);
    }
    let rest = &body[2 + MAC_LEN..];
    if !signer.value_ok(key, rest, &body[2..2 + MAC_LEN]) {
        return Err(Refused::Bad);
    }
    let expiry_ms = u64::from_be_bytes(rest[..8].try_into().map_err(|_| Refused::Bad)?);
    let written = u64::from_be_bytes(rest[8..16].try_into().map_err(|_| Refused::Bad)?);
    let mut left = seconds_left(written, now_us);
    if expiry_ms != 0 {
        left = left.min(expiry_ms as f64 / 1000.0 - now_us as f64 / 1e6);
    }
    judge(left, written, now_us)?;
    let (tags, pos) = read_tags(rest, 16)?;
    let found = match rest.get(pos) {
        Some(b'I') => Found::Int(int(&rest[pos + 1..])?),
        Some(b'P') => Found::Encoded(&rest[pos + 1..]),
        _ => return Err(Refused::Bad),
    };
    Ok(Decoded {
        found,
        left_s: left,
        tags,
        written,
    })
}

fn seconds_left(written: u64, now_us: u64) -> f64 {
    (written.saturating_add(MAX_AGE_US)) as f64 / 1e6 - now_us as f64 / 1e6
}

fn judge(left: f64, written: u64, now_us: u64) -> Result<(), Refused> {
    if left <= 0.0 {
        return Err(Refused::Expired(written));
    }
    if written > now_us.saturating_add(MAX_SKEW_US) {
        return Err(Refused::Ahead(written));
    }
    Ok(())
}

/// An integer written in decimal by the tier or its scripts (an optional
/// sign, then digits).
fn int(b: &[u8]) -> Result<i64, Refused> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(Refused::Bad)
}

/// The body of a stored value, past the prefix the scripts keep before it (a
/// tag count, then each tag's length (u16 BE), name, version's length (u8)
/// and version), or `None` for a prefix that does not add up.
///
/// ```
/// use ziggurat_cluster::strip_prefix;
/// assert_eq!(strip_prefix(b"\x01\x00\x01t\x011body"), Some(&b"body"[..]));
/// assert_eq!(strip_prefix(b"\x02\x00\x01t"), None);
/// ```
pub fn strip_prefix(stored: &[u8]) -> Option<&[u8]> {
    let n = *stored.first()?;
    let mut pos = 1usize;
    for _ in 0..n {
        let len = stored.get(pos..pos + 2)?;
        pos += 2 + u16::from_be_bytes([len[0], len[1]]) as usize;
        pos += 1 + *stored.get(pos)? as usize;
    }
    stored.get(pos..)
}

fn tag_list(out: &mut Vec<u8>, tags: &[&str]) {
    // A body never holds more than 255 tags: the Cache allows far fewer.
    out.push(tags.len().min(255) as u8);
    for t in tags.iter().take(255) {
        out.extend_from_slice(&(t.len() as u16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
}

fn read_tags(b: &[u8], mut pos: usize) -> Result<(Vec<String>, usize), Refused> {
    let n = *b.get(pos).ok_or(Refused::Bad)?;
    pos += 1;
    let mut tags = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = b.get(pos..pos + 2).ok_or(Refused::Bad)?;
        let len = u16::from_be_bytes([len[0], len[1]]) as usize;
        let tag = b.get(pos + 2..pos + 2 + len).ok_or(Refused::Bad)?;
        tags.push(String::from_utf8(tag.to_vec()).map_err(|_| Refused::Bad)?);
        pos += 2 + len;
    }
    Ok((tags, pos))
}
