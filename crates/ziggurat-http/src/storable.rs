//! Whether the cache may store a response, and what it keeps of it (RFC 9111 §3, §3.2,
//! §4.2, RFC 9213): the rules a fill applies to the app's response head.

use std::collections::HashSet;

use crate::age::initial_age;
use crate::auth::auth_shared;
use crate::cache_control::Directives;
use crate::connection::{connection_listed, HOP_BY_HOP};
use crate::delta::delta_seconds;
use crate::fields::{field, fields, latin1, strip, Headers, ASCII_SPACE};
use crate::freshness::{freshness_lifetime, LifetimeRules};
use crate::not_stored::NotStored;
use crate::status::{ignores_no_store, status_storable};
use crate::tags::split_tags;
use crate::targeted::response_directives;
use crate::vary::{parse_vary, vary_values};

/// The longest a response is kept: a year.
pub const MAX_HTTP_TTL: f64 = 365.0 * 86400.0;
/// The most bytes of header lines a stored response keeps (names and values).
const MAX_STORED_HEADERS: usize = 32 * 1024;

/// RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10: a response with one of these is never
/// served stale (nor under stale-while-revalidate or stale-if-error).
pub const STALE_FORBIDDING: [&str; 4] = [
    "no-cache",
    "must-revalidate",
    "proxy-revalidate",
    "s-maxage",
];

/// The options of the cache that storing reads.
#[derive(Debug, Clone)]
pub struct StoreOptions<'a> {
    /// The targeted fields this cache obeys (RFC 9213 target list), lower-case names.
    pub targeted_fields: &'a [&'a [u8]],
    /// Whether a response without explicit freshness gets a heuristic lifetime.
    pub heuristic: bool,
    /// The lifetime of a response without explicit freshness, if any.
    pub default_ttl: Option<f64>,
    /// Seconds a stored response may answer for an app that fails (0: only as it says).
    pub stale_if_error: f64,
    /// Seconds a response with a validator is kept past its stale use, to revalidate.
    pub revalidate_keep: f64,
    /// The header that names a response's tags (never stored).
    pub tag_header: &'a [u8],
    /// Whether a response with `Set-Cookie` is stored (without it).
    pub store_set_cookie: bool,
    /// The largest body stored, in bytes.
    pub max_body: u64,
    /// The most tags a stored response may have.
    pub max_tags: usize,
    /// Whether the request's cache directives are obeyed.
    pub request_directives: bool,
    /// Whether `must-revalidate` lets a response to a request with `Authorization` be
    /// stored, as RFC 9111 §3.5 allows (off: many APIs send `max-age=N, must-revalidate`
    /// on answers meant for one user).
    pub store_auth_must_revalidate: bool,
    /// Request fields every response varies on, lower-case.
    pub key_headers: &'a [&'a str],
}

/// What storing a response needs to know of the request that asked for it.
#[derive(Debug, Clone)]
pub struct StoreRequest<'a> {
    /// The request method.
    pub method: &'a str,
    /// The request's header lines (for the `Vary` values).
    pub headers: &'a Headers<'a>,
    /// The request's cache directives.
    pub directives: &'a Directives,
    /// Whether it had `Authorization`.
    pub has_auth: bool,
    /// When the request was sent on.
    pub time: f64,
}

/// What is stored of a response besides its status and body, and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta<'a> {
    /// The stored header lines.
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    /// Its freshness lifetime.
    pub lifetime: f64,
    /// Its corrected initial age.
    pub initial_age: f64,
    /// Its stale-while-revalidate window.
    pub swr: f64,
    /// Its stale-if-error window.
    pub sie: f64,
    /// The directives of [`STALE_FORBIDDING`] it has.
    pub flags: Vec<&'static str>,
    /// Its ETag.
    pub etag: Option<&'a [u8]>,
    /// Its Last-Modified.
    pub last_modified: Option<&'a [u8]>,
    /// The request fields it varies on.
    pub vary: Vec<String>,
    /// The request's values of those fields.
    pub vary_values: Vec<Option<Vec<u8>>>,
    /// Its tags.
    pub tags: Vec<String>,
    /// How long the cache keeps it.
    pub ttl: f64,
}

/// The directives of [`STALE_FORBIDDING`] a response has (kept with it).
///
/// ```
/// use ziggurat_http::{parse_cache_control, stale_flags};
/// let cc = parse_cache_control([&b"max-age=5, s-maxage=9, public"[..]]);
/// assert_eq!(stale_flags(&cc), ["s-maxage"]);
/// ```
pub fn stale_flags(cc: &Directives) -> Vec<&'static str> {
    STALE_FORBIDDING
        .into_iter()
        .filter(|d| cc.contains(d))
        .collect()
}

/// Whether a response with these flags may be served stale at all (RFC 9111 §4.2.4).
///
/// ```
/// use ziggurat_http::may_serve_stale;
/// assert!(may_serve_stale(&[]) && !may_serve_stale(&["no-cache"]));
/// ```
pub fn may_serve_stale(flags: &[&str]) -> bool {
    !flags.iter().any(|f| STALE_FORBIDDING.contains(f))
}

/// Seconds past its freshness a stored response (its `flags` and `stale-if-error`
/// window `sie`) may answer for an app that failed (RFC 9111 §4.2.4, RFC 5861): the
/// largest of its `stale-if-error`, the `stale_if_error` option and the request's
/// `stale-if-error` (with `request_directives`); 0 when its directives forbid any stale
/// use.
///
/// ```
/// use ziggurat_http::{stale_if_error_window, Directives, StoreOptions};
/// let opts = StoreOptions { stale_if_error: 90.0, ..StoreOptions::default() };
/// assert_eq!(stale_if_error_window(&[], 30.0, &opts, &Directives::new()), 90.0);
/// assert_eq!(stale_if_error_window(&["must-revalidate"], 30.0, &opts, &Directives::new()), 0.0);
/// ```
pub fn stale_if_error_window(
    flags: &[&str],
    sie: f64,
    opts: &StoreOptions<'_>,
    req_cc: &Directives,
) -> f64 {
    if !may_serve_stale(flags) {
        return 0.0;
    }
    let mut window = sie.max(opts.stale_if_error);
    if opts.request_directives {
        if let Some(d) = req_cc.get("stale-if-error").and_then(delta_seconds) {
            window = window.max(d as f64);
        }
    }
    window
}

/// How long the cache keeps a stored response: while fresh, then for as long as it may
/// be served stale (`window`: the larger of stale-while-revalidate and stale-if-error,
/// or the `stale_if_error` option) unless its directives forbid that, then
/// `revalidate_keep` more when `keep` (it has a validator); a year at most.
///
/// ```
/// use ziggurat_http::{entry_ttl, StoreOptions};
/// let opts = StoreOptions { revalidate_keep: 60.0, ..StoreOptions::default() };
/// assert_eq!(entry_ttl(&opts, 60.0, 10.0, 30.0, &[], false), 80.0);
/// assert_eq!(entry_ttl(&opts, 60.0, 10.0, 30.0, &["no-cache"], true), 110.0);
/// ```
pub fn entry_ttl(
    opts: &StoreOptions<'_>,
    lifetime: f64,
    initial_age: f64,
    window: f64,
    flags: &[&str],
    keep: bool,
) -> f64 {
    let mut ttl = (lifetime - initial_age).max(0.0);
    if may_serve_stale(flags) {
        ttl += window.max(opts.stale_if_error);
    }
    if keep {
        ttl += opts.revalidate_keep;
    }
    ttl.min(MAX_HTTP_TTL)
}

/// The fields never stored: the hop-by-hop ones, `Age`, `Content-Length`,
/// `Cache-Status` and the tag header.
///
/// ```
/// use ziggurat_http::{never_stored, StoreOptions};
/// let names = never_stored(&StoreOptions { tag_header: b"x-tags", ..StoreOptions::default() });
/// assert!(names.contains(&&b"x-tags"[..]) && names.contains(&&b"te"[..]));
/// ```
pub fn never_stored<'a>(opts: &StoreOptions<'a>) -> Vec<&'a [u8]> {
    let mut out: Vec<&[u8]> = HOP_BY_HOP.to_vec();
    out.extend([
        &b"age"[..],
        b"content-length",
        b"cache-status",
        opts.tag_header,
    ]);
    out
}

/// The header lines stored of a response: not the hop-by-hop ones (the fixed list and
/// those its `Connection` names), `Age`, `Content-Length`, `Cache-Status`, the tag
/// header, `Set-Cookie` (stored only without it), nor `strip` (the names of
/// `private="…"` and `no-cache="…"`).
///
/// ```
/// use ziggurat_http::{stored_headers, StoreOptions};
/// let h: &[(&[u8], &[u8])] = &[(b"connection", b"x-a"), (b"x-a", b"1"), (b"x-b", b"2")];
/// assert_eq!(stored_headers(&StoreOptions::default(), h, &[]), [(&b"x-b"[..], &b"2"[..])]);
/// ```
pub fn stored_headers<'a>(
    opts: &StoreOptions<'_>,
    headers: &Headers<'a>,
    strip: &[Vec<u8>],
) -> Vec<(&'a [u8], &'a [u8])> {
    let listed = connection_listed(headers);
    // One set of names, looked up once per line: the app chooses how many names `private`
    // and `Connection` list, and how many lines there are.
    let mut dropped: HashSet<&[u8]> = never_stored(opts).into_iter().collect();
    dropped.extend(strip.iter().chain(&listed).map(Vec::as_slice));
    if opts.store_set_cookie {
        dropped.insert(b"set-cookie");
    }
    headers
        .iter()
        .filter(|(k, _)| !dropped.contains(k))
        .copied()
        .collect()
}

/// The field names of a `private="…"` or `no-cache="…"` argument.
fn names(arg: &str) -> Vec<Vec<u8>> {
    arg.replace(' ', "")
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|n| n.as_bytes().to_ascii_lowercase())
        .collect()
}

/// Why the response to `req` cannot be stored (the `Cache-Status` detail), or what to
/// store of it.
///
/// ```
/// use ziggurat_http::{decide, Directives, NotStored, StoreOptions, StoreRequest};
/// let cc = Directives::new();
/// let req = StoreRequest { method: "GET", headers: &[], directives: &cc, has_auth: false,
///                          time: 0.0 };
/// let opts = StoreOptions::default();
/// let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"max-age=60"), (b"location", b"/x")];
/// assert_eq!(decide(&opts, 302, h, &req, 0.0).unwrap().lifetime, 60.0);
/// assert_eq!(decide(&opts, 500, &[], &req, 0.0).unwrap_err(), NotStored::NoFreshness);
/// let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"must-understand, max-age=9")];
/// assert_eq!(decide(&opts, 201, h, &req, 0.0).unwrap_err().as_str(), "must-understand");
/// ```
pub fn decide<'a>(
    opts: &StoreOptions<'_>,
    status: u16,
    headers: &Headers<'a>,
    req: &StoreRequest<'_>,
    now: f64,
) -> Result<Meta<'a>, NotStored> {
    if req.method != "GET" {
        return Err(NotStored::Method);
    }
    if status == 206 {
        return Err(NotStored::Partial);
    }
    let (cc, target) = response_directives(headers, opts.targeted_fields);
    if let Some(why) = status_storable(status, &cc) {
        return Err(why);
    }
    if cc.contains("no-store") && !ignores_no_store(status, &cc) {
        return Err(NotStored::NoStore);
    }
    let mut unshared = Vec::new();
    match cc.get("private") {
        Some(None) => return Err(NotStored::Private),
        Some(Some(arg)) => unshared.extend(names(arg)),
        None => {}
    }
    if let Some(Some(arg)) = cc.get("no-cache") {
        unshared.extend(names(arg));
    }
    if req.directives.contains("no-store") {
        return Err(NotStored::RequestNoStore);
    }
    if req.has_auth && !auth_shared(&cc, opts.store_auth_must_revalidate) {
        return Err(NotStored::Authorization);
    }
    if !opts.store_set_cookie && field(headers, b"set-cookie").is_some() {
        return Err(NotStored::SetCookie);
    }
    let mut vary = parse_vary(headers).ok_or(NotStored::VaryStar)?;
    if !opts.key_headers.iter().all(|k| vary.iter().any(|v| v == k)) {
        vary.extend(opts.key_headers.iter().map(|k| (*k).to_owned()));
        vary.sort_unstable();
        vary.dedup();
    }
    let (lifetime, explicit) = freshness_lifetime(
        &cc,
        headers,
        status,
        now,
        &LifetimeRules {
            heuristic: opts.heuristic,
            default_ttl: opts.default_ttl,
            targeted: target.is_some(),
        },
    );
    if !explicit && lifetime <= 0.0 {
        return Err(NotStored::NoFreshness);
    }
    let age0 = initial_age(headers, req.time, now);
    let tags = split_tags(fields(headers, opts.tag_header));
    if tags.len() > opts.max_tags {
        return Err(NotStored::TooManyTags);
    }
    if let Some(cl) = field(headers, b"content-length") {
        if let Some(n) = delta_seconds(Some(&latin1(strip(cl, ASCII_SPACE)))) {
            if n > opts.max_body {
                return Err(NotStored::TooLarge);
            }
        }
    }
    let flags = stale_flags(&cc);
    let window = |name| {
        cc.get(name)
            .and_then(delta_seconds)
            .map_or(0.0, |d| d as f64)
    };
    let (swr, sie) = (window("stale-while-revalidate"), window("stale-if-error"));
    let etag = field(headers, b"etag");
    let last_modified = field(headers, b"last-modified");
    let keep = etag.is_some() || last_modified.is_some();
    let ttl = entry_ttl(opts, lifetime, age0, swr.max(sie), &flags, keep);
    if ttl <= 0.0 {
        return Err(NotStored::Stale);
    }
    let kept = stored_headers(opts, headers, &unshared);
    if kept.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > MAX_STORED_HEADERS {
        return Err(NotStored::HeadersTooLarge);
    }
    let names: Vec<Vec<u8>> = vary.iter().map(|n| latin1_bytes(n)).collect();
    let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let values = vary_values(&names, req.headers);
    Ok(Meta {
        headers: kept,
        lifetime,
        initial_age: age0,
        swr,
        sie,
        flags,
        etag,
        last_modified,
        vary,
        vary_values: values,
        tags,
        ttl,
    })
}

/// A name made of Latin-1 text as its bytes (a name is never outside Latin-1: it came
/// from a header's bytes or from an ASCII option).
fn latin1_bytes(name: &str) -> Vec<u8> {
    name.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

impl Default for StoreOptions<'_> {
    /// The cache's default options.
    fn default() -> Self {
        StoreOptions {
            targeted_fields: &[b"ziggurat-cache-control", b"cdn-cache-control"],
            heuristic: false,
            default_ttl: None,
            stale_if_error: 0.0,
            revalidate_keep: 60.0,
            tag_header: b"cache-tag",
            store_set_cookie: false,
            max_body: 1 << 20,
            max_tags: 16,
            request_directives: true,
            store_auth_must_revalidate: false,
            key_headers: &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type H<'a> = &'a [(&'a [u8], &'a [u8])];

    fn get<'a>(cc: &'a Directives, headers: H<'a>) -> StoreRequest<'a> {
        StoreRequest {
            method: "GET",
            headers,
            directives: cc,
            has_auth: false,
            time: 0.0,
        }
    }

    fn why(status: u16, h: H<'_>) -> &'static str {
        let cc = Directives::new();
        decide(&StoreOptions::default(), status, h, &get(&cc, &[]), 0.0)
            .unwrap_err()
            .as_str()
    }

    #[test]
    fn refusals() {
        let cc = Directives::new();
        let opts = StoreOptions::default();
        let ok: H<'_> = &[(b"cache-control", b"max-age=60")];
        let mut req = get(&cc, &[]);
        req.method = "HEAD";
        assert_eq!(
            decide(&opts, 200, ok, &req, 0.0).unwrap_err().as_str(),
            "method"
        );
        assert_eq!(why(206, ok), "partial");
        assert_eq!(why(304, ok), "status");
        assert_eq!(
            why(200, &[(b"cache-control", b"no-store, max-age=5")]),
            "no-store"
        );
        assert_eq!(
            why(200, &[(b"cache-control", b"private, max-age=5")]),
            "private"
        );
        assert_eq!(
            why(
                200,
                &[(b"cache-control", b"max-age=5"), (b"set-cookie", b"a=1")]
            ),
            "set-cookie"
        );
        assert_eq!(
            why(200, &[(b"cache-control", b"max-age=5"), (b"vary", b"a, *")]),
            "vary-star"
        );
        assert_eq!(why(200, &[]), "no-freshness");
        assert_eq!(
            why(
                200,
                &[
                    (b"cache-control", b"max-age=5"),
                    (b"content-length", b" 9999999 ")
                ]
            ),
            "too-large"
        );
        assert_eq!(
            why(200, &[(b"cache-control", b"max-age=5"), (b"age", b"9")]),
            "stale"
        );
        let tags = (0..17)
            .map(|i| format!("t{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            why(
                200,
                &[
                    (b"cache-control", b"max-age=5"),
                    (b"cache-tag", tags.as_bytes())
                ]
            ),
            "too-many-tags"
        );
        let big = vec![b'x'; 33 * 1024];
        assert_eq!(
            why(200, &[(b"cache-control", b"max-age=5"), (b"x", &big)]),
            "headers-too-large"
        );
        let no_store = crate::parse_cache_control([&b"no-store"[..]]);
        assert_eq!(
            decide(&opts, 200, ok, &get(&no_store, &[]), 0.0)
                .unwrap_err()
                .as_str(),
            "request-no-store"
        );
        let mut auth = get(&cc, &[]);
        auth.has_auth = true;
        assert_eq!(
            decide(&opts, 200, ok, &auth, 0.0).unwrap_err().as_str(),
            "authorization"
        );
        let public: H<'_> = &[(b"cache-control", b"public, max-age=60")];
        assert!(decide(&opts, 200, public, &auth, 0.0).is_ok());
        let revalidated: H<'_> = &[(b"cache-control", b"max-age=60, must-revalidate")];
        assert!(decide(&opts, 200, revalidated, &auth, 0.0).is_err());
        let chosen = StoreOptions {
            store_auth_must_revalidate: true,
            ..StoreOptions::default()
        };
        assert!(decide(&chosen, 200, revalidated, &auth, 0.0).is_ok());
    }

    #[test]
    fn what_is_stored() {
        let cc = Directives::new();
        let req_headers: H<'_> = &[(b"accept", b"a, b"), (b"accept", b"c")];
        let mut req = get(&cc, req_headers);
        let opts = StoreOptions {
            key_headers: &["x-key"],
            ..StoreOptions::default()
        };
        req.time = 98.0;
        let h: H<'_> = &[
            (
                b"cache-control",
                b"max-age=60, private=\"X-User, x-b\", stale-if-error=30, must-revalidate",
            ),
            (b"connection", b"x-hop"),
            (b"x-hop", b"1"),
            (b"x-user", b"me"),
            (b"content-length", b"2"),
            (b"age", b"5"),
            (b"cache-tag", b"a b,a"),
            (b"vary", b"Accept"),
            (b"etag", b"\"e\""),
            (b"x-keep", b"k"),
        ];
        let m = decide(&opts, 200, h, &req, 100.0).unwrap();
        let names: Vec<&[u8]> = m.headers.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, [&b"cache-control"[..], b"vary", b"etag", b"x-keep"]);
        assert_eq!(
            (m.lifetime, m.initial_age, m.swr, m.sie),
            (60.0, 7.0, 0.0, 30.0)
        );
        assert_eq!(m.flags, ["must-revalidate"]);
        assert_eq!(m.vary, ["accept", "x-key"]);
        assert_eq!(m.vary_values, [Some(b"a,b,c".to_vec()), None]);
        assert_eq!(m.tags, ["a", "b"]);
        // Fresh for 53 s, never stale (must-revalidate), then kept 60 s to revalidate.
        assert_eq!(m.ttl, 113.0);
        assert_eq!(m.etag, Some(&b"\"e\""[..]));
    }

    #[test]
    fn targeted_field_decides_alone() {
        let cc = Directives::new();
        let h: H<'_> = &[
            (b"cache-control", b"no-store"),
            (b"expires", b"0"),
            (b"cdn-cache-control", b"max-age=600"),
        ];
        let m = decide(&StoreOptions::default(), 200, h, &get(&cc, &[]), 0.0).unwrap();
        assert_eq!(m.lifetime, 600.0);
        // must-understand overrides no-store on a status this cache understands.
        let h: H<'_> = &[(b"cache-control", b"must-understand, no-store, max-age=9")];
        assert_eq!(
            decide(&StoreOptions::default(), 200, h, &get(&cc, &[]), 0.0)
                .unwrap()
                .lifetime,
            9.0
        );
    }

    #[test]
    fn windows() {
        let opts = StoreOptions {
            stale_if_error: 10.0,
            request_directives: true,
            ..StoreOptions::default()
        };
        let req = crate::parse_cache_control([&b"stale-if-error=500"[..]]);
        assert_eq!(stale_if_error_window(&[], 30.0, &opts, &req), 500.0);
        let off = StoreOptions {
            request_directives: false,
            ..opts.clone()
        };
        assert_eq!(stale_if_error_window(&[], 30.0, &off, &req), 30.0);
        assert_eq!(entry_ttl(&opts, 1e12, 0.0, 0.0, &[], false), MAX_HTTP_TTL);
        assert_eq!(entry_ttl(&opts, 5.0, 9.0, 0.0, &["s-maxage"], false), 0.0);
        assert_eq!(entry_ttl(&opts, 5.0, 0.0, 3.0, &[], false), 15.0);
    }
}
