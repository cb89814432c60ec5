//! The connection to Redis or Valkey (`ziggurat.cluster.link`): the crate's
//! link, its calls made with the GIL released, its replies as Python values.

use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
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
/// failure, a connection per thread and process. Made with `from_url` or
/// `from_parts`.
///
/// >>> link = ClusterLink.from_url("redis://127.0.0.1:1/0", 0.05, 1.0)
/// >>> link.command("PING")
/// Traceback (most recent call last):
/// ...
/// ziggurat._native.ClusterDown: unreachable: Connection refused (os error 111)
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterLink {
    link: zc::Link,
}

fn seconds(s: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what} must be seconds >= 0, got {s}")))
}

fn fault(f: zc::Fault) -> PyErr {
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

/// A reply as redis-py gives it with `decode_responses` off: bulk and simple
/// strings as bytes, integers, lists, None for nil.
fn reply(py: Python<'_>, v: Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Nil => py.None(),
        Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Value::BulkString(b) => PyBytes::new(py, &b).into_any().unbind(),
        Value::SimpleString(s) => PyBytes::new(py, s.as_bytes()).into_any().unbind(),
        Value::Okay => PyBytes::new(py, b"OK").into_any().unbind(),
        Value::Array(items) | Value::Set(items) => {
            let out = PyList::empty(py);
            for i in items {
                out.append(reply(py, i)?)?;
            }
            out.into_any().unbind()
        }
        Value::Map(pairs) => {
            let out = PyDict::new(py);
            for (k, v) in pairs {
                out.set_item(reply(py, k)?, reply(py, v)?)?;
            }
            out.into_any().unbind()
        }
        Value::Double(d) => d.into_pyobject(py)?.into_any().unbind(),
        Value::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Value::VerbatimString { text, .. } => PyBytes::new(py, text.as_bytes()).into_any().unbind(),
        Value::Attribute { data, .. } => reply(py, *data)?,
        Value::ServerError(e) => return Err(fault(zc::Fault::Reply(format!("{e:?}")))),
        Value::Push { .. } => py.None(),
        _ => py.None(),
    })
}

#[pymethods]
impl ClusterLink {
    /// A link to the server of a `redis://`, `rediss://` or `unix://` URL;
    /// raises ValueError naming what is wrong (never the password).
    ///
    /// >>> ClusterLink.from_url("redis://:pw@h:99999/0", 0.1, 1.0)
    /// Traceback (most recent call last):
    /// ...
    /// ValueError: redis URL 'redis://:***@h:99999/0' is not valid: its port must be a number from 1 to 65535
    #[staticmethod]
    fn from_url(url: &str, timeout: f64, retry_after: f64) -> PyResult<ClusterLink> {
        let e = zc::Endpoint::parse(url).map_err(PyValueError::new_err)?;
        ClusterLink::made(zc::Server::One(e), timeout, retry_after)
    }

    /// A link from an application client's settings: `nodes` as
    /// `(host, port)` pairs (several: a Redis Cluster) or one `(path, 0)`
    /// for a Unix socket, with its database, login and TLS.
    ///
    /// >>> ClusterLink.from_parts([("127.0.0.1", 6379)], 0, None, None, False, False, 0.1, 1.0).server
    /// '127.0.0.1:6379'
    #[staticmethod]
    #[allow(clippy::too_many_arguments)] // the client's settings, one by one
    fn from_parts(
        nodes: Vec<(String, u16)>,
        db: i64,
        username: Option<String>,
        password: Option<String>,
        tls: bool,
        cluster: bool,
        timeout: f64,
        retry_after: f64,
    ) -> PyResult<ClusterLink> {
        let endpoints: Vec<zc::Endpoint> = nodes
            .into_iter()
            .map(|(host, port)| zc::Endpoint {
                address: if port == 0 {
                    zc::Address::Unix(host.into())
                } else {
                    zc::Address::Tcp { host, port, tls }
                },
                db,
                username: username.clone(),
                password: password.clone(),
            })
            .collect();
        let server = match (cluster, endpoints.len()) {
            (false, 1) => zc::Server::One(endpoints.into_iter().next().expect("one endpoint")),
            (false, n) => {
                return Err(PyValueError::new_err(format!(
                    "one server expected, got {n}"
                )))
            }
            (true, _) => zc::Server::Cluster(endpoints),
        };
        ClusterLink::made(server, timeout, retry_after)
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

impl ClusterLink {
    fn made(server: zc::Server, timeout: f64, retry_after: f64) -> PyResult<ClusterLink> {
        let link = zc::Link::new(
            server,
            seconds(timeout, "redis_timeout")?,
            seconds(retry_after, "retry_after")?,
        )
        .map_err(PyValueError::new_err)?;
        Ok(ClusterLink { link })
    }
}
