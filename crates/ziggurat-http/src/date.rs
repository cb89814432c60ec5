//! HTTP-date (RFC 9110 §5.6.7): the three forms, strictly.

use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const WEEKDAYS: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// An HTTP-date as a Unix time; None for anything but the three forms RFC 9110 §5.6.7
/// allows (IMF-fixdate, the obsolete RFC 850 form, asctime: case-sensitive, single
/// spaces, GMT only), leading and trailing spaces and tabs aside. A two-digit year more
/// than 50 years ahead of the clock's is in the past.
///
/// ```
/// use ziggurat_http::http_date;
/// assert_eq!(http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784111777.0));
/// assert_eq!(http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(784111777.0));
/// assert_eq!(http_date(b"Sun Nov  6 08:49:37 1994"), Some(784111777.0));
/// assert_eq!(http_date(b"Sun, 06 Nov 1994 08:49:37 UTC"), None);
/// ```
pub fn http_date(value: &[u8]) -> Option<f64> {
    http_date_in(value, current_year())
}

/// `http_date` as if the clock were in `year` (which only the RFC 850 form reads).
///
/// ```
/// use ziggurat_http::http_date_in;
/// assert_eq!(http_date_in(b"Thursday, 01-Jan-70 00:00:00 GMT", 2019), Some(0.0));
/// assert_eq!(http_date_in(b"Thursday, 01-Jan-70 00:00:00 GMT", 2020), Some(3155760000.0));
/// ```
pub fn http_date_in(value: &[u8], year: i64) -> Option<f64> {
    if value.is_empty() || value.len() > 64 || !value.is_ascii() {
        return None;
    }
    let text = crate::fields::strip(value, b" \t");
    let (y, month, d, h, mi, sec) = imf_fixdate(text)
        .or_else(|| rfc850(text, year))
        .or_else(|| asctime(text))?;
    if !(1..=days_in_month(y, month)).contains(&d) || h >= 24 || mi >= 60 || sec > 60 {
        return None;
    }
    let days = days_from_civil(y, month, d);
    Some((days * 86400 + h * 3600 + mi * 60 + sec) as f64)
}

type Parts = (i64, i64, i64, i64, i64, i64);

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn imf_fixdate(t: &[u8]) -> Option<Parts> {
    if t.len() != 29 || !DAYS.contains(&&t[..3]) || &t[3..5] != b", " || &t[25..] != b" GMT" {
        return None;
    }
    let d = digits(&t[5..7])?;
    let month = month(t.get(7..12)?, b' ', b' ')?;
    let y = digits(&t[12..16])?;
    let (h, mi, sec) = clock(&t[16..25], b' ')?;
    Some((y, month, d, h, mi, sec))
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn rfc850(t: &[u8], year: i64) -> Option<Parts> {
    let comma = t.iter().position(|&c| c == b',')?;
    if !WEEKDAYS.contains(&&t[..comma]) {
        return None;
    }
    let t = &t[comma..];
    if t.len() != 24 || &t[..2] != b", " || &t[20..] != b" GMT" {
        return None;
    }
    let d = digits(&t[2..4])?;
    let month = month(&t[4..9], b'-', b'-')?;
    let yy = digits(&t[9..11])?;
    let (h, mi, sec) = clock(&t[11..20], b' ')?;
    let mut y = 2000 + yy;
    if y > year + 50 {
        y -= 100;
    }
    Some((y, month, d, h, mi, sec))
}

/// `Sun Nov  6 08:49:37 1994`
fn asctime(t: &[u8]) -> Option<Parts> {
    if t.len() != 24 || !DAYS.contains(&&t[..3]) {
        return None;
    }
    let month = month(&t[3..8], b' ', b' ')?;
    let d = match t[8] {
        b' ' => digits(&t[9..10])?,
        _ => digits(&t[8..10])?,
    };
    let (h, mi, sec) = clock(&t[10..19], b' ')?;
    if t[19] != b' ' {
        return None;
    }
    let y = digits(&t[20..24])?;
    Some((y, month, d, h, mi, sec))
}

/// ` Nov ` (with the given separators) as 1 to 12.
fn month(t: &[u8], before: u8, after: u8) -> Option<i64> {
    if t.len() != 5 || t[0] != before || t[4] != after {
        return None;
    }
    let i = MONTHS.iter().position(|m| *m == &t[1..4])?;
    Some(i as i64 + 1)
}

/// ` 08:49:37` (after the separator) as hours, minutes, seconds.
fn clock(t: &[u8], before: u8) -> Option<(i64, i64, i64)> {
    if t.len() != 9 || t[0] != before || t[3] != b':' || t[6] != b':' {
        return None;
    }
    Some((digits(&t[1..3])?, digits(&t[4..6])?, digits(&t[7..9])?))
}

fn digits(t: &[u8]) -> Option<i64> {
    if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(t.iter().fold(0, |n, &c| n * 10 + i64::from(c - b'0')))
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The Gregorian year of a day count from 1970-01-01.
fn year_of_days(days: i64) -> i64 {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let y = yoe + era * 400;
    if mp >= 10 {
        y + 1
    } else {
        y
    }
}

/// The current year of the UTC calendar.
pub(crate) fn current_year() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    year_of_days(i64::try_from(secs / 86400).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SUNDAY: Option<f64> = Some(784_111_777.0);

    #[test]
    fn the_three_forms() {
        assert_eq!(http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), SUNDAY);
        assert_eq!(http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), SUNDAY);
        assert_eq!(http_date(b"Sun Nov  6 08:49:37 1994"), SUNDAY);
        assert_eq!(http_date(b"Sun Nov 06 08:49:37 1994"), SUNDAY);
        assert_eq!(http_date(b" \tSun, 06 Nov 1994 08:49:37 GMT \t"), SUNDAY);
        // The day name is not checked against the date.
        assert_eq!(http_date(b"Mon, 06 Nov 1994 08:49:37 GMT"), SUNDAY);
        assert_eq!(http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0.0));
    }

    #[test]
    fn everything_else_is_refused() {
        for bad in [
            &b"Sun, 06 Nov 94 08:49:37 GMT"[..],
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06  Nov 1994 08:49:37 GMT",
            b"Sun, 06-Nov-1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08.49.37 GMT",
            b"Sun, 06 Nov 1994 8:49:37 GMT",
            b"sun, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06 nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 gmt",
            b"Sun, 06 Nov 1994 08:49:37 GMT\n",
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37",
            b"Sun, 06 Nov 1994 08:49:37 +0000",
            b"Sun Nov 6 08:49:37 1994",
            b"Sun Nov  6 08:49:37 1994 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMT\xff",
            b"0",
            b"-1",
            b"",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
            b"Sun, 29 Feb 1900 08:49:37 GMT",
            b"Sun, 00 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"Sun, 06 Nov 1994 08:60:00 GMT",
            b"Sun, 06 Nov 1994 08:49:61 GMT",
            b"Sun Nov  0 08:49:37 1994",
            b"Funday, 06-Nov-94 08:49:37 GMT",
            b"Sun, 06-Nov-94 08:49:37 GMT",
        ] {
            assert_eq!(http_date(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        let long = [b' '; 40]
            .iter()
            .chain(b"Sun, 06 Nov 1994 08:49:37 GMT")
            .copied()
            .collect::<Vec<u8>>();
        assert_eq!(http_date(&long), None);
    }

    #[test]
    fn leap_days_and_seconds() {
        assert_eq!(
            http_date(b"Tue, 29 Feb 2000 00:00:00 GMT"),
            Some(951_782_400.0)
        );
        assert_eq!(
            http_date(b"Wed, 29 Feb 2012 00:00:00 GMT"),
            Some(1_330_473_600.0)
        );
        // A leap second is the next minute's first.
        assert_eq!(
            http_date(b"Sat, 31 Dec 2016 23:59:60 GMT"),
            http_date(b"Sun, 01 Jan 2017 00:00:00 GMT")
        );
        assert_eq!(
            http_date(b"Mon, 01 Jan 0001 00:00:00 GMT"),
            Some(-62_135_596_800.0)
        );
    }

    #[test]
    fn two_digit_years_follow_the_clock() {
        let at = |y| http_date_in(b"Thursday, 01-Jan-70 00:00:00 GMT", y);
        assert_eq!(at(2026), Some(3_155_760_000.0));
        assert_eq!(at(2020), Some(3_155_760_000.0));
        assert_eq!(at(2019), Some(0.0));
        assert_eq!(
            http_date_in(b"Friday, 31-Dec-99 23:59:59 GMT", 2026),
            Some(946_684_799.0)
        );
        assert_eq!(
            http_date_in(b"Monday, 01-Jan-00 00:00:00 GMT", 2026),
            Some(946_684_800.0)
        );
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-800_000, -1, 0, 1, 59, 365, 10_957, 20_000, 2_932_896] {
            let y = year_of_days(days);
            assert!(days_from_civil(y, 1, 1) <= days && days < days_from_civil(y + 1, 1, 1));
        }
        assert!(current_year() >= 2024);
    }

    proptest! {
        #[test]
        fn any_bytes_are_safe(raw in proptest::collection::vec(any::<u8>(), 0..70)) {
            let _ = http_date(&raw);
        }

        #[test]
        fn imf_fixdate_round_trips(days in 0i64..2_932_896, secs in 0i64..86400) {
            let t = days * 86400 + secs;
            let y = year_of_days(days);
            let mut m = 1;
            while m < 12 && days_from_civil(y, m + 1, 1) <= days {
                m += 1;
            }
            let d = days - days_from_civil(y, m, 1) + 1;
            let wd = DAYS[usize::try_from((days + 3).rem_euclid(7)).unwrap()];
            let text = format!(
                "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
                String::from_utf8_lossy(wd),
                d,
                String::from_utf8_lossy(MONTHS[usize::try_from(m - 1).unwrap()]),
                y,
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            );
            prop_assert_eq!(http_date(text.as_bytes()), Some(t as f64));
        }
    }
}
