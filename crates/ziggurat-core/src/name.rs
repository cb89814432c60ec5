//! Segment names: which names are accepted, and the file each one names
//! (`ziggurat.{name}.v{layout}`, so builds of another layout never share it).

use crate::layout::LAYOUT_VERSION;

/// The longest segment name. Its file name, `ziggurat.{name}.v{layout}`, stays
/// well within NAME_MAX (255 bytes), and it leaves room for what a cache adds to
/// its name (`.ver-{version}`, `.neg`).
pub(crate) const MAX_NAME: usize = 200;

/// The file of the segment `name` in its directory.
pub(crate) fn file_name(name: &str) -> String {
    format!("ziggurat.{name}.v{LAYOUT_VERSION}")
}

/// Whether `name` is 1 to [`MAX_NAME`] bytes of `A-Z a-z 0-9 . _ -`, not
/// starting with `.` (no path separator, no hidden file).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}
