//! `HttpExchange`: the crate's `Exchange` (one request's fill) for
//! `lib/http/fill.cjs`, and what it stores: the response's facts are kept here between
//! its head and the end of its body, so that they never cross into JavaScript.

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use ziggurat_http::{
    decode, Entry, Exchange, ExchangeRequest, HeadStep, HeadUpdate, LookupStep, Marker, Meta,
    Saved, Stored, PURGE_TOKEN,
};

use crate::http::{flat, key, key_of, lines, slices, writes, HttpRules, HttpWrite, Key, Lines};

/// A stored response's facts from the app's head, owned until its body ends.
struct Pending {
    status: u16,
    headers: Lines,
    lifetime: f64,
    initial_age: f64,
    swr: f64,
    sie: f64,
    flags: Vec<&'static str>,
    etag: Option<Vec<u8>>,
    last_modified: Option<Vec<u8>>,
    vary: Vec<String>,
    vary_values: Vec<Option<Vec<u8>>>,
    tags: Vec<String>,
    ttl: f64,
    request_time: f64,
}

impl Pending {
    fn of(m: &Meta<'_>, status: u16, request_time: f64) -> Self {
        Pending {
            status,
            headers: m
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
            lifetime: m.lifetime,
            initial_age: m.initial_age,
            swr: m.swr,
            sie: m.sie,
            flags: m.flags.clone(),
            etag: m.etag.map(<[u8]>::to_vec),
            last_modified: m.last_modified.map(<[u8]>::to_vec),
            vary: m.vary.clone(),
            vary_values: m.vary_values.clone(),
            tags: m.tags.clone(),
            ttl: m.ttl,
            request_time,
        }
    }

    fn stored<'a>(&'a self, body: &'a [u8], now: f64) -> Stored<'a> {
        Stored {
            status: self.status,
            headers: slices(&self.headers),
            body,
            request_time: self.request_time,
            response_time: now,
            initial_age: self.initial_age,
            lifetime: self.lifetime,
            swr: self.swr,
            sie: self.sie,
            flags: self.flags.clone(),
            etag: self.etag.as_deref(),
            last_modified: self.last_modified.as_deref(),
            vary: self.vary.iter().map(String::as_str).collect(),
            vary_values: self.vary_values.iter().map(Option::as_deref).collect(),
            tags: self.tags.iter().map(String::as_str).collect(),
        }
    }
}

/// One request's fill.
#[napi]
pub struct HttpExchange {
    x: Exchange,
    pending: Option<Pending>,
}

/// The lookup step: `kind` 0 serve (`status`, `refresh`), 1 answer 504, 2 pass
/// (`status`, `headUpdate`), 3 fill (`stale`, `coalesce`).
#[napi(object)]
pub struct LookupOut {
    pub kind: u32,
    pub status: Option<String>,
    pub refresh: bool,
    pub head_update: bool,
    pub coalesce: bool,
}

/// A stored response as this request's answer; its body (when sent) is
/// `value.subarray(bodyStart, bodyEnd)`.
#[napi(object)]
pub struct ReplyOut {
    pub status: u32,
    pub headers: Vec<String>,
    pub body: bool,
    pub body_start: u32,
    pub body_end: u32,
}

/// The step on the app's head: `kind` 0 refreshed (write `value` for `ttl` with
/// `tags` under the fill's key, answer it with `status`), 1 validators mismatch (delete
/// the key, answer the held response with `status`), 2 stale (answer the held response
/// with `status`), 3 pass (`detail`), 4 store (buffer up to `maxBody` bytes).
#[napi(object)]
pub struct HeadOut {
    pub kind: u32,
    pub status: Option<String>,
    pub detail: Option<String>,
    pub value: Option<Buffer>,
    pub ttl: f64,
    pub tags: Vec<String>,
}

/// A response buffered to its end: its value bytes, the writes that store it in
/// order, its initial age.
#[napi(object)]
pub struct Completed {
    pub value: Buffer,
    pub writes: Vec<HttpWrite>,
    pub initial_age: f64,
}

/// What a 200 to a forwarded `HEAD` does: `kind` 0 nothing, 1 delete the key, 2 write
/// `value` for `ttl` with `tags`.
#[napi(object)]
pub struct HeadUpdateOut {
    pub kind: u32,
    pub value: Option<Buffer>,
    pub ttl: f64,
    pub tags: Vec<String>,
}

fn stored_of(value: &[u8]) -> Option<Stored<'_>> {
    match decode(value) {
        Ok(Entry::Response(s)) => Some(s),
        _ => None,
    }
}

fn tags_of(s: &Stored<'_>) -> Vec<String> {
    s.tags.iter().map(|t| (*t).to_owned()).collect()
}

impl HttpExchange {
    pub(crate) fn of(req: &ExchangeRequest<'_>) -> Self {
        HttpExchange {
            x: Exchange::new(req),
            pending: None,
        }
    }
}

#[napi]
impl HttpExchange {
    /// What to do given the stored value found (null: none matched), at `now`.
    #[napi]
    pub fn lookup(&mut self, value: Option<Buffer>, now: f64) -> LookupOut {
        let out = |kind, status, refresh, head_update, coalesce| LookupOut {
            kind,
            status,
            refresh,
            head_update,
            coalesce,
        };
        match self.x.lookup(value.as_deref(), now) {
            LookupStep::Serve { status, refresh } => out(0, Some(status), refresh, false, false),
            LookupStep::GatewayTimeout => out(1, None, false, false, false),
            LookupStep::Pass {
                status,
                head_update,
            } => out(2, Some(status), false, head_update, false),
            LookupStep::Fill { coalesce, .. } => out(3, None, false, false, coalesce),
        }
    }

    /// The stored `value` as this request's answer at `now`, with the `Cache-Status`
    /// member `status` when the rules send one.
    #[napi]
    pub fn reply(
        &self,
        rules: &HttpRules,
        value: Buffer,
        now: f64,
        status: Option<String>,
    ) -> Option<ReplyOut> {
        let s = stored_of(&value)?;
        let hidden: Vec<&[u8]> = rules.hidden.iter().map(|h| &h[..]).collect();
        let cs = status.as_deref().and_then(|c| rules.status(c));
        let r = self.x.reply(&s, s.age(now), &hidden, cs);
        let start = s.body.as_ptr() as usize - value.as_ptr() as usize;
        Some(ReplyOut {
            status: r.status.into(),
            headers: flat(&r.headers),
            body: r.body,
            body_start: start as u32,
            body_end: (start + s.body.len()) as u32,
        })
    }

    /// The `Cache-Status` member to answer with the stored `value` found after waiting
    /// on another fill, or null: go to the app.
    #[napi]
    pub fn collapsed(&self, value: Buffer, now: f64) -> Option<String> {
        self.x.collapsed(&value, now)
    }

    /// As `collapsed`, for a response found inside this fill's lease.
    #[napi]
    pub fn recheck(&mut self, value: Buffer, now: f64) -> Option<String> {
        self.x.recheck(&value, now)
    }

    /// Seconds to wait for the app's head before serving stale, or null: wait.
    #[napi]
    pub fn app_timeout(&self, limit: Option<f64>) -> Option<f64> {
        self.x.app_timeout(limit)
    }

    /// The request lines for the app (a flat array).
    #[napi]
    pub fn upstream_headers(&mut self, capability: Option<String>) -> Vec<String> {
        let drop: [&[u8]; 2] = [PURGE_TOKEN, b"purge_token"];
        flat(
            &self
                .x
                .upstream_headers(&drop, capability.as_deref().map(str::as_bytes)),
        )
    }

    /// Whether `head` needs the stored value read again (`current`).
    #[napi]
    pub fn needs_current(&self, status: u32) -> bool {
        self.x.needs_current(status as u16)
    }

    /// The step on the app's head (see `HeadOut`).
    #[napi]
    pub fn head(
        &mut self,
        rules: &HttpRules,
        current: Option<Buffer>,
        status: u32,
        headers: Vec<String>,
        request_time: f64,
        now: f64,
    ) -> HeadOut {
        let l = lines(&headers);
        let h = slices(&l);
        let code = status as u16;
        let mut pending = None;
        let out = rules.store_options(|o| {
            let none = |kind, status: Option<String>, detail: Option<String>| HeadOut {
                kind,
                status,
                detail,
                value: None,
                ttl: 0.0,
                tags: Vec::new(),
            };
            match self
                .x
                .head(o, current.as_deref(), code, &h, request_time, now)
            {
                HeadStep::Refreshed {
                    stored,
                    ttl,
                    status,
                } => HeadOut {
                    kind: 0,
                    tags: tags_of(&stored),
                    value: Some(Entry::Response(stored).encode().into()),
                    status: Some(status),
                    detail: None,
                    ttl,
                },
                HeadStep::Mismatch { status } => none(1, Some(status), None),
                HeadStep::Stale { status } => none(2, Some(status), None),
                HeadStep::Pass(why) => none(3, None, Some(why.as_str().to_owned())),
                HeadStep::Store(m) => {
                    pending = Some(Pending::of(&m, code, request_time));
                    none(4, None, None)
                }
            }
        });
        if out.kind == 0 {
            self.x.release();
        }
        self.pending = pending;
        out
    }

    /// The `Cache-Status` member of the app's response passed uncached.
    #[napi]
    pub fn pass_status(&self, status: u32, detail: String) -> String {
        self.x.pass_status(status as u16, &detail)
    }

    /// The response whose head `head` said to store, its `body` ended at `now`: its
    /// value and the writes that store it (`record`: the value under the URL's key now;
    /// `fresh`: 6 random bytes; `guarded`: the writes are checked against a snapshot).
    #[napi]
    pub fn complete(
        &self,
        body: Buffer,
        now: f64,
        record: Option<Buffer>,
        fresh: Buffer,
        guarded: bool,
    ) -> Option<Completed> {
        let p = self.pending.as_ref()?;
        let s = p.stored(&body, now);
        let value = Entry::Response(s.clone()).encode();
        let mut f = [0u8; 6];
        for (d, b) in f.iter_mut().zip(fresh.iter()) {
            *d = *b;
        }
        let w = ziggurat_http::save_writes(
            self.x.base(),
            &s,
            &value,
            p.ttl,
            now,
            record.as_deref(),
            f,
            guarded,
        );
        Some(Completed {
            value: value.into(),
            writes: writes(w),
            initial_age: p.initial_age,
        })
    }

    /// The head's status, lines and initial age of the response being stored.
    #[napi]
    pub fn pending_status(&self) -> Option<u32> {
        self.pending.as_ref().map(|p| p.status.into())
    }

    /// Records what storing came to (0 stored, 1 purged, 2 failed) for a response with
    /// `status`; its `Cache-Status` member.
    #[napi]
    pub fn saved(&mut self, status: u32, outcome: u32) -> String {
        let saved = match outcome {
            0 => Saved::Stored,
            1 => Saved::Purged,
            _ => Saved::Failed,
        };
        self.x.saved(saved);
        self.x.stored_status(status as u16, saved)
    }

    /// Whether the response just stored may answer the client's own validators.
    #[napi]
    pub fn answers_validators(&self, status: u32) -> bool {
        self.x.answers_validators(status as u16)
    }

    /// The `Cache-Status` member to serve stale with after the app failed, or null.
    #[napi]
    pub fn stale_if_error(
        &mut self,
        rules: &HttpRules,
        current: Option<Buffer>,
        app_status: u32,
        detail: String,
        now: f64,
    ) -> Option<String> {
        rules.store_options(|o| {
            self.x
                .stale_if_error(o, current.as_deref(), app_status as u16, &detail, now)
        })
    }

    /// What a forwarded `HEAD`'s 200 (`headers`) does to the held response.
    #[napi]
    pub fn head_update(
        &mut self,
        rules: &HttpRules,
        headers: Vec<String>,
        now: f64,
    ) -> HeadUpdateOut {
        let l = lines(&headers);
        let h = slices(&l);
        let out = rules.store_options(|o| match self.x.head_update(o, &h, now) {
            None | Some(HeadUpdate::Ignore) => HeadUpdateOut {
                kind: 0,
                value: None,
                ttl: 0.0,
                tags: Vec::new(),
            },
            Some(HeadUpdate::Invalidate) => HeadUpdateOut {
                kind: 1,
                value: None,
                ttl: 0.0,
                tags: Vec::new(),
            },
            Some(HeadUpdate::Refresh(fresh, ttl)) => HeadUpdateOut {
                kind: 2,
                tags: tags_of(&fresh),
                value: Some(Entry::Response(*fresh).encode().into()),
                ttl,
            },
        });
        self.x.release();
        out
    }

    /// The stored response found after waiting lives under `k`; whether that moved the fill.
    #[napi]
    pub fn rekey(&mut self, k: Key) -> bool {
        self.x.rekey(&key_of(&k))
    }

    /// What the requests waiting on this fill do: 0 read the stored response, 1 the
    /// app failed and stale answered, 2 relayed as it came, 3 nothing.
    #[napi]
    pub fn marker(&self) -> u32 {
        match self.x.marker() {
            Marker::Stored => 0,
            Marker::Error => 1,
            Marker::Tee => 2,
            Marker::None => 3,
        }
    }

    /// The key the response lives under.
    #[napi(getter)]
    pub fn key(&self) -> Key {
        key(self.x.key().to_vec())
    }

    /// The URL's key.
    #[napi(getter)]
    pub fn base(&self) -> Key {
        key(self.x.base().to_vec())
    }

    /// Whether other requests for the key may wait on this fill.
    #[napi(getter)]
    pub fn coalesce(&self) -> bool {
        self.x.coalesce()
    }

    /// Whether the response is stored (by this fill or another it found).
    #[napi(getter)]
    pub fn stored(&self) -> bool {
        self.x.stored()
    }

    /// Whether the response is relayed as it comes.
    #[napi(getter)]
    pub fn tee(&self) -> bool {
        self.x.tee()
    }

    /// Whether a stored response is held for validation and stale use.
    #[napi(getter)]
    pub fn holds_stale(&self) -> bool {
        self.x.holds_stale()
    }
}
