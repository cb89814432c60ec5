//! Cache-Status (RFC 9211): how this cache, named `ziggurat`, handled a request.

/// A parameter of a Cache-Status member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param<'a> {
    /// A flag: present when true, left out when false.
    Flag(bool),
    /// `key=value`.
    Value(&'a str),
}

/// A `Cache-Status` member for this cache: `ziggurat`, then `hit` when `kind` is
/// `"hit"`, then the parameters in order (an `_` in a key written `-`).
///
/// ```
/// use ziggurat_http::{cache_status, Param};
/// assert_eq!(cache_status("hit", &[("ttl", Param::Value("12"))]), "ziggurat; hit; ttl=12");
/// assert_eq!(
///     cache_status("fwd", &[("fwd", Param::Value("uri-miss")), ("detail", Param::Value("no-store"))]),
///     "ziggurat; fwd=uri-miss; detail=no-store"
/// );
/// ```
pub fn cache_status(kind: &str, params: &[(&str, Param<'_>)]) -> String {
    let mut out = String::from("ziggurat");
    if kind == "hit" {
        out.push_str("; hit");
    }
    for (key, value) in params {
        match value {
            Param::Flag(false) => continue,
            Param::Flag(true) => {
                out.push_str("; ");
                out.push_str(&key.replace('_', "-"));
            }
            Param::Value(v) => {
                out.push_str("; ");
                out.push_str(&key.replace('_', "-"));
                out.push('=');
                out.push_str(v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_keys() {
        let got = cache_status(
            "hit",
            &[
                ("ttl", Param::Value("-3")),
                ("collapsed", Param::Flag(true)),
                ("stored", Param::Flag(false)),
                ("fwd_status", Param::Value("304")),
            ],
        );
        assert_eq!(got, "ziggurat; hit; ttl=-3; collapsed; fwd-status=304");
        assert_eq!(cache_status("fwd", &[]), "ziggurat");
    }
}
