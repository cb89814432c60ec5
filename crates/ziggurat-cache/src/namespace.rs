//! Namespaces: keys under a prefix of one cache, cleared together. Every
//! front end makes a namespace's keys and hidden tag by this rule, so that a
//! namespace opened in one language sees and clears what another wrote.

use ziggurat_core::{Arg, Form, Problem};

use crate::error::Error;

/// What a front end needs to make a namespace's keys and tags: a key `k` of
/// the namespace is the cache key `key_prefix + k` (bytes keys the same in
/// bytes), and every entry written through the namespace also carries `tag`,
/// which clearing the namespace invalidates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// What goes before each key: the name and `:`.
    pub key_prefix: String,
    /// The hidden tag: NUL, `ns:` and the name (no tag a caller passes starts
    /// with NUL by accident).
    pub tag: String,
}

impl Namespace {
    /// The namespace `name`: a non-empty string without `:`.
    ///
    /// ```
    /// use ziggurat_cache::Namespace;
    /// let ns = Namespace::new("posts").unwrap();
    /// assert_eq!((ns.key_prefix.as_str(), ns.tag.as_str()), ("posts:", "\0ns:posts"));
    /// assert!(Namespace::new("a:b").is_err());
    /// ```
    pub fn new(name: &str) -> Result<Namespace, Error> {
        if name.is_empty() || name.contains(':') {
            return Err(Error::invalid(
                Arg::Namespace,
                Problem::Malformed {
                    rule: Form::Namespace,
                    got: name.to_string(),
                },
            ));
        }
        Ok(Namespace {
            key_prefix: format!("{name}:"),
            tag: format!("\0ns:{name}"),
        })
    }
}
