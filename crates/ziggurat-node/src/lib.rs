//! The Node.js front end of ziggurat: a napi-rs addon that converts values
//! and drives `ziggurat_cache::Cache`, nothing more. The Cache's rules (what a
//! read finds, when an L1 copy may be kept, leases, stores, counters, tags,
//! clears) live in ziggurat-cache; the JavaScript package (`node/`) keeps the
//! L1 of live objects, calls the loaders and validates its L1 hits with
//! `Atomics.load` on the mapped words that this addon exposes.
//!
//! - `cache`: the `NativeCache` class: open by name, reads, writes, counters.
//! - `miss`: every call into the Cache's miss path (`getOrSet`).
//! - `rules`: the Cache's argument rules JavaScript asks for (keys, durations, sizes, copy,
//!   namespaces, the degraded modes' messages) and the metric families of `metrics.cjs`.
//! - `stats`: this process's counters and the segments' figures, for `stats()`.
//! - `front`: what a read below L1 hands to JavaScript, and `readInput()`.
//! - `codec`: the payloads shared with the Python front end.
//! - `words`: the mapped words as JavaScript array buffers (over read-only
//!   views of the files), the thread's meta block and what its words say,
//!   the input block and the clock, and the Node-API glue of a call with no
//!   argument (the only `unsafe`). It uses no other module of the addon:
//!   `cache` uses `front` and `words`, `front` uses `words`.
//! - `cluster`: `NativeTier`, a cache joined to the cluster tier (ziggurat-cluster), its
//!   calls run by `pool`'s threads, each settling a promise, the values crossing in
//!   `tier_value` (none of the three in the WebAssembly build).
//! - `errors`: the Cache's errors as JavaScript exceptions.
//! - `http`, `http_request`, `http_exchange`: the HTTP response cache's rules
//!   (ziggurat-http) for `ziggurat/http`, conversions only.

mod args;
mod cache;
#[cfg(not(target_family = "wasm"))]
mod cluster;
mod codec;
mod errors;
mod front;
mod http;
mod http_exchange;
mod http_request;
mod miss;
#[cfg(not(target_family = "wasm"))]
mod pool;
mod rules;
mod stats;
#[cfg(not(target_family = "wasm"))]
mod tier_value;
#[allow(unsafe_code)]
mod words;

pub use cache::NativeCache;
#[cfg(not(target_family = "wasm"))]
pub use cluster::{check_tier, NativeTier, TierCounts, TierOptions};
pub use front::{forget_reader, read_input_function};
pub use http::{
    http_defaults, http_fwd_status, http_invalidated_keys, http_lock_key, http_overrides_method,
    http_purge_keys, http_purge_mark, http_refresh_lock_key, http_setting_problem, http_url_key,
    HttpDefaults, HttpRules,
};
pub use http_exchange::HttpExchange;
pub use http_request::HttpRequest;
pub use rules::{
    check_copy, check_key, degraded_refusal, degraded_warning, duration, incr_overflow,
    metric_families, namespace_parts, rules, size, unset_degraded_mode, MetricFamily,
    MAX_KEY_BYTES,
};
#[cfg(not(target_family = "wasm"))]
pub use tier_value::Found;
pub use words::{clock_buffer, input_buffer, meta_buffer};
