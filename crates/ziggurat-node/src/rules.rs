//! The Cache's argument rules that JavaScript asks for, so that the package
//! keeps no copy of a rule written in ziggurat-cache.

use napi::Result;
use napi_derive::napi;

use crate::errors::to_napi;

/// The longest key, in bytes (a text key's UTF-8); the shortest is 1. The
/// methods taking many keys ask the addon to check only the keys that may
/// break it (each is checked before anything is read or written).
#[napi]
pub const MAX_KEY_BYTES: u32 = ziggurat_cache::MAX_KEY as u32;

/// The key prefix and hidden tag of the namespace `name` (the same as
/// Python's), or a RangeError that says the rule.
#[napi(ts_return_type = "[string, string]")]
pub fn namespace_parts(name: String) -> Result<Vec<String>> {
    let ns = ziggurat_cache::Namespace::new(&name).map_err(to_napi)?;
    Ok(vec![ns.key_prefix, ns.tag])
}
