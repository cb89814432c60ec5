//! What crosses between JavaScript and the cluster tier (`cluster`): a value
//! from JavaScript's encoding as the tier stores it, a value read from Redis
//! as JavaScript decodes it, and what a `getOrSet` miss hands the tier.

use std::sync::atomic::{AtomicU64, Ordering};

use napi::bindgen_prelude::{BigInt, Buffer, Either4};
use napi::Result;
use napi_derive::napi;
use ziggurat_cache::{Body, Cache, Kind, Miss};
use ziggurat_cluster as zc;

use crate::args::payload;
use crate::codec::{decode, Decoded};
use crate::errors::invalid;
use crate::front::{js, NodeValue};
use crate::miss::{MissState, Offer, LOAD};

/// A value read from Redis as JavaScript decodes it: its code (the
/// `ValueCode` of the rules table) and the value.
#[napi(object)]
pub struct Found {
    /// What the value is (JSON text, bytes, a value JavaScript encoded, a counter).
    pub code: u32,
    /// The value, as a read of the segment gives it.
    pub value: Either4<String, Buffer, f64, BigInt>,
}

/// A value as the tier stores it, owned (it travels to a pool thread).
pub(crate) enum Owned {
    Bytes(Vec<u8>),
    Int(i64),
}

impl Owned {
    pub(crate) fn data(&self) -> zc::Data<'_> {
        match self {
            Owned::Bytes(b) => zc::Data::Encoded(b),
            Owned::Int(i) => zc::Data::Int(*i),
        }
    }

    /// A value from JavaScript's encoding (see `args::payload`), an integer
    /// within what Redis scripts count exactly.
    pub(crate) fn of(
        code: u32,
        text: Option<String>,
        bytes: Option<Buffer>,
        num: Option<f64>,
        big: Option<BigInt>,
    ) -> Result<Owned> {
        let (body, kind) = payload(code, text, bytes, num, big)?;
        let b = match body {
            Body::Owned(v) => v,
            Body::Bytes(b) => b.to_vec(),
        };
        Owned::from_body(b, kind).ok_or_else(|| {
            invalid(format!(
                "an integer in a cache joined to Redis must be within ±{} (what Redis scripts \
                 count exactly)",
                zc::EXACT_INT
            ))
        })
    }

    /// A stored body of `kind` (a counter: its 8 bytes) as the tier takes it;
    /// None for a counter Redis could not count exactly.
    pub(crate) fn from_body(b: Vec<u8>, kind: Kind) -> Option<Owned> {
        if kind != Kind::Counter {
            return Some(Owned::Bytes(b));
        }
        let n = i64::from_le_bytes(b.try_into().ok()?);
        zc::exact_int(n).then_some(Owned::Int(n))
    }
}

/// What a value read from Redis is for JavaScript; None for a value it
/// cannot read (a pickle of a Python object), counted as foreign.
pub(crate) fn found(s: zc::Stored, raw: bool, foreign: &AtomicU64) -> Option<Decoded> {
    let d = match s.data {
        zc::Held::Encoded(b) => decode(Kind::Value, b, raw),
        zc::Held::Int(i) | zc::Held::Counter(i) => Some(Decoded::Int(i)),
    };
    if d.is_none() {
        foreign.fetch_add(1, Ordering::Relaxed);
    }
    d
}

pub(crate) fn js_found(d: Option<Decoded>) -> Option<Found> {
    d.map(|d| {
        let (code, value) = js(d);
        Found {
            code: code as u32,
            value,
        }
    })
}

/// The key of a load step whose cache asks the tier below before its loader
/// runs (not an early refresh); None otherwise.
pub(crate) fn asking(m: &MissState, c: &Cache) -> Option<Vec<u8>> {
    let miss = m.miss.as_ref()?;
    (m.step == LOAD && c.asks_tier_below(miss)).then(|| m.key.clone())
}

/// What the tier is told once a load ended: the key, the host's lease if
/// still held, the value stored (taken: told once).
pub(crate) fn told(m: &mut MissState) -> (Vec<u8>, Option<Miss<NodeValue>>, Option<Offer>) {
    (m.key.clone(), m.miss.take(), m.offer.take())
}
