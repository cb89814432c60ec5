//! The middleware's settings as every front end has them: their defaults, and the
//! rules a value must keep. A front end checks a value's type in its own words, then
//! asks [`problem`] whether the value can hold, and words the answer.

use crate::purge::MIN_PURGE_TOKEN;

/// Request headers that apps (or their frameworks) reflect into pages and links but
/// that a key on scheme, host and path does not cover: a request carrying one is
/// neither looked up nor stored (see the poisoning notes in docs/http.md).
pub const DEFAULT_BYPASS_HEADERS: [&str; 13] = [
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-scheme",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-host",
    "x-original-url",
    "x-rewrite-url",
    "x-original-host",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "forwarded",
];

/// RFC 9213: the targeted fields this cache obeys, first match wins. Its own field
/// speaks to it alone and never leaves; `CDN-Cache-Control` is forwarded, for a CDN in
/// front of the app.
pub const DEFAULT_TARGETED_FIELDS: [&str; 2] = ["ziggurat-cache-control", "cdn-cache-control"];
/// The targeted fields that leave with the response.
pub const DEFAULT_TARGETED_FORWARD: [&str; 1] = ["cdn-cache-control"];
/// The Edge Architecture note's field: with `surrogate_control`, the last targeted
/// field read, and never sent on.
pub const SURROGATE_FIELD: &str = "surrogate-control";
/// The hosts whose requests are cached by default.
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
/// The addresses a `PURGE` is taken from by default.
pub const DEFAULT_PURGE_CLIENTS: [&str; 2] = ["127.0.0.1", "::1"];
/// The largest body stored by default, bytes.
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;
/// The tag header by default.
pub const DEFAULT_TAG_HEADER: &str = "cache-tag";
/// Seconds a URL whose fill stored nothing is not waited on, by default.
pub const DEFAULT_HIT_FOR_MISS: f64 = 10.0;
/// Seconds a response kept for revalidation outlives its freshness, by default.
pub const DEFAULT_REVALIDATE_KEEP: f64 = 60.0;
/// Seconds the requests waiting on a fill may read its marker: they read it right
/// after it lands.
pub const MARKER_TTL: f64 = 0.5;

/// App calls one process stops waiting for (`app_timeout`) and lets run on at once; past
/// it, the process waits for the app as if there were no `app_timeout`.
pub const MAX_ABANDONED: usize = 8;
/// Seconds the fill lock of a URL whose app call was abandoned holds the failed marker
/// (every process answers the URL stale, without calling the app) if the process dies
/// before the call ends.
pub const ABANDONED_HOLD: f64 = 120.0;

/// A setting whose value cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingProblem {
    /// The tag header is not a header name.
    NotHeaderName,
    /// The purge token is shorter than [`MIN_PURGE_TOKEN`] characters.
    ShortToken,
    /// A key header has `_`: requests with one bypass the cache, so it could never key.
    Underscore,
    /// A targeted field names `Cache-Control`, which is always read.
    CacheControl,
    /// Seconds that are not finite and above 0.
    Seconds,
}

/// The settings with a rule beyond their type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `tag_header`.
    TagHeader,
    /// `purge_token`.
    PurgeToken,
    /// One of `key_headers`.
    KeyHeader,
    /// One of `targeted_fields` or `targeted_forward`.
    Targeted,
    /// A number of seconds (`default_ttl`, `stale_if_error`, `app_timeout`,
    /// `hit_for_miss`, `revalidate_keep`).
    Seconds,
}

/// The tag header's name as it is matched: trimmed and lower-case; None when `value` is
/// not a header name.
///
/// ```
/// use ziggurat_http::tag_header_name;
/// assert_eq!(tag_header_name(" Surrogate-Key ").as_deref(), Some("surrogate-key"));
/// assert_eq!(tag_header_name("two words"), None);
/// ```
pub fn tag_header_name(value: &str) -> Option<String> {
    let t = value.trim();
    (!t.is_empty() && t.is_ascii() && !t.contains(' ')).then(|| t.to_ascii_lowercase())
}

/// Why the text `value` of `setting` cannot hold, or None.
///
/// ```
/// use ziggurat_http::{problem, Setting, SettingProblem};
/// assert_eq!(problem(Setting::KeyHeader, "x_tenant"), Some(SettingProblem::Underscore));
/// assert_eq!(problem(Setting::PurgeToken, "0123456789abcdef"), None);
/// ```
pub fn problem(setting: Setting, value: &str) -> Option<SettingProblem> {
    match setting {
        Setting::TagHeader => tag_header_name(value)
            .is_none()
            .then_some(SettingProblem::NotHeaderName),
        Setting::PurgeToken => {
            (value.chars().count() < MIN_PURGE_TOKEN).then_some(SettingProblem::ShortToken)
        }
        Setting::KeyHeader => value.contains('_').then_some(SettingProblem::Underscore),
        Setting::Targeted => value
            .trim()
            .eq_ignore_ascii_case("cache-control")
            .then_some(SettingProblem::CacheControl),
        Setting::Seconds => value
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && s.is_finite())
            .is_none()
            .then_some(SettingProblem::Seconds),
    }
}
