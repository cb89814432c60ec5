//! ziggurat-http: ziggurat's shared HTTP response cache (RFC 9111, RFC 9213, RFC 9211)
//! with no language runtime and no I/O, so that every front end (the Python ASGI and
//! WSGI middleware, Node.js's `ziggurat/http`) caches by the same rules and reads the
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
//! 1. [`classify`] with its [`ClassifyOptions`]: [`Action::Pass`] (forward; the head
//!    leaves as [`client_headers`] says; when it `invalidates` and the app answers 2xx/3xx,
//!    delete every key of [`invalidated_keys`] first), [`Action::Purge`]
//!    ([`purge_request`]: the sender checked, then tags to invalidate or a URL's
//!    [`purge_keys`] to delete in their order; [`purge_answer`]), or [`Action::Lookup`].
//!    The settings' defaults are the `DEFAULT_*` constants, their rules [`problem`]. A
//!    request with none of [`plain_hit_blockers`], whose target does not
//!    [`overrides_method`], may first be answered from the front end's own table of
//!    fresh responses.
//! 2. Read the value under [`Lookup::base`]: [`find`] says whether it is the response,
//!    or a record naming the variant to read ([`answers`] confirms it), or nothing. A
//!    plain request of a fresh response is answered with [`fresh_hit`]'s lines, made
//!    once per second of age.
//! 3. Make the request's [`Exchange`] ([`ExchangeRequest`]: the method, header lines,
//!    directives and keys) and feed it the value found: [`Exchange::lookup`] says
//!    [`LookupStep::Serve`] (answer with [`Exchange::reply`]; with `refresh`, revalidate
//!    in the background with this exchange), [`LookupStep::GatewayTimeout`],
//!    [`LookupStep::Pass`] (a `HEAD`: its 200 goes to [`Exchange::head_update`]) or
//!    [`LookupStep::Fill`]. The exchange keeps the stored value when a later step needs
//!    it.
//! 4. Fill: when [`Exchange::coalesce`], hold the lease of [`lock_key`]; inside it, a
//!    response another process stored may already answer ([`Exchange::recheck`]);
//!    waiters read the result as [`Exchange::collapsed`] says. Call the app with
//!    [`Exchange::upstream_headers`] (the stored validators in place of the client's),
//!    waiting at most [`Exchange::app_timeout`].
//! 5. The app failed or timed out: [`Exchange::stale_if_error`] says whether (and with
//!    which `Cache-Status`) the stale response answers.
//! 6. The app's head: [`Exchange::head`] (reading the stored value again first when
//!    [`Exchange::needs_current`]): [`HeadStep::Refreshed`] (store it, answer it,
//!    [`Exchange::release`]), [`HeadStep::Mismatch`], [`HeadStep::Stale`],
//!    [`HeadStep::Pass`] (with [`Exchange::pass_status`]), or [`HeadStep::Store`]:
//!    buffer the body up to `max_body` (or relay it as it comes when [`Exchange::tee`]),
//!    then store [`Entry::encode`] of a [`Stored`] made of the status, the [`Meta`], the
//!    body and the times, for [`Meta::ttl`] with [`Meta::tags`]: the writes of
//!    [`save_writes`] in order (a varying response under [`variant_key`], then its
//!    [`Variants`] record under the URL's key), unless the URL's [`purge_mark`] moved
//!    since the fill began; the client gets [`client_headers`]; tell [`Exchange::saved`] what came of
//!    it ([`Saved`]): [`Exchange::stored_status`] is the answer's `Cache-Status`, and a
//!    client's validators are answered from it when [`Exchange::answers_validators`].
//! 7. The requests that waited on the fill do what [`Exchange::marker`] says.
//! 8. Every answer carries [`cache_status`]; the tag header and the targeted fields
//!    meant for this cache never leave.
//!
//! The exchange owns what it holds (no borrow outlives a call), so a front end keeps it
//! in its own request object between the events. The functions it threads its state
//! through ([`lookup_step`], [`reply`], [`head_step`], [`stale_if_error`],
//! [`head_update`], [`refreshed`]) are public for a front end that holds the state
//! itself.
//!
//! The parts: [`parse_cache_control`], [`response_directives`], [`freshness_lifetime`],
//! [`initial_age`], [`parse_vary`], [`etag_matches`], [`http_date`], [`normalise_host`]
//! and the status rules are what these decisions are made of; [`decide`] is what a fill
//! stores.
//!
//! ```
//! use ziggurat_http::{freshness_lifetime, response_directives, LifetimeRules};
//! let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"Public, MAX-AGE=60, s-maxage=\"30\"")];
//! let (cc, _) = response_directives(h, &[]);
//! assert_eq!(freshness_lifetime(&cc, h, 200, 0.0, &LifetimeRules::default()), (30.0, true));
//! ```
#![forbid(unsafe_code)]

mod age;
mod auth;
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
mod not_stored;
mod purge;
mod responses;
mod sent;
mod settings;
mod status;
mod storable;
mod stored;
mod tags;
mod targeted;
mod vary;

pub use age::initial_age;
pub use auth::auth_shared;
pub use cache_control::{parse_cache_control, Directives};
pub use cache_status::{cache_status, Param};
pub use classify::{
    classify, host_allowed, overrides_method, plain_hit_blockers, Action, ClassifyOptions, Lookup,
    CLIENT_CONDITIONALS, PASS_CONDITIONALS,
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
pub use freshness::{expires_time, freshness_lifetime, LifetimeRules};
pub use host::normalise_host;
pub use key::{
    base_key, invalidated_keys, lock_key, purge_keys, purge_mark, refresh_lock_key, url_key,
    variant_key, MAX_URL_KEY,
};
pub use not_stored::NotStored;
pub use purge::{purge_answer, purge_request, Purge, Purged, MIN_PURGE_TOKEN, PURGE_TOKEN};
pub use responses::{answers, find, save_writes, variant_of, Found, Write};
pub use sent::{client_headers, fresh_hit, fresh_until, gateway_timeout, FreshHit, Lines, Sent};
pub use settings::{
    problem, tag_header_name, Setting, SettingProblem, ABANDONED_HOLD, DEFAULT_ALLOWED_HOSTS,
    DEFAULT_BYPASS_HEADERS, DEFAULT_HIT_FOR_MISS, DEFAULT_MAX_BODY, DEFAULT_PURGE_CLIENTS,
    DEFAULT_REVALIDATE_KEEP, DEFAULT_TAG_HEADER, DEFAULT_TARGETED_FIELDS, DEFAULT_TARGETED_FORWARD,
    MARKER_TTL, MAX_ABANDONED, SURROGATE_FIELD,
};
pub use status::{
    ignores_no_store, is_heuristic_status, is_storable_status, is_understood_status,
    may_use_default_freshness, status_storable, HEURISTIC_STATUSES,
};
pub use storable::{
    decide, entry_ttl, may_serve_stale, never_stored, stale_flags, stale_if_error_window,
    stored_headers, Meta, StoreOptions, StoreRequest, MAX_HTTP_TTL, STALE_FORBIDDING,
};
pub use stored::{decode, DecodeError, Entry, Stored, Variants, FORMAT_VERSION};
pub use tags::split_tags;
pub use targeted::{
    parse_surrogate_control, parse_targeted, response_directives, SURROGATE_CAPABILITY,
    SURROGATE_DEVICE,
};
pub use vary::{parse_vary, vary_digest, vary_values};
