//! The Cache's rule for keys, the same in every front end: a key is 1 to
//! [`MAX_KEY`] bytes, and a text key is its UTF-8 form.
//!
//! Python's `str` and JavaScript's strings may hold lone surrogates, which have
//! no UTF-8 form. A front end refuses such a key with [`not_utf8`]'s message
//! rather than encoding it some way of its own: were each front end to pick
//! its own encoding, one key could name two entries, or two keys one entry.

pub use ziggurat_core::MAX_KEY;

use ziggurat_core::{Arg, Problem};

use crate::error::Error;

/// `Ok` for the bytes of a key a Cache takes; otherwise what is wrong, as a
/// message naming the argument (`key`) and the limits.
///
/// ```
/// use ziggurat_cache::{check_key, MAX_KEY};
/// assert!(check_key(b"user:42").is_ok());
/// assert_eq!(check_key(b"").unwrap_err().to_string(), "key must be 1 to 4096 bytes, got 0");
/// assert!(check_key(&vec![b'k'; MAX_KEY + 1]).is_err());
/// ```
#[inline]
pub fn check_key(key: &[u8]) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_KEY {
        return Err(bad_length(key.len()));
    }
    Ok(())
}

#[cold]
fn bad_length(len: usize) -> Error {
    Error::invalid(
        Arg::Key,
        Problem::Length {
            max: MAX_KEY,
            got: len,
        },
    )
}

/// The message for a text key with no UTF-8 form: a lone surrogate at
/// character `index` (counted as the front end counts characters).
///
/// ```
/// assert!(ziggurat_cache::not_utf8(1).contains("lone surrogate at index 1"));
/// ```
pub fn not_utf8(index: usize) -> String {
    format!(
        "key is not valid UTF-8 (lone surrogate at index {index}); pass it as bytes, \
         encoded as the application chooses, or as text without lone surrogates"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert!(check_key(b"k").is_ok());
        assert!(check_key(&vec![0xff; MAX_KEY]).is_ok());
        assert_eq!(
            check_key(&vec![b'k'; MAX_KEY + 1]).unwrap_err().to_string(),
            format!("key must be 1 to {MAX_KEY} bytes, got {}", MAX_KEY + 1)
        );
        assert!(check_key(b"").is_err());
    }
}
