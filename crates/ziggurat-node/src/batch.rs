//! What the methods taking many keys (`getMany`, `setMany`, `deleteMany`)
//! need of the Cache beyond its single-key calls: the key rule's bound, so
//! that JavaScript asks the addon to check only the keys that may break it
//! (each is checked before anything is read or written).

use napi_derive::napi;

/// The longest key, in bytes (a text key's UTF-8); the shortest is 1.
#[napi]
pub const MAX_KEY_BYTES: u32 = ziggurat_cache::MAX_KEY as u32;
