//! The Cache's argument rules that JavaScript asks for, and the metric
//! families it reports, so that the package keeps no copy of a rule or a
//! table written in ziggurat-cache.

use napi::Result;
use napi_derive::napi;

use crate::errors::to_napi;

/// The longest key, in bytes (a text key's UTF-8); the shortest is 1. The
/// methods taking many keys ask the addon to check only the keys that may
/// break it (each is checked before anything is read or written).
#[napi]
pub const MAX_KEY_BYTES: u32 = ziggurat_cache::MAX_KEY as u32;

/// The key prefix and hidden tag of the namespace `name` (the same as
/// Python's), or a RangeError that says the rule.
#[napi(ts_return_type = "[string, string]")]
pub fn namespace_parts(name: String) -> Result<Vec<String>> {
    let ns = ziggurat_cache::Namespace::new(&name).map_err(to_napi)?;
    Ok(vec![ns.key_prefix, ns.tag])
}

/// One metric family both front ends report (the same table as Python's).
#[napi(object)]
pub struct MetricFamily {
    /// `cache`, `host` (a segment's figure: `key` is its stats key) or
    /// `process` (this process's own: `key` is the name after `ziggurat_process_`).
    pub group: String,
    /// Where its value comes from: see `group`.
    pub key: String,
    /// The Prometheus name.
    pub prom: String,
    /// The OpenTelemetry instrument's name.
    pub otel: String,
    /// `counter` or `gauge`.
    pub kind: String,
    /// The OpenTelemetry unit.
    pub unit: String,
    /// What it counts, in words true of every front end.
    pub help: String,
}

/// The metric families both front ends report, cache, then host, then process.
#[napi]
pub fn metric_families() -> Vec<MetricFamily> {
    ziggurat_cache::FAMILIES
        .iter()
        .map(|f| MetricFamily {
            group: f.group.name().to_string(),
            key: f.key.to_string(),
            prom: f.prom.to_string(),
            otel: f.otel.to_string(),
            kind: f.kind.name().to_string(),
            unit: f.unit.to_string(),
            help: f.help.to_string(),
        })
        .collect()
}
