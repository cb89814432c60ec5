//! The Node.js front end of ziggurat: a napi-rs addon that converts values
//! and drives `ziggurat_cache::Cache`, nothing more. The Cache's rules (what a
//! read finds, when an L1 copy may be kept, leases, stores, counters, tags,
//! clears) live in ziggurat-cache; the JavaScript package (`node/`) keeps the
//! L1 of live objects, calls the loaders and validates its L1 hits with
//! `Atomics.load` on the mapped words that this addon exposes.
//!
//! - `cache`: the `NativeCache` class: open by name, reads, writes, counters.
//! - `miss`: every call into the Cache's miss path (`getOrSet`).
//! - `rules`: the Cache's argument rules JavaScript asks for (key length, namespaces)
//!   and the metric families of `metrics.cjs`.
//! - `front`: what a read below L1 hands to JavaScript.
//! - `codec`: the payloads shared with the Python front end.
//! - `words`: the mapped words as JavaScript array buffers (the only `unsafe`).
//! - `errors`: the Cache's errors as JavaScript exceptions.

mod cache;
mod codec;
mod errors;
mod front;
mod miss;
mod rules;
#[allow(unsafe_code)]
mod words;

pub use cache::NativeCache;
pub use front::{forget_reader, read_input};
pub use rules::{metric_families, namespace_parts, MetricFamily, MAX_KEY_BYTES};
