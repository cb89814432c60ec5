//! What a host sends the write script ([`WRITE`](crate::WRITE)) and how it
//! reads a refusal: the arguments every write starts with (the op, the host
//! with its fence, the stream's length, the event's `k`, its MAC and its write
//! time), how long Redis keeps a value, and the errors the script answers.

use crate::body::MAX_AGE_US;
use crate::event::signed_body;
use crate::mac::Signer;

/// The first six arguments of a write: op, `host:fence`, the stream's length,
/// the event's `k`, its MAC and its write time `w` (µs). The op's own
/// arguments follow (see [`WRITE`](crate::WRITE)).
///
/// ```
/// use ziggurat_cluster::{write_args, Signer};
/// let s = Signer::new(b"c", &[b"0123456789abcdef".to_vec()]).unwrap();
/// let a = write_args(&s, "1f", 3, 1000, "del", b"k", 7);
/// assert_eq!((a[0].as_slice(), a[1].as_slice(), a[2].as_slice()), (&b"del"[..], &b"1f:3"[..], &b"1000"[..]));
/// assert_eq!(a[4].len(), 16);
/// ```
pub fn write_args(
    signer: &Signer,
    host: &str,
    fence: u64,
    stream_length: u64,
    op: &str,
    k: &[u8],
    w: u64,
) -> Vec<Vec<u8>> {
    vec![
        op.as_bytes().to_vec(),
        format!("{host}:{fence}").into_bytes(),
        stream_length.to_string().into_bytes(),
        k.to_vec(),
        signer.event_mac(&signed_body(host, op, k, w)).to_vec(),
        w.to_string().into_bytes(),
    ]
}

/// Milliseconds Redis keeps something for `ttl_s` seconds (0: no expiry, for
/// an infinite TTL; at least 1).
///
/// ```
/// use ziggurat_cluster::px;
/// assert_eq!((px(f64::INFINITY), px(0.0001), px(1.5)), (0, 1, 1500));
/// ```
pub fn px(ttl_s: f64) -> u64 {
    if ttl_s.is_infinite() {
        0
    } else {
        ((ttl_s * 1000.0) as u64).max(1)
    }
}

/// Milliseconds Redis keeps a signed value written now for `ttl_s`: its TTL,
/// at most [`MAX_AGE_US`] (a body is refused past it anyway).
///
/// ```
/// use ziggurat_cluster::px_value;
/// assert_eq!((px_value(60.0), px_value(f64::INFINITY)), (60_000, 86_400_000));
/// ```
pub fn px_value(ttl_s: f64) -> u64 {
    px(ttl_s.min(MAX_AGE_US as f64 / 1e6))
}

/// Milliseconds Redis keeps a value written at `written_us` that gets `ttl_s`
/// from `now_us` on (a touch): at most until [`MAX_AGE_US`] after its write.
///
/// ```
/// use ziggurat_cluster::px_since;
/// let now = 1_700_000_000_000_000;
/// assert_eq!(px_since(60.0, now, now), 60_000);
/// assert_eq!(px_since(f64::INFINITY, now - 86_399_000_000, now), 1_000);
/// ```
pub fn px_since(ttl_s: f64, written_us: u64, now_us: u64) -> u64 {
    let left = (written_us as f64 + MAX_AGE_US as f64 - now_us as f64) / 1e6;
    px(ttl_s.min(left).max(0.001))
}

/// What the write script's error says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The host's fence is older than the server's: a recovery is under way,
    /// and the write stays on the host.
    Fenced,
    /// `incr` of a missing key without a default.
    Missing,
    /// `incr` of a value that is not an integer.
    NotInt,
    /// `incr` past the range the scripts count exactly (±2^53).
    Overflow,
    /// Anything else the server answers (out of memory, a read-only
    /// replica, ...): the write stays on the host.
    Server,
}

/// The refusal in the server's error `message`.
///
/// ```
/// use ziggurat_cluster::{refusal, Refusal};
/// assert_eq!(refusal("ERR user_script:12: FENCED"), Refusal::Fenced);
/// assert_eq!(refusal("OOM command not allowed"), Refusal::Server);
/// ```
pub fn refusal(message: &str) -> Refusal {
    [
        ("FENCED", Refusal::Fenced),
        ("MISSING", Refusal::Missing),
        ("NOTINT", Refusal::NotInt),
        ("OVERFLOW", Refusal::Overflow),
    ]
    .into_iter()
    .find(|(word, _)| message.contains(word))
    .map_or(Refusal::Server, |(_, r)| r)
}
