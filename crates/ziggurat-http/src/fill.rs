//! The fill: what the cache does with a request it looked up, from the stored response
//! it found (if any) to what is stored of the app's answer. No I/O: the front end calls
//! the app and feeds each event in; every function here is one transition.
//!
//! ```text
//!  lookup ──lookup_step──▶ Serve (fresh, stale-while-revalidate, max-stale) │ GatewayTimeout
//!    │                     │ Pass (HEAD, no-store) │ Fill { stale, coalesce }
//!    ▼ Fill
//!  app called (with the stored validators: upstream_validators)
//!    ├─ app failed or timed out ──stale_if_error──▶ serve stale │ fail
//!    └─ head received ──head_step──▶ Refreshed (304 merged: refreshed) │ Mismatch │ Stale
//!                                    │ Pass (not storable) │ Store(Meta)
//!  Store ── body complete ──▶ encode (crate::Entry) under the key, for Meta::ttl
//!  HEAD forwarded, 200 received ──head_update──▶ Refresh │ Invalidate │ Ignore
//! ```

use std::collections::HashSet;

use crate::age::initial_age;
use crate::auth::auth_shared;
use crate::cache_control::Directives;
use crate::cache_status::{cache_status, Param};
use crate::connection::connection_listed;
use crate::date::http_date;
use crate::delta::delta_seconds;
use crate::etag::etag_matches;
use crate::fields::{field, Headers};
use crate::freshness::{freshness_lifetime, LifetimeRules};
use crate::not_stored::NotStored;
use crate::storable::{
    decide, entry_ttl, never_stored, stale_flags, stale_if_error_window, Meta, StoreOptions,
    StoreRequest,
};
use crate::stored::Stored;
use crate::targeted::response_directives;

/// RFC 9111 §4.2.4, RFC 5861: the app's answers that let a stale response be served.
pub const ERROR_STATUSES: [u16; 4] = [500, 502, 503, 504];
/// RFC 9111 §3.2: fields that describe the stored body itself, which a 304 does not
/// change.
const KEPT_ON_UPDATE: [&[u8]; 3] = [b"content-encoding", b"content-md5", b"content-range"];
/// What a 304 to the client carries of the stored response (RFC 9110 §15.4.5).
const NOT_MODIFIED_KEEP: [&[u8]; 9] = [
    b"cache-control",
    b"content-location",
    b"date",
    b"etag",
    b"expires",
    b"vary",
    b"last-modified",
    b"age",
    b"cache-status",
];

fn hit_status(s: &Stored<'_>, age: f64, extra: &[(&str, Param<'_>)]) -> String {
    let ttl = ((s.lifetime - age) as i64).to_string();
    let mut params = vec![("ttl", Param::Value(&ttl))];
    params.extend_from_slice(extra);
    cache_status("hit", &params)
}

/// Without the ASCII whitespace around it (as `bytes.strip()`: with vertical tab).
fn ws(v: &[u8]) -> &[u8] {
    crate::fields::strip(v, crate::classify::WS)
}

fn delta(cc: &Directives, name: &str) -> Option<u64> {
    cc.get(name).and_then(delta_seconds)
}

/// Whether `s`, `age` seconds old, may answer a request with directives `req` without
/// validation.
///
/// ```
/// use ziggurat_http::{parse_cache_control, usable, Stored};
/// let s = Stored { lifetime: 60.0, ..Default::default() };
/// assert!(usable(&s, 10.0, &parse_cache_control([&b"max-age=20"[..]])));
/// assert!(!usable(&s, 10.0, &parse_cache_control([&b"min-fresh=55"[..]])));
/// ```
pub fn usable(s: &Stored<'_>, age: f64, req: &Directives) -> bool {
    if s.has("no-cache") || req.contains("no-cache") || age >= s.lifetime {
        return false;
    }
    if delta(req, "max-age").is_some_and(|ma| age > ma as f64) {
        return false;
    }
    !delta(req, "min-fresh").is_some_and(|mf| s.lifetime - age < mf as f64)
}

/// What the fill needs of the request.
#[derive(Debug, Clone)]
pub struct FillRequest<'a> {
    /// `GET` or `HEAD`.
    pub method: &'a str,
    /// Its cache directives (see [`crate::Lookup`]).
    pub directives: &'a Directives,
    /// Whether it had `Authorization`.
    pub has_auth: bool,
}

/// What to do with a looked-up request.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupStep {
    /// Answer with the stored response ([`reply`]) and this `Cache-Status` member;
    /// `refresh`: then revalidate it in the background (stale-while-revalidate).
    Serve {
        /// The `Cache-Status` member.
        status: String,
        /// Whether a background revalidation follows.
        refresh: bool,
    },
    /// `only-if-cached` and nothing usable: 504.
    GatewayTimeout,
    /// Forward uncached with this `Cache-Status` member; `head_update`: a `HEAD` whose
    /// 200 updates or removes the stored response ([`head_update`]).
    Pass {
        /// The `Cache-Status` member.
        status: String,
        /// Whether a 200 updates the stored response.
        head_update: bool,
    },
    /// Call the app to fill the key; `stale`: the stored response is kept for
    /// validation and stale use; `coalesce`: other requests for the key may wait on it.
    Fill {
        /// Whether a stale response is held.
        stale: bool,
        /// Whether waiters may share the result.
        coalesce: bool,
    },
}

fn fwd(fwd: &str, detail: &str) -> String {
    cache_status(
        "fwd",
        &[("fwd", Param::Value(fwd)), ("detail", Param::Value(detail))],
    )
}

/// What to do with a looked-up request given the stored response `stored` (None: none
/// matched) at `now` (RFC 9111 §4.2, §4.2.4, §5.2.1; RFC 5861).
///
/// ```
/// use ziggurat_http::{lookup_step, Directives, FillRequest, LookupStep, Stored};
/// let cc = Directives::new();
/// let req = FillRequest { method: "GET", directives: &cc, has_auth: false };
/// let s = Stored { lifetime: 60.0, swr: 30.0, ..Default::default() };
/// assert_eq!(lookup_step(Some(&s), &req, 10.0),
///            LookupStep::Serve { status: "ziggurat; hit; ttl=50".into(), refresh: false });
/// assert!(matches!(lookup_step(Some(&s), &req, 70.0), LookupStep::Serve { refresh: true, .. }));
/// assert_eq!(lookup_step(Some(&s), &req, 99.0), LookupStep::Fill { stale: true, coalesce: true });
/// ```
pub fn lookup_step(stored: Option<&Stored<'_>>, req: &FillRequest<'_>, now: f64) -> LookupStep {
    let cc = req.directives;
    let only_cached = cc.contains("only-if-cached");
    let Some(s) = stored else {
        if only_cached {
            return LookupStep::GatewayTimeout;
        }
        return miss(req, false);
    };
    let age = s.age(now);
    if usable(s, age, cc) {
        return LookupStep::Serve {
            status: hit_status(s, age, &[]),
            refresh: false,
        };
    }
    let stale_ok = !cc.contains("no-cache") && s.may_serve_stale();
    if s.swr != 0.0 && stale_ok && age - s.lifetime <= s.swr {
        return LookupStep::Serve {
            status: hit_status(
                s,
                age,
                &[("detail", Param::Value("stale-while-revalidate"))],
            ),
            refresh: true,
        };
    }
    if cc.contains("max-stale")
        && stale_ok
        && delta(cc, "max-stale").is_none_or(|m| age - s.lifetime <= m as f64)
    {
        return LookupStep::Serve {
            status: hit_status(s, age, &[("detail", Param::Value("max-stale"))]),
            refresh: false,
        };
    }
    if only_cached {
        return LookupStep::GatewayTimeout;
    }
    miss(req, true)
}

fn miss(req: &FillRequest<'_>, stale: bool) -> LookupStep {
    // Requests whose response will not be stored are not coalesced, and do not mark the
    // URL "do not wait" for the requests that could store it.
    if req.method == "HEAD" {
        return LookupStep::Pass {
            status: fwd(if stale { "stale" } else { "uri-miss" }, "head"),
            head_update: stale,
        };
    }
    if req.directives.contains("no-store") {
        return LookupStep::Pass {
            status: fwd("uri-miss", "request-no-store"),
            head_update: false,
        };
    }
    LookupStep::Fill {
        stale,
        coalesce: !req.has_auth,
    }
}

/// Whether the client's own validators (`If-None-Match`, else `If-Modified-Since`) match
/// the stored response `s`.
pub fn not_modified(s: &Stored<'_>, req: &Headers<'_>) -> bool {
    if let Some(inm) = field(req, b"if-none-match") {
        return etag_matches(inm, s.etag);
    }
    match (
        field(req, b"if-modified-since").and_then(http_date),
        s.last_modified,
    ) {
        (Some(ims), Some(lm)) => http_date(lm).is_some_and(|lm| lm <= ims),
        _ => false,
    }
}

/// A response the cache sends itself: status, header lines, and whether the stored body
/// goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The header lines.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Whether the stored body is sent.
    pub body: bool,
}

/// The stored response `s`, `age` seconds old, as the answer to a request with header
/// lines `req`: `hidden` lines (the targeted fields for this cache) removed, `Age`, then
/// the `Cache-Status` member `status` if given, `Content-Length`; a 304 when the client's
/// validators match a stored 200; no body when `method` is `HEAD`.
///
/// ```
/// use ziggurat_http::{reply, Stored};
/// let s = Stored { status: 200, headers: vec![(b"etag", b"\"a\"")], body: b"hi",
///                  etag: Some(b"\"a\""), ..Default::default() };
/// let r = reply(&s, 3.5, &[], &[(b"if-none-match", b"\"a\"")], "GET", Some("ziggurat; hit"));
/// assert_eq!((r.status, r.body, r.headers.len()), (304, false, 3));
/// assert_eq!(reply(&s, 0.0, &[], &[], "HEAD", None).headers.last().unwrap().1, b"2");
/// ```
pub fn reply(
    s: &Stored<'_>,
    age: f64,
    hidden: &[&[u8]],
    req: &Headers<'_>,
    method: &str,
    status: Option<&str>,
) -> Reply {
    let mut headers: Vec<(Vec<u8>, Vec<u8>)> = s
        .headers
        .iter()
        .filter(|(k, _)| !hidden.contains(k))
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    headers.push((b"age".to_vec(), (age as i64).to_string().into_bytes()));
    if let Some(cs) = status {
        headers.push((b"cache-status".to_vec(), cs.as_bytes().to_vec()));
    }
    if s.status == 200 && not_modified(s, req) {
        headers.retain(|(k, _)| NOT_MODIFIED_KEEP.contains(&&k[..]));
        return Reply {
            status: 304,
            headers,
            body: false,
        };
    }
    if s.status != 204 && s.status != 304 {
        let n = s.body.len().to_string().into_bytes();
        headers.push((b"content-length".to_vec(), n));
    }
    Reply {
        status: s.status,
        headers,
        body: method != "HEAD",
    }
}

/// The `Cache-Status` member to serve `s` stale with when the app failed (raised, timed
/// out, or answered `app_status` 500/502/503/504; 0 when it gave no status), or None when
/// `stale-if-error` (the response's, the option, or the request's) does not allow it.
///
/// ```
/// use ziggurat_http::{stale_if_error, Directives, StoreOptions, Stored};
/// let s = Stored { lifetime: 60.0, sie: 30.0, ..Default::default() };
/// let o = StoreOptions::default();
/// assert_eq!(stale_if_error(&s, &o, &Directives::new(), 503, "stale-if-error", 80.0).unwrap(),
///            "ziggurat; hit; ttl=-20; fwd-status=503; detail=stale-if-error");
/// assert_eq!(stale_if_error(&s, &o, &Directives::new(), 503, "stale-if-error", 95.0), None);
/// ```
pub fn stale_if_error(
    s: &Stored<'_>,
    opts: &StoreOptions<'_>,
    req: &Directives,
    app_status: u16,
    detail: &str,
    now: f64,
) -> Option<String> {
    let window = stale_if_error_window(&s.flags, s.sie, opts, req);
    let age = s.age(now);
    if window == 0.0 || age - s.lifetime > window {
        return None;
    }
    let code = app_status.to_string();
    Some(hit_status(
        s,
        age,
        &[
            ("fwd_status", Param::Value(&code)),
            ("detail", Param::Value(detail)),
        ],
    ))
}

/// RFC 9111 §3.2: `s` with its header lines updated from `headers` of a response that
/// describes it (a 304, or a 200 to a `HEAD`), its freshness recomputed and its age
/// counted from that response; and how long to keep it. `Set-Cookie` is never merged,
/// nor the fields that describe the stored body (`Content-Encoding`, `Content-MD5`,
/// `Content-Range`).
///
/// ```
/// use ziggurat_http::{refreshed, StoreOptions, Stored};
/// let s = Stored { status: 200, headers: vec![(b"cache-control", b"max-age=1"), (b"x", b"old")],
///                  lifetime: 1.0, ..Default::default() };
/// let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"max-age=60"), (b"connection", b"x"),
///                              (b"x", b"new"), (b"set-cookie", b"a=1")];
/// let (fresh, ttl) = refreshed(&StoreOptions::default(), &s, h, 100.0, 100.0);
/// assert_eq!(fresh.headers, [(&b"x"[..], &b"old"[..]), (b"cache-control", b"max-age=60")]);
/// assert_eq!((fresh.lifetime, ttl), (60.0, 120.0)); // kept 60 s more to revalidate
/// ```
pub fn refreshed<'a>(
    opts: &StoreOptions<'_>,
    s: &Stored<'a>,
    headers: &Headers<'a>,
    request_time: f64,
    now: f64,
) -> (Stored<'a>, f64) {
    let listed = connection_listed(headers);
    // Sets of names, looked up once per line, whatever the number of lines on either side.
    let mut unmerged: HashSet<&[u8]> = never_stored(opts).into_iter().collect();
    unmerged.extend(KEPT_ON_UPDATE);
    unmerged.insert(b"set-cookie");
    unmerged.extend(listed.iter().map(Vec::as_slice));
    let update: Vec<(&[u8], &[u8])> = headers
        .iter()
        .filter(|(k, _)| !unmerged.contains(k))
        .copied()
        .collect();
    let updated: HashSet<&[u8]> = update.iter().map(|(k, _)| *k).collect();
    let mut merged: Vec<(&[u8], &[u8])> = s
        .headers
        .iter()
        .filter(|(k, _)| !updated.contains(k))
        .copied()
        .collect();
    merged.extend(update);
    let (cc, target) = response_directives(&merged, opts.targeted_fields);
    let (lifetime, _) = freshness_lifetime(
        &cc,
        &merged,
        s.status,
        now,
        &LifetimeRules {
            heuristic: opts.heuristic,
            default_ttl: opts.default_ttl,
            targeted: target.is_some(),
        },
    );
    let age0 = initial_age(headers, request_time, now);
    let flags = stale_flags(&cc);
    let swr = delta(&cc, "stale-while-revalidate").unwrap_or(0) as f64;
    let sie = delta(&cc, "stale-if-error").unwrap_or(0) as f64;
    let ttl = entry_ttl(opts, lifetime, age0, swr.max(sie), &flags, true);
    let fresh = Stored {
        etag: field(&merged, b"etag"),
        last_modified: field(&merged, b"last-modified"),
        headers: merged,
        request_time,
        response_time: now,
        initial_age: age0,
        lifetime,
        flags,
        swr,
        sie,
        ..s.clone()
    };
    (fresh, ttl)
}

/// What to do with the app's response head.
#[derive(Debug, Clone, PartialEq)]
pub enum HeadStep<'a> {
    /// A 304 validated the stale response: store this merge of it ([`refreshed`]) for
    /// `ttl` under the fill's key and answer with it and this `Cache-Status` member.
    Refreshed {
        /// The updated stored response.
        stored: Stored<'a>,
        /// How long to keep it.
        ttl: f64,
        /// The `Cache-Status` member.
        status: String,
    },
    /// A 304 whose `ETag` differs from the stored one: remove the stored response and
    /// answer with it once, with this `Cache-Status` member.
    Mismatch {
        /// The `Cache-Status` member.
        status: String,
    },
    /// The app failed and `stale-if-error` allows the stale response: answer with it
    /// and this `Cache-Status` member.
    Stale {
        /// The `Cache-Status` member.
        status: String,
    },
    /// Not stored: forward the app's response; why (its `Cache-Status` detail).
    Pass(NotStored),
    /// Buffer the body (at most `max_body` bytes) and store it with this.
    Store(Meta<'a>),
}

/// What to do with the app's response head (`status`, `headers`), for a fill holding
/// the stale response `stale` (sent to the app with its validators when `validated`).
///
/// ```
/// use ziggurat_http::{head_step, Directives, HeadStep, NotStored, StoreOptions, StoreRequest, Stored};
/// let cc = Directives::new();
/// let req = StoreRequest { method: "GET", headers: &[], directives: &cc, has_auth: false,
///                          time: 0.0 };
/// let o = StoreOptions::default();
/// let s = Stored { status: 200, etag: Some(b"\"a\""), lifetime: 1.0, ..Default::default() };
/// let h: &[(&[u8], &[u8])] = &[(b"etag", b"\"b\"")];
/// assert!(matches!(head_step(&o, &req, Some(&s), true, 304, h, 5.0), HeadStep::Mismatch { .. }));
/// assert_eq!(head_step(&o, &req, None, false, 200, &[], 5.0), HeadStep::Pass(NotStored::NoFreshness));
/// ```
pub fn head_step<'a>(
    opts: &StoreOptions<'_>,
    req: &StoreRequest<'_>,
    stale: Option<&Stored<'a>>,
    validated: bool,
    status: u16,
    headers: &Headers<'a>,
    now: f64,
) -> HeadStep<'a> {
    if let Some(s) = stale {
        if status == 304 && validated {
            let new_etag = field(headers, b"etag").map(ws);
            if let (Some(new), Some(old)) = (new_etag, s.etag.map(ws)) {
                if new != old {
                    let status = stored_fwd("validator-mismatch");
                    return HeadStep::Mismatch { status };
                }
            }
            let (fresh, ttl) = refreshed(opts, s, headers, req.time, now);
            let status = stored_fwd("revalidated");
            return HeadStep::Refreshed {
                stored: fresh,
                ttl,
                status,
            };
        }
        if ERROR_STATUSES.contains(&status) {
            if let Some(cs) = stale_if_error(s, opts, req.directives, status, "stale-if-error", now)
            {
                return HeadStep::Stale { status: cs };
            }
        }
    }
    match decide(opts, status, headers, req, now) {
        Ok(m) => HeadStep::Store(m),
        Err(why) => HeadStep::Pass(why),
    }
}

fn stored_fwd(detail: &str) -> String {
    cache_status(
        "fwd",
        &[
            ("fwd", Param::Value("stale")),
            ("fwd_status", Param::Value("304")),
            ("detail", Param::Value(detail)),
        ],
    )
}

/// What a 200 to a forwarded `HEAD` does to the stored `GET` response (RFC 9111 §4.3.5).
#[derive(Debug, Clone, PartialEq)]
pub enum HeadUpdate<'a> {
    /// Nothing (an answer for this client alone speaks for no other).
    Ignore,
    /// Remove it: the `HEAD` describes another representation, or forbids storing.
    Invalidate,
    /// Store this update of it for `ttl` ([`refreshed`]).
    Refresh(Box<Stored<'a>>, f64),
}

/// What a 200 (`headers`) to a `HEAD` forwarded at `request_time` does to the stored
/// response `s`: it is updated when the `HEAD` describes the same representation (same
/// `ETag`, `Last-Modified` and, if sent, `Content-Length`), else removed.
///
/// ```
/// use ziggurat_http::{head_update, HeadUpdate, StoreOptions, Stored};
/// let s = Stored { status: 200, body: b"abc", etag: Some(b"\"a\""), ..Default::default() };
/// let o = StoreOptions::default();
/// let same: &[(&[u8], &[u8])] = &[(b"etag", b"\"a\""), (b"content-length", b"3")];
/// assert!(matches!(head_update(&o, &s, same, false, 0.0, 1.0), HeadUpdate::Refresh(..)));
/// let other: &[(&[u8], &[u8])] = &[(b"etag", b"\"a\""), (b"content-length", b"4")];
/// assert_eq!(head_update(&o, &s, other, false, 0.0, 1.0), HeadUpdate::Invalidate);
/// ```
pub fn head_update<'a>(
    opts: &StoreOptions<'_>,
    s: &Stored<'a>,
    headers: &Headers<'a>,
    has_auth: bool,
    request_time: f64,
    now: f64,
) -> HeadUpdate<'a> {
    let (cc, _) = response_directives(headers, opts.targeted_fields);
    if has_auth && !auth_shared(&cc, opts.store_auth_must_revalidate) {
        return HeadUpdate::Ignore;
    }
    if s.status != 200 || cc.contains("no-store") || cc.contains("private") || !same(s, headers) {
        return HeadUpdate::Invalidate;
    }
    let (fresh, ttl) = refreshed(opts, s, headers, request_time, now);
    HeadUpdate::Refresh(Box::new(fresh), ttl)
}

/// Whether a response's validators and length are the stored response's (a validator
/// the stored response has and the response lacks counts as different).
fn same(s: &Stored<'_>, headers: &Headers<'_>) -> bool {
    for (name, mine) in [(&b"etag"[..], s.etag), (b"last-modified", s.last_modified)] {
        let theirs = field(headers, name).map(ws);
        if theirs != mine.map(ws) {
            return false;
        }
    }
    field(headers, b"content-length").is_none_or(|cl| ws(cl) == s.body.len().to_string().as_bytes())
}
