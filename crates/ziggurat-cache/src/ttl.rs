//! TTL rules shared by every front end: seconds, finite and positive, or
//! infinite for "never expires".

use ziggurat_core::{Arg, Problem};

use crate::error::Error;

/// The longest finite TTL, in seconds (100 years); longer is a mistake, not a wish.
pub const MAX_TTL_SECONDS: f64 = 100.0 * 365.0 * 86400.0;

/// How long an entry lives: fresh for `ttl_ms` (None: forever), then servable
/// as stale for `stale_ms` more by a fail-safe read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// Freshness in ms; None never expires.
    pub ttl_ms: Option<u64>,
    /// Extra ms the record is kept past its freshness for fail-safe reads.
    pub stale_ms: u64,
}

impl Lifetime {
    /// A lifetime from seconds; `Err` names what is wrong with `ttl` (the
    /// caller adds which method and argument).
    pub fn from_seconds(ttl: f64, stale: f64) -> Result<Lifetime, Problem> {
        let ttl_ms = seconds_to_ms(ttl)?;
        let stale_ms = if stale == 0.0 {
            0
        } else {
            seconds_to_ms(stale)?.unwrap_or(0)
        };
        Ok(Lifetime { ttl_ms, stale_ms })
    }

    /// The segment record's TTL in seconds: freshness plus the stale window;
    /// None when the entry never expires.
    pub fn record_ttl(&self) -> Option<f64> {
        self.ttl_ms
            .map(|ms| ((ms + self.stale_ms) as f64 / 1000.0).min(MAX_TTL_SECONDS))
    }

    /// The segment record's absolute expiry for a soft deadline `soft` (0: never).
    pub fn record_expiry(&self, soft: u64) -> u64 {
        if soft == 0 {
            0
        } else {
            soft + self.stale_ms
        }
    }
}

/// `ttl` if it is a TTL the Cache takes (seconds > 0, at most [`MAX_TTL_SECONDS`],
/// or infinity for never); otherwise what is wrong, naming the argument `what`.
///
/// ```
/// use ziggurat_cache::{check_ttl, Arg};
/// assert_eq!(check_ttl(1.5, Arg::Ttl).unwrap(), 1.5);
/// assert!(check_ttl(0.0, Arg::NegTtl).unwrap_err().to_string().starts_with("neg_ttl must be"));
/// ```
pub fn check_ttl(ttl: f64, what: Arg) -> Result<f64, Error> {
    match seconds_to_ms(ttl) {
        Ok(_) => Ok(ttl),
        Err(problem) => Err(Error::invalid(what, problem)),
    }
}

/// The lifetime of an entry for `ttl` and `stale` seconds, both already
/// checked ([`check_ttl`]); a value that slipped through never expires.
pub fn lifetime(ttl: f64, stale: f64) -> Lifetime {
    Lifetime::from_seconds(ttl, stale).unwrap_or(Lifetime {
        ttl_ms: None,
        stale_ms: 0,
    })
}

/// Milliseconds of a TTL in seconds: `None` for infinity.
fn seconds_to_ms(s: f64) -> Result<Option<u64>, Problem> {
    if s == f64::INFINITY {
        return Ok(None);
    }
    if !(s.is_finite() && s > 0.0) {
        return Err(Problem::Seconds {
            got: s,
            zero: false,
            never: true,
        });
    }
    if s > MAX_TTL_SECONDS {
        return Err(Problem::TooLong {
            max: MAX_TTL_SECONDS,
            got: s,
            never: true,
        });
    }
    Ok(Some(((s * 1000.0).ceil() as u64).max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert_eq!(Lifetime::from_seconds(1.5, 0.0).unwrap().ttl_ms, Some(1500));
        assert_eq!(
            Lifetime::from_seconds(f64::INFINITY, 0.0).unwrap().ttl_ms,
            None
        );
        assert_eq!(Lifetime::from_seconds(0.0001, 0.0).unwrap().ttl_ms, Some(1));
        for bad in [0.0, -1.0, f64::NAN, f64::NEG_INFINITY, 1e12] {
            assert!(Lifetime::from_seconds(bad, 0.0).is_err(), "{bad}");
        }
        let l = Lifetime::from_seconds(10.0, 5.0).unwrap();
        assert_eq!(l.record_ttl(), Some(15.0));
        assert_eq!(l.record_expiry(1000), 6000);
        assert_eq!(
            Lifetime::from_seconds(f64::INFINITY, 5.0)
                .unwrap()
                .record_ttl(),
            None
        );
    }
}
