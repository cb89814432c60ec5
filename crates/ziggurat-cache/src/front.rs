//! What a front end supplies to the Cache's behaviour: its L1 (live objects
//! of its language, which this crate never holds) and the decoding of stored
//! payloads into those objects. The miss path ([`crate::Cache::begin`] and
//! the steps after it) asks a [`Front`] whenever it must look at L1 or turn a
//! payload into a value, so one state machine serves every language.

use crate::entry::Trailer;
use crate::error::Error;
use crate::flight::FlightKey;
use crate::watch::{L1Watch, Watch32};

/// Makes a front end's payload (a bytes object, a buffer) from a stored value.
/// A read that has to start again drops what it made, so either call may run
/// more than once per read.
pub trait Payload {
    /// What the front end keeps of a payload.
    type Out;
    /// A payload holding a copy of `bytes`.
    fn copied(&mut self, bytes: &[u8]) -> Self::Out;
    /// A payload of `len` bytes that `write` writes (call it once, on a buffer
    /// of exactly `len` bytes).
    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Self::Out;
}

/// The payload as a vector: for front ends and tests that want plain bytes.
pub struct Bytes;

impl Payload for Bytes {
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

/// A value or a cached miss found below L1.
pub struct Found<P> {
    /// The payload (the cache's encoding of the value; for a counter, its
    /// little-endian `i64`).
    pub payload: P,
    /// The entry's kind and deadlines.
    pub trailer: Trailer,
    /// The entry's tags, as an L1 entry of it watches them (empty for
    /// readers made without an L1, which keep nothing that could watch).
    pub tags: Vec<Watch32>,
    /// Set when an L1 may keep what was read (only asked for by readers made
    /// with an L1, see [`crate::Reader::new`]).
    pub keep: Option<L1Watch>,
}

/// Where a load of a key that was not found fresh starts from: both stamps as
/// read before the probes ([`crate::flight::snapshot`]), so that a lease holder can tell
/// whether anything was written since instead of probing again, and the key's
/// hashes in both segments, so that the lease and the write that follow do
/// not hash it again.
#[derive(Clone, Copy, Debug, Default)]
pub struct Missing {
    /// Both stamps, None while either was odd (a write in progress), and
    /// always for a reader without L1, which reads them after its probe.
    pub stamps: Option<u64>,
    /// The key hashed for both segments (None without a cached-miss segment).
    pub keys: Option<FlightKey>,
}

/// A front end's side of one call for one key (it knows the key's object
/// and its L1 hash; the state machine knows the key's bytes).
pub trait Front: Payload {
    /// A value of the front end's language.
    type Value;
    /// The front end's error (its exception).
    type Error;

    /// The one L1 lookup: `Some(Some(value))` for a value, `Some(None)` for
    /// a cached miss, `None` when L1 holds nothing valid for the key.
    fn l1(&mut self) -> Result<Option<Option<Self::Value>>, Self::Error>;

    /// A fresh value read below L1: decoded (and kept in L1 when
    /// `found.keep` allows), or None when it cannot be decoded (counted and
    /// reported by the front end; the read is then a miss).
    fn fresh(&mut self, found: Found<Self::Out>) -> Result<Option<Self::Value>, Self::Error>;

    /// A value past its soft deadline, decoded for a load that may fail
    /// (never kept in L1); None when it cannot be decoded.
    fn stale(&mut self, found: Found<Self::Out>) -> Option<Self::Value>;

    /// A cached miss read below L1: kept in L1 when `found.keep` allows.
    fn negative(&mut self, found: Found<()>);

    /// This crate's error as the front end's.
    fn error(&mut self, e: Error) -> Self::Error;
}

/// What a read below L1 ([`crate::Cache::read`]) found.
pub enum Read<V> {
    /// A fresh value.
    Fresh(V, Trailer),
    /// A cached miss.
    Negative(Trailer),
    /// A value past its soft deadline (only when the read allowed one); a
    /// load that follows starts from the [`Missing`].
    Stale(V, Trailer, Missing),
    /// Nothing usable; a load that follows starts from the [`Missing`].
    Miss(Missing),
}
