//! `HttpExchange`, the crate's `Exchange` (one request's fill) for `ziggurat.http.fill`,
//! and what storing decides of a response alone (`storable.decide`). Conversions only:
//! each step goes back as a tuple whose first item says which step it is.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyTuple};
use ziggurat_http::{
    Entry, Exchange, ExchangeRequest, HeadStep, HeadUpdate, LookupStep, Marker, Meta, Saved,
};

use super::convert::{floats, from_dict, lines, opt_bytes, pairs, slices, status, Line};
use super::options::{with_request, HttpOptions, Req};
use super::stored::stored;

/// The fields of `storable.Meta`.
fn meta<'py>(py: Python<'py>, m: &Meta<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let values = m.vary_values.iter().map(|v| opt_bytes(py, v.as_deref()));
    let mut fields = vec![lines(py, &m.headers)?.into_any()];
    fields.extend(floats(py, &[m.lifetime, m.initial_age, m.swr, m.sie]));
    fields.extend([
        PyFrozenSet::new(py, &m.flags)?.into_any(),
        opt_bytes(py, m.etag),
        opt_bytes(py, m.last_modified),
        PyTuple::new(py, &m.vary)?.into_any(),
        PyTuple::new(py, values)?.into_any(),
        PyTuple::new(py, &m.tags)?.into_any(),
        PyFloat::new(py, m.ttl).into_any(),
    ]);
    PyTuple::new(py, fields)
}

/// `(0, value, ttl, cache_status)` refreshed; `(1, cache_status)` validator mismatch;
/// `(2, cache_status)` stale; `(3, detail)` pass; `(4, meta)` store.
fn head_tuple<'py>(py: Python<'py>, step: HeadStep<'_>) -> PyResult<Bound<'py, PyTuple>> {
    let b = |s: &str| PyBytes::new(py, s.as_bytes());
    match step {
        HeadStep::Refreshed {
            stored,
            ttl,
            status,
        } => {
            let v = PyBytes::new(py, &Entry::Response(stored).encode());
            (0, v, ttl, b(&status)).into_pyobject(py)
        }
        HeadStep::Mismatch { status } => (1, b(&status)).into_pyobject(py),
        HeadStep::Stale { status } => (2, b(&status)).into_pyobject(py),
        HeadStep::Pass(why) => (3, why.as_str()).into_pyobject(py),
        HeadStep::Store(m) => (4, meta(py, &m)?).into_pyobject(py),
    }
}

/// What is stored of a response to `req` alone: `(3, detail)` or `(4, meta)`.
#[pyfunction]
pub(super) fn http_decide<'py>(
    py: Python<'py>,
    opts: PyRef<'py, HttpOptions>,
    req: Req<'py>,
    status_code: &Bound<'py, PyAny>,
    headers: &Bound<'py, PyAny>,
    now: f64,
) -> PyResult<Bound<'py, PyTuple>> {
    const F: &str = "decide";
    let code = status(status_code, F)?;
    let p = pairs(headers, F)?;
    let h = slices(&p);
    with_request(&opts, &req, |o, r| {
        head_tuple(
            py,
            ziggurat_http::head_step(o, r, None, false, code, &h, now),
        )
    })?
}

/// One request's fill (the crate's `Exchange`).
#[pyclass(module = "ziggurat._native")]
pub(super) struct HttpExchange(Exchange);

fn cs(py: Python<'_>, s: Option<String>) -> Option<Bound<'_, PyBytes>> {
    s.map(|c| PyBytes::new(py, c.as_bytes()))
}

#[pymethods]
impl HttpExchange {
    #[new]
    fn new(
        method: &str,
        headers: &Bound<'_, PyAny>,
        directives: &Bound<'_, PyDict>,
        has_auth: bool,
        base: Vec<u8>,
        key: Vec<u8>,
        now: f64,
    ) -> PyResult<Self> {
        const F: &str = "exchange";
        let p = pairs(headers, F)?;
        Ok(HttpExchange(Exchange::new(&ExchangeRequest {
            method,
            headers: &slices(&p),
            directives: from_dict(directives, F)?,
            has_auth,
            base,
            key,
            now,
        })))
    }

    /// `(0, cache_status, refresh)` serve; `(1,)` 504; `(2, cache_status, head_update)`
    /// pass; `(3, stale, coalesce)` fill.
    fn lookup<'py>(
        &mut self,
        py: Python<'py>,
        value: Option<&[u8]>,
        now: f64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = |s: String| PyBytes::new(py, s.as_bytes());
        match self.0.lookup(value, now) {
            LookupStep::Serve { status, refresh } => (0, b(status), refresh).into_pyobject(py),
            LookupStep::GatewayTimeout => PyTuple::new(py, [1]),
            LookupStep::Pass {
                status,
                head_update,
            } => (2, b(status), head_update).into_pyobject(py),
            LookupStep::Fill { stale, coalesce } => (3, stale, coalesce).into_pyobject(py),
        }
    }

    /// `(status, headers, with_body)` of the stored response as this request's answer.
    fn reply<'py>(
        &self,
        py: Python<'py>,
        value: &[u8],
        age: f64,
        hidden: Vec<Vec<u8>>,
        status: Option<&str>,
    ) -> PyResult<(u16, Vec<Line<'py>>, bool)> {
        let s = stored(value, "reply")?;
        let hidden: Vec<&[u8]> = hidden.iter().map(|h| &h[..]).collect();
        let r = self.0.reply(&s, age, &hidden, status);
        let lines = r
            .headers
            .iter()
            .map(|(k, v)| (PyBytes::new(py, k), PyBytes::new(py, v)));
        Ok((r.status, lines.collect(), r.body))
    }

    fn collapsed<'py>(
        &self,
        py: Python<'py>,
        value: &[u8],
        now: f64,
    ) -> Option<Bound<'py, PyBytes>> {
        cs(py, self.0.collapsed(value, now))
    }

    fn recheck<'py>(
        &mut self,
        py: Python<'py>,
        value: &[u8],
        now: f64,
    ) -> Option<Bound<'py, PyBytes>> {
        cs(py, self.0.recheck(value, now))
    }

    fn app_timeout(&self, limit: Option<f64>) -> Option<f64> {
        self.0.app_timeout(limit)
    }

    fn upstream_headers(
        &mut self,
        drop: Vec<Vec<u8>>,
        capability: Option<Vec<u8>>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let drop: Vec<&[u8]> = drop.iter().map(|d| &d[..]).collect();
        self.0.upstream_headers(&drop, capability.as_deref())
    }

    fn needs_current(&self, status: u16) -> bool {
        self.0.needs_current(status)
    }

    /// As `http_decide`, and `(0, …)` to `(2, …)` for a held or `current` response.
    #[allow(clippy::too_many_arguments)]
    fn head<'py>(
        &mut self,
        py: Python<'py>,
        opts: PyRef<'py, HttpOptions>,
        current: Option<&[u8]>,
        status_code: &Bound<'py, PyAny>,
        headers: &Bound<'py, PyAny>,
        request_time: f64,
        now: f64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        const F: &str = "head";
        let code = status(status_code, F)?;
        let p = pairs(headers, F)?;
        let h = slices(&p);
        opts.store(|o| head_tuple(py, self.0.head(o, current, code, &h, request_time, now)))
    }

    fn pass_status<'py>(&self, py: Python<'py>, status: u16, detail: &str) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.0.pass_status(status, detail).as_bytes())
    }

    /// Records what storing came to (`stored`, `purged`, `store-failed`); its
    /// `Cache-Status` member.
    fn saved<'py>(&mut self, py: Python<'py>, status: u16, outcome: &str) -> Bound<'py, PyBytes> {
        let saved = match outcome {
            "stored" => Saved::Stored,
            "purged" => Saved::Purged,
            _ => Saved::Failed,
        };
        self.0.saved(saved);
        PyBytes::new(py, self.0.stored_status(status, saved).as_bytes())
    }

    fn answers_validators(&self, status: u16) -> bool {
        self.0.answers_validators(status)
    }

    fn stale_if_error<'py>(
        &mut self,
        py: Python<'py>,
        opts: PyRef<'py, HttpOptions>,
        current: Option<&[u8]>,
        app_status: u16,
        detail: &str,
        now: f64,
    ) -> Option<Bound<'py, PyBytes>> {
        let step = opts.store(|o| self.0.stale_if_error(o, current, app_status, detail, now));
        cs(py, step)
    }

    /// None (nothing held, or ignore), False (invalidate) or `(value, ttl)` (refresh)
    /// for a forwarded HEAD's 200.
    fn head_update<'py>(
        &self,
        py: Python<'py>,
        opts: PyRef<'py, HttpOptions>,
        headers: &Bound<'py, PyAny>,
        now: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let p = pairs(headers, "head_update")?;
        let h = slices(&p);
        Ok(match opts.store(|o| self.0.head_update(o, &h, now)) {
            None | Some(HeadUpdate::Ignore) => py.None().into_bound(py),
            Some(HeadUpdate::Invalidate) => PyBool::new(py, false).to_owned().into_any(),
            Some(HeadUpdate::Refresh(fresh, ttl)) => {
                let value = PyBytes::new(py, &Entry::Response(*fresh).encode());
                (value, ttl).into_pyobject(py)?.into_any()
            }
        })
    }

    fn release(&mut self) {
        self.0.release();
    }

    fn rekey(&mut self, key: &[u8]) -> bool {
        self.0.rekey(key)
    }

    /// 0 stored, 1 error, 2 tee, 3 none.
    fn marker(&self) -> u8 {
        match self.0.marker() {
            Marker::Stored => 0,
            Marker::Error => 1,
            Marker::Tee => 2,
            Marker::None => 3,
        }
    }

    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.0.key())
    }

    #[getter]
    fn holds_stale(&self) -> bool {
        self.0.holds_stale()
    }

    #[getter]
    fn coalesce(&self) -> bool {
        self.0.coalesce()
    }

    #[getter]
    fn stored(&self) -> bool {
        self.0.stored()
    }

    #[getter]
    fn tee(&self) -> bool {
        self.0.tee()
    }
}
