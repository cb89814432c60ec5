//! The passwords of a Redis URL, hidden from every message: the one in its
//! user information and any `password=` query parameter (redis-py reads both;
//! a `unix://` URL can carry one only in the query). Never fails, whatever the
//! URL: a message about a bad URL must not print its password either.

use percent_encoding::percent_decode_str;

/// The schemes a cache's `redis` URL may have.
pub const SCHEMES: [&str; 5] = ["redis", "rediss", "unix", "valkey", "valkeys"];

/// The query parameters a password is read from.
const SECRET_PARAMETERS: [&str; 1] = ["password"];

/// `(scheme with "://", authority, the rest)` of `url`, when it has a scheme.
fn split(url: &str) -> Option<(&str, &str, &str)> {
    let colon = url.find("://")?;
    let scheme = &url[..colon];
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) {
        return None;
    }
    let after = colon + 3;
    let end = url[after..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| after + i);
    Some((&url[..after], &url[after..end], &url[end..]))
}

fn unquote(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

fn unquote_plus(s: &str) -> String {
    unquote(&s.replace('+', " "))
}

fn secret_name(name: &str) -> bool {
    SECRET_PARAMETERS.contains(&unquote_plus(name).to_lowercase().as_str())
}

/// `url` with its passwords hidden, for messages and logs.
///
/// ```
/// use ziggurat_cluster::redacted;
/// assert_eq!(redacted("redis://app:hunter2@10.0.0.5:6379/0"), "redis://app:***@10.0.0.5:6379/0");
/// assert_eq!(redacted("unix:///run/redis.sock?db=0&password=hunter2"), "unix:///run/redis.sock?db=0&password=***");
/// assert_eq!(redacted("not a url"), "not a url");
/// ```
pub fn redacted(url: &str) -> String {
    let Some((scheme, authority, rest)) = split(url) else {
        return url.to_owned();
    };
    let mut out = String::from(scheme);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            out.push_str(&format!("{user}:***@{host}"));
        }
        _ => out.push_str(authority),
    }
    let Some((path, query)) = rest.split_once('?') else {
        out.push_str(rest);
        return out;
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if secret_name(name) => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    out.push_str(path);
    out.push('?');
    out.push_str(&pairs.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// `text` (an error's message, say) with every password of `url` replaced by
/// `***`, as written in the URL and decoded.
///
/// ```
/// use ziggurat_cluster::scrubbed;
/// assert_eq!(scrubbed("AUTH hunter2 refused", "redis://:hunter2@h/0"), "AUTH *** refused");
/// assert_eq!(scrubbed("bad p%40ss and p@ss", "redis://u:p%40ss@h/0"), "bad *** and ***");
/// ```
pub fn scrubbed(text: &str, url: &str) -> String {
    let mut found: Vec<&str> = Vec::new();
    if let Some((_, authority, rest)) = split(url) {
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if let Some((_, password)) = userinfo.split_once(':') {
                found.push(password);
            }
        }
        let query = rest.split_once('?').map_or("", |(_, q)| q);
        let query = query.split_once('#').map_or(query, |(q, _)| q);
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=') {
                if secret_name(name) {
                    found.push(value);
                }
            }
        }
    }
    let mut secrets: Vec<String> = found
        .iter()
        .flat_map(|raw| [raw.to_string(), unquote(raw), unquote_plus(raw)])
        .filter(|s| !s.is_empty())
        .collect();
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    let mut text = text.to_owned();
    for s in secrets {
        text = text.replace(&s, "***");
    }
    text
}
