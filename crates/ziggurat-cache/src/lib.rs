//! ziggurat-cache: what a `Cache` stores in a segment and how it changes it,
//! with no language runtime in it, so that every front end (Python today)
//! reads and writes the same entries by the same rules.
//!
//! An entry's value is `payload || trailer` (see [`Trailer`]); the segment
//! record itself lives `stale` seconds past the trailer's soft deadline so a
//! fail-safe read can still find a stale value. Counters are entries whose
//! payload is a little-endian `i64`, changed in place under the shard lock.
//!
//! A front end reads below its L1 with [`Reader::lookup`], writes with
//! [`store`] and [`store_negative`], changes entries in place with [`add`],
//! [`incr`], [`touch`] and [`fill`], and loads a missing key under a lease
//! with [`Flight`]. None of these takes or returns a language object: payloads
//! are bytes, and what an L1 entry checks is a set of shared words
//! ([`L1Watch`], [`Watch32`]).

mod entry;
mod flight;
mod key;
mod lookup;
mod pair;
mod size;
mod store;
mod ttl;
mod update;
mod watch;

pub use entry::{counter_payload, encode, refresh_due, seal, split, Kind, Trailer, TRAILER_LEN};
pub use flight::{process_alive, snapshot, Flight, FlightKey, Next};
pub use key::{check_key, not_utf8, MAX_KEY};
pub use lookup::{Before, Bytes, Found, Lookup, Missing, Payload, Reader};
pub use pair::{neg_size_for, open_pair, Pair, DEFAULT_SIZE, NEG_SUFFIX};
pub use size::{parse_size, MAX_SIZE};
pub use store::{store, store_negative, Kept};
pub use ttl::{Lifetime, MAX_TTL_SECONDS};
pub use update::{add, fill, incr, touch, Seen, UpdateError};
pub use watch::{L1Watch, Watch32, Watch64};
