//! The wire format against vectors recorded from the tier's first
//! implementation (tests/vectors.json): every MAC, body, counter head, signed
//! event body, tags field and note key must come out byte for byte, so hosts
//! of either build read each other's values and events.

use serde_json::Value;
use ziggurat_cluster::{
    counter_head, decode, encode_value, note_key, signed_body, tags_field, Data, Found, Signer,
    MAX_AGE_US,
};

fn vectors() -> Value {
    serde_json::from_str(include_str!("vectors.json")).unwrap()
}

fn unhex(s: &Value) -> Vec<u8> {
    let s = s.as_str().unwrap();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn the_macs_are_the_recorded_ones() {
    let v = vectors();
    let macs = v["macs"].as_array().unwrap();
    assert!(macs.len() >= 100);
    for m in macs {
        let secrets: Vec<Vec<u8>> = m["secrets"].as_array().unwrap().iter().map(unhex).collect();
        let s = Signer::new(m["name"].as_str().unwrap().as_bytes(), &secrets).unwrap();
        let (item, body) = (unhex(&m["item"]), unhex(&m["body"]));
        assert_eq!(hex(&s.value_mac(&item, &body)), m["value"], "{m}");
        assert_eq!(hex(&s.counter_mac(&item, &body)), m["counter"], "{m}");
        assert_eq!(
            hex(&s.event_mac(&[item.clone(), body.clone()].concat())),
            m["event"]
        );
        assert!(s.value_ok(&item, &body, &unhex(&m["value"])));
        // Rotation: a signer whose first secret is new still verifies the old MAC.
        let mut rotated = vec![b"another-secret-0123456789".to_vec()];
        rotated.extend(secrets.iter().cloned());
        let r = Signer::new(m["name"].as_str().unwrap().as_bytes(), &rotated).unwrap();
        assert!(r.value_ok(&item, &body, &unhex(&m["value"])));
        assert_ne!(hex(&r.value_mac(&item, &body)), m["value"]);
    }
}

#[test]
fn the_bodies_are_the_recorded_ones_and_read_back() {
    let v = vectors();
    let s = Signer::new(b"shop", &[b"0123456789abcdef".to_vec()]).unwrap();
    for b in v["bodies"].as_array().unwrap() {
        let key = unhex(&b["key"]);
        let w = b["w"].as_u64().unwrap();
        let now = b["now"].as_f64().unwrap();
        let expiry_ms = match b["ttl"].as_f64() {
            None => 0,
            Some(ttl) => ((now + ttl) * 1000.0) as u64,
        };
        let tags: Vec<&str> = b["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let encoded;
        let data = match &b["data"] {
            Value::Number(n) => Data::Int(n.as_i64().unwrap()),
            d => {
                encoded = unhex(d);
                Data::Encoded(&encoded)
            }
        };
        let body = encode_value(&s, &key, data, expiry_ms, w, &tags);
        assert_eq!(hex(&body), b["body"], "{b}");
        // Read back where it was written, it holds what was put in.
        let now_us = (now * 1e6) as u64;
        if w + MAX_AGE_US > now_us {
            let got = decode(&s, &key, &body, -1, now_us).unwrap();
            let want = match data {
                Data::Int(i) => Found::Int(i),
                Data::Encoded(e) => Found::Encoded(e),
            };
            assert_eq!(got.found, want);
            assert_eq!(got.written, w);
            assert_eq!(got.tags, tags);
        }
    }
}

#[test]
fn counter_heads_events_tags_and_notes_are_the_recorded_ones() {
    let v = vectors();
    let s = Signer::new(b"shop", &[b"0123456789abcdef".to_vec()]).unwrap();
    for c in v["counter_heads"].as_array().unwrap() {
        let head = counter_head(&s, &unhex(&c["key"]), c["w"].as_u64().unwrap());
        assert_eq!(hex(&head), c["head"]);
    }
    for e in v["signed_bodies"].as_array().unwrap() {
        let body = signed_body(
            e["host"].as_str().unwrap(),
            e["op"].as_str().unwrap(),
            &unhex(&e["k"]),
            e["w"].as_u64().unwrap(),
        );
        assert_eq!(hex(&body), e["body"]);
    }
    for t in v["tags_fields"].as_array().unwrap() {
        let tags: Vec<&str> = t["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        assert_eq!(hex(&tags_field(&tags)), t["field"]);
    }
    for n in v["note_keys"].as_array().unwrap() {
        assert_eq!(hex(&note_key(&unhex(&n["what"]))), n["key"]);
    }
}
