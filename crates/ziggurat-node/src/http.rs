//! The HTTP response cache (ziggurat-http) for `ziggurat/http`: conversions only.
//! Header lines cross as flat arrays of strings (name, value, name, value…) whose
//! characters are the bytes (Latin-1, as Node.js's HTTP parser gives them); keys cross
//! as strings when they are ASCII (their UTF-8 is then their bytes) and as Buffers
//! otherwise; a stored response crosses as its value bytes.
//!
//! - `HttpRules`: one middleware's settings, read once, and what it asks of a request
//!   (`HttpRequest`: its classification, the stored response that answers it, a purge).
//! - `http_exchange`: one request's fill.
//! - the functions below: the stored format, keys, the writes of a fill, what leaves.

use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;
use ziggurat_http::{
    decode, ClassifyOptions, Entry, Purged, Sent, StoreOptions, Write, DEFAULT_ALLOWED_HOSTS,
    DEFAULT_BYPASS_HEADERS, DEFAULT_HIT_FOR_MISS, DEFAULT_MAX_BODY, DEFAULT_PURGE_CLIENTS,
    DEFAULT_REVALIDATE_KEEP, DEFAULT_TAG_HEADER, DEFAULT_TARGETED_FIELDS, DEFAULT_TARGETED_FORWARD,
    MARKER_TTL, MAX_HTTP_TTL, MIN_PURGE_TOKEN, SURROGATE_CAPABILITY, SURROGATE_FIELD,
};

/// Owned header lines.
pub(crate) type Lines = Vec<(Vec<u8>, Vec<u8>)>;

/// A key as JavaScript's cache takes it.
pub(crate) type Key = Either<String, Buffer>;

/// The bytes a string of Latin-1 characters stands for (a character past U+00FF, which
/// no parser gives, stands for `?`).
pub(crate) fn latin1(s: &str) -> Vec<u8> {
    if s.is_ascii() {
        return s.as_bytes().to_vec();
    }
    s.chars()
        .map(|c| u8::try_from(u32::from(c)).unwrap_or(b'?'))
        .collect()
}

/// Bytes as a string of Latin-1 characters.
pub(crate) fn text(b: &[u8]) -> String {
    b.iter().map(|&c| char::from(c)).collect()
}

/// A flat array of names and values as lines, names lower-cased.
pub(crate) fn lines(raw: &[String]) -> Lines {
    raw.chunks_exact(2)
        .map(|p| (latin1(&p[0]).to_ascii_lowercase(), latin1(&p[1])))
        .collect()
}

/// Lines borrowed, as the crate takes them.
pub(crate) fn slices(l: &Lines) -> Vec<(&[u8], &[u8])> {
    l.iter().map(|(k, v)| (&k[..], &v[..])).collect()
}

/// Lines as a flat array for `writeHead`.
pub(crate) fn flat(l: &[(Vec<u8>, Vec<u8>)]) -> Vec<String> {
    l.iter().flat_map(|(k, v)| [text(k), text(v)]).collect()
}

/// A key for the cache.
pub(crate) fn key(b: Vec<u8>) -> Key {
    if b.is_ascii() {
        // ASCII: the string's UTF-8 is these bytes.
        Either::A(String::from_utf8(b).unwrap_or_default())
    } else {
        Either::B(b.into())
    }
}

/// The bytes of a key.
pub(crate) fn key_of(k: &Key) -> Vec<u8> {
    match k {
        Either::A(s) => s.as_bytes().to_vec(),
        Either::B(b) => b.to_vec(),
    }
}

/// The settings of one middleware, as `lib/http/options.cjs` checked them.
#[napi(object)]
pub struct HttpSettings {
    pub allowed_hosts: Vec<String>,
    pub max_body: f64,
    pub request_directives: bool,
    pub tag_header: String,
    pub cache_status: bool,
    pub default_ttl: Option<f64>,
    pub heuristic: bool,
    pub store_set_cookie: bool,
    pub store_auth_must_revalidate: bool,
    pub bypass_headers: Vec<String>,
    pub bypass_cookies: Vec<String>,
    pub key_headers: Vec<String>,
    pub purge_token: Option<String>,
    pub targeted_fields: Vec<String>,
    pub targeted_forward: Vec<String>,
    pub stale_if_error: Option<f64>,
    pub revalidate_keep: f64,
    pub surrogate_control: bool,
}

/// One middleware's settings, read once.
#[napi]
pub struct HttpRules {
    pub(crate) targeted: Vec<Vec<u8>>,
    pub(crate) hidden: Vec<Vec<u8>>,
    pub(crate) strip: Vec<Vec<u8>>,
    pub(crate) heuristic: bool,
    pub(crate) default_ttl: Option<f64>,
    pub(crate) stale_if_error: f64,
    pub(crate) revalidate_keep: f64,
    pub(crate) tag_header: Vec<u8>,
    pub(crate) store_set_cookie: bool,
    pub(crate) max_body: u64,
    pub(crate) request_directives: bool,
    pub(crate) bypass_headers: Vec<Vec<u8>>,
    pub(crate) bypass_cookies: Vec<Vec<u8>>,
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) store_auth_must_revalidate: bool,
    pub(crate) key_headers: Vec<String>,
    pub(crate) cache_status: bool,
}

fn bytes_of(v: &[String]) -> Vec<Vec<u8>> {
    v.iter().map(|s| latin1(s).to_ascii_lowercase()).collect()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|b| &b[..]).collect()
}

impl HttpRules {
    pub(crate) fn classify_options<R>(&self, f: impl FnOnce(&ClassifyOptions<'_>) -> R) -> R {
        let bh = refs(&self.bypass_headers);
        let bc = refs(&self.bypass_cookies);
        let ah: Vec<&str> = self.allowed_hosts.iter().map(String::as_str).collect();
        f(&ClassifyOptions {
            bypass_headers: &bh,
            bypass_cookies: &bc,
            request_directives: self.request_directives,
            purge: self.token.is_some(),
            allowed_hosts: &ah,
        })
    }

    pub(crate) fn store_options<R>(&self, f: impl FnOnce(&StoreOptions<'_>) -> R) -> R {
        let targets = refs(&self.targeted);
        let keys: Vec<&str> = self.key_headers.iter().map(String::as_str).collect();
        f(&StoreOptions {
            targeted_fields: &targets,
            heuristic: self.heuristic,
            default_ttl: self.default_ttl,
            stale_if_error: self.stale_if_error,
            revalidate_keep: self.revalidate_keep,
            tag_header: &self.tag_header,
            store_set_cookie: self.store_set_cookie,
            max_body: self.max_body,
            max_tags: ziggurat_core::MAX_TAGS,
            request_directives: self.request_directives,
            store_auth_must_revalidate: self.store_auth_must_revalidate,
            key_headers: &keys,
        })
    }

    pub(crate) fn status<'a>(&self, cs: &'a str) -> Option<&'a str> {
        self.cache_status.then_some(cs)
    }
}

#[napi]
impl HttpRules {
    /// The rules of the checked settings `s`.
    #[napi(constructor)]
    pub fn new(s: HttpSettings) -> Self {
        let mut targeted = bytes_of(&s.targeted_fields);
        if s.surrogate_control && !targeted.iter().any(|t| t == SURROGATE_FIELD.as_bytes()) {
            targeted.push(SURROGATE_FIELD.as_bytes().to_vec());
        }
        let forward = bytes_of(&s.targeted_forward);
        let hidden: Vec<Vec<u8>> = targeted
            .iter()
            .filter(|t| !forward.contains(t))
            .cloned()
            .collect();
        let tag_header = latin1(&s.tag_header).to_ascii_lowercase();
        let mut strip = hidden.clone();
        strip.push(tag_header.clone());
        HttpRules {
            targeted,
            hidden,
            strip,
            heuristic: s.heuristic,
            default_ttl: s.default_ttl,
            stale_if_error: s.stale_if_error.unwrap_or(0.0),
            revalidate_keep: s.revalidate_keep,
            tag_header,
            store_set_cookie: s.store_set_cookie,
            max_body: s.max_body as u64,
            request_directives: s.request_directives,
            bypass_headers: bytes_of(&s.bypass_headers),
            bypass_cookies: s.bypass_cookies.iter().map(|c| latin1(c)).collect(),
            allowed_hosts: s.allowed_hosts,
            token: s.purge_token.map(|t| t.into_bytes()),
            store_auth_must_revalidate: s.store_auth_must_revalidate,
            key_headers: s.key_headers,
            cache_status: s.cache_status,
        }
    }

    /// The request fields that keep a request off the plain-hit path.
    #[napi]
    pub fn blockers(&self) -> Vec<String> {
        self.classify_options(ziggurat_http::plain_hit_blockers)
            .iter()
            .map(|b| text(b))
            .collect()
    }

    /// The key prefix of the URLs on the Host `host_raw` for `scheme` (the key is the
    /// prefix and the raw target), or null for a host that is not allowed.
    #[napi]
    pub fn prefix(&self, scheme: String, host_raw: String) -> Option<String> {
        let host = ziggurat_http::normalise_host(&latin1(&host_raw))?;
        let allowed: Vec<&str> = self.allowed_hosts.iter().map(String::as_str).collect();
        if !ziggurat_http::host_allowed(&host, &allowed) {
            return None;
        }
        String::from_utf8(ziggurat_http::base_key(&scheme, &host, b"")).ok()
    }

    /// The lines that never leave: the tag header and the targeted fields for this cache.
    #[napi(getter)]
    pub fn strip(&self) -> Vec<String> {
        self.strip.iter().map(|b| text(b)).collect()
    }

    /// `headers` as the client gets them (`how`: 0 passed, 1 streamed, 2 just stored,
    /// with `status`, `initial_age` and `body_len`), with the `Cache-Status` member `cs`.
    #[napi]
    pub fn client_headers(
        &self,
        headers: Vec<String>,
        how: u32,
        cs: Option<String>,
        status: Option<u32>,
        initial_age: Option<f64>,
        body_len: Option<u32>,
    ) -> Vec<String> {
        let l = lines(&headers);
        let sent = match how {
            0 => Sent::Passed,
            1 => Sent::Streamed,
            _ => Sent::Stored {
                status: status.unwrap_or(200) as u16,
                initial_age: initial_age.unwrap_or(0.0),
                body_len: body_len.unwrap_or(0) as usize,
            },
        };
        let strip = refs(&self.strip);
        let cs = cs.as_deref().and_then(|c| self.status(c));
        flat(&ziggurat_http::client_headers(
            &slices(&l),
            &strip,
            sent,
            cs,
        ))
    }

    /// The answer to `only-if-cached` with nothing usable stored.
    #[napi]
    pub fn gateway_timeout(&self) -> Answer {
        let (status, headers, body) = ziggurat_http::gateway_timeout(self.cache_status);
        Answer {
            status: status.into(),
            headers: flat(&headers),
            body: body.to_vec().into(),
        }
    }

    /// The answer to a purge: `what` 0 forbidden, 1 bad host, 2 tags, 3 URL (`found`),
    /// 4 failed.
    #[napi]
    pub fn purge_answer(&self, what: u32, found: bool) -> Answer {
        let p = match what {
            0 => Purged::Forbidden,
            1 => Purged::BadHost,
            2 => Purged::Tags,
            3 => Purged::Url(found),
            _ => Purged::Failed,
        };
        let (status, headers, body) = ziggurat_http::purge_answer(p, self.cache_status);
        Answer {
            status: status.into(),
            headers: flat(&headers),
            body: body.to_vec().into(),
        }
    }

    /// `s` (the value bytes of a stored response) as a plain hit at `now`, or null
    /// once it is not fresh (or the bytes hold no response).
    #[napi]
    pub fn fresh_hit(&self, value: Buffer, now: f64) -> Option<FreshHit> {
        let Ok(Entry::Response(s)) = decode(&value) else {
            return None;
        };
        let hidden = refs(&self.hidden);
        let h = ziggurat_http::fresh_hit(&s, now, &hidden, self.cache_status)?;
        let start = s.body.as_ptr() as usize - value.as_ptr() as usize;
        Some(FreshHit {
            status: s.status.into(),
            headers: flat(&h.headers),
            since: h.since,
            until: h.until,
            body_start: start as u32,
            body_end: (start + s.body.len()) as u32,
            varies: !s.vary.is_empty(),
        })
    }
}

/// A response the cache sends itself.
#[napi(object)]
pub struct Answer {
    pub status: u32,
    pub headers: Vec<String>,
    pub body: Buffer,
}

/// A stored response as a plain hit sends it during one second of its age: the body is
/// `value.subarray(bodyStart, bodyEnd)`.
#[napi(object)]
pub struct FreshHit {
    pub status: u32,
    pub headers: Vec<String>,
    pub since: f64,
    pub until: f64,
    pub body_start: u32,
    pub body_end: u32,
    pub varies: bool,
}

/// One write of a fill.
#[napi(object)]
pub struct HttpWrite {
    pub key: Key,
    pub value: Buffer,
    pub ttl: f64,
    pub tags: Vec<String>,
}

pub(crate) fn writes(w: Vec<Write>) -> Vec<HttpWrite> {
    w.into_iter()
        .map(|w| HttpWrite {
            key: key(w.key),
            value: w.value.into(),
            ttl: w.ttl,
            tags: w.tags,
        })
        .collect()
}

/// What the record or response under a URL's key says of a request: `kind` 0 the
/// response is the value itself, 1 read the variant under `key`, 2 nothing.
#[napi(object)]
pub struct HttpFound {
    pub kind: u32,
    pub key: Option<Key>,
}

/// The keys a purge of the URL keyed `base` deletes, in order.
#[napi]
pub fn http_purge_keys(base: Key) -> Vec<Key> {
    ziggurat_http::purge_keys(&key_of(&base))
        .into_iter()
        .map(key)
        .collect()
}

/// The key whose lease coalesces the fills of `k`.
#[napi]
pub fn http_lock_key(k: Key) -> Key {
    key(ziggurat_http::lock_key(&key_of(&k)))
}

/// The key whose lease lets one background refresh of `k` run per host.
#[napi]
pub fn http_refresh_lock_key(k: Key) -> Key {
    key(ziggurat_http::refresh_lock_key(&key_of(&k)))
}

/// A `Cache-Status` member for a response forwarded to the app: `fwd`, then
/// `fwd-status` when given, then `detail`.
#[napi]
pub fn http_fwd_status(fwd: String, detail: String, fwd_status: Option<u32>) -> String {
    use ziggurat_http::{cache_status, Param};
    let code = fwd_status.map(|s| s.to_string());
    let mut params = vec![("fwd", Param::Value(&fwd))];
    if let Some(c) = &code {
        params.push(("fwd_status", Param::Value(c)));
    }
    params.push(("detail", Param::Value(&detail)));
    cache_status("fwd", &params)
}

/// The key only a purge of the URL keyed `base` moves.
#[napi]
pub fn http_purge_mark(base: Key) -> Key {
    key(ziggurat_http::purge_mark(&key_of(&base)))
}

/// The key of an absolute URL, or null when it is not an http(s) URL with a valid host.
#[napi]
pub fn http_url_key(url: String) -> Option<Key> {
    ziggurat_http::url_key(&url).map(key)
}

/// The keys an unsafe method's success invalidates (RFC 9111 §4.4), given the
/// response's lines; none when the Host is not one a key can be made of.
#[napi]
pub fn http_invalidated_keys(
    scheme: String,
    host_raw: Option<String>,
    target: String,
    headers: Vec<String>,
) -> Vec<Key> {
    let Some(host) = host_raw.and_then(|h| ziggurat_http::normalise_host(&latin1(&h))) else {
        return Vec::new();
    };
    let l = lines(&headers);
    ziggurat_http::invalidated_keys(&scheme, &host, &latin1(&target), &slices(&l))
        .into_iter()
        .map(key)
        .collect()
}

/// Whether a target's query overrides the method (such a request is never a plain hit).
#[napi]
pub fn http_overrides_method(target: String) -> bool {
    ziggurat_http::overrides_method(&latin1(&target))
}

/// The settings' defaults and limits, read once by `lib/http/options.cjs`.
#[napi(object)]
pub struct HttpDefaults {
    /// `allowedHosts`.
    pub allowed_hosts: Vec<String>,
    /// `bypassHeaders`.
    pub bypass_headers: Vec<String>,
    /// `purgeClients`.
    pub purge_clients: Vec<String>,
    /// `targetedFields`.
    pub targeted_fields: Vec<String>,
    /// `targetedForward`.
    pub targeted_forward: Vec<String>,
    /// `maxBody`, bytes.
    pub max_body: f64,
    /// `tagHeader`.
    pub tag_header: String,
    /// `hitForMiss`, seconds.
    pub hit_for_miss: f64,
    /// `revalidateKeep`, seconds.
    pub revalidate_keep: f64,
    /// Seconds a fill's marker lives.
    pub marker_ttl: f64,
    /// App calls one process lets run on past `appTimeout` at once.
    pub max_abandoned: u32,
    /// Seconds an abandoned call's URL is held for stale answers at most.
    pub abandoned_hold: f64,
    /// The longest a response is stored, seconds.
    pub max_ttl: f64,
    /// The shortest purge token, characters.
    pub min_purge_token: u32,
    /// This cache's device token in `Surrogate-Capability`.
    pub surrogate_capability: String,
    /// The header a `PURGE` carries its token in (never passed to the app, nor its `_` spelling).
    pub purge_token_header: String,
}

/// The defaults table.
#[napi]
pub fn http_defaults() -> HttpDefaults {
    let v = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect();
    HttpDefaults {
        allowed_hosts: v(&DEFAULT_ALLOWED_HOSTS),
        bypass_headers: v(&DEFAULT_BYPASS_HEADERS),
        purge_clients: v(&DEFAULT_PURGE_CLIENTS),
        targeted_fields: v(&DEFAULT_TARGETED_FIELDS),
        targeted_forward: v(&DEFAULT_TARGETED_FORWARD),
        max_body: DEFAULT_MAX_BODY as f64,
        tag_header: DEFAULT_TAG_HEADER.to_owned(),
        hit_for_miss: DEFAULT_HIT_FOR_MISS,
        revalidate_keep: DEFAULT_REVALIDATE_KEEP,
        marker_ttl: MARKER_TTL,
        max_abandoned: ziggurat_http::MAX_ABANDONED as u32,
        abandoned_hold: ziggurat_http::ABANDONED_HOLD,
        max_ttl: MAX_HTTP_TTL,
        min_purge_token: MIN_PURGE_TOKEN as u32,
        surrogate_capability: SURROGATE_CAPABILITY.to_owned(),
        purge_token_header: text(ziggurat_http::PURGE_TOKEN),
    }
}

/// Why a setting's text value cannot hold (`setting`: 0 tag header, 1 purge token,
/// 2 key header, 3 targeted field), or null: 'header', 'short', 'underscore',
/// 'cache-control'.
#[napi]
pub fn http_setting_problem(setting: u32, value: String) -> Option<String> {
    use ziggurat_http::{Setting, SettingProblem};
    let s = match setting {
        0 => Setting::TagHeader,
        1 => Setting::PurgeToken,
        2 => Setting::KeyHeader,
        _ => Setting::Targeted,
    };
    ziggurat_http::problem(s, &value).map(|p| {
        match p {
            SettingProblem::NotHeaderName => "header",
            SettingProblem::ShortToken => "short",
            SettingProblem::Underscore => "underscore",
            SettingProblem::CacheControl => "cache-control",
            SettingProblem::Seconds => "seconds",
        }
        .to_owned()
    })
}
