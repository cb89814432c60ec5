//! The arguments JavaScript passes the addon, as the Cache takes them: a key's
//! bytes, tags' bytes, and a value's body from the package's encoding
//! (lib/values.cjs), by the value codes of the rules table.

use napi::bindgen_prelude::{BigInt, Buffer, Either};
use napi::Result;
use ziggurat_cache::{pickle_bytes, Body, Kind, ValueCode};

use crate::errors::invalid;

/// A key as JavaScript passes it: a string (its UTF-8, checked for lone
/// surrogates by the caller) or a Buffer.
pub type KeyArg = Either<String, Buffer>;

/// The bytes of a key argument.
pub fn key_bytes(k: &KeyArg) -> &[u8] {
    match k {
        Either::A(s) => s.as_bytes(),
        Either::B(b) => b,
    }
}

/// The tags as the Cache takes them.
pub fn tag_bytes(tags: Option<Vec<String>>) -> Vec<Vec<u8>> {
    tags.unwrap_or_default()
        .into_iter()
        .map(String::into_bytes)
        .collect()
}

/// A value's body and kind from the JavaScript side's encoding.
pub(crate) fn payload(
    code: u32,
    text: Option<String>,
    bytes: Option<Buffer>,
    num: Option<f64>,
    big: Option<BigInt>,
) -> Result<(Body<'static>, Kind)> {
    match (ValueCode::of(code), text, bytes) {
        (Some(ValueCode::JsonText), Some(t), _) => Ok((Body::Owned(t.into_bytes()), Kind::Value)),
        (Some(ValueCode::Bytes), _, Some(b)) => Ok((Body::Owned(pickle_bytes(&b)), Kind::Value)),
        // A value JavaScript encoded (serializer 'msgpack'): its bytes as they are.
        (Some(ValueCode::Raw), _, Some(b)) => Ok((Body::Owned(b.to_vec()), Kind::Value)),
        (Some(ValueCode::Counter), _, _) => {
            let n = match (num, big) {
                (Some(n), _) => n as i64,
                (None, Some(b)) => int64(&b, "value")?,
                _ => return Err(invalid("a counter needs its value")),
            };
            Ok((Body::Owned(n.to_le_bytes().to_vec()), Kind::Counter))
        }
        _ => Err(invalid(format!("unknown value encoding {code}"))),
    }
}

/// A BigInt argument that fits in 64 bits.
pub(crate) fn int64(b: &BigInt, what: &str) -> Result<i64> {
    match b.get_i64() {
        (n, true) => Ok(n),
        _ => Err(invalid(format!(
            "{what} must fit in a signed 64-bit integer"
        ))),
    }
}
