//! What the tier's Python side still words: a write's refusal, a Redis URL's
//! passwords kept out of messages (`ziggurat.cluster.tier`, `link`).

use pyo3::prelude::*;
use ziggurat_cluster as zc;

/// `url` with its passwords hidden (its user information's, any `password=`
/// query parameter's), for messages and logs. Never raises.
///
/// >>> cluster_redacted("redis://app:hunter2@10.0.0.5:6379/0")
/// 'redis://app:***@10.0.0.5:6379/0'
#[pyfunction]
pub fn cluster_redacted(url: &str) -> String {
    zc::redacted(url)
}

/// `text` with every password of `url` replaced by `***`, as written in the
/// URL and decoded.
///
/// >>> cluster_scrubbed("AUTH hunter2 refused", "redis://:hunter2@h/0")
/// 'AUTH *** refused'
#[pyfunction]
pub fn cluster_scrubbed(text: &str, url: &str) -> String {
    zc::scrubbed(text, url)
}

/// What the write script's error `message` says: `"fenced"`, `"missing"`,
/// `"not_int"`, `"overflow"` or `"server"` (anything else).
///
/// >>> cluster_refusal("ERR user_script:12: FENCED"), cluster_refusal("OOM")
/// ('fenced', 'server')
#[pyfunction]
pub fn cluster_refusal(message: &str) -> &'static str {
    match zc::refusal(message) {
        zc::Refusal::Fenced => "fenced",
        zc::Refusal::Missing => "missing",
        zc::Refusal::NotInt => "not_int",
        zc::Refusal::Overflow => "overflow",
        zc::Refusal::Server => "server",
    }
}

/// Whether `seconds` is a valid `redis_timeout` (the crate's bound).
///
/// >>> cluster_timeout_ok(0.1), cluster_timeout_ok(61.0)
/// (True, False)
#[pyfunction]
pub fn cluster_timeout_ok(seconds: f64) -> bool {
    zc::timeout_ok(seconds)
}
