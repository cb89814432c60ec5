//! A look at a key that loads nothing (Python's `Cache.peek`): what this
//! process would find now, how long it stays fresh and the TTL it was
//! written with, by the same rules in every front end.

use ziggurat_core::now_ms;

use crate::front::Read;

/// What a look found, as front ends number it (Python's
/// `ziggurat.loader.Found`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Sight {
    /// Nothing usable.
    Miss = 0,
    /// A fresh value.
    Hit = 1,
    /// A cached miss.
    Negative = 2,
    /// A value past its TTL, kept for fail-safe.
    Stale = 3,
}

impl Sight {
    /// Every kind.
    pub const ALL: [Sight; 4] = [Sight::Miss, Sight::Hit, Sight::Negative, Sight::Stale];

    /// The kind's name: MISS, HIT, NEGATIVE, STALE.
    pub fn name(self) -> &'static str {
        match self {
            Sight::Miss => "MISS",
            Sight::Hit => "HIT",
            Sight::Negative => "NEGATIVE",
            Sight::Stale => "STALE",
        }
    }
}

/// What a look at a key found.
///
/// ```
/// use ziggurat_cache::{Look, Sight};
/// let l = Look::in_l1(Some("v"), 0, 0);
/// assert_eq!((l.sight, l.value, l.seconds_left, l.ttl), (Sight::Hit, Some("v"), f64::INFINITY, 0.0));
/// ```
#[derive(Debug, PartialEq)]
pub struct Look<V> {
    /// What was found.
    pub sight: Sight,
    /// The value (None unless a hit or a stale value).
    pub value: Option<V>,
    /// Seconds before the entry goes stale (infinite: it never does);
    /// negative: stale for that long.
    pub seconds_left: f64,
    /// The TTL the entry was written with, in seconds (0: never expires).
    pub ttl: f64,
}

impl<V> Look<V> {
    /// An L1 entry of `value` (None: a cached miss) with soft deadline
    /// `soft` (0: none), written with `ttl_ms`.
    pub fn in_l1(value: Option<V>, soft: u64, ttl_ms: u32) -> Look<V> {
        let sight = if value.is_some() {
            Sight::Hit
        } else {
            Sight::Negative
        };
        Look::of(sight, value, seconds_left(soft, now_ms()), ttl_ms)
    }

    /// What a read below L1 (stale values allowed) found.
    pub fn read(r: Read<V>) -> Look<V> {
        let now = now_ms();
        match r {
            Read::Fresh(v, t) => Look::of(Sight::Hit, Some(v), seconds_left(t.soft, now), t.ttl_ms),
            Read::Negative(t) => {
                Look::of(Sight::Negative, None, seconds_left(t.soft, now), t.ttl_ms)
            }
            Read::Stale(v, t, _) => {
                let since = now.saturating_sub(t.soft) as f64 / 1000.0;
                Look::of(Sight::Stale, Some(v), -since, t.ttl_ms)
            }
            Read::Miss(_) => Look::of(Sight::Miss, None, f64::INFINITY, 0),
        }
    }

    fn of(sight: Sight, value: Option<V>, seconds_left: f64, ttl_ms: u32) -> Look<V> {
        Look {
            sight,
            value,
            seconds_left,
            ttl: ttl_ms as f64 / 1000.0,
        }
    }
}

/// Seconds from `now` to the soft deadline `soft` (0: none, infinite).
fn seconds_left(soft: u64, now: u64) -> f64 {
    if soft == 0 {
        f64::INFINITY
    } else {
        soft.saturating_sub(now) as f64 / 1000.0
    }
}
