//! Age (RFC 9111 §4.2.3, §5.1): how old a response was when the cache received it.

use crate::date::http_date;
use crate::delta::delta_seconds;
use crate::fields::{field, fields, latin1, parse_list, Headers};

/// The corrected initial age of a response (RFC 9111 §4.2.3). Of several `Age` values
/// the first counts; an invalid one (not a non-negative integer) is ignored (§5.1).
///
/// ```
/// use ziggurat_http::initial_age;
/// assert_eq!(initial_age(&[(b"age", b"10")], 100.0, 101.0), 11.0);
/// assert_eq!(initial_age(&[(b"age", b"0, 7200")], 100.0, 101.0), 1.0);
/// assert_eq!(initial_age(&[(b"age", b"1a")], 100.0, 101.0), 1.0);
/// ```
pub fn initial_age(headers: &Headers<'_>, request_time: f64, response_time: f64) -> f64 {
    let age_value = parse_list(fields(headers, b"age"))
        .first()
        .and_then(|v| delta_seconds(Some(&latin1(v))))
        .unwrap_or(0);
    let apparent = field(headers, b"date")
        .and_then(http_date)
        .map_or(0.0, |date| (response_time - date).max(0.0));
    let corrected = age_value as f64 + (response_time - request_time);
    apparent.max(corrected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apparent_age_from_date() {
        let h: &[(&[u8], &[u8])] = &[(b"date", b"Thu, 01 Jan 1970 00:00:00 GMT")];
        assert_eq!(initial_age(h, 90.0, 100.0), 100.0);
        // A Date in the future counts as no apparent age.
        assert_eq!(initial_age(h, -20.0, -10.0), 10.0);
        let h: &[(&[u8], &[u8])] = &[(b"date", b"garbage"), (b"age", b"3")];
        assert_eq!(initial_age(h, 99.0, 100.0), 4.0);
        assert_eq!(initial_age(&[(b"age", b"-3")], 100.0, 100.0), 0.0);
        assert_eq!(initial_age(&[(b"age", b" , 5")], 100.0, 100.0), 5.0);
    }
}
