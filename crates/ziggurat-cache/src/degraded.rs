//! What a cache says when it cannot use its shared segment, the same in every
//! front end: the error of `degraded="raise"` and the warning of the modes
//! that run without the segment. The reason is the segment error's own text
//! (it names the file and the remedy); each front end spells the cache's name
//! (quoted as its language quotes strings) and its options (its `Words`).

use ziggurat_core::{Arg, OpenCause, Words};

/// The message of the error a cache opened with `degraded="raise"` raises:
/// `call` is the constructor's call as the front end writes it.
///
/// ```
/// assert_eq!(
///     ziggurat_cache::degraded_refusal("Cache('blog')", "directory /x does not exist"),
///     "Cache('blog'): the shared segment cannot be used: directory /x does not exist",
/// );
/// ```
pub fn degraded_refusal(call: &str, reason: &str) -> String {
    format!("{call}: the shared segment cannot be used: {reason}")
}

/// The warning of a cache that runs without its segment: `name` quoted as the
/// front end quotes strings; `local_ttl` is `None` for "passthrough", else the
/// "local" mode's `degraded_ttl` in seconds; `words` spell the options.
///
/// ```
/// use ziggurat_cache::{degraded_warning, RustWords};
/// let w = degraded_warning("\"blog\"", "no room", Some(1.0), &RustWords);
/// assert_eq!(
///     w,
///     "ziggurat cache \"blog\" runs without its shared segment (no room); degraded = \"local\": \
///      each process caches alone, entries live at most degraded_ttl = 1 s",
/// );
/// assert!(degraded_warning("\"blog\"", "no room", None, &RustWords)
///     .ends_with("nothing is cached until the cause is fixed and the process restarts"));
/// ```
pub fn degraded_warning(
    name: &str,
    reason: &str,
    local_ttl: Option<f64>,
    words: &dyn Words,
) -> String {
    let mode = match local_ttl {
        None => format!(
            "{}: nothing is cached until the cause is fixed and the process restarts",
            words.setting(Arg::Degraded, &words.text("passthrough"))
        ),
        Some(ttl) => format!(
            "{}: each process caches alone, entries live at most {} s",
            words.setting(Arg::Degraded, &words.text("local")),
            words.setting(Arg::DegradedTtl, &words.number(ttl))
        ),
    };
    format!("ziggurat cache {name} runs without its shared segment ({reason}); {mode}")
}

/// The mode of a cache whose options leave `degraded` unset, once its open
/// failed with `cause` (the segment error's short name): `default`, the
/// options' own, except where no segment can ever run (`unsupported_platform`:
/// a system other than Linux, such as a developer's laptop). There each
/// process caches alone ("local"), so the app runs as it will on its servers,
/// short of the sharing; elsewhere a failed open is a fault to fix, and the
/// default keeps it from passing for a working cache.
///
/// ```
/// use ziggurat_cache::unset_degraded_mode;
/// assert_eq!(unset_degraded_mode("unsupported_platform", "passthrough"), "local");
/// assert_eq!(unset_degraded_mode("no_space", "passthrough"), "passthrough");
/// ```
pub fn unset_degraded_mode<'a>(cause: &str, default: &'a str) -> &'a str {
    if cause == OpenCause::Unsupported.name() {
        "local"
    } else {
        default
    }
}
