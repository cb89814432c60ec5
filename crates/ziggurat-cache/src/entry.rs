//! The entry format: a payload followed by a fixed trailer.

use ziggurat_core::now_ms;

/// Bytes of the trailer: `kind:u8 || soft_deadline:u64 || ttl_ms:u32`, little-endian.
pub const TRAILER_LEN: usize = 13;

/// What an entry's payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A value encoded by the cache's serializer.
    Value = 1,
    /// A cached miss: the payload is the key's main stamp (`u32`) when it was stored.
    Negative = 2,
    /// An integer: the payload is an `i64`, little-endian; `incr` changes it in place.
    Counter = 3,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Value),
            2 => Some(Kind::Negative),
            3 => Some(Kind::Counter),
            _ => None,
        }
    }
}

/// The fixed tail of every entry a cache writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// What the payload holds.
    pub kind: Kind,
    /// When the entry stops being fresh, in ms of `now_ms()` (CLOCK_MONOTONIC_COARSE);
    /// 0 never. Fresh while now < soft.
    pub soft: u64,
    /// The TTL the entry was written with, in ms (0 for "never expires"); early
    /// refresh compares the time left with it.
    pub ttl_ms: u32,
}

impl Trailer {
    /// Whether the entry is past its soft deadline at `now` (ms of `now_ms()`).
    #[inline]
    pub fn stale_at(&self, now: u64) -> bool {
        self.soft != 0 && now >= self.soft
    }

    /// The trailer's bytes.
    pub fn bytes(&self) -> [u8; TRAILER_LEN] {
        let mut t = [0u8; TRAILER_LEN];
        t[0] = self.kind as u8;
        t[1..9].copy_from_slice(&self.soft.to_le_bytes());
        t[9..13].copy_from_slice(&self.ttl_ms.to_le_bytes());
        t
    }

    /// Reads a trailer from its bytes; None for an unknown kind.
    pub fn parse(t: &[u8; TRAILER_LEN]) -> Option<Trailer> {
        Some(Trailer {
            kind: Kind::from_u8(t[0])?,
            soft: u64::from_le_bytes(t[1..9].try_into().ok()?),
            ttl_ms: u32::from_le_bytes(t[9..13].try_into().ok()?),
        })
    }

    /// A trailer for an entry written now with a lifetime of `ttl_ms` (None: never expires).
    pub fn starting_now(kind: Kind, ttl_ms: Option<u64>) -> Trailer {
        match ttl_ms {
            None => Trailer {
                kind,
                soft: 0,
                ttl_ms: 0,
            },
            Some(ms) => Trailer {
                kind,
                soft: now_ms() + ms.max(1),
                ttl_ms: ms.min(u32::MAX as u64) as u32,
            },
        }
    }
}

/// Whether an entry with this soft deadline and TTL (a trailer's `soft` and
/// `ttl_ms`) is, at `now`, in the last `refresh_ahead` part (0 to 1) of its
/// life: a read then starts a reload before it goes stale. Never for an entry
/// that does not expire.
#[inline]
pub fn refresh_due(soft: u64, ttl_ms: u32, refresh_ahead: f64, now: u64) -> bool {
    refresh_ahead > 0.0
        && soft != 0
        && (soft.saturating_sub(now) as f64) < refresh_ahead * ttl_ms as f64
}

/// Milliseconds from `now` until [`refresh_due`] holds for this entry (0: it
/// holds now); None when it never will (early refresh off, or an entry that
/// does not expire). A front end that keeps a hit's answer without the
/// entry's TTL asks [`refresh_due`] again once they have passed.
pub fn refresh_due_in(soft: u64, ttl_ms: u32, refresh_ahead: f64, now: u64) -> Option<u64> {
    if refresh_ahead <= 0.0 || soft == 0 {
        return None;
    }
    if refresh_due(soft, ttl_ms, refresh_ahead, now) {
        return Some(0);
    }
    // Due from the first ms past `soft - refresh_ahead * ttl_ms`.
    let start = soft as f64 - refresh_ahead * ttl_ms as f64;
    Some((start.floor() as u64 + 1).saturating_sub(now))
}

/// `payload || trailer`, ready for the segment.
pub fn encode(payload: &[u8], t: &Trailer) -> Vec<u8> {
    let mut v = Vec::with_capacity(payload.len() + TRAILER_LEN);
    v.extend_from_slice(payload);
    seal(v, t)
}

/// `payload || trailer` in the payload's own buffer (no copy when it has room).
pub fn seal(mut payload: Vec<u8>, t: &Trailer) -> Vec<u8> {
    payload.extend_from_slice(&t.bytes());
    payload
}

/// Splits a stored value into payload and trailer; None when it was not
/// written by a cache (too short, or an unknown kind).
pub fn split(stored: &[u8]) -> Option<(&[u8], Trailer)> {
    let n = stored.len().checked_sub(TRAILER_LEN)?;
    let t: &[u8; TRAILER_LEN] = stored[n..].try_into().ok()?;
    Some((&stored[..n], Trailer::parse(t)?))
}

/// The payload of a counter holding `n`.
pub fn counter_payload(n: i64) -> [u8; 8] {
    n.to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = Trailer {
            kind: Kind::Counter,
            soft: 123_456,
            ttl_ms: 789,
        };
        let v = encode(b"abc", &t);
        assert_eq!(v.len(), 3 + TRAILER_LEN);
        assert_eq!(split(&v), Some((&b"abc"[..], t)));
    }

    #[test]
    fn foreign_values_are_refused() {
        assert_eq!(split(b"short"), None);
        let mut v = encode(b"x", &Trailer::starting_now(Kind::Value, Some(10)));
        let n = v.len() - TRAILER_LEN;
        v[n] = 9; // unknown kind
        assert_eq!(split(&v), None);
    }

    #[test]
    fn never_expiring_entries_have_no_soft_deadline() {
        let t = Trailer::starting_now(Kind::Value, None);
        assert_eq!((t.soft, t.ttl_ms), (0, 0));
        assert!(!t.stale_at(u64::MAX));
        let t = Trailer::starting_now(Kind::Value, Some(1000));
        assert!(!t.stale_at(t.soft - 1));
        assert!(t.stale_at(t.soft));
    }

    #[test]
    fn a_refresh_is_due_in_the_last_part_of_a_life() {
        // A 10 s life ending at 100 s; the last 20% starts at 98 s.
        assert!(!refresh_due(100_000, 10_000, 0.2, 97_999));
        assert!(!refresh_due(100_000, 10_000, 0.2, 98_000));
        assert!(refresh_due(100_000, 10_000, 0.2, 98_001));
        assert!(refresh_due(100_000, 10_000, 0.2, 150_000));
        assert!(!refresh_due(100_000, 10_000, 0.0, 99_999), "off");
        assert!(!refresh_due(0, 0, 0.5, 99_999), "never expires");
    }

    #[test]
    fn a_refresh_is_due_in_so_many_ms() {
        assert_eq!(refresh_due_in(100_000, 10_000, 0.2, 97_000), Some(1001));
        assert!(refresh_due(100_000, 10_000, 0.2, 97_000 + 1001));
        assert!(!refresh_due(100_000, 10_000, 0.2, 97_000 + 1000));
        assert_eq!(refresh_due_in(100_000, 10_000, 0.2, 98_001), Some(0));
        assert_eq!(refresh_due_in(100_000, 10_000, 0.0, 97_000), None, "off");
        assert_eq!(refresh_due_in(0, 0, 0.5, 97_000), None, "never expires");
    }
}
