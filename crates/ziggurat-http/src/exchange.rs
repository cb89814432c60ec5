//! One request's fill as an object: what the cache knows of the request and of the
//! stored response it holds, carried from the lookup to the marker its waiters read.
//! The front end feeds it each event (the stored value it read, the app's head, what the
//! store did) and it answers what to do; it does no I/O, so every front end drives the
//! same states.
//!
//! ```text
//!  new ──lookup──▶ Serve │ GatewayTimeout │ Pass (HEAD: head_update on its 200) │ Fill
//!  Fill ──upstream_headers──▶ app ──head──▶ Refreshed │ Mismatch │ Stale │ Pass │ Store
//!       └─ app failed or timed out ──stale_if_error──▶ serve stale │ fail
//!  Store ── body buffered, store tried ──saved──▶ the Cache-Status detail
//!  any time ──marker──▶ what the requests waiting on this fill do
//! ```

use crate::cache_control::Directives;
use crate::cache_status::{cache_status, Param};
use crate::classify::CLIENT_CONDITIONALS;
use crate::fields::{field, fields, Headers};
use crate::fill::{
    head_step, head_update, lookup_step, reply, stale_if_error, usable, FillRequest, HeadStep,
    HeadUpdate, LookupStep, Reply, ERROR_STATUSES,
};
use crate::storable::{StoreOptions, StoreRequest};
use crate::stored::{decode, Entry, Stored};

/// Header lines owned by the exchange.
type Lines = Vec<(Vec<u8>, Vec<u8>)>;

/// What the front end read of a request it looked up ([`crate::Lookup`]).
#[derive(Debug, Clone)]
pub struct ExchangeRequest<'a> {
    /// `GET` or `HEAD`.
    pub method: &'a str,
    /// The request's header lines.
    pub headers: &'a Headers<'a>,
    /// Its cache directives.
    pub directives: Directives,
    /// Whether it had `Authorization`.
    pub has_auth: bool,
    /// The URL's key ([`crate::Lookup::base`]).
    pub base: Vec<u8>,
    /// The key its response lives under ([`crate::variant_key`] for a varying one).
    pub key: Vec<u8>,
    /// When the request arrived.
    pub now: f64,
}

/// What storing the app's response came to, as the front end saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// It is stored.
    Stored,
    /// A purge (or a clear, or an invalidation of its tags) returned while the app
    /// rendered it: it was not stored, and may predate the purge.
    Purged,
    /// The store failed.
    Failed,
}

impl Saved {
    /// The `Cache-Status` detail.
    pub fn as_str(self) -> &'static str {
        match self {
            Saved::Stored => "stored",
            Saved::Purged => "purged",
            Saved::Failed => "store-failed",
        }
    }
}

/// What the requests that waited on a fill do once it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// Read the stored response (also after a purge: they then coalesce again).
    Stored,
    /// The app failed and a stale response answered: answer the same way.
    Error,
    /// The response is relayed as it comes: go to the app.
    Tee,
    /// Nothing for them: go to the app (the URL is not waited on for a while).
    None,
}

/// One request's fill (see the module documentation for the order of the events).
///
/// ```
/// use ziggurat_http::{Directives, Exchange, ExchangeRequest, HeadStep, LookupStep, Saved,
///                     StoreOptions, Marker};
/// let req = ExchangeRequest { method: "GET", headers: &[], directives: Directives::new(),
///     has_auth: false, base: b"zh2:http://h /".to_vec(), key: b"zh2:http://h /".to_vec(),
///     now: 10.0 };
/// let mut x = Exchange::new(&req);
/// assert_eq!(x.lookup(None, 10.0), LookupStep::Fill { stale: false, coalesce: true });
/// let o = StoreOptions::default();
/// let h: &[(&[u8], &[u8])] = &[(b"cache-control", b"max-age=60")];
/// assert!(matches!(x.head(&o, None, 200, h, 10.0, 10.5), HeadStep::Store(_)));
/// assert_eq!(x.saved(Saved::Stored), "stored");
/// assert_eq!(x.marker(), Marker::Stored);
/// ```
#[derive(Debug, Clone)]
pub struct Exchange {
    method: String,
    headers: Lines,
    directives: Directives,
    has_auth: bool,
    base: Vec<u8>,
    key: Vec<u8>,
    start: f64,
    /// The stored response held for validation and stale use, as its value bytes.
    stale: Option<Vec<u8>>,
    coalesce: bool,
    validated: bool,
    request_time: f64,
    tee: bool,
    stored: bool,
    purged: bool,
    failed: bool,
}

fn response(value: &[u8]) -> Option<Stored<'_>> {
    match decode(value) {
        Ok(Entry::Response(s)) => Some(s),
        _ => None,
    }
}

impl Exchange {
    /// The fill of a looked-up request.
    pub fn new(req: &ExchangeRequest<'_>) -> Self {
        Exchange {
            method: req.method.to_owned(),
            headers: req
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
            directives: req.directives.clone(),
            has_auth: req.has_auth,
            base: req.base.clone(),
            key: req.key.clone(),
            start: req.now,
            stale: None,
            coalesce: false,
            validated: false,
            request_time: req.now,
            tee: false,
            stored: false,
            purged: false,
            failed: false,
        }
    }

    fn lines(&self) -> Vec<(&[u8], &[u8])> {
        self.headers.iter().map(|(k, v)| (&k[..], &v[..])).collect()
    }

    fn stale_response(&self) -> Option<Stored<'_>> {
        self.stale.as_deref().and_then(response)
    }

    /// The URL's key.
    pub fn base(&self) -> &[u8] {
        &self.base
    }

    /// The key the response lives under.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The stored response found after waiting lives under `key` (another `Vary`
    /// variant than the one looked up first); whether that moved the fill.
    pub fn rekey(&mut self, key: &[u8]) -> bool {
        let moved = key != self.key;
        self.key = key.to_vec();
        moved
    }

    /// Whether a stored response is held for validation and stale use.
    pub fn holds_stale(&self) -> bool {
        self.stale.is_some()
    }

    /// Whether the response is stored (by this fill, or by another one it found).
    pub fn stored(&self) -> bool {
        self.stored
    }

    /// Whether the response is relayed as it comes, and stored at its end if it fits.
    pub fn tee(&self) -> bool {
        self.tee
    }

    /// Whether other requests for the key may wait on this fill.
    pub fn coalesce(&self) -> bool {
        self.coalesce
    }

    /// What to do given the stored value found (`None`: none matched), at `now`
    /// ([`lookup_step`]); the value is kept when the step needs it later.
    pub fn lookup(&mut self, value: Option<&[u8]>, now: f64) -> LookupStep {
        let s = value.and_then(response);
        let req = FillRequest {
            method: &self.method,
            directives: &self.directives,
            has_auth: self.has_auth,
        };
        let step = lookup_step(s.as_ref(), &req, now);
        let keep = match step {
            LookupStep::Serve { refresh, .. } => refresh,
            LookupStep::Pass { head_update, .. } => head_update,
            LookupStep::Fill { stale, coalesce } => {
                self.coalesce = coalesce;
                stale
            }
            LookupStep::GatewayTimeout => false,
        };
        if keep {
            self.stale = value.map(<[u8]>::to_vec);
        }
        step
    }

    /// The stored response `s`, `age` seconds old, as the answer to this request
    /// ([`reply`]).
    pub fn reply(&self, s: &Stored<'_>, age: f64, hidden: &[&[u8]], status: Option<&str>) -> Reply {
        reply(s, age, hidden, &self.lines(), &self.method, status)
    }

    fn collapsed_status(&self, value: &[u8], now: f64) -> Option<String> {
        let s = response(value)?;
        let age = s.age(now);
        // A response validated after this request arrived is as good as validating it now.
        if !usable(&s, age, &self.directives) && s.response_time < self.start {
            return None;
        }
        let ttl = ((s.lifetime - age) as i64).to_string();
        Some(cache_status(
            "hit",
            &[
                ("ttl", Param::Value(&ttl)),
                ("collapsed", Param::Flag(true)),
            ],
        ))
    }

    /// The `Cache-Status` member to answer with the stored `value` found after waiting
    /// on another fill, when it may answer this request; None: go to the app.
    pub fn collapsed(&self, value: &[u8], now: f64) -> Option<String> {
        self.collapsed_status(value, now)
    }

    /// As [`Exchange::collapsed`], for the stored `value` found inside this fill's lease
    /// before calling the app (another process filled the key): the fill is then done.
    pub fn recheck(&mut self, value: &[u8], now: f64) -> Option<String> {
        let cs = self.collapsed_status(value, now);
        self.stored |= cs.is_some();
        cs
    }

    /// How long to wait for the app's response head before giving up on it: `limit`
    /// when a held stored response may be served stale, else None (wait).
    pub fn app_timeout(&self, limit: Option<f64>) -> Option<f64> {
        limit.filter(|_| self.stale_response().is_some_and(|s| s.may_serve_stale()))
    }

    /// The request lines for the app: the client's validators and the `drop` fields
    /// removed, the held response's validators added (the client's own are answered
    /// from the result), and with `capability`, this cache's device token appended to
    /// `Surrogate-Capability` (one line).
    pub fn upstream_headers(&mut self, drop: &[&[u8]], capability: Option<&[u8]>) -> Lines {
        const CAP: &[u8] = b"surrogate-capability";
        let mut out: Lines = self
            .headers
            .iter()
            .filter(|(k, _)| !CLIENT_CONDITIONALS.contains(&&k[..]) && !drop.contains(&&k[..]))
            .filter(|(k, _)| capability.is_none() || k != CAP)
            .cloned()
            .collect();
        if let Some(s) = self.stale_response() {
            if let Some(etag) = s.etag {
                out.push((b"if-none-match".to_vec(), etag.to_vec()));
            }
            if let Some(lm) = s.last_modified {
                out.push((b"if-modified-since".to_vec(), lm.to_vec()));
            }
            self.validated = s.etag.is_some() || s.last_modified.is_some();
        }
        if let Some(token) = capability {
            let lines = self.lines();
            let mut seen = fields(&lines, CAP);
            seen.push(token);
            out.push((CAP.to_vec(), seen.join(&b", "[..])));
        }
        out
    }

    /// Whether the app's head with `status` needs the stored response read again
    /// (for [`Exchange::head`]'s `current`): none is held and the app failed.
    pub fn needs_current(&self, status: u16) -> bool {
        self.stale.is_none() && ERROR_STATUSES.contains(&status)
    }

    /// What to do with the app's head (`status`, `headers`), the request having been sent
    /// on at `request_time` ([`head_step`]); `current`: the stored value read again when
    /// [`Exchange::needs_current`]. A refreshed response is no longer held.
    pub fn head<'a>(
        &'a mut self,
        opts: &StoreOptions<'_>,
        current: Option<&'a [u8]>,
        status: u16,
        headers: &Headers<'a>,
        request_time: f64,
        now: f64,
    ) -> HeadStep<'a> {
        self.request_time = request_time;
        let lines = self.lines();
        let req = StoreRequest {
            method: &self.method,
            headers: &lines,
            directives: &self.directives,
            has_auth: self.has_auth,
            time: request_time,
        };
        let held = self.stale.as_deref().or(current).and_then(response);
        let step = head_step(
            opts,
            &req,
            held.as_ref(),
            self.validated,
            status,
            headers,
            now,
        );
        match &step {
            HeadStep::Store(_) => {
                // A body of unknown length is relayed as it comes and stored at its end
                // if it fits; the waiters are released at the head.
                self.tee =
                    status != 204 && status != 304 && field(headers, b"content-length").is_none();
            }
            HeadStep::Stale { .. } => self.failed = true,
            _ => {}
        }
        step
    }

    /// The `Cache-Status` member of the app's response passed uncached (its `status`,
    /// and the `detail` why).
    pub fn pass_status(&self, status: u16, detail: &str) -> String {
        self.fwd_status(status, false, detail)
    }

    fn fwd_status(&self, status: u16, stored: bool, detail: &str) -> String {
        let fwd = if self.stale.is_some() {
            "stale"
        } else {
            "uri-miss"
        };
        let code = status.to_string();
        let mut params = vec![
            ("fwd", Param::Value(fwd)),
            ("fwd_status", Param::Value(&code)),
        ];
        if stored {
            params.push(("stored", Param::Flag(true)));
        } else {
            params.push(("detail", Param::Value(detail)));
        }
        cache_status("fwd", &params)
    }

    /// What storing the response came to; the `Cache-Status` detail.
    pub fn saved(&mut self, saved: Saved) -> &'static str {
        match saved {
            Saved::Stored => self.stored = true,
            Saved::Purged => self.purged = true,
            Saved::Failed => {}
        }
        saved.as_str()
    }

    /// The `Cache-Status` member of the app's stored (or not) response (`status`).
    pub fn stored_status(&self, status: u16, saved: Saved) -> String {
        self.fwd_status(status, saved == Saved::Stored, saved.as_str())
    }

    /// Whether the response just stored (`status`) may answer the client's own
    /// validators (with a 304).
    pub fn answers_validators(&self, status: u16) -> bool {
        status == 200
            && self
                .headers
                .iter()
                .any(|(k, _)| CLIENT_CONDITIONALS.contains(&&k[..]))
    }

    /// The `Cache-Status` member to serve the held stored response (or `current`, the
    /// stored value read again) stale with, the app having failed ([`stale_if_error`]),
    /// or None.
    pub fn stale_if_error(
        &mut self,
        opts: &StoreOptions<'_>,
        current: Option<&[u8]>,
        app_status: u16,
        detail: &str,
        now: f64,
    ) -> Option<String> {
        let s = self.stale.as_deref().or(current).and_then(response)?;
        let cs = stale_if_error(&s, opts, &self.directives, app_status, detail, now)?;
        self.failed = true;
        Some(cs)
    }

    /// What the 200 (`headers`) to this forwarded `HEAD` does to the held response
    /// ([`head_update`]); None when none is held.
    pub fn head_update<'a>(
        &'a self,
        opts: &StoreOptions<'_>,
        headers: &Headers<'a>,
        now: f64,
    ) -> Option<HeadUpdate<'a>> {
        let s = self.stale_response()?;
        Some(head_update(
            opts,
            &s,
            headers,
            self.has_auth,
            self.start,
            now,
        ))
    }

    /// Lets go of the held response (refreshed, or updated by a `HEAD`).
    pub fn release(&mut self) {
        self.stale = None;
    }

    /// What the requests that waited on this fill do.
    pub fn marker(&self) -> Marker {
        if self.stored || self.purged {
            Marker::Stored
        } else if self.failed {
            Marker::Error
        } else if self.tee {
            Marker::Tee
        } else {
            Marker::None
        }
    }
}
