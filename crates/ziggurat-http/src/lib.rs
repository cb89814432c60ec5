//! ziggurat-http: the rules of ziggurat's shared HTTP response cache (RFC 9111, RFC
//! 9213, RFC 9211) with no language runtime and no I/O, so that every front end (the
//! Python ASGI and WSGI middleware today) caches by the same rules.
//!
//! A header list is `(name, value)` pairs of bytes with lower-case names ([`Headers`]).
//! Every parser accepts any bytes and never panics: a malformed field is treated the
//! way the RFCs say a cache must treat it (usually: the response is stale, or the
//! directive is ignored).
//!
//! What a front end calls when:
//! - on a request: [`normalise_host`] for the key, [`parse_cache_control`] for the
//!   request's directives, [`etag_matches`] and [`http_date`] for its conditionals,
//!   [`split_tags`] for a PURGE;
//! - on the app's response: [`response_directives`] (a targeted field such as
//!   `CDN-Cache-Control` first, then `Cache-Control`), [`status_storable`] and
//!   [`ignores_no_store`], [`parse_vary`] with [`vary_values`] and [`vary_digest`] for
//!   the variant, [`freshness_lifetime`] and [`initial_age`], [`connection_listed`] and
//!   [`HOP_BY_HOP`] for what is never stored, [`split_tags`] for its tags;
//! - on the app's response, to store it: [`decide`] does all of the above in one call
//!   (with the cache's [`StoreOptions`] and what it knows of the request,
//!   [`StoreRequest`]) and says why the response is not stored or what is ([`Meta`]);
//!   [`entry_ttl`], [`stale_flags`] and [`stored_headers`] for a response that a 304
//!   updates; [`stale_if_error_window`] when the app fails;
//! - on every answer: [`cache_status`] for the `Cache-Status` field.
//!
//! ```
//! use ziggurat_http::{freshness_lifetime, response_directives};
//! let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"Public, MAX-AGE=60, s-maxage=\"30\"")];
//! let (cc, _) = response_directives(h, &[]);
//! assert_eq!(freshness_lifetime(&cc, h, 200, 0.0, false, None, true), (30.0, true));
//! ```
#![forbid(unsafe_code)]

mod age;
mod cache_control;
mod cache_status;
mod classify;
mod connection;
mod date;
mod delta;
mod etag;
mod fields;
mod fill;
mod freshness;
mod host;
mod key;
mod status;
mod storable;
mod stored;
mod tags;
mod targeted;
mod vary;

pub use age::initial_age;
pub use cache_control::{parse_cache_control, Directives};
pub use cache_status::{cache_status, Param};
pub use classify::{classify, host_allowed, Action, ClassifyOptions, Lookup, CLIENT_CONDITIONALS};
pub use connection::{connection_listed, HOP_BY_HOP};
pub use date::{http_date, http_date_in};
pub use delta::{delta_seconds, MAX_DELTA};
pub use etag::etag_matches;
pub use fields::{field, fields, parse_list, Headers};
pub use fill::{
    head_step, head_update, lookup_step, not_modified, refreshed, reply, stale_if_error, usable,
    FillRequest, HeadStep, HeadUpdate, LookupStep, Reply, ERROR_STATUSES,
};
pub use freshness::{expires_time, freshness_lifetime};
pub use host::normalise_host;
pub use key::{base_key, invalidated_keys, lock_key, url_key, variant_key, MAX_KEY};
pub use status::{
    ignores_no_store, is_heuristic_status, is_storable_status, is_understood_status,
    may_use_default_freshness, status_storable, HEURISTIC_STATUSES,
};
pub use storable::{
    decide, entry_ttl, may_serve_stale, never_stored, stale_flags, stale_if_error_window,
    stored_headers, Meta, StoreOptions, StoreRequest, MAX_TTL, STALE_FORBIDDING,
};
pub use stored::{decode, DecodeError, Entry, Stored, Variants, FORMAT_VERSION};
pub use tags::split_tags;
pub use targeted::{parse_targeted, response_directives};
pub use vary::{parse_vary, vary_digest, vary_values};
