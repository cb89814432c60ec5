//! Hop-by-hop fields (RFC 9110 §7.6.1, RFC 9111 §3.1): never stored, never replayed.

use std::collections::HashSet;

use crate::fields::{fields, parse_list, Headers};

/// The fields that are hop-by-hop whatever `Connection` says.
pub const HOP_BY_HOP: [&[u8]; 10] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"proxy-authenticate",
    b"proxy-authentication-info",
    b"proxy-authorization",
];

/// The lower-case names a message's `Connection` field lists (each once, in order): the
/// hop-by-hop fields of that message.
///
/// ```
/// use ziggurat_http::connection_listed;
/// let h: &[(&[u8], &[u8])] = &[(b"connection", b"X-Secret, close"), (b"connection", b"a")];
/// assert_eq!(connection_listed(h), [b"x-secret".to_vec(), b"close".to_vec(), b"a".to_vec()]);
/// ```
pub fn connection_listed(headers: &Headers<'_>) -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for item in parse_list(fields(headers, b"connection")) {
        let name = item.to_ascii_lowercase();
        if seen.insert(name.clone()) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connection_counts() {
        let h: &[(&[u8], &[u8])] = &[(b"keep-alive", b"x"), (b"connection", b" ,A,a ")];
        assert_eq!(connection_listed(h), [b"a".to_vec()]);
        assert!(connection_listed(&[]).is_empty());
    }
}
