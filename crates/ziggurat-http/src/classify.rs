//! Request classification: what a request is to the cache, before any lookup.

use crate::cache_control::{parse_cache_control, Directives};
use crate::cache_status::{cache_status, Param};
use crate::fields::Headers;
use crate::host::normalise_host;
use crate::key::base_key;

/// Methods that are safe and never cached: passed without invalidating anything.
const SAFE_UNCACHED: [&str; 3] = ["OPTIONS", "TRACE", "CONNECT"];
/// The client's validators: the cache answers them from the stored response.
pub const CLIENT_CONDITIONALS: [&[u8]; 2] = [b"if-none-match", b"if-modified-since"];
/// Conditionals and ranges the cache does not evaluate: such requests pass.
pub const PASS_CONDITIONALS: [&[u8]; 4] =
    [b"if-match", b"if-unmodified-since", b"if-range", b"range"];
/// Whitespace `bytes.strip()` removes (ASCII).
pub(crate) const WS: &[u8] = b" \t\n\r\x0b\x0c";

/// The request fields whose presence can change the answer to a `GET` of a fresh
/// stored response under options `o` (`Authorization` cannot: it matters only to what
/// is stored). A request with none of them, whose target does not
/// [`overrides_method`], is a plain hit when a fresh response is stored for its URL.
///
/// ```
/// use ziggurat_http::{plain_hit_blockers, ClassifyOptions};
/// let o = ClassifyOptions { request_directives: true, ..Default::default() };
/// assert!(plain_hit_blockers(&o).contains(&b"cache-control".to_vec()));
/// ```
pub fn plain_hit_blockers(o: &ClassifyOptions<'_>) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [&b"content-length"[..], b"transfer-encoding"]
        .into_iter()
        .chain(CLIENT_CONDITIONALS)
        .chain(PASS_CONDITIONALS)
        .chain(o.bypass_headers.iter().copied())
        .map(<[u8]>::to_vec)
        .collect();
    if !o.bypass_cookies.is_empty() {
        out.push(b"cookie".to_vec());
    }
    if o.request_directives {
        out.extend([b"cache-control".to_vec(), b"pragma".to_vec()]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The options classification reads.
#[derive(Debug, Clone, Default)]
pub struct ClassifyOptions<'a> {
    /// Request fields (lower-case) whose presence bypasses the cache.
    pub bypass_headers: &'a [&'a [u8]],
    /// Cookie names whose presence bypasses the cache.
    pub bypass_cookies: &'a [&'a [u8]],
    /// Whether the request's `Cache-Control` (and `Pragma`) are obeyed.
    pub request_directives: bool,
    /// Whether `PURGE` requests are the cache's own (a purge token is configured).
    pub purge: bool,
    /// The allowed hosts (see [`host_allowed`]).
    pub allowed_hosts: &'a [&'a str],
}

/// A request the cache looks up: what the lookup and the fill need of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    /// The normalised host.
    pub host: String,
    /// The key of its URL ([`base_key`]).
    pub base: Vec<u8>,
    /// Its cache directives (empty unless `request_directives`).
    pub directives: Directives,
    /// Whether it has `Authorization`.
    pub has_auth: bool,
    /// Whether it has `If-None-Match` or `If-Modified-Since`.
    pub conditional: bool,
}

/// What a request is to the cache.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A `GET` or `HEAD` to look up.
    Lookup(Lookup),
    /// The cache's own `PURGE` (its token is checked by the front end).
    Purge,
    /// Forward to the app, uncached, with this `Cache-Status` member; `invalidates`: an
    /// unsafe method, whose successful response invalidates ([`crate::invalidated_keys`]).
    Pass {
        /// The `Cache-Status` member.
        status: String,
        /// Whether a 2xx/3xx response invalidates the stored responses of the URL.
        invalidates: bool,
    },
}

fn pass(fwd: &str, detail: Option<&str>) -> Action {
    let mut params = vec![("fwd", Param::Value(fwd))];
    if let Some(d) = detail {
        params.push(("detail", Param::Value(d)));
    }
    Action::Pass {
        status: cache_status("fwd", &params),
        invalidates: false,
    }
}

fn bypass(detail: &str) -> Action {
    pass("bypass", Some(detail))
}

/// Whether a normalised `host[:port]` is allowed: an entry `".example.com"` allows the
/// domain and its subdomains, `"*"` any host.
///
/// ```
/// use ziggurat_http::host_allowed;
/// assert!(host_allowed("a.example.com:8000", &[".example.com"]));
/// assert!(!host_allowed("evil.test", &["localhost"]));
/// ```
pub fn host_allowed(host: &str, allowed: &[&str]) -> bool {
    let name = if host.starts_with('[') {
        &host[..host.find(']').map_or(0, |i| i + 1)]
    } else {
        host.rsplit_once(':').map_or(host, |(n, _)| n)
    };
    let name = name.trim_end_matches('.');
    allowed.iter().any(|p| {
        *p == "*" || *p == name || (p.starts_with('.') && (name == &p[1..] || name.ends_with(p)))
    })
}

/// What a request is (see [`Action`]), from its method, scheme, raw `Host` value, raw
/// target and header lines (lower-case names). The first reason to pass wins, in this
/// order: the method, a target that is not a path, the host, the scheme, then the
/// headers in their order (a bypass header, a conditional the cache does not evaluate, a
/// body, a bypass cookie, a name with `_`), then a `_method=` override in the query.
///
/// ```
/// use ziggurat_http::{classify, Action, ClassifyOptions};
/// let o = ClassifyOptions { allowed_hosts: &["localhost"], ..Default::default() };
/// let Action::Lookup(l) = classify(&o, "GET", "http", Some(b"LocalHost"), b"/a", &[]) else { panic!() };
/// assert_eq!(l.base, b"zh2:http://localhost /a");
/// let Action::Pass { status, invalidates } = classify(&o, "POST", "http", None, b"/a", &[]) else { panic!() };
/// assert_eq!((status.as_str(), invalidates), ("ziggurat; fwd=method; detail=invalidates", true));
/// assert_eq!(classify(&o, "GET", "http", Some(b"evil"), b"/", &[]),
///            ziggurat_http::Action::Pass { status: "ziggurat; fwd=bypass; detail=host".into(), invalidates: false });
/// ```
pub fn classify(
    opts: &ClassifyOptions<'_>,
    method: &str,
    scheme: &str,
    host_raw: Option<&[u8]>,
    target: &[u8],
    headers: &Headers<'_>,
) -> Action {
    if method != "GET" && method != "HEAD" {
        if method == "PURGE" && opts.purge {
            return Action::Purge;
        }
        if SAFE_UNCACHED.contains(&method) {
            return pass("method", None);
        }
        let Action::Pass { status, .. } = pass("method", Some("invalidates")) else {
            unreachable!()
        };
        return Action::Pass {
            status,
            invalidates: true,
        };
    }
    if target.first() != Some(&b'/') {
        // The origin form only: "*" and absolute or authority forms name no path of this
        // host (and a key must not let ":8443/x" on one host meet "/x" on another).
        return bypass("target");
    }
    let host = match host_raw.and_then(normalise_host) {
        Some(h) if host_allowed(&h, opts.allowed_hosts) => h,
        _ => return bypass("host"),
    };
    if scheme != "http" && scheme != "https" {
        return bypass("scheme");
    }
    // Cache-Control is parsed once, after the loop, over all its lines: a request holds as
    // many lines as its server lets through, and its cost must follow their bytes.
    let mut cache_control: Vec<&[u8]> = Vec::new();
    let mut pragma_no_cache = false;
    let mut has_auth = false;
    let mut conditional = false;
    for (k, v) in headers.iter() {
        let k = *k;
        if opts.bypass_headers.contains(&k) {
            return bypass("header");
        }
        if PASS_CONDITIONALS.contains(&k) {
            return bypass(&String::from_utf8_lossy(k));
        }
        match k {
            b"content-length" if !matches!(crate::fields::strip(v, WS), b"" | b"0") => {
                return bypass("body")
            }
            b"transfer-encoding" => return bypass("body"),
            b"authorization" => has_auth = true,
            b"if-none-match" | b"if-modified-since" => conditional = true,
            b"cookie" => {
                let named = v.split(|&c| c == b';').any(|c| {
                    let c = crate::fields::strip(c, WS);
                    opts.bypass_cookies
                        .iter()
                        .any(|n| c.len() > n.len() && c.starts_with(n) && c[n.len()] == b'=')
                });
                if named {
                    return bypass("cookie");
                }
            }
            b"cache-control" if opts.request_directives => cache_control.push(v),
            b"pragma" if opts.request_directives => {
                pragma_no_cache |= v.to_ascii_lowercase().windows(8).any(|w| w == b"no-cache");
            }
            // Bridges to WSGI (and many frameworks) read "X_Forwarded_Host" as
            // X-Forwarded-Host, which neither the bypass list nor a Vary sees here.
            _ if k.contains(&b'_') => return bypass("underscore"),
            _ => {}
        }
    }
    if overrides_method(target) {
        return bypass("method-override");
    }
    let mut directives = parse_cache_control(cache_control.iter().copied());
    // RFC 9111 §5.4: "no-cache" counts only without Cache-Control.
    if pragma_no_cache && cache_control.first().is_none_or(|cc| cc.is_empty()) {
        directives.insert_first("no-cache".to_owned(), None);
    }
    Action::Lookup(Lookup {
        base: base_key(scheme, &host, target),
        host,
        directives,
        has_auth,
        conditional,
    })
}

/// Whether the query of `target` carries a `_method=` override (any case), which
/// frameworks obey to turn a `GET` into another method: such a request is never cached.
///
/// ```
/// use ziggurat_http::overrides_method;
/// assert!(overrides_method(b"/p?x=1&_METHOD=delete"));
/// assert!(!overrides_method(b"/_method=/p?x=1"));
/// ```
pub fn overrides_method(target: &[u8]) -> bool {
    target.iter().position(|&c| c == b'?').is_some_and(|q| {
        target[q..]
            .windows(8)
            .any(|w| w.eq_ignore_ascii_case(b"_method="))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(a: Action) -> String {
        match a {
            Action::Pass { status, .. } => status,
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn the_first_reason_wins() {
        let o = ClassifyOptions {
            allowed_hosts: &["*"],
            bypass_cookies: &[b"sessionid"],
            request_directives: true,
            ..Default::default()
        };
        let c = |h: &Headers<'_>, t: &[u8]| detail(classify(&o, "GET", "http", Some(b"h"), t, h));
        assert!(c(&[(b"range", b"bytes=0-1"), (b"x_y", b"1")], b"/").ends_with("detail=range"));
        assert!(c(&[(b"x_y", b"1"), (b"range", b"b")], b"/").ends_with("detail=underscore"));
        assert!(c(&[(b"content-length", b" 0 ")], b"/?_METHOD=x").ends_with("method-override"));
        assert!(c(&[(b"cookie", b"a=1; sessionid=2")], b"/").ends_with("detail=cookie"));
        assert!(c(&[(b"cookie", b"sessionidx=2")], b"/").starts_with("Lookup"));
        let Action::Lookup(l) = classify(
            &o,
            "HEAD",
            "https",
            Some(b"h"),
            b"/",
            &[
                (b"pragma", b"No-Cache"),
                (b"authorization", b"x"),
                (b"if-none-match", b"*"),
            ],
        ) else {
            panic!()
        };
        assert!(l.directives.contains("no-cache") && l.has_auth && l.conditional);
        assert_eq!(
            classify(&o, "PURGE", "http", None, b"/", &[]),
            pass("method", Some("invalidates")).invalidating()
        );
    }

    #[test]
    fn every_cache_control_line_counts_and_pragma_only_without_one() {
        let mut o = ClassifyOptions {
            allowed_hosts: &["h"],
            request_directives: true,
            ..Default::default()
        };
        let directives = |o: &ClassifyOptions<'_>, h: &Headers<'_>| {
            let Action::Lookup(l) = classify(o, "GET", "http", Some(b"h"), b"/", h) else {
                panic!()
            };
            l.directives
        };
        let h: &Headers<'_> = &[
            (b"cache-control", b"max-age=5"),
            (b"accept", b"*/*"),
            (b"cache-control", b"max-age=9, no-store"),
        ];
        let cc = directives(&o, h);
        assert_eq!(
            cc.iter().collect::<Vec<_>>(),
            [("max-age", Some("5")), ("no-store", None)]
        );
        // Pragma counts when the first Cache-Control line is empty or missing, wherever it
        // stands among the lines.
        for h in [
            &[
                (&b"pragma"[..], &b"No-Cache"[..]),
                (b"cache-control", b""),
                (b"cache-control", b"max-age=1"),
            ][..],
            &[
                (b"cache-control", b""),
                (b"cache-control", b"max-age=1"),
                (b"pragma", b"no-cache"),
            ],
        ] {
            let cc = directives(&o, h);
            assert!(cc.contains("no-cache") && cc.contains("max-age"), "{h:?}");
        }
        assert!(!directives(
            &o,
            &[(b"pragma", b"no-cache"), (b"cache-control", b"max-age=1")]
        )
        .contains("no-cache"));
        o.request_directives = false;
        assert!(directives(
            &o,
            &[(b"pragma", b"no-cache"), (b"cache-control", b"no-store")]
        )
        .is_empty());
    }

    impl Action {
        fn invalidating(self) -> Action {
            match self {
                Action::Pass { status, .. } => Action::Pass {
                    status,
                    invalidates: true,
                },
                a => a,
            }
        }
    }
}
