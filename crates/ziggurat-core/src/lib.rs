//! ziggurat-core: the shared-memory segment behind ziggurat's L2 tier.
//!
//! One fixed-size file, mapped by every worker process on a host. Readers take
//! no lock and never wait; writers serialise per shard on robust mutexes and
//! leave a consistent shard behind even when killed mid-write. Entries live in
//! log rings evicted with S3-FIFO, each key has a version stamp that process-
//! local caches validate against, and tags and a segment epoch invalidate in
//! bulk. The byte layout is described in docs/format.md.
//!
//! `unsafe` code lives only in `shm` (the mapping and the word handles that
//! outlive a borrow of it), `lock` (the shard mutexes), `stamps` (futex calls)
//! and `sys` (other system calls); the workspace denies it everywhere else.

// Off Linux a segment's open is refused before the engine runs (sys_elsewhere.rs):
// the engine is built there for the rules it holds, and most of it is never called.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

mod access;
mod arena;
mod attach;
mod clock;
#[cfg(target_os = "linux")]
mod create;
mod error;
mod evict;
#[cfg(feature = "failpoints")]
pub mod failpoint;
#[cfg(not(feature = "failpoints"))]
mod failpoint;
mod failure;
mod file;
mod fork;
mod geometry;
mod hash;
mod holds;
pub mod huge;
mod index;
mod invalid;
mod layout;
mod lease;
#[allow(unsafe_code)]
mod lock;
mod name;
mod options;
mod read;
#[allow(unsafe_code)]
mod read_only_view;
mod recovery;
#[cfg(target_os = "linux")]
mod replace;
mod segment;
mod shard;
mod shard_lock;
#[allow(unsafe_code)]
mod shm;
mod snapshot;
#[allow(unsafe_code)]
mod stamps;
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod sys;
#[cfg(not(target_os = "linux"))]
#[path = "sys_elsewhere.rs"]
mod sys;
mod tags;
mod view;
mod write;

pub use clock::{now_ms, ticks, ticks_to_ns};
pub use error::{Error, OpenCause, Result};
pub use fork::current_pid;
pub use geometry::Geometry;
pub use hash::KeyHash;
pub use huge::{HugePages, HugeReport};
pub use invalid::{describe, fill, Arg, Form, Layout, Problem, RustWords, Words};
pub use layout::{APP_WORDS, LAYOUT_VERSION, MAX_KEY, MAX_TAGS};
pub use lease::{holder_pid, Lease};
pub use name::{check_segment_name, MAX_SEGMENT_NAME};
pub use options::Options;
pub use read::ReadMeta;
pub use read_only_view::ReadOnlyView;
pub use recovery::Report;
pub use segment::Segment;
pub use shm::{Word32, Word64};
pub use snapshot::Snapshot;
pub use sys::group_id;
pub use tags::TagRef;
pub use view::{View32, View64};
pub use write::Rewrite;
