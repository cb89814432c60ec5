//! Why a response is not stored: the `Cache-Status` detail a front end sends with it.

/// Why a response is not stored.
///
/// ```
/// use ziggurat_http::NotStored;
/// assert_eq!(NotStored::NoFreshness.as_str(), "no-freshness");
/// assert_eq!(NotStored::NoFreshness.to_string(), "no-freshness");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotStored {
    /// The request's method is not `GET`.
    Method,
    /// A 206 (the cache does not combine partial content).
    Partial,
    /// A status that is not storable.
    Status,
    /// `must-understand` on a status this cache does not understand (RFC 9111 §5.2.2.3).
    MustUnderstand,
    /// The response's `no-store`.
    NoStore,
    /// The response's unqualified `private`.
    Private,
    /// The request's `no-store`.
    RequestNoStore,
    /// A request with `Authorization`, and no directive lets a shared cache store the
    /// answer (RFC 9111 §3.5).
    Authorization,
    /// `Set-Cookie`, unless the option stores such responses.
    SetCookie,
    /// `Vary: *`.
    VaryStar,
    /// No explicit freshness, and no heuristic or default lifetime.
    NoFreshness,
    /// More tags than a stored response may have.
    TooManyTags,
    /// A `Content-Length` past the largest body stored.
    TooLarge,
    /// Already stale on arrival, with nothing to keep it for.
    Stale,
    /// More bytes of header lines than a stored response keeps.
    HeadersTooLarge,
}

impl NotStored {
    /// The `Cache-Status` detail.
    pub fn as_str(self) -> &'static str {
        match self {
            NotStored::Method => "method",
            NotStored::Partial => "partial",
            NotStored::Status => "status",
            NotStored::MustUnderstand => "must-understand",
            NotStored::NoStore => "no-store",
            NotStored::Private => "private",
            NotStored::RequestNoStore => "request-no-store",
            NotStored::Authorization => "authorization",
            NotStored::SetCookie => "set-cookie",
            NotStored::VaryStar => "vary-star",
            NotStored::NoFreshness => "no-freshness",
            NotStored::TooManyTags => "too-many-tags",
            NotStored::TooLarge => "too-large",
            NotStored::Stale => "stale",
            NotStored::HeadersTooLarge => "headers-too-large",
        }
    }
}

impl std::fmt::Display for NotStored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
