//! The Cache's rule for tags, the same in every front end: at most
//! [`MAX_TAGS`] per entry, none empty. A tag has no length limit (the segment
//! keeps its hash).

pub use ziggurat_core::MAX_TAGS;

use ziggurat_core::{Arg, Problem};

use crate::error::Error;

/// The shortest tag, in bytes: none is empty.
pub const MIN_TAG_BYTES: usize = 1;

/// `Ok` for tags an entry may carry; otherwise what is wrong.
///
/// ```
/// use ziggurat_cache::check_tags;
/// assert!(check_tags(&[b"user:1".as_slice()]).is_ok());
/// assert_eq!(check_tags(&[b"".as_slice()]).unwrap_err().to_string(), "a tag must not be empty");
/// ```
pub fn check_tags<T: AsRef<[u8]>>(tags: &[T]) -> Result<(), Error> {
    if tags.iter().any(|t| t.as_ref().len() < MIN_TAG_BYTES) {
        return Err(Error::invalid(Arg::Tags, Problem::Empty));
    }
    if tags.len() > MAX_TAGS {
        return Err(Error::invalid(
            Arg::Tags,
            Problem::TooMany {
                max: MAX_TAGS,
                got: tags.len(),
            },
        ));
    }
    Ok(())
}

/// The tags as the segment takes them.
pub(crate) fn refs(tags: &[Vec<u8>]) -> Vec<&[u8]> {
    tags.iter().map(|t| t.as_slice()).collect()
}
