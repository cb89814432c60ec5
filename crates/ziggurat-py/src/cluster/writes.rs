//! What a write sends the script and how it reads a refusal, and a Redis
//! URL's passwords kept out of messages (`ziggurat.cluster.tier`, `link`).

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ziggurat_cluster as zc;

use super::signer::ClusterSigner;

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

/// The first six arguments of a write (op, `host:fence`, the stream's length,
/// the event's `k`, its MAC, its write time), as bytes.
///
/// >>> s = ClusterSigner("c", [b"0123456789abcdef"])
/// >>> cluster_write_args(s, "1f", 3, 1000, "del", b"k", 7)[:3]
/// [b'del', b'1f:3', b'1000']
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn cluster_write_args<'py>(
    py: Python<'py>,
    signer: &ClusterSigner,
    host: &str,
    fence: u64,
    stream_length: u64,
    op: &str,
    k: &[u8],
    w: u64,
) -> Vec<Bound<'py, PyBytes>> {
    zc::write_args(&signer.0, host, fence, stream_length, op, k, w)
        .iter()
        .map(|a| PyBytes::new(py, a))
        .collect()
}

/// Milliseconds Redis keeps a signed value written now for `ttl` seconds (0:
/// no expiry).
///
/// >>> cluster_px_value(60.0), cluster_px_value(float("inf"))
/// (60000, 86400000)
#[pyfunction]
pub fn cluster_px_value(ttl: f64) -> u64 {
    zc::px_value(ttl)
}

/// Milliseconds Redis keeps a value written at `written_us` that gets `ttl`
/// from `now_us` on.
///
/// >>> cluster_px_since(60.0, 10**15, 10**15)
/// 60000
#[pyfunction]
pub fn cluster_px_since(ttl: f64, written_us: u64, now_us: u64) -> u64 {
    zc::px_since(ttl, written_us, now_us)
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
