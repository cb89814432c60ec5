//! What a read below L1 hands to JavaScript: the value's payload (JSON text,
//! bytes or a counter, see `codec`), how long it stays fresh, and the words
//! an L1 entry of it watches (as indices into the buffers of `words`).

use std::sync::atomic::{AtomicU64, Ordering};

use napi::bindgen_prelude::{BigInt, Buffer};
use napi_derive::napi;
use ziggurat_cache::{Error, Found, Front, L1Watch, Payload, Trailer, Watch32};

use crate::codec::{decode, Decoded};
use crate::errors::to_napi;
use crate::words::Regions;

/// What a JavaScript call finds for a key (a read, a step of `getOrSet`).
/// `code`: 0 nothing, 1 JSON text in `text`, 2 bytes in `bytes`, 3 a counter
/// in `num` (or `big` beyond 2^53), 4 a cached miss.
#[napi(object)]
pub struct Got {
    /// What was found (see above).
    pub code: u32,
    /// The JSON text of a value.
    pub text: Option<String>,
    /// The bytes of a value.
    pub bytes: Option<Buffer>,
    /// A counter within 2^53.
    pub num: Option<f64>,
    /// A counter beyond 2^53.
    pub big: Option<BigInt>,
    /// The L1 entry's watches, when JavaScript may keep it (see [`Keep`]).
    pub keep: Option<Keep>,
}

/// What a JavaScript L1 entry watches: the index of the key's stamp and the
/// value it had, the epoch it had (low and high halves), the tags' cells and
/// versions (pairs), and its soft deadline in ms of the engine's clock (low
/// and high halves; both 0: never), which JavaScript compares with the clock
/// word (`words::clock`).
#[napi(object)]
pub struct Keep {
    /// Index of the key's stamp in the stamp buffer.
    pub stamp: u32,
    /// The stamp's value.
    pub seen: u32,
    /// The epoch's low 32 bits.
    pub epoch_lo: u32,
    /// The epoch's high 32 bits.
    pub epoch_hi: u32,
    /// Cell and version of each tag, in pairs.
    pub tags: Vec<u32>,
    /// The soft deadline's low 32 bits.
    pub soft_lo: u32,
    /// The soft deadline's high 32 bits.
    pub soft_hi: u32,
}

impl Got {
    /// Nothing found.
    pub fn nothing() -> Got {
        Got::code(0)
    }

    /// A cached miss.
    pub fn negative() -> Got {
        Got::code(4)
    }

    fn code(code: u32) -> Got {
        Got {
            code,
            text: None,
            bytes: None,
            num: None,
            big: None,
            keep: None,
        }
    }
}

/// A value read below L1, still in Rust (a miss's stale value waits in it).
pub struct NodeValue {
    data: Decoded,
    keep: Option<(L1Watch, Vec<Watch32>, Trailer)>,
}

impl NodeValue {
    /// The value as JavaScript receives it, with its L1 watches as indices
    /// of `regions` when it may be kept.
    pub fn into_got(self, regions: Option<&Regions>) -> Got {
        let keep = match (self.keep, regions) {
            (Some((w, tags, t)), Some(r)) => Some(keep_of(r, &w, &tags, &t)),
            _ => None,
        };
        let mut g = match self.data {
            Decoded::Json(s) => Got {
                text: Some(s),
                ..Got::code(1)
            },
            Decoded::Bytes(b) => Got {
                bytes: Some(b.into()),
                ..Got::code(2)
            },
            Decoded::Int(n) => int_got(n),
        };
        g.keep = keep;
        g
    }

    /// A copy (a miss's stale value is kept while a step hands it on).
    pub fn copy(&self) -> NodeValue {
        NodeValue {
            data: match &self.data {
                Decoded::Json(s) => Decoded::Json(s.clone()),
                Decoded::Bytes(b) => Decoded::Bytes(b.clone()),
                Decoded::Int(n) => Decoded::Int(*n),
            },
            keep: None,
        }
    }
}

/// A counter as JavaScript receives it: a number within 2^53, else a BigInt.
pub fn int_got(n: i64) -> Got {
    const SAFE: i64 = (1 << 53) - 1;
    if (-SAFE..=SAFE).contains(&n) {
        Got {
            num: Some(n as f64),
            ..Got::code(3)
        }
    } else {
        Got {
            big: Some(BigInt::from(n)),
            ..Got::code(3)
        }
    }
}

/// The watches of an L1 entry as indices of `r`.
pub fn keep_of(r: &Regions, w: &L1Watch, tags: &[Watch32], t: &Trailer) -> Keep {
    let epoch = w.epoch.seen;
    Keep {
        stamp: r.stamp_index(w.stamp.word.as_ptr() as *const u32),
        seen: w.stamp.seen,
        epoch_lo: epoch as u32,
        epoch_hi: (epoch >> 32) as u32,
        tags: tags
            .iter()
            .flat_map(|t| [r.tag_index(t.word.as_ptr() as *const u32), t.seen])
            .collect(),
        soft_lo: t.soft as u32,
        soft_hi: (t.soft >> 32) as u32,
    }
}

/// The front end's side of one read: payloads as vectors, decoded for
/// JavaScript; values it cannot read are counted as foreign.
pub struct NodeFront<'a> {
    /// Entries this process could not read (pickles of Python objects).
    pub foreign: &'a AtomicU64,
}

impl Payload for NodeFront<'_> {
    type Out = Vec<u8>;

    fn copied(&mut self, bytes: &[u8]) -> Vec<u8> {
        bytes.to_vec()
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Vec<u8> {
        let mut v = vec![0u8; len];
        write(&mut v);
        v
    }
}

impl NodeFront<'_> {
    fn value(&mut self, found: Found<Vec<u8>>, keep: bool) -> Option<NodeValue> {
        let t = found.trailer;
        let Some(data) = decode(t.kind, found.payload) else {
            self.foreign.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let keep = if keep {
            found.keep.map(|w| (w, found.tags, t))
        } else {
            None
        };
        Some(NodeValue { data, keep })
    }
}

impl Front for NodeFront<'_> {
    type Value = NodeValue;
    type Error = napi::Error;

    fn l1(&mut self) -> Result<Option<Option<NodeValue>>, napi::Error> {
        // The L1 is JavaScript's, asked before any call into the addon.
        Ok(None)
    }

    fn fresh(&mut self, found: Found<Vec<u8>>) -> Result<Option<NodeValue>, napi::Error> {
        Ok(self.value(found, true))
    }

    fn stale(&mut self, found: Found<Vec<u8>>) -> Option<NodeValue> {
        self.value(found, false)
    }

    fn negative(&mut self, _found: Found<()>) {
        // Cached misses are not kept in the JavaScript L1: each is read again.
    }

    fn error(&mut self, e: Error) -> napi::Error {
        to_napi(e)
    }
}
