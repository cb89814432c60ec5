//! A cache's defaults, checked once when the cache is made: the TTLs its
//! writes and loads use, the jitter and early refresh of loads, and how long
//! a waiter waits for another caller's load.

use ziggurat_core::{Arg, Problem};

use crate::defaults;
use crate::error::Error;
use crate::ttl::check_ttl;

/// The defaults of one cache (checked by [`CacheOptions::checked`] when the
/// cache is made).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheOptions {
    /// Seconds a value lives (math.inf: never expires).
    pub ttl: f64,
    /// Seconds a loader's None is cached as a miss (None: not cached).
    pub neg_ttl: Option<f64>,
    /// Seconds a value is kept past its TTL for a failed load to answer with
    /// (None: fail-safe off).
    pub stale_ttl: Option<f64>,
    /// The fraction of a loaded value's TTL taken off at random, so entries
    /// loaded together do not expire together.
    pub jitter: f64,
    /// Seconds the others wait for a loader, and a lease's deadline.
    pub loader_timeout: f64,
    /// The last fraction of a TTL in which a hit starts an early refresh (0: never).
    pub refresh_ahead: f64,
    /// Without a segment, the longest an L1 entry lives (None: its TTL).
    pub degraded_ttl: Option<f64>,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            ttl: defaults::TTL,
            neg_ttl: Some(defaults::NEG_TTL),
            stale_ttl: None,
            jitter: defaults::JITTER,
            loader_timeout: defaults::LOADER_TIMEOUT,
            refresh_ahead: defaults::REFRESH_AHEAD,
            degraded_ttl: None,
        }
    }
}

impl CacheOptions {
    /// The options if every one is within its range; otherwise the first
    /// that is not, named.
    ///
    /// ```
    /// use ziggurat_cache::CacheOptions;
    /// let o = CacheOptions { ttl: 60.0, ..CacheOptions::default() };
    /// assert!(o.checked().is_ok());
    /// let bad = CacheOptions { jitter: 1.5, ..o };
    /// assert!(bad.checked().unwrap_err().to_string().starts_with("jitter"));
    /// ```
    pub fn checked(self) -> Result<CacheOptions, Error> {
        check_ttl(self.ttl, Arg::Ttl)?;
        for (v, what) in [
            (self.neg_ttl, Arg::NegTtl),
            (self.stale_ttl, Arg::StaleTtl),
            (self.degraded_ttl, Arg::DegradedTtl),
        ] {
            if let Some(v) = v {
                check_ttl(v, what)?;
            }
        }
        let fraction = |v: f64, what: Arg| {
            if (0.0..1.0).contains(&v) {
                Ok(())
            } else {
                Err(Error::invalid(what, Problem::Fraction { got: v }))
            }
        };
        fraction(self.jitter, Arg::Jitter)?;
        fraction(self.refresh_ahead, Arg::RefreshAhead)?;
        check_ttl(self.loader_timeout, Arg::LoaderTimeout)?;
        Ok(self)
    }
}

/// How a front end hands out the objects its L1 keeps (its `copy` option).
///
/// ```
/// use ziggurat_cache::CopyMode;
/// assert_eq!(CopyMode::parse("decode").unwrap(), CopyMode::Decode);
/// assert!(CopyMode::parse("deep").is_err());
/// assert!(CopyMode::Shared.as_is(false) && !CopyMode::Shared.as_is(true));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyMode {
    /// The object that was stored, to every caller (who must not change it).
    Shared,
    /// A copy of it for each caller (a shallow copy of a dict, list or set).
    Copy,
    /// The stored bytes, decoded anew for each caller.
    Decode,
}

impl CopyMode {
    /// The mode named `name` (`"shared"`, `"copy"` or `"decode"`).
    pub fn parse(name: &str) -> Result<CopyMode, Error> {
        match name {
            "shared" => Ok(CopyMode::Shared),
            "copy" => Ok(CopyMode::Copy),
            "decode" => Ok(CopyMode::Decode),
            other => Err(Error::invalid(
                Arg::Copy,
                Problem::Choice {
                    allowed: &["shared", "copy", "decode"],
                    got: other.to_string(),
                },
            )),
        }
    }

    /// Whether L1 hands out what it keeps as is: no copy, and no check that
    /// the caller changed it (which `debug` asks for).
    #[inline]
    pub fn as_is(self, debug: bool) -> bool {
        self == CopyMode::Shared && !debug
    }
}
