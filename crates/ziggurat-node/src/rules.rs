//! The Cache's argument rules that JavaScript asks for, the table of its
//! limits, defaults and names, and the metric families it reports, so that
//! the package keeps no copy of a rule or a table written in ziggurat-cache.

use std::collections::HashMap;

use napi::bindgen_prelude::{Either, Either3};
use napi::Result;
use napi_derive::napi;
use ziggurat_cache::{duration_text, size_text, RuleValue};

use crate::args::{key_bytes, KeyArg};
use crate::errors::{arg_named, to_napi};

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

/// Seconds of a duration (a number of seconds, or a string such as
/// "5m"), checked as a TTL named `what`.
#[napi]
pub fn duration(value: Either<f64, String>, what: String) -> Result<f64> {
    let arg = arg_named(&what)?;
    let s = match value {
        Either::A(seconds) => seconds,
        Either::B(text) => duration_text(&text, arg).map_err(to_napi)?,
    };
    ziggurat_cache::check_ttl(s, arg).map_err(to_napi)
}

/// The message of an `incr` of the counter `key` (as JavaScript writes the
/// key) whose result leaves the signed 64-bit range: the Cache's, for the
/// store that runs without a segment.
#[napi]
pub fn incr_overflow(key: String) -> String {
    ziggurat_cache::incr_overflow(&key)
}

/// The message of the error `degraded: 'raise'` throws (the rule every
/// front end shares): `call`, then the reason.
#[napi]
pub fn degraded_refusal(call: String, reason: String) -> String {
    ziggurat_cache::degraded_refusal(&call, &reason)
}

/// The warning of a cache that runs without its segment (the rule every
/// front end shares, in this package's words); `local_ttl` none for
/// 'passthrough', else the 'local' mode's `degradedTtl` in seconds.
#[napi]
pub fn degraded_warning(name: String, reason: String, local_ttl: Option<f64>) -> String {
    ziggurat_cache::degraded_warning(&name, &reason, local_ttl, &crate::errors::NodeWords)
}

/// The `degraded` mode of a cache whose options leave it unset, once its
/// open failed with `cause` (the rule every front end shares): 'local' on a
/// system the segment never runs on, else `fallback` (the options' default).
#[napi]
pub fn unset_degraded_mode(cause: String, fallback: String) -> String {
    ziggurat_cache::unset_degraded_mode(&cause, &fallback).to_owned()
}

/// Checks a key by the Cache's rule (1 to 4096 bytes), for a cache that
/// runs without its segment and so reaches no other call that checks it.
#[napi]
pub fn check_key(key: KeyArg) -> Result<()> {
    ziggurat_cache::check_key(key_bytes(&key)).map_err(to_napi)
}

/// Checks the cache option `copy` by the Cache's rule ('shared', 'copy' or
/// 'decode'), so that the package keeps no list of its own.
#[napi]
pub fn check_copy(mode: String) -> Result<()> {
    ziggurat_cache::CopyMode::parse(&mode)
        .map(|_| ())
        .map_err(to_napi)
}

/// Bytes of a size string ("256MiB").
#[napi]
pub fn size(text: String) -> Result<f64> {
    size_text(&text).map(|n| n as f64).map_err(to_napi)
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
    /// `host` (one figure for the host, taken once when the series of
    /// several processes are gathered) or `process` (summed).
    pub scope: String,
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
            scope: f.scope.name().to_string(),
        })
        .collect()
}

/// Every rule of `ziggurat_cache::rules` by its dotted name ("tags.max",
/// "defaults.ttl", "steps.HIT", ...): a number, a name, or names. The
/// package reads it once, at load (`lib/rules.cjs`).
#[napi(ts_return_type = "Record<string, number | string | string[]>")]
pub fn rules() -> HashMap<String, Either3<f64, String, Vec<String>>> {
    ziggurat_cache::rules()
        .into_iter()
        .map(|r| {
            let v = match r.value {
                RuleValue::Int(n) => Either3::A(n as f64),
                RuleValue::Float(x) => Either3::A(x),
                RuleValue::Text(t) => Either3::B(t.to_string()),
                RuleValue::Names(ns) => Either3::C(ns.iter().map(|n| n.to_string()).collect()),
            };
            (r.name.to_string(), v)
        })
        .collect()
}
