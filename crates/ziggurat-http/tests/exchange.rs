//! One request's fill through `Exchange`, event by event, as a front end drives it.

use ziggurat_http::{
    decode, field, fields, parse_cache_control, Entry, Exchange, ExchangeRequest, HeadStep,
    HeadUpdate, LookupStep, Marker, NotStored, Saved, StoreOptions, Stored,
};

type H<'a> = &'a [(&'a [u8], &'a [u8])];
const KEY: &[u8] = b"zh2:http://h /p";

fn exchange(method: &str, headers: H<'_>, now: f64) -> Exchange {
    let cc: Vec<&[u8]> = fields(headers, b"cache-control");
    Exchange::new(&ExchangeRequest {
        method,
        headers,
        directives: parse_cache_control(cc),
        has_auth: field(headers, b"authorization").is_some(),
        base: KEY.to_vec(),
        key: KEY.to_vec(),
        now,
    })
}

fn response(value: &[u8]) -> Option<Stored<'_>> {
    match decode(value) {
        Ok(Entry::Response(s)) => Some(s),
        _ => None,
    }
}

/// A 200 stored at `at` for 60 s with an `ETag`.
fn value(at: f64) -> Vec<u8> {
    Entry::Response(Stored {
        status: 200,
        headers: vec![(b"cache-control", b"max-age=60"), (b"etag", b"\"v1\"")],
        body: b"hello",
        request_time: at,
        response_time: at,
        lifetime: 60.0,
        etag: Some(b"\"v1\""),
        ..Default::default()
    })
    .encode()
}

#[test]
fn miss_then_store() {
    let o = StoreOptions::default();
    let mut x = exchange("GET", &[(b"accept", b"*/*")], 100.0);
    assert_eq!(
        x.lookup(None, 100.0),
        LookupStep::Fill {
            stale: false,
            coalesce: true
        }
    );
    assert!(!x.holds_stale() && x.coalesce() && x.app_timeout(Some(5.0)).is_none());
    let up = x.upstream_headers(&[], None);
    assert_eq!(up, [(b"accept".to_vec(), b"*/*".to_vec())]);
    let h: H<'_> = &[(b"cache-control", b"max-age=60"), (b"content-length", b"5")];
    let HeadStep::Store(m) = x.head(&o, None, 200, h, 100.0, 100.5) else {
        panic!("not stored");
    };
    assert_eq!(m.lifetime, 60.0);
    assert!(!x.tee() && x.marker() == Marker::None);
    assert_eq!(x.saved(Saved::Stored), "stored");
    assert_eq!(
        x.stored_status(200, Saved::Stored),
        "ziggurat; fwd=uri-miss; fwd-status=200; stored"
    );
    assert!(x.stored() && x.marker() == Marker::Stored);
    assert!(!x.answers_validators(200));
}

#[test]
fn streamed_and_passed() {
    let o = StoreOptions::default();
    let mut x = exchange("GET", &[], 0.0);
    x.lookup(None, 0.0);
    let h: H<'_> = &[(b"cache-control", b"max-age=60")];
    assert!(matches!(
        x.head(&o, None, 200, h, 0.0, 0.0),
        HeadStep::Store(_)
    ));
    assert_eq!(x.marker(), Marker::Tee);
    let mut x = exchange("GET", &[(b"authorization", b"x")], 0.0);
    assert_eq!(
        x.lookup(None, 0.0),
        LookupStep::Fill {
            stale: false,
            coalesce: false
        }
    );
    assert_eq!(
        x.head(&o, None, 200, h, 0.0, 0.0),
        HeadStep::Pass(NotStored::Authorization)
    );
    assert_eq!(
        x.pass_status(200, "authorization"),
        "ziggurat; fwd=uri-miss; fwd-status=200; detail=authorization"
    );
}

#[test]
fn conditional_request_revalidates() {
    let o = StoreOptions::default();
    let v = value(0.0);
    let inm: H<'_> = &[(b"if-none-match", b"\"v1\""), (b"x", b"1")];
    // Fresh: the client's validator is answered from the stored response.
    let mut x = exchange("GET", inm, 10.0);
    let LookupStep::Serve { status, refresh } = x.lookup(Some(&v), 10.0) else {
        panic!("not served");
    };
    assert!(!refresh && !x.holds_stale());
    let s = response(&v).unwrap();
    let r = x.reply(&s, s.age(10.0), &[], Some(&status));
    assert_eq!((r.status, r.body), (304, false));
    // Stale: the stored validator goes to the app in place of the client's.
    let mut x = exchange("GET", inm, 100.0);
    assert_eq!(
        x.lookup(Some(&v), 100.0),
        LookupStep::Fill {
            stale: true,
            coalesce: true
        }
    );
    assert_eq!(x.app_timeout(Some(5.0)), Some(5.0));
    let up = x.upstream_headers(&[b"x"], Some(b"ziggurat=\"ESI/1.0\""));
    assert_eq!(
        up,
        [
            (b"if-none-match".to_vec(), b"\"v1\"".to_vec()),
            (
                b"surrogate-capability".to_vec(),
                b"ziggurat=\"ESI/1.0\"".to_vec()
            ),
        ]
    );
    let h: H<'_> = &[(b"cache-control", b"max-age=60"), (b"etag", b"\"v1\"")];
    let HeadStep::Refreshed { stored, ttl, .. } = x.head(&o, None, 304, h, 100.0, 100.0) else {
        panic!("not refreshed");
    };
    assert_eq!((stored.response_time, stored.lifetime), (100.0, 60.0));
    assert!(ttl > 60.0);
    x.release();
    assert!(!x.holds_stale());
    // Another ETag: the stored response no longer describes the app's.
    let mut x = exchange("GET", inm, 100.0);
    x.lookup(Some(&v), 100.0);
    x.upstream_headers(&[], None);
    let h: H<'_> = &[(b"etag", b"\"v2\"")];
    assert!(matches!(
        x.head(&o, None, 304, h, 100.0, 100.0),
        HeadStep::Mismatch { .. }
    ));
    // A response stored fresh answers the client's validator too.
    let mut x = exchange("GET", inm, 0.0);
    x.lookup(None, 0.0);
    assert!(x.answers_validators(200) && !x.answers_validators(201));
}

#[test]
fn app_failure_serves_stale() {
    let o = StoreOptions {
        stale_if_error: 300.0,
        ..StoreOptions::default()
    };
    let v = value(0.0);
    let mut x = exchange("GET", &[], 100.0);
    x.lookup(None, 100.0);
    assert!(x.needs_current(503) && !x.needs_current(200));
    assert!(matches!(
        x.head(&o, Some(&v), 503, &[], 100.0, 100.0),
        HeadStep::Stale { .. }
    ));
    assert_eq!(x.marker(), Marker::Error);
    let mut x = exchange("GET", &[], 100.0);
    x.lookup(Some(&v), 100.0);
    let cs = x.stale_if_error(&o, None, 0, "stale-if-error-timeout", 100.0);
    assert_eq!(
        cs.as_deref(),
        Some("ziggurat; hit; ttl=-40; fwd-status=0; detail=stale-if-error-timeout")
    );
    assert_eq!(x.marker(), Marker::Error);
}

#[test]
fn head_request() {
    let o = StoreOptions::default();
    let v = value(0.0);
    let mut x = exchange("HEAD", &[], 10.0);
    let LookupStep::Serve { status, .. } = x.lookup(Some(&v), 10.0) else {
        panic!("not served");
    };
    let s = response(&v).unwrap();
    let r = x.reply(&s, 10.0, &[], Some(&status));
    assert_eq!((r.status, r.body), (200, false));
    assert!(x.head_update(&o, &[], 10.0).is_none());
    // Stale: forwarded, and its 200 freshens the stored GET response.
    let mut x = exchange("HEAD", &[], 100.0);
    assert!(matches!(
        x.lookup(Some(&v), 100.0),
        LookupStep::Pass {
            head_update: true,
            ..
        }
    ));
    let same: H<'_> = &[(b"etag", b"\"v1\""), (b"cache-control", b"max-age=60")];
    assert!(matches!(
        x.head_update(&o, same, 100.0),
        Some(HeadUpdate::Refresh(..))
    ));
    let other: H<'_> = &[(b"etag", b"\"v2\"")];
    assert_eq!(
        x.head_update(&o, other, 100.0),
        Some(HeadUpdate::Invalidate)
    );
}

#[test]
fn purge_during_fill() {
    // The store refused the response (a purge returned while the app rendered):
    // the waiters read again, and coalesce behind a new fill.
    let o = StoreOptions::default();
    let mut x = exchange("GET", &[], 0.0);
    x.lookup(None, 0.0);
    let h: H<'_> = &[(b"cache-control", b"max-age=60"), (b"content-length", b"2")];
    assert!(matches!(
        x.head(&o, None, 200, h, 0.0, 1.0),
        HeadStep::Store(_)
    ));
    assert_eq!(x.saved(Saved::Purged), "purged");
    assert!(!x.stored() && x.marker() == Marker::Stored);
    assert_eq!(
        x.stored_status(200, Saved::Purged),
        "ziggurat; fwd=uri-miss; fwd-status=200; detail=purged"
    );
    let mut x = exchange("GET", &[], 0.0);
    x.lookup(None, 0.0);
    assert_eq!(x.saved(Saved::Failed), "store-failed");
    assert_eq!(x.marker(), Marker::None);
}

#[test]
fn waiting_on_another_fill() {
    let v = value(50.0);
    let mut x = exchange("GET", &[], 40.0);
    x.lookup(None, 40.0);
    assert_eq!(
        x.collapsed(&v, 60.0).as_deref(),
        Some("ziggurat; hit; ttl=50; collapsed")
    );
    // Stored before this request came and stale now: not an answer.
    let old = value(0.0);
    assert_eq!(x.collapsed(&old, 70.0), None);
    assert!(x.recheck(&v, 60.0).is_some() && x.stored());
    assert!(!x.rekey(KEY) && x.rekey(b"zh2:http://h /p\x00v"));
    assert_eq!((x.key(), x.base()), (&b"zh2:http://h /p\x00v"[..], KEY));
}
