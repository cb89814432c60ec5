//! What Redis hands back is not trusted: any bytes decode to a refusal or a
//! value whose MAC checked, never a panic; a body changed anywhere is refused;
//! an event's signed fields split one way only.

use proptest::prelude::*;
use ziggurat_cluster::{
    decode, encode_value, parse, place, signed_body, strip_prefix, Data, Refused, Signer,
};

fn signer() -> Signer {
    Signer::new(b"shop", &[b"0123456789abcdef".to_vec()]).unwrap()
}

const NOW: u64 = 1_700_000_000_000_000;

proptest! {
    #[test]
    fn any_bytes_decode_without_a_panic(body in proptest::collection::vec(any::<u8>(), 0..200), pttl in -2i64..100_000) {
        let s = signer();
        let _ = decode(&s, b"k", &body, pttl, NOW);
        let _ = strip_prefix(&body);
    }

    #[test]
    fn a_body_changed_anywhere_is_refused(
        data in proptest::collection::vec(any::<u8>(), 0..64),
        tags in proptest::collection::vec("[a-z\u{0}é]{0,6}", 0..4),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let s = signer();
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        let mut body = encode_value(&s, b"k", Data::Encoded(&data), 0, NOW, &tags);
        let ok = decode(&s, b"k", &body, -1, NOW).unwrap();
        prop_assert_eq!(ok.tags, tags.iter().map(|t| t.to_string()).collect::<Vec<_>>());
        let i = at.index(body.len());
        body[i] ^= flip;
        prop_assert_eq!(decode(&s, b"k", &body, -1, NOW), Err(Refused::Bad));
    }

    #[test]
    fn a_value_is_bound_to_its_key(data in proptest::collection::vec(any::<u8>(), 0..32), other in "[a-z]{1,4}") {
        prop_assume!(other != "k");
        let s = signer();
        let body = encode_value(&s, b"k", Data::Encoded(&data), 0, NOW, &[]);
        prop_assert_eq!(decode(&s, other.as_bytes(), &body, -1, NOW), Err(Refused::Bad));
    }

    #[test]
    fn signed_bodies_split_one_way(
        a in ("[a-f0-9]{0,6}", "[a-z\u{0}]{0,6}", proptest::collection::vec(any::<u8>(), 0..8), any::<u64>()),
        b in ("[a-f0-9]{0,6}", "[a-z\u{0}]{0,6}", proptest::collection::vec(any::<u8>(), 0..8), any::<u64>()),
    ) {
        prop_assume!(a != b);
        prop_assert_ne!(signed_body(&a.0, &a.1, &a.2, a.3), signed_body(&b.0, &b.1, &b.2, b.3));
    }

    #[test]
    fn any_fields_parse_without_a_panic(fields in proptest::collection::vec(
        (prop::sample::select(vec![&b"s"[..], b"h", b"o", b"k", b"m", b"w", b"g", b"x"]),
         proptest::collection::vec(any::<u8>(), 0..20)), 0..9)) {
        let s = signer();
        let f: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (*n, v.as_slice())).collect();
        prop_assert!(parse(&f, &s).is_none(), "no forged event checks");
        let _ = place(&f);
    }
}

#[test]
fn expired_and_ahead_bodies_are_refused_as_such() {
    let s = signer();
    let old = encode_value(&s, b"k", Data::Int(1), 0, NOW - 86_400_000_001, &[]);
    assert_eq!(
        decode(&s, b"k", &old, -1, NOW),
        Err(Refused::Expired(NOW - 86_400_000_001))
    );
    let past = encode_value(&s, b"k", Data::Int(1), NOW / 1000 - 1, NOW - 10, &[]);
    assert_eq!(
        decode(&s, b"k", &past, -1, NOW),
        Err(Refused::Expired(NOW - 10))
    );
    let ahead = encode_value(&s, b"k", Data::Int(1), 0, NOW + 300_000_001, &[]);
    assert_eq!(
        decode(&s, b"k", &ahead, -1, NOW),
        Err(Refused::Ahead(NOW + 300_000_001))
    );
    let within = encode_value(&s, b"k", Data::Int(1), 0, NOW + 299_000_000, &[]);
    assert!(decode(&s, b"k", &within, -1, NOW).is_ok());
}

#[test]
fn secrets_are_checked() {
    use ziggurat_cluster::SecretProblem;
    assert_eq!(Signer::new(b"c", &[]).err(), Some(SecretProblem::None));
    assert_eq!(
        Signer::new(b"c", &[b"0123456789abcdef".to_vec(), b"short".to_vec()]).err(),
        Some(SecretProblem::Short(1))
    );
}

#[test]
fn event_fields_cannot_be_regrouped_into_another_valid_event() {
    let s = signer();
    let key = b"z\x00clear\x00[]";
    let mac = s.event_mac(&signed_body("h1", "set", key, 5));
    let genuine: Vec<(&[u8], &[u8])> = vec![
        (b"s", b"7"),
        (b"h", b"h1"),
        (b"o", b"set"),
        (b"k", key),
        (b"w", b"5"),
        (b"m", &mac),
    ];
    assert!(parse(&genuine, &s).is_some());
    // The same bytes split another way: another host, a clear, no key.
    let forged: Vec<(&[u8], &[u8])> = vec![
        (b"s", b"7"),
        (b"h", b"h1\x00set\x00z"),
        (b"o", b"clear"),
        (b"k", b"[]"),
        (b"w", b"5"),
        (b"m", &mac),
    ];
    assert!(parse(&forged, &s).is_none());
}
