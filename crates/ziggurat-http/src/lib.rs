//! ziggurat-http: ziggurat's shared HTTP response cache (RFC 9111, RFC 9213, RFC 9211)
//! with no language runtime and no I/O, so that every front end (the Python ASGI and
//! WSGI middleware today, a Node.js one next) caches by the same rules and reads the
//! responses another stored.
//!
//! A header list is `(name, value)` pairs of bytes with lower-case names ([`Headers`]).
//! Every parser accepts any bytes and never panics: a malformed field is treated the
//! way the RFCs say a cache must treat it (usually: the response is stale, or the
//! directive is ignored). A stored value that is not this format ([`decode`]) is an
//! error the front end treats as a miss.
//!
//! # What a front end does for one request
//!
//! The front end does the I/O, its framework's glue, its per-process table of ready
//! answers and its language's coalescing; the crate decides every step.
//!
//! 1. [`classify`] with its [`ClassifyOptions`]: [`Action::Pass`] (forward; add the
//!    `Cache-Status` member; when it `invalidates` and the app answers 2xx/3xx, delete
//!    every key of [`invalidated_keys`] first), [`Action::Purge`] (check the token;
//!    invalidate the [`split_tags`] of the tag header, or delete [`base_key`]), or
//!    [`Action::Lookup`].
//! 2. Read the value under [`Lookup::base`] and [`decode`] it. [`Entry::Variants`]:
//!    [`vary_values`] of the request for its names, [`vary_digest`], read
//!    [`variant_key`] and keep the response only if its `vary_values` are the request's.
//! 3. A plain request whose stored response is fresh may be answered from the front
//!    end's own table; otherwise [`lookup_step`]: [`LookupStep::Serve`] with [`reply`]
//!    (with `refresh`, revalidate in the background), [`LookupStep::GatewayTimeout`],
//!    [`LookupStep::Pass`] (a `HEAD`: its 200 goes to [`head_update`]) or
//!    [`LookupStep::Fill`].
//! 4. Fill: when `coalesce`, hold the lease of [`lock_key`]; call the app without the
//!    client's validators ([`CLIENT_CONDITIONALS`]), with the stale response's `etag` and
//!    `last_modified` as `If-None-Match` and `If-Modified-Since`.
//! 5. The app failed or timed out: [`stale_if_error`] says whether (and with which
//!    `Cache-Status`) the stale response answers.
//! 6. The app's head: [`head_step`]: [`HeadStep::Refreshed`] (the 304 merged by
//!    [`refreshed`]: store it, answer it), [`HeadStep::Mismatch`], [`HeadStep::Stale`],
//!    [`HeadStep::Pass`], or [`HeadStep::Store`]: buffer the body up to `max_body`,
//!    then store [`Entry::encode`] of a [`Stored`] made of the status, the [`Meta`],
//!    the body and the times, for [`Meta::ttl`] with [`Meta::tags`] (a varying response
//!    under [`variant_key`], a [`Variants`] record under the URL's key).
//! 7. Every answer carries [`cache_status`]; the tag header and the targeted fields
//!    meant for this cache never leave.
//!
//! The parts: [`parse_cache_control`], [`response_directives`], [`freshness_lifetime`],
//! [`initial_age`], [`parse_vary`], [`etag_matches`], [`http_date`], [`normalise_host`]
//! and the status rules are what these decisions are made of; [`decide`] is what a fill
//! stores.
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
mod exchange;
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
pub use classify::{
    classify, host_allowed, overrides_method, Action, ClassifyOptions, Lookup, CLIENT_CONDITIONALS,
    PASS_CONDITIONALS,
};
pub use connection::{connection_listed, HOP_BY_HOP};
pub use date::{http_date, http_date_in};
pub use delta::{delta_seconds, MAX_DELTA};
pub use etag::etag_matches;
pub use exchange::{Exchange, ExchangeRequest, Marker, Saved};
pub use fields::{field, fields, parse_list, Headers};
pub use fill::{
    head_step, head_update, lookup_step, not_modified, refreshed, reply, stale_if_error, usable,
    FillRequest, HeadStep, HeadUpdate, LookupStep, Reply, ERROR_STATUSES,
};
pub use freshness::{expires_time, freshness_lifetime};
pub use host::normalise_host;
pub use key::{
    base_key, invalidated_keys, lock_key, purge_keys, purge_mark, url_key, variant_key, MAX_URL_KEY,
};
pub use status::{
    ignores_no_store, is_heuristic_status, is_storable_status, is_understood_status,
    may_use_default_freshness, status_storable, HEURISTIC_STATUSES,
};
pub use storable::{
    auth_shared, decide, entry_ttl, may_serve_stale, never_stored, stale_flags,
    stale_if_error_window, stored_headers, Meta, StoreOptions, StoreRequest, MAX_HTTP_TTL,
    STALE_FORBIDDING,
};
pub use stored::{decode, DecodeError, Entry, Stored, Variants, FORMAT_VERSION};
pub use tags::split_tags;
pub use targeted::{
    parse_surrogate_control, parse_targeted, response_directives, SURROGATE_CAPABILITY,
    SURROGATE_DEVICE,
};
pub use vary::{parse_vary, vary_digest, vary_values};
