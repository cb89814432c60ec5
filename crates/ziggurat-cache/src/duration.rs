//! Durations as people write them in configuration: seconds as a number, or
//! a string of a number and a unit ("500ms", "30s", "5m", "1.5h", "7d"), the
//! same rule in every front end that takes text (Node.js's `ttl: '5m'`).
//! The result is seconds, checked afterwards as a TTL ([`crate::check_ttl`]).

use ziggurat_core::{Arg, Form, Problem};

use crate::error::Error;

/// Seconds of a duration string: a number (fractions allowed) and an
/// optional unit, case-insensitive: ms, s, m, h, d (none: seconds), or
/// "inf"/"infinity" for never. None for anything else.
///
/// ```
/// use ziggurat_cache::parse_duration;
/// assert_eq!(parse_duration("5m"), Some(300.0));
/// assert_eq!(parse_duration("1.5h"), Some(5400.0));
/// assert_eq!(parse_duration("250ms"), Some(0.25));
/// assert_eq!(parse_duration("10"), Some(10.0));
/// assert_eq!(parse_duration("inf"), Some(f64::INFINITY));
/// assert_eq!(parse_duration("5 parsecs"), None);
/// ```
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(f64::INFINITY);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "ms" => 0.001,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Some(n * mult)
}

/// A duration string's seconds ([`parse_duration`]), or what is wrong with
/// it, naming the argument `what`.
///
/// ```
/// use ziggurat_cache::{duration_text, Arg};
/// assert_eq!(duration_text("2m", Arg::Ttl).unwrap(), 120.0);
/// assert!(duration_text("soon", Arg::Ttl).unwrap_err().to_string().starts_with("ttl: cannot read"));
/// ```
pub fn duration_text(s: &str, what: Arg) -> Result<f64, Error> {
    parse_duration(s).ok_or_else(|| {
        Error::invalid(
            what,
            Problem::Malformed {
                rule: Form::Duration,
                got: s.to_string(),
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Some(30.0));
        assert_eq!(parse_duration(" 2 m "), Some(120.0));
        assert_eq!(parse_duration("7d"), Some(604_800.0));
        assert_eq!(parse_duration("1H"), Some(3600.0));
        assert_eq!(parse_duration("Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("m"), None);
        assert_eq!(parse_duration("-5m"), None);
        assert_eq!(parse_duration("1.2.3s"), None);
        assert_eq!(parse_duration("5 weeks"), None);
    }
}
