//! What the client gets of a response the cache sends: the app's head as it leaves
//! (passed, streamed, or just stored), and a stored response while it is fresh.

use crate::cache_status::{cache_status, Param};
use crate::connection::connection_listed;
use crate::fields::Headers;
use crate::stored::Stored;

/// Header lines owned by the caller.
pub type Lines = Vec<(Vec<u8>, Vec<u8>)>;

/// How the app's response leaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sent {
    /// Untouched but for the lines this cache keeps to itself.
    Passed,
    /// Relayed as it comes, and stored at its end if it fits: no `Age`, and the lines
    /// `Connection` names dropped, as a stored response has them.
    Streamed,
    /// Just stored, answered from its buffered body of `body_len` bytes: as a hit sends
    /// it, with `Age` (the response's initial age) and `Content-Length`.
    Stored {
        /// The response's status.
        status: u16,
        /// Its corrected initial age, seconds.
        initial_age: f64,
        /// Its body's length, bytes.
        body_len: usize,
    },
}

/// The app's head `headers` as the client gets it: `strip` (the tag header and the
/// targeted fields meant for this cache alone) never leaves; then the `Cache-Status`
/// member `status` when given.
///
/// ```
/// use ziggurat_http::{client_headers, Sent};
/// let h: &[(&[u8], &[u8])] = &[(b"cache-tag", b"posts"), (b"age", b"9"), (b"x", b"1")];
/// let out = client_headers(h, &[b"cache-tag"], Sent::Stored { status: 200, initial_age: 2.5, body_len: 3 }, None);
/// assert_eq!(out, [(b"x".to_vec(), b"1".to_vec()), (b"age".to_vec(), b"2".to_vec()),
///                  (b"content-length".to_vec(), b"3".to_vec())]);
/// ```
pub fn client_headers(
    headers: &Headers<'_>,
    strip: &[&[u8]],
    how: Sent,
    status: Option<&str>,
) -> Lines {
    let listed = match how {
        Sent::Passed => Vec::new(),
        _ => connection_listed(headers),
    };
    let mut out: Lines = headers
        .iter()
        .filter(|(k, _)| !strip.contains(k) && !listed.iter().any(|l| l == k))
        .filter(|(k, _)| match how {
            Sent::Passed => true,
            Sent::Streamed => *k != b"age",
            Sent::Stored { .. } => *k != b"age" && *k != b"content-length",
        })
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    if let Sent::Stored {
        status,
        initial_age,
        body_len,
    } = how
    {
        out.push((
            b"age".to_vec(),
            (initial_age as i64).to_string().into_bytes(),
        ));
        if status != 204 && status != 304 {
            out.push((
                b"content-length".to_vec(),
                body_len.to_string().into_bytes(),
            ));
        }
    }
    if let Some(cs) = status {
        out.push((b"cache-status".to_vec(), cs.as_bytes().to_vec()));
    }
    out
}

/// A stored response as a plain hit sends it during one second of its age.
#[derive(Debug, Clone, PartialEq)]
pub struct FreshHit {
    /// The header lines (`Age` and the `Cache-Status` member's `ttl` hold for the second).
    pub headers: Lines,
    /// From when these lines hold (Unix time; `-inf`: since the response was stored).
    pub since: f64,
    /// Until when they hold: the next second of age, or the end of freshness.
    pub until: f64,
}

/// When `s` stops being fresh: the full rules decide past it (a response the app
/// marked `no-cache` is never a plain hit).
pub fn fresh_until(s: &Stored<'_>) -> f64 {
    if s.has("no-cache") || s.lifetime <= s.initial_age {
        f64::NEG_INFINITY
    } else {
        s.response_time + (s.lifetime - s.initial_age)
    }
}

/// `s` as a plain hit (a GET or HEAD with none of the request fields that ask for
/// more) at `now`: `hidden` lines removed, `Content-Length`, `Age`, then the
/// `Cache-Status` member when `cache_status_on`; None once it is not fresh.
///
/// ```
/// use ziggurat_http::{fresh_hit, Stored};
/// let s = Stored { status: 200, body: b"hi", response_time: 100.0, initial_age: 5.0,
///                  lifetime: 60.0, ..Default::default() };
/// let h = fresh_hit(&s, 110.5, &[], true).unwrap();
/// assert_eq!((h.since, h.until), (110.0, 111.0));
/// assert_eq!(h.headers.last().unwrap().1, b"ziggurat; hit; ttl=44");
/// assert!(fresh_hit(&s, 155.0, &[], true).is_none());
/// ```
pub fn fresh_hit(
    s: &Stored<'_>,
    now: f64,
    hidden: &[&[u8]],
    cache_status_on: bool,
) -> Option<FreshHit> {
    let stale_at = fresh_until(s);
    if now.is_nan() || now >= stale_at {
        return None;
    }
    let age = s.age(now);
    let whole = age.trunc();
    let mut headers: Lines = s
        .headers
        .iter()
        .filter(|(k, _)| !hidden.contains(k))
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    if s.status != 204 && s.status != 304 {
        headers.push((
            b"content-length".to_vec(),
            s.body.len().to_string().into_bytes(),
        ));
    }
    headers.push((b"age".to_vec(), (whole as i64).to_string().into_bytes()));
    if cache_status_on {
        let ttl = ((s.lifetime - age) as i64).to_string();
        headers.push((
            b"cache-status".to_vec(),
            cache_status("hit", &[("ttl", Param::Value(&ttl))]).into_bytes(),
        ));
    }
    // Age is the initial age until the response time, then grows with the clock: it
    // reaches whole + 1 at the same instant on either side.
    let until = (s.response_time + (whole + 1.0 - s.initial_age)).min(stale_at);
    let since = if now >= s.response_time && whole > s.initial_age {
        s.response_time + (whole - s.initial_age)
    } else {
        f64::NEG_INFINITY
    };
    Some(FreshHit {
        headers,
        since,
        until,
    })
}

/// The answer to `only-if-cached` when nothing usable is stored (RFC 9111 §5.2.1.7):
/// status, header lines (with the `Cache-Status` member when `cache_status_on`), body.
///
/// ```
/// assert_eq!(ziggurat_http::gateway_timeout(false).0, 504);
/// ```
pub fn gateway_timeout(cache_status_on: bool) -> (u16, Lines, &'static [u8]) {
    let body: &'static [u8] = b"not in cache\n";
    let mut headers = vec![
        (b"content-type".to_vec(), b"text/plain".to_vec()),
        (
            b"content-length".to_vec(),
            body.len().to_string().into_bytes(),
        ),
    ];
    if cache_status_on {
        let cs = cache_status(
            "fwd",
            &[
                ("fwd", Param::Value("miss")),
                ("detail", Param::Value("only-if-cached")),
            ],
        );
        headers.push((b"cache-status".to_vec(), cs.into_bytes()));
    }
    (504, headers, body)
}
