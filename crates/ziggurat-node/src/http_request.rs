//! `HttpRequest`: one request as the middleware's rules see it: its classification,
//! the stored response that answers it, its purge, and its fill's `HttpExchange`.

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use ziggurat_http::{decode, Action, Entry, ExchangeRequest, Found, Purge};

use crate::http::{key, key_of, latin1, lines, slices, HttpFound, HttpRules, Key, Lines};
use crate::http_exchange::HttpExchange;

/// A request classified by a middleware's rules.
#[napi]
pub struct HttpRequest {
    method: String,
    scheme: String,
    host_raw: Option<Vec<u8>>,
    target: Vec<u8>,
    headers: Lines,
    action: Action,
    /// The request's values of the `Vary` fields of the record last found.
    values: Vec<Option<Vec<u8>>>,
}

/// What a purge asks: `kind` 0 forbidden, 1 bad host, 2 the `tags`, 3 the URL keyed `key`.
#[napi(object)]
pub struct PurgeAsk {
    pub kind: u32,
    pub tags: Vec<String>,
    pub key: Option<Key>,
}

#[napi]
impl HttpRequest {
    /// Classifies a request (`headers` a flat array, as `req.rawHeaders`).
    #[napi(constructor)]
    pub fn new(
        rules: &HttpRules,
        method: String,
        scheme: String,
        host_raw: Option<String>,
        target: String,
        headers: Vec<String>,
    ) -> Self {
        let headers = lines(&headers);
        let host_raw = host_raw.map(|h| latin1(&h));
        let target = latin1(&target);
        let action = rules.classify_options(|o| {
            ziggurat_http::classify(
                o,
                &method,
                &scheme,
                host_raw.as_deref(),
                &target,
                &slices(&headers),
            )
        });
        HttpRequest {
            method,
            scheme,
            host_raw,
            target,
            headers,
            action,
            values: Vec::new(),
        }
    }

    /// 0 look it up, 1 a purge, 2 pass it to the app.
    #[napi(getter)]
    pub fn kind(&self) -> u32 {
        match self.action {
            Action::Lookup(_) => 0,
            Action::Purge => 1,
            Action::Pass { .. } => 2,
        }
    }

    /// The `Cache-Status` member of a request passed.
    #[napi(getter)]
    pub fn status(&self) -> Option<String> {
        match &self.action {
            Action::Pass { status, .. } => Some(status.clone()),
            _ => None,
        }
    }

    /// Whether a passed request's success invalidates its URL (an unsafe method).
    #[napi(getter)]
    pub fn invalidates(&self) -> bool {
        matches!(
            self.action,
            Action::Pass {
                invalidates: true,
                ..
            }
        )
    }

    /// The URL's key of a request looked up.
    #[napi(getter)]
    pub fn base(&self) -> Option<Key> {
        match &self.action {
            Action::Lookup(l) => Some(key(l.base.clone())),
            _ => None,
        }
    }

    /// Whether a fresh stored response answers it as a plain hit (it carries no
    /// directives and no validators).
    #[napi(getter)]
    pub fn plain(&self) -> bool {
        match &self.action {
            Action::Lookup(l) => l.directives.is_empty() && !l.conditional,
            _ => false,
        }
    }

    /// What the value under the URL's key says of this request (see `HttpFound`).
    #[napi]
    pub fn find(&mut self, value: Option<Buffer>) -> HttpFound {
        let Action::Lookup(l) = &self.action else {
            return HttpFound { kind: 2, key: None };
        };
        match ziggurat_http::find(&l.base, value.as_deref(), &slices(&self.headers)) {
            Found::Response(_) => HttpFound { kind: 0, key: None },
            Found::Variant { key: k, values } => {
                self.values = values;
                HttpFound {
                    kind: 1,
                    key: Some(key(k)),
                }
            }
            Found::Miss => HttpFound { kind: 2, key: None },
        }
    }

    /// Whether the variant `value` read under the key `find` gave answers this request.
    #[napi]
    pub fn answers(&self, value: Buffer) -> bool {
        matches!(decode(&value), Ok(Entry::Response(s)) if ziggurat_http::answers(&s, &self.values))
    }

    /// What this `PURGE` asks, sent from an address `client_allowed` or not.
    #[napi]
    pub fn purge(&self, rules: &HttpRules, client_allowed: bool) -> PurgeAsk {
        let token = rules.token.as_deref().unwrap_or(b"");
        let p = ziggurat_http::purge_request(
            token,
            &rules.tag_header,
            client_allowed,
            &self.scheme,
            self.host_raw.as_deref(),
            &self.target,
            &slices(&self.headers),
        );
        match p {
            Purge::Forbidden => PurgeAsk {
                kind: 0,
                tags: Vec::new(),
                key: None,
            },
            Purge::BadHost => PurgeAsk {
                kind: 1,
                tags: Vec::new(),
                key: None,
            },
            Purge::Tags(tags) => PurgeAsk {
                kind: 2,
                tags,
                key: None,
            },
            Purge::Url(base) => PurgeAsk {
                kind: 3,
                tags: Vec::new(),
                key: Some(key(base)),
            },
        }
    }

    /// The fill of this request, its response living under `k`, at `now`.
    #[napi]
    pub fn exchange(&self, k: Key, now: f64) -> Option<HttpExchange> {
        let Action::Lookup(l) = &self.action else {
            return None;
        };
        let req = ExchangeRequest {
            method: &self.method,
            headers: &slices(&self.headers),
            directives: l.directives.clone(),
            has_auth: l.has_auth,
            base: l.base.clone(),
            key: key_of(&k),
            now,
        };
        Some(HttpExchange::of(&req))
    }
}
