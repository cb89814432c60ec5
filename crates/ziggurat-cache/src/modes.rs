//! The names of the options that pick a mode, the same in every front end,
//! in the order their error messages list them.

/// What a cache does when its shared segment cannot be used: cache nothing,
/// cache in this process alone for at most `degraded_ttl`, or raise.
pub const DEGRADED_MODES: [&str; 3] = ["passthrough", "local", "raise"];

/// How L1 hands out what it keeps ([`crate::CopyMode::parse`] reads these).
pub const COPY_MODES: [&str; 3] = ["shared", "copy", "decode"];

/// Whether a segment's mapping asks for huge pages
/// (`ziggurat_core::HugePages::parse` reads these).
pub const HUGE_PAGES_MODES: [&str; 3] = ["auto", "require", "off"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CopyMode;

    #[test]
    fn the_lists_are_what_the_parsers_read() {
        for m in COPY_MODES {
            assert!(CopyMode::parse(m).is_ok(), "{m}");
        }
        for m in HUGE_PAGES_MODES {
            assert_eq!(ziggurat_core::HugePages::parse(m).unwrap().name(), m);
        }
        assert!(CopyMode::parse("deep").is_err());
        assert!(ziggurat_core::HugePages::parse("yes").is_err());
        assert_eq!(crate::defaults::COPY, COPY_MODES[0]);
        assert_eq!(crate::defaults::DEGRADED, DEGRADED_MODES[0]);
        assert_eq!(crate::defaults::HUGE_PAGES, HUGE_PAGES_MODES[0]);
    }
}
