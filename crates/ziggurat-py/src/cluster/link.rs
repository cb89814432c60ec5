//! The connection to Redis or Valkey (`ziggurat.cluster.link`): the crate's
//! link, its calls made with the GIL released, its replies as Python values.

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};
use redis::Value;
use ziggurat_cluster as zc;

create_exception!(
    ziggurat._native,
    ClusterDown,
    PyException,
    "The server cannot be used now (unreachable, timed out, or within retry_after of such a failure): the caller falls back to the host's tiers."
);
create_exception!(
    ziggurat._native,
    ClusterReply,
    PyException,
    "An error the server answered (a script's refusal, out of memory, a read-only replica): the connection is sound."
);

/// The connection of one cache to its server: each call bounded by
/// `timeout` seconds, the server left alone `retry_after` seconds after a
/// failure, a connection per thread and process.
///
/// >>> link = ClusterLink(["redis://127.0.0.1:1/0"], False, 0.05, 1.0)
/// >>> link.command("PING")
/// Traceback (most recent call last):
/// ...
/// ziggurat._native.ClusterDown: unreachable: Connection refused (os error 111)
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterLink {
    pub(super) link: Arc<zc::Link>,
}

fn seconds(s: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what} must be seconds >= 0, got {s}")))
}

pub(super) fn fault(f: zc::Fault) -> PyErr {
    match f {
        zc::Fault::Down { why, .. } => ClusterDown::new_err(why),
        zc::Fault::Reply(text) => ClusterReply::new_err(text),
    }
}

/// A command's argument as Redis takes it: bytes as they are, text as UTF-8,
/// numbers in decimal (a float as `repr` writes it, as redis-py sends it).
fn arg(a: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = a.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = a.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes().to_vec());
    }
    if a.is_instance_of::<PyInt>() || a.is_instance_of::<PyFloat>() {
        return Ok(a.repr()?.to_str()?.as_bytes().to_vec());
    }
    if let Ok(b) = a.extract::<Vec<u8>>() {
        return Ok(b);
    }
    Err(PyTypeError::new_err(format!(
        "a Redis command's arguments are bytes, str, int or float, not {}",
        a.get_type().name()?
    )))
}

fn args(items: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    items.try_iter()?.map(|a| arg(&a?)).collect()
}

/// A reply as redis-py gives it with `decode_responses` off (the link speaks
/// RESP2): bulk and simple strings as bytes, integers, lists, None for nil.
fn reply(py: Python<'_>, v: Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::BulkString(b) => PyBytes::new(py, &b).into_any().unbind(),
        Value::SimpleString(s) => PyBytes::new(py, s.as_bytes()).into_any().unbind(),
        Value::Okay => PyBytes::new(py, b"OK").into_any().unbind(),
        Value::Array(items) => {
            let items = items
                .into_iter()
                .map(|i| reply(py, i))
                .collect::<PyResult<Vec<_>>>()?;
            PyList::new(py, items)?.into_any().unbind()
        }
        _ => py.None(),
    })
}

#[pymethods]
impl ClusterLink {
    /// A link to the server of a `redis://`, `rediss://` or `unix://` URL,
    /// or (`cluster`) to the Redis Cluster of the nodes of several; raises
    /// ValueError naming what is wrong (never the password).
    ///
    /// >>> ClusterLink(["redis://:pw@h:99999/0"], False, 0.1, 1.0)
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: redis URL 'redis://:***@h:99999/0' is not valid: its port must be a number from 1 to 65535
    #[new]
    fn new(
        urls: Vec<String>,
        cluster: bool,
        timeout: f64,
        retry_after: f64,
    ) -> PyResult<ClusterLink> {
        let server = zc::Server::of(&urls, cluster).map_err(PyValueError::new_err)?;
        let link = zc::Link::new(
            server,
            seconds(timeout, "redis_timeout")?,
            seconds(retry_after, "retry_after")?,
        )
        .map_err(PyValueError::new_err)?;
        Ok(ClusterLink {
            link: Arc::new(link),
        })
    }

    /// The server's raw reply to one command (the GIL released meanwhile);
    /// raises ClusterDown or ClusterReply.
    #[pyo3(signature = (*parts))]
    fn command(&self, py: Python<'_>, parts: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let parts = args(parts.as_any())?;
        let mut cmd = redis::Cmd::new();
        for p in &parts {
            cmd.arg(p.as_slice());
        }
        let v = py.detach(|| self.link.query(&cmd)).map_err(fault)?;
        reply(py, v)
    }

    /// Runs the script `source` (SHA1 `sha`) on `keys` and `args`, loading it
    /// when the server lost it; raises ClusterDown or ClusterReply.
    fn script(
        &self,
        py: Python<'_>,
        sha: &str,
        source: &str,
        keys: &Bound<'_, PyAny>,
        argv: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let keys = args(keys)?;
        let argv = args(argv)?;
        let k: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let a: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let v = py
            .detach(|| self.link.script(sha, source, &k, &a))
            .map_err(fault)?;
        reply(py, v)
    }

    /// Counts a failure seen in a reply (a write the server refused).
    fn count_error(&self) {
        self.link.count_error();
    }

    /// Whether the server failed less than `retry_after` ago (a call now
    /// raises ClusterDown at once).
    #[getter]
    fn resting(&self) -> bool {
        self.link.resting()
    }

    /// Records a call made on a client of the caller's own: `None` reached
    /// the server, `True` timed out, `False` failed otherwise (counted; the
    /// server is left alone for `retry_after`).
    fn record(&self, failed: Option<bool>) {
        self.link.record(failed.map_or(Ok(()), Err));
    }

    /// Whether the last call reached the server.
    #[getter]
    fn up(&self) -> bool {
        self.link.up()
    }

    /// Calls that failed for want of the server (timeouts aside).
    #[getter]
    fn errors(&self) -> u64 {
        self.link.errors()
    }

    /// Calls that timed out.
    #[getter]
    fn timeouts(&self) -> u64 {
        self.link.timeouts()
    }

    /// The server's address (never its login).
    #[getter]
    fn server(&self) -> String {
        self.link.server().shown()
    }
}
