//! What a front end supplies to the Cache's behaviour: its L1 (live objects
//! of its language, which this crate never holds) and the decoding of stored
//! payloads into those objects. The miss path ([`crate::Cache::begin`] and
//! the steps after it) asks a [`Front`] whenever it must look at L1 or turn a
//! payload into a value, so one state machine serves every language.

use crate::entry::Trailer;
use crate::error::Error;
use crate::lookup::{Found, Missing, Payload};

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
