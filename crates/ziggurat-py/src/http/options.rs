//! `HttpOptions`, the options of one middleware read once (`Options.native`), and what
//! the rules need of them: the request's classification and the store options, with the
//! request a store decision reads (`Req`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use ziggurat_http::{Action, ClassifyOptions, StoreOptions, StoreRequest};

use super::convert::{from_dict, names_arg, pairs, slices, to_dict};

/// Declares `HttpOptions` with its Python constructor from one field list: the
/// constructor takes the fields positionally, in this order, as `Options.native` gives them.
macro_rules! options {
    ($($field:ident: $ty:ty,)*; $($methods:tt)*) => {
        /// The options of one middleware, read once (`Options.native`).
        #[pyclass(frozen)]
        pub(super) struct HttpOptions {
            $($field: $ty,)*
        }

        #[pymethods]
        impl HttpOptions {
            #[new]
            #[allow(clippy::too_many_arguments)]
            fn new($($field: $ty,)*) -> Self {
                Self { $($field,)* }
            }

            $($methods)*
        }
    };
}

options! {
    targeted_fields: Vec<Vec<u8>>,
    heuristic: bool,
    default_ttl: Option<f64>,
    stale_if_error: f64,
    revalidate_keep: f64,
    tag_header: Vec<u8>,
    store_set_cookie: bool,
    max_body: u64,
    request_directives: bool,
    bypass_headers: Vec<Vec<u8>>,
    bypass_cookies: Vec<Vec<u8>>,
    allowed_hosts: Vec<String>,
    purge: bool,
    store_auth_must_revalidate: bool,
    key_headers: Vec<String>,
    ;
    /// The request fields that keep a request off the plain-hit path.
    fn blockers<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        let bh: Vec<&[u8]> = self.bypass_headers.iter().map(|v| &v[..]).collect();
        let bc: Vec<&[u8]> = self.bypass_cookies.iter().map(|v| &v[..]).collect();
        let o = ClassifyOptions {
            bypass_headers: &bh,
            bypass_cookies: &bc,
            request_directives: self.request_directives,
            purge: self.purge,
            allowed_hosts: &[],
        };
        ziggurat_http::plain_hit_blockers(&o)
            .iter()
            .map(|b| PyBytes::new(py, b))
            .collect()
    }

    /// `(0, host, base, directives, has_auth, conditional)` to look up, `(1,)` a purge,
    /// `(2, cache_status, invalidates)` to pass.
    fn classify<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        scheme: &str,
        host_raw: Option<&[u8]>,
        target: &[u8],
        headers: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let p = pairs(headers, "classify")?;
        let bh: Vec<&[u8]> = self.bypass_headers.iter().map(|v| &v[..]).collect();
        let bc: Vec<&[u8]> = self.bypass_cookies.iter().map(|v| &v[..]).collect();
        let ah: Vec<&str> = self.allowed_hosts.iter().map(String::as_str).collect();
        let o = ClassifyOptions {
            bypass_headers: &bh,
            bypass_cookies: &bc,
            request_directives: self.request_directives,
            purge: self.purge,
            allowed_hosts: &ah,
        };
        match ziggurat_http::classify(&o, method, scheme, host_raw, target, &slices(&p)) {
            Action::Purge => PyTuple::new(py, [1]),
            Action::Pass {
                status,
                invalidates,
            } => (2, PyBytes::new(py, status.as_bytes()), invalidates).into_pyobject(py),
            Action::Lookup(l) => {
                let base = PyBytes::new(py, &l.base);
                let cc = to_dict(py, &l.directives)?;
                (0, l.host, base, cc, l.has_auth, l.conditional).into_pyobject(py)
            }
        }
    }
}

impl HttpOptions {
    pub(super) fn store<R>(&self, f: impl FnOnce(&StoreOptions<'_>) -> R) -> R {
        let targets: Vec<&[u8]> = self.targeted_fields.iter().map(|t| &t[..]).collect();
        let keys: Vec<&str> = self.key_headers.iter().map(String::as_str).collect();
        f(&StoreOptions {
            targeted_fields: &targets,
            heuristic: self.heuristic,
            default_ttl: self.default_ttl,
            stale_if_error: self.stale_if_error,
            revalidate_keep: self.revalidate_keep,
            tag_header: &self.tag_header,
            store_set_cookie: self.store_set_cookie,
            max_body: self.max_body,
            max_tags: ziggurat_core::MAX_TAGS,
            request_directives: self.request_directives,
            store_auth_must_revalidate: self.store_auth_must_revalidate,
            key_headers: &keys,
        })
    }
}

/// What storing needs of the request, from the attributes of `storable.Request`.
#[derive(FromPyObject)]
pub(super) struct Req<'py> {
    #[pyo3(attribute)]
    method: String,
    #[pyo3(attribute)]
    headers: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    directives: Bound<'py, PyDict>,
    #[pyo3(attribute)]
    has_auth: bool,
    #[pyo3(attribute)]
    key_headers: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    time: f64,
}

/// What storing needs of the request, from the attributes of `storable.Request`, and
/// the options, as the crate's structs.
pub(super) fn with_request<R>(
    opts: &HttpOptions,
    req: &Req<'_>,
    f: impl FnOnce(&StoreOptions<'_>, &StoreRequest<'_>) -> R,
) -> PyResult<R> {
    const F: &str = "decide";
    let rp = pairs(&req.headers, F)?;
    let req_cc = from_dict(&req.directives, F)?;
    let keys = names_arg(&req.key_headers, F, "req.key_headers")?;
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let req_lines = slices(&rp);
    let request = StoreRequest {
        method: &req.method,
        headers: &req_lines,
        directives: &req_cc,
        has_auth: req.has_auth,
        time: req.time,
    };
    Ok(opts.store(|o| {
        let o = StoreOptions {
            key_headers: &keys,
            ..o.clone()
        };
        f(&o, &request)
    }))
}
