//! delta-seconds (RFC 9111 §1.2.2).

/// 2**31: an overflowing delta-seconds means "as long as possible" (RFC 9111 §1.2.2).
pub const MAX_DELTA: u64 = 2_147_483_648;

/// A delta-seconds argument (ASCII digits only); None when absent or malformed.
///
/// ```
/// use ziggurat_http::delta_seconds;
/// assert_eq!(delta_seconds(Some("60")), Some(60));
/// assert_eq!(delta_seconds(Some("-1")), None);
/// assert_eq!(delta_seconds(Some(&"9".repeat(30))), Some(2_147_483_648));
/// assert_eq!(delta_seconds(None), None);
/// ```
pub fn delta_seconds(arg: Option<&str>) -> Option<u64> {
    let arg = arg?.as_bytes();
    if arg.is_empty() || !arg.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if arg.len() > 10 {
        return Some(MAX_DELTA);
    }
    let n = arg.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0'));
    Some(n.min(MAX_DELTA))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ascii_digits() {
        for bad in ["", "+1", "1 ", " 1", "1.0", "\u{b2}", "\u{661}"] {
            assert_eq!(delta_seconds(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(delta_seconds(Some("007")), Some(7));
        assert_eq!(delta_seconds(Some("0")), Some(0));
    }

    #[test]
    fn caps_at_two_to_the_31() {
        assert_eq!(delta_seconds(Some("2147483647")), Some(2_147_483_647));
        assert_eq!(delta_seconds(Some("2147483649")), Some(MAX_DELTA));
        assert_eq!(delta_seconds(Some("9999999999")), Some(MAX_DELTA));
        assert_eq!(delta_seconds(Some("00000000001")), Some(MAX_DELTA));
    }
}
