//! Every rule a front end applies on its own side, by name, in one table:
//! the front ends' native parts export it, their language sides read their
//! limits, defaults and names from it once, at import, and each front end's
//! conformance test checks that what its modules use equals it.
//!
//! Names are dotted: `group.name`, the group one of `tags`, `key`,
//! `defaults`, `modes`, `steps`, `codes`, `envelope` and `metrics`.
//!
//! ```
//! use ziggurat_cache::{rule, RuleValue};
//! assert_eq!(rule("tags.max"), Some(RuleValue::Int(8)));
//! assert_eq!(rule("defaults.ttl"), Some(RuleValue::Float(300.0)));
//! assert_eq!(rule("steps.LOAD"), Some(RuleValue::Int(2)));
//! ```

use crate::defaults as d;
use crate::encoding::ValueCode;
use crate::envelope::{MAX_DEPTH, PICKLE_PROTOCOL};
use crate::families::{
    DEGRADED_LABELS, HOST_LABELS, PROCESS_LABELS, PROCESS_UNTIERED_LABELS, TIERS, UP_LABELS,
};
use crate::handoff::StepKind;
use crate::key::MAX_KEY;
use crate::modes::{COPY_MODES, DEGRADED_MODES, HUGE_PAGES_MODES};
use crate::tags::{MAX_TAGS, MIN_TAG_BYTES};

/// The value of a rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RuleValue {
    /// A whole number (a limit, a count, a code).
    Int(i64),
    /// Seconds or a fraction.
    Float(f64),
    /// A name.
    Text(&'static str),
    /// Names, in the order messages list them.
    Names(&'static [&'static str]),
}

/// One rule: its dotted name and value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// `group.name` (see the module documentation).
    pub name: &'static str,
    /// Its value.
    pub value: RuleValue,
}

const fn int(name: &'static str, v: i64) -> Rule {
    Rule {
        name,
        value: RuleValue::Int(v),
    }
}

const fn float(name: &'static str, v: f64) -> Rule {
    Rule {
        name,
        value: RuleValue::Float(v),
    }
}

const fn text(name: &'static str, v: &'static str) -> Rule {
    Rule {
        name,
        value: RuleValue::Text(v),
    }
}

const fn names(name: &'static str, v: &'static [&'static str]) -> Rule {
    Rule {
        name,
        value: RuleValue::Names(v),
    }
}

/// The rules with a fixed value: every one but the step kinds and value
/// codes, which [`rules`] adds from their enums.
#[rustfmt::skip]
const FIXED: &[Rule] = &[
    int("tags.max", MAX_TAGS as i64),
    int("tags.min_bytes", MIN_TAG_BYTES as i64),
    int("key.max_bytes", MAX_KEY as i64),
    float("defaults.ttl", d::TTL),
    float("defaults.neg_ttl", d::NEG_TTL),
    float("defaults.jitter", d::JITTER),
    float("defaults.refresh_ahead", d::REFRESH_AHEAD),
    float("defaults.loader_timeout", d::LOADER_TIMEOUT),
    int("defaults.l1_items", d::L1_ITEMS as i64),
    int("defaults.l1_negative_share", d::L1_NEGATIVE_SHARE as i64),
    int("defaults.avg_item_size", d::AVG_ITEM_SIZE as i64),
    float("defaults.lock_timeout", d::LOCK_TIMEOUT),
    float("defaults.degraded_ttl", d::DEGRADED_TTL),
    text("defaults.directory", d::DIRECTORY),
    text("defaults.serializer", d::SERIALIZER),
    text("defaults.copy", d::COPY),
    text("defaults.degraded", d::DEGRADED),
    text("defaults.huge_pages", d::HUGE_PAGES),
    float("defaults.redis_timeout", d::REDIS_TIMEOUT),
    int("defaults.stream_length", d::STREAM_LENGTH as i64),
    names("modes.degraded", &DEGRADED_MODES),
    names("modes.copy", &COPY_MODES),
    names("modes.huge_pages", &HUGE_PAGES_MODES),
    int("envelope.max_depth", MAX_DEPTH as i64),
    int("envelope.pickle_protocol", PICKLE_PROTOCOL as i64),
    names("metrics.host_labels", &HOST_LABELS),
    names("metrics.process_labels", &PROCESS_LABELS),
    names("metrics.process_untiered_labels", &PROCESS_UNTIERED_LABELS),
    names("metrics.up_labels", &UP_LABELS),
    names("metrics.degraded_labels", &DEGRADED_LABELS),
    names("metrics.tiers", &TIERS),
];

/// Every rule, in a fixed order: the step kinds as `steps.<NAME>`, the
/// value codes as `codes.<NAME>`.
pub fn rules() -> Vec<Rule> {
    let steps = StepKind::ALL.map(|k| (step_name(k), k as i64));
    let codes = ValueCode::ALL.map(|c| (code_name(c), c as i64));
    let mut all = FIXED.to_vec();
    all.extend(steps.into_iter().chain(codes).map(|(n, v)| int(n, v)));
    all
}

/// The rule named `name`.
pub fn rule(name: &str) -> Option<RuleValue> {
    rules()
        .into_iter()
        .find(|r| r.name == name)
        .map(|r| r.value)
}

fn step_name(k: StepKind) -> &'static str {
    match k {
        StepKind::Hit => "steps.HIT",
        StepKind::Load => "steps.LOAD",
        StepKind::Wait => "steps.WAIT",
        StepKind::Local => "steps.LOCAL",
    }
}

fn code_name(c: ValueCode) -> &'static str {
    match c {
        ValueCode::Nothing => "codes.NOTHING",
        ValueCode::JsonText => "codes.JSON_TEXT",
        ValueCode::Bytes => "codes.BYTES",
        ValueCode::Counter => "codes.COUNTER",
        ValueCode::Negative => "codes.NEGATIVE",
        ValueCode::Raw => "codes.RAW",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_their_enums() {
        let all = rules();
        let mut seen = std::collections::HashSet::new();
        assert!(all.iter().all(|r| seen.insert(r.name)), "a name twice");
        for k in StepKind::ALL {
            assert_eq!(step_name(k), format!("steps.{}", k.name()));
        }
        for c in ValueCode::ALL {
            assert_eq!(code_name(c), format!("codes.{}", c.name()));
        }
        let o = crate::CacheOptions::default();
        assert_eq!(rule("defaults.ttl"), Some(RuleValue::Float(o.ttl)));
        assert_eq!(rule("defaults.jitter"), Some(RuleValue::Float(o.jitter)));
        assert_eq!(rule("defaults.neg_ttl"), o.neg_ttl.map(RuleValue::Float));
        assert_eq!(
            rule("defaults.loader_timeout"),
            Some(RuleValue::Float(o.loader_timeout))
        );
    }
}
