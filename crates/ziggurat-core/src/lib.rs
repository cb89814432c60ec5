//! ziggurat-core: the shared-memory segment behind ziggurat's L2 tier.
//!
//! One fixed-size file, mapped by every worker process on a host. Readers take
//! no lock and never wait; writers serialise per shard on robust mutexes and
//! leave a consistent shard behind even when killed mid-write. Entries live in
//! log rings evicted with S3-FIFO, each key has a version stamp that process-
//! local caches validate against, and tags and a segment epoch invalidate in
//! bulk. The byte layout is described in docs/format.md.

pub mod arena;
pub mod clock;
pub mod error;
pub mod evict;
pub mod failpoint;
pub mod hash;
pub mod index;
pub mod layout;
pub mod lease;
pub mod lock;
pub mod recovery;
pub mod segment;
pub mod shard;
pub mod shm;
pub mod stamps;
pub mod tags;

pub use error::{Error, Result};
pub use recovery::Report;
pub use segment::{Options, ReadMeta, Rewrite, Segment};
