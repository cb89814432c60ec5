//! Stored responses that a writer of the cache crafted so that a front end would send a
//! status or header line no server may send: each decodes as a miss.

use proptest::prelude::*;
use ziggurat_http::{decode, DecodeError, Entry, Stored};

/// The status a stored response decodes with, or why it does not decode.
fn decoded(s: Stored<'_>) -> Result<u16, DecodeError> {
    match decode(&Entry::Response(s).encode())? {
        Entry::Response(back) => Ok(back.status),
        Entry::Variants(_) => panic!("a response decoded as a variant record"),
    }
}

fn sendable() -> Stored<'static> {
    Stored {
        status: 200,
        // Tab, obs-text and DEL are left to the server (RFC 9110 §5.5).
        headers: vec![(b"x-a", b"1\t\x80 \x7f")],
        etag: Some(b"\"e\""),
        last_modified: Some(b"Sun, 06 Nov 1994 08:49:37 GMT"),
        ..Default::default()
    }
}

#[test]
fn a_status_outside_100_to_599_is_refused() {
    for status in [100, 200, 599] {
        assert_eq!(
            decoded(Stored {
                status,
                ..sendable()
            }),
            Ok(status)
        );
    }
    for status in [0, 99, 600, u16::MAX] {
        let got = decoded(Stored {
            status,
            ..sendable()
        });
        assert_eq!(got, Err(DecodeError::Unsendable), "{status}");
    }
}

#[test]
fn a_line_a_server_would_split_or_refuse_is_refused() {
    let values = [&b"a\r\nset-cookie: pwn=1"[..], b"a\rb", b"a\nb", b"a\0b"];
    let lines = values.map(|v| (&b"x"[..], v));
    let names = [&b"x y"[..], b"x:", b""].map(|k| (k, &b"1"[..]));
    for line in lines.into_iter().chain(names) {
        let s = Stored {
            headers: vec![(b"x-a", b"1"), line],
            ..sendable()
        };
        assert_eq!(decoded(s), Err(DecodeError::Unsendable), "{line:?}");
    }
    // The validators are sent to the app as request fields on revalidation.
    for v in [&b"\"e\"\r\nx: 1"[..], b"\0"] {
        let etag = Stored {
            etag: Some(v),
            ..sendable()
        };
        let last_modified = Stored {
            last_modified: Some(v),
            ..sendable()
        };
        assert_eq!(decoded(etag), Err(DecodeError::Unsendable));
        assert_eq!(decoded(last_modified), Err(DecodeError::Unsendable));
    }
}

proptest! {
    #[test]
    fn cr_lf_or_nul_anywhere_in_a_line_is_refused(
        name in "[a-z0-9-]{1,12}",
        value in proptest::collection::vec(0x20u8..0x7f, 0..40),
        at in any::<usize>(),
        c in proptest::sample::select(&b"\r\n\0"[..]),
        in_name in any::<bool>(),
    ) {
        let (mut name, mut value) = (name.into_bytes(), value);
        let target = if in_name { &mut name } else { &mut value };
        let at = at % (target.len() + 1);
        target.insert(at, c);
        let s = Stored { status: 200, headers: vec![(&name, &value)], ..Default::default() };
        prop_assert_eq!(decoded(s), Err(DecodeError::Unsendable));
    }
}
