//! Invalidation events: their fields, their check, and the rule that keeps a
//! host from ever following the stream past a hole without noticing.
//!
//! Redis never says that a read skipped entries: reading from a position the
//! stream no longer holds (trimmed, lost with the server's data, or on a
//! replica that never had it) returns the next entry that survived. So each
//! event carries the next number of a sequence kept beside the stream, and a
//! host expects exactly `last + 1`; anything else means events were lost (a
//! gap) or the sequence started again (the server lost its data), and the host
//! clears. An entry's fields: `s` sequence number, `h` host, `o` op, `k` the key
//! or the tags (a JSON list of strings), `m` MAC, `w` the write's time (µs), `g`
//! the stream's generation. The MAC covers `h`, `o`, `k` and `w`
//! ([`signed_body`]); the server assigns `s` and `g`.

use crate::mac::Signer;

/// What a host does with an event numbered `seq` after `last` ([`follow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The next one: apply it (or pass it, when the host wrote it).
    Apply,
    /// Events between were lost: clear.
    Gap,
    /// The sequence went back: the server lost its data; clear.
    Back,
}

/// The rule for an event numbered `seq` read after `last`. A host that starts
/// following takes the stream's last number as `last` (0 for a new stream), so
/// it is strict from the first event on.
///
/// ```
/// use ziggurat_cluster::{follow, Next};
/// assert_eq!(follow(41, 42), Next::Apply);
/// assert_eq!(follow(41, 45), Next::Gap);
/// assert_eq!(follow(41, 3), Next::Back);
/// assert_eq!(follow(5, 5), Next::Back);
/// ```
pub fn follow(last: u64, seq: u64) -> Next {
    match seq.checked_sub(last) {
        Some(1) => Next::Apply,
        Some(0) | None => Next::Back,
        Some(_) => Next::Gap,
    }
}

/// The ops whose `k` field is a JSON list of tags rather than a key.
const TAG_OPS: [&str; 3] = ["tags", "clear", "recover"];

/// What an event's MAC covers: each field after its length (u32 BE), then the
/// write time (u64 BE), so the fields of one event can never be read as those
/// of another (a key may hold any byte).
///
/// ```
/// use ziggurat_cluster::signed_body;
/// assert_eq!(&signed_body("h1", "del", b"k", 7)[..10], b"\x00\x00\x00\x02h1\x00\x00\x00\x03");
/// assert_ne!(signed_body("h1", "del", b"k", 7), signed_body("h1\x00\x00\x00\x03del", "", b"k", 7));
/// ```
pub fn signed_body(host: &str, op: &str, k: &[u8], w: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + host.len() + op.len() + k.len());
    for f in [host.as_bytes(), op.as_bytes(), k] {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out.extend_from_slice(&w.to_be_bytes());
    out
}

/// The `k` field of an event about tags: a JSON list (any string is a tag).
///
/// ```
/// use ziggurat_cluster::tags_field;
/// assert_eq!(tags_field(&["a", "\u{0}ns:x"]), br#"["a","\u0000ns:x"]"#);
/// ```
pub fn tags_field(tags: &[&str]) -> Vec<u8> {
    serde_json::to_vec(tags).unwrap_or_else(|_| unreachable!("a list of strings serializes"))
}

/// The key or the tags an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum About {
    /// The key of a set, add, del, incr or touch.
    Key(Vec<u8>),
    /// The tags of a tags, clear or recover.
    Tags(Vec<String>),
}

/// One event whose MAC checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its number in the sequence.
    pub seq: u64,
    /// The host that wrote it (lowercase hex).
    pub host: String,
    /// set, add, del, incr, touch (a key changed), tags, clear or recover (a
    /// clear after a cut-off).
    pub op: String,
    /// The key or the tags.
    pub about: About,
    /// The stream's generation (0 when absent).
    pub gen: u64,
    /// The write's time, µs.
    pub w: u64,
}

/// The value of field `name` among a stream entry's `fields`.
fn field<'a>(fields: &[(&[u8], &'a [u8])], name: &[u8]) -> Option<&'a [u8]> {
    fields.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

fn number(b: &[u8]) -> Option<u64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `(seq, gen)` of an entry the reading host wrote itself, which it passes: read
/// without checking its MAC, since only its place in the sequence matters then
/// and the MAC never covers it. A forged entry naming the host gets no further
/// than a genuine one replayed with another number would: the host's position
/// moves, and a number out of turn makes it clear. `None` when malformed.
///
/// ```
/// use ziggurat_cluster::place;
/// assert_eq!(place(&[(b"s", b"7"), (b"h", b"h1"), (b"g", b"12")]), Some((7, 12)));
/// assert_eq!(place(&[(b"s", b"x")]), None);
/// ```
pub fn place(fields: &[(&[u8], &[u8])]) -> Option<(u64, u64)> {
    let seq = number(field(fields, b"s")?)?;
    let gen = match field(fields, b"g") {
        Some(g) => number(g)?,
        None => 0,
    };
    Some((seq, gen))
}

/// The event in a stream entry's `fields`, or `None` when it is malformed or
/// its MAC does not check (a forged or damaged event has no effect).
///
/// ```
/// use ziggurat_cluster::{parse, signed_body, About, Signer};
/// let s = Signer::new(b"c", &[b"0123456789abcdef".to_vec()]).unwrap();
/// let m = s.event_mac(&signed_body("h1", "del", b"x", 5));
/// let f: Vec<(&[u8], &[u8])> = vec![(b"s", b"7"), (b"h", b"h1"), (b"o", b"del"), (b"k", b"x"), (b"w", b"5"), (b"m", &m)];
/// let e = parse(&f, &s).unwrap();
/// assert_eq!((e.seq, e.about), (7, About::Key(b"x".to_vec())));
/// let forged: Vec<(&[u8], &[u8])> = vec![(b"s", b"7"), (b"h", b"h1"), (b"o", b"del"), (b"k", b"y"), (b"w", b"5"), (b"m", &m)];
/// assert!(parse(&forged, &s).is_none());
/// ```
pub fn parse(fields: &[(&[u8], &[u8])], signer: &Signer) -> Option<Event> {
    let seq = number(field(fields, b"s")?)?;
    let host = std::str::from_utf8(field(fields, b"h")?).ok()?;
    let op = std::str::from_utf8(field(fields, b"o")?).ok()?;
    let k = field(fields, b"k")?;
    let mac = field(fields, b"m")?;
    let gen = match field(fields, b"g") {
        Some(g) => number(g)?,
        None => 0,
    };
    let w = number(field(fields, b"w")?)?;
    if !signer.event_ok(&signed_body(host, op, k, w), mac) {
        return None;
    }
    let about = if TAG_OPS.contains(&op) {
        About::Tags(serde_json::from_slice::<Vec<String>>(k).ok()?)
    } else {
        About::Key(k.to_vec())
    };
    Some(Event {
        seq,
        host: host.to_owned(),
        op: op.to_owned(),
        about,
        gen,
        w,
    })
}
