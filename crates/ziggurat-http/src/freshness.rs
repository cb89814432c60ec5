//! Freshness lifetime (RFC 9111 §4.2.1, §4.2.2, §5.3).

use crate::cache_control::Directives;
use crate::date::http_date;
use crate::delta::delta_seconds;
use crate::fields::{field, fields, Headers};
use crate::status::may_use_default_freshness;

/// Whether the response has `Expires`, and its time (None when invalid: RFC 9111 §5.3
/// makes an invalid date, or more than one `Expires` line, mean "already expired").
///
/// ```
/// use ziggurat_http::expires_time;
/// assert_eq!(expires_time(&[(b"expires", b"Sun, 06 Nov 1994 08:49:37 GMT")]), (true, Some(784111777.0)));
/// assert_eq!(expires_time(&[(b"expires", b"0")]), (true, None));
/// assert_eq!(expires_time(&[]), (false, None));
/// ```
pub fn expires_time(headers: &Headers<'_>) -> (bool, Option<f64>) {
    match fields(headers, b"expires")[..] {
        [] => (false, None),
        [one] => (true, http_date(one)),
        _ => (true, None),
    }
}

/// What decides a response's lifetime besides its directives and fields.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LifetimeRules {
    /// Whether a response without explicit freshness gets a heuristic lifetime.
    pub heuristic: bool,
    /// The lifetime of a response without explicit freshness, if any.
    pub default_ttl: Option<f64>,
    /// Whether the directives came from a targeted field (RFC 9213), which decides
    /// alone: `Expires` is then not read.
    pub targeted: bool,
}

/// Seconds a response is fresh for a shared cache, and whether it said so explicitly.
///
/// `s-maxage` wins over `max-age`, which wins over `Expires` - `Date` (unless
/// `rules.targeted`); a malformed value of the directive or field that decides means 0
/// (stale). Without explicit information, `rules.heuristic` gives 10 % of the time since
/// `Last-Modified` (at most a day) and `rules.default_ttl` a fixed lifetime, both only
/// where [`may_use_default_freshness`].
///
/// ```
/// use ziggurat_http::{freshness_lifetime, parse_cache_control, Directives, LifetimeRules};
/// let cc = parse_cache_control([&b"max-age=60, s-maxage=5"[..]]);
/// let rules = LifetimeRules::default();
/// assert_eq!(freshness_lifetime(&cc, &[], 200, 0.0, &rules), (5.0, true));
/// let none = Directives::new();
/// assert_eq!(freshness_lifetime(&none, &[(b"expires", b"garbage")], 200, 0.0, &rules), (0.0, true));
/// let ttl = LifetimeRules { default_ttl: Some(30.0), ..rules };
/// assert_eq!(freshness_lifetime(&none, &[], 200, 0.0, &ttl), (30.0, false));
/// ```
pub fn freshness_lifetime(
    cc: &Directives,
    headers: &Headers<'_>,
    status: u16,
    response_time: f64,
    rules: &LifetimeRules,
) -> (f64, bool) {
    for name in ["s-maxage", "max-age"] {
        if let Some(arg) = cc.get(name) {
            return (delta_seconds(arg).map_or(0.0, |d| d as f64), true);
        }
    }
    let (has_expires, exp) = if !rules.targeted {
        expires_time(headers)
    } else {
        (false, None)
    };
    let date = || field(headers, b"date").and_then(http_date);
    if has_expires {
        return match exp {
            None => (0.0, true),
            Some(exp) => ((exp - date().unwrap_or(response_time)).max(0.0), true),
        };
    }
    if !may_use_default_freshness(status) {
        return (0.0, false);
    }
    if rules.heuristic {
        let base = date().unwrap_or(response_time);
        if let Some(lm) = field(headers, b"last-modified").and_then(http_date) {
            if lm < base {
                return ((0.1 * (base - lm)).min(86400.0), false);
            }
        }
    }
    (rules.default_ttl.unwrap_or(0.0), false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache_control::parse_cache_control;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn life(cc: &[u8], h: &[(&[u8], &[u8])], status: u16, heuristic: bool) -> (f64, bool) {
        freshness_lifetime(
            &parse_cache_control([cc]),
            h,
            status,
            1000.0,
            &LifetimeRules {
                heuristic,
                ..LifetimeRules::default()
            },
        )
    }

    #[test]
    fn directives_first() {
        assert_eq!(
            life(b"max-age=x", &[(b"expires", DATE)], 200, false),
            (0.0, true)
        );
        assert_eq!(life(b"s-maxage, max-age=9", &[], 200, false), (0.0, true));
        assert_eq!(
            life(b"max-age=9", &[(b"expires", b"0")], 500, false),
            (9.0, true)
        );
    }

    #[test]
    fn every_expires_form() {
        let date: &[u8] = b"Sun, 06 Nov 1994 08:00:00 GMT";
        for exp in [
            &b"Sun, 06 Nov 1994 08:49:37 GMT"[..],
            b"Sunday, 06-Nov-94 08:49:37 GMT",
            b"Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                life(b"", &[(b"expires", exp), (b"date", date)], 200, false),
                (2977.0, true)
            );
        }
        // Invalid, twice, or in the past: stale.
        for h in [
            &[(&b"expires"[..], &b"0"[..])][..],
            &[(b"expires", b"-1")],
            &[(b"expires", b"Sun, 06 Nov 1994 08:49:37 UTC")],
            &[(b"expires", DATE), (b"expires", DATE)],
            &[
                (b"expires", DATE),
                (b"date", b"Mon, 07 Nov 1994 08:49:37 GMT"),
            ],
        ] {
            assert_eq!(life(b"", h, 200, false), (0.0, true), "{h:?}");
        }
        // Without Date, the time the response came.
        let t = http_date(DATE).unwrap();
        let got = freshness_lifetime(
            &Directives::new(),
            &[(b"expires", DATE)],
            200,
            t - 5.0,
            &LifetimeRules::default(),
        );
        assert_eq!(got, (5.0, true));
        // A targeted field decides alone: Expires is not read.
        let got = freshness_lifetime(
            &Directives::new(),
            &[(b"expires", DATE)],
            200,
            0.0,
            &LifetimeRules {
                targeted: true,
                ..LifetimeRules::default()
            },
        );
        assert_eq!(got, (0.0, false));
    }

    #[test]
    fn heuristic_and_default() {
        let h: &[(&[u8], &[u8])] = &[
            (b"last-modified", b"Sun, 06 Nov 1994 08:00:00 GMT"),
            (b"date", b"Sun, 06 Nov 1994 09:00:00 GMT"),
        ];
        assert_eq!(life(b"", h, 200, true), (360.0, false));
        assert_eq!(life(b"", h, 200, false), (0.0, false));
        assert_eq!(life(b"", h, 404, true), (0.0, false));
        assert_eq!(life(b"", h, 201, true), (0.0, false));
        let old: &[(&[u8], &[u8])] = &[(b"last-modified", b"Thu, 01 Jan 1970 00:00:00 GMT")];
        let both = LifetimeRules {
            heuristic: true,
            default_ttl: Some(5.0),
            targeted: false,
        };
        let got = freshness_lifetime(&Directives::new(), old, 200, 1e9, &both);
        assert_eq!(got, (86400.0, false));
        // Last-Modified after Date: the default decides.
        let got = freshness_lifetime(&Directives::new(), old, 200, -1.0, &both);
        assert_eq!(got, (5.0, false));
        let got = freshness_lifetime(&Directives::new(), &[], 501, 0.0, &both);
        assert_eq!(got, (0.0, false));
    }
}
