//! Segment names: which names are accepted, and the file each one names
//! (`ziggurat.{name}.v{layout}`, so builds of another layout never share it).

use crate::error::{Error, Result};
use crate::invalid::{Arg, Form, Problem};
use crate::layout::LAYOUT_VERSION;

/// The longest segment name. Its file name, `ziggurat.{name}.v{layout}`, stays
/// well within NAME_MAX (255 bytes), and it leaves room for what a cache adds to
/// its name (`.ver-{version}`, `.neg`).
pub const MAX_SEGMENT_NAME: usize = 200;

/// The file of the segment `name` in its directory.
pub(crate) fn file_name(name: &str) -> String {
    format!("ziggurat.{name}.v{LAYOUT_VERSION}")
}

/// Whether `name` is 1 to [`MAX_SEGMENT_NAME`] bytes of `A-Z a-z 0-9 . _ -`, not
/// starting with `.` (no path separator, no hidden file).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SEGMENT_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// `Ok` if `name` may name a segment (see [`valid_name`]); otherwise an
/// [`Error::Invalid`] that says the rule. Checked before any path is made
/// from the name, so no name reaches outside its directory.
///
/// ```
/// use ziggurat_core::check_segment_name;
/// assert!(check_segment_name("api.ver-2.neg").is_ok());
/// assert!(check_segment_name("../etc/passwd").is_err());
/// ```
pub fn check_segment_name(name: &str) -> Result<()> {
    if valid_name(name) {
        return Ok(());
    }
    Err(Error::invalid(
        Arg::SegmentName,
        Problem::Malformed {
            rule: Form::FileName {
                max: MAX_SEGMENT_NAME,
            },
            got: name.to_string(),
        },
    ))
}
