//! Sizes as people write them: "64MiB" (binary, powers of 1024) or "1.5GB"
//! (decimal, powers of 1000), the same rule in every front end.

use ziggurat_core::{Arg, Form, Problem};

use crate::error::Error;

/// The largest size accepted, in bytes (1 PiB); the segment itself may refuse
/// less when the machine cannot hold it.
pub const MAX_SIZE: u64 = 1 << 50;

/// A size given as a number of bytes, if it is within 1 B ..= [`MAX_SIZE`].
///
/// ```
/// assert_eq!(ziggurat_cache::size_bytes(4096).unwrap(), 4096);
/// assert!(ziggurat_cache::size_bytes(0).is_err());
/// ```
pub fn size_bytes(n: i128) -> Result<u64, Error> {
    if n <= 0 || n > MAX_SIZE as i128 {
        return Err(Error::invalid(
            Arg::Size,
            Problem::Range {
                min: 1,
                max: MAX_SIZE as i128,
                got: n,
            },
        ));
    }
    Ok(n as u64)
}

/// A size string's bytes ([`parse_size`]), or what is wrong with it.
///
/// ```
/// assert_eq!(ziggurat_cache::size_text("64MiB").unwrap(), 64 << 20);
/// assert!(ziggurat_cache::size_text("12 parsecs").unwrap_err().to_string().contains("KiB"));
/// ```
pub fn size_text(s: &str) -> Result<u64, Error> {
    parse_size(s).ok_or_else(|| {
        Error::invalid(
            Arg::Size,
            Problem::Malformed {
                rule: Form::Size,
                got: s.to_string(),
            },
        )
    })
}

/// Bytes of a size string: a number (fractions allowed) and an optional unit,
/// case-insensitive: B; KB, MB, GB, TB (decimal); KiB, MiB, GiB, TiB (binary).
/// None for anything else, or outside 1 B ..= [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "t" | "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v = n * mult;
    (1.0..=MAX_SIZE as f64).contains(&v).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1.5 GB"), Some(1_500_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("2TiB"), Some(2 << 40));
        assert_eq!(parse_size("1tb"), Some(1_000_000_000_000));
        assert_eq!(parse_size("1024TiB"), Some(MAX_SIZE));
        assert_eq!(parse_size("1025TiB"), None);
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("0.5"), None);
    }
}
