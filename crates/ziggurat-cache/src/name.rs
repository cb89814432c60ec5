//! A cache's `name` and `version` options and the segment they name. Every
//! front end applies this rule, so that a cache named in one language opens
//! the same file in another, and a name one language accepts the other does
//! too. The engine's own rule for segment names (longer, since a cache adds
//! `.ver-{version}` and `.neg` to its name) still guards the files.

use ziggurat_core::{check_segment_name, Arg, Form, Problem};

use crate::error::Error;

/// The longest cache name, in bytes.
pub const MAX_NAME: usize = 80;

/// The longest version, in bytes.
pub const MAX_VERSION: usize = 16;

/// What joins a name and its version in the segment's name.
pub const VERSION_MARK: &str = ".ver-";

/// The segment of the cache `name` at `version`: `name`, or
/// `name.ver-{version}` (each version is a segment of its own, so entries of
/// another deploy, perhaps of another shape, are never read). The name is 1
/// to [`MAX_NAME`] bytes of `A-Z a-z 0-9 . _ -`, not starting with `.`; the
/// version 1 to [`MAX_VERSION`] of `A-Z a-z 0-9 _ -` (no `.`, so the segment
/// name splits back into the two).
///
/// ```
/// use ziggurat_cache::segment_name;
/// assert_eq!(segment_name("api", None).unwrap(), "api");
/// assert_eq!(segment_name("api", Some("2")).unwrap(), "api.ver-2");
/// assert!(segment_name("../etc", None).unwrap_err().to_string().starts_with("name must be"));
/// assert!(segment_name("api", Some("1.2")).unwrap_err().to_string().starts_with("version must be"));
/// ```
pub fn segment_name(name: &str, version: Option<&str>) -> Result<String, Error> {
    // The engine's rule for a segment's name, shorter: the cache adds a version
    // and `.neg` to it.
    if name.len() > MAX_NAME || check_segment_name(name).is_err() {
        return Err(Error::invalid(
            Arg::Name,
            Problem::Malformed {
                rule: Form::FileName { max: MAX_NAME },
                got: name.to_string(),
            },
        ));
    }
    let Some(version) = version else {
        return Ok(name.to_string());
    };
    let version_ok = (1..=MAX_VERSION).contains(&version.len())
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b));
    if !version_ok {
        return Err(Error::invalid(
            Arg::Version,
            Problem::Malformed {
                rule: Form::Version { max: MAX_VERSION },
                got: version.to_string(),
            },
        ));
    }
    Ok(format!("{name}{VERSION_MARK}{version}"))
}

/// The name and version a segment name holds: the inverse of
/// [`segment_name`] (the last `.ver-` splits them, since a version has no
/// `.`).
///
/// ```
/// use ziggurat_cache::name_and_version;
/// assert_eq!(name_and_version("api.ver-2"), ("api", Some("2")));
/// assert_eq!(name_and_version("api"), ("api", None));
/// ```
pub fn name_and_version(segment: &str) -> (&str, Option<&str>) {
    match segment.rsplit_once(VERSION_MARK) {
        Some((name, version)) if !version.contains('.') => (name, Some(version)),
        _ => (segment, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_at_the_limits() {
        assert!(segment_name(&"a".repeat(MAX_NAME), None).is_ok());
        assert!(segment_name(&"a".repeat(MAX_NAME + 1), None).is_err());
        assert!(segment_name("", None).is_err());
        assert!(segment_name(".hidden", None).is_err());
        assert!(segment_name("a/b", None).is_err());
        assert!(segment_name("caf\u{e9}", None).is_err());
        assert!(segment_name("a", Some(&"v".repeat(MAX_VERSION))).is_ok());
        assert!(segment_name("a", Some(&"v".repeat(MAX_VERSION + 1))).is_err());
        assert!(segment_name("a", Some("")).is_err());
    }

    #[test]
    fn a_segment_name_splits_back() {
        for (name, version) in [("a.b", Some("7")), ("x.ver-y", Some("z")), ("plain", None)] {
            let seg = segment_name(name, version).unwrap();
            assert_eq!(name_and_version(&seg), (name, version));
        }
    }
}
