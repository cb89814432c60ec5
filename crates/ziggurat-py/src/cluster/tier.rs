//! The tier's reads and writes (`ziggurat.cluster.tier`): ziggurat-cluster's
//! tier on the cache's own segment, each call made with the GIL released.
//! Python keeps the serializer (values arrive here as bytes or an int) and
//! the wording of errors and warnings.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyTuple};
use ziggurat_cluster as zc;

use super::link::{ClusterLink, ClusterReply};
use super::signer::ClusterSigner;
use crate::args::check_key;
use crate::core::CacheCore;

/// The tier of one cache (see `ziggurat.cluster.tier`). `warn(message)` is
/// called with what the crate reports, worded by the crate.
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterTier {
    pub(super) tier: Arc<zc::Tier>,
    pub(super) cache: Arc<ziggurat_cache::Cache>,
}

enum Value<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Value<'_> {
    fn data(&self) -> zc::Data<'_> {
        match self {
            Value::Bytes(b) => zc::Data::Encoded(b),
            Value::Int(i) => zc::Data::Int(*i),
        }
    }
}

/// A value as the tier takes it: the serializer's bytes, or an int within ±2^53.
fn value<'a>(v: &'a Bound<'_, PyAny>) -> PyResult<Value<'a>> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes()));
    }
    Ok(Value::Int(v.extract::<i64>()?))
}

fn tags_of(tags: &[String]) -> Vec<&str> {
    tags.iter().map(String::as_str).collect()
}

/// What the front end does after a write Redis did not take.
fn local<T>(r: Result<T, zc::NotDone>) -> PyResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(zc::NotDone::Local) => Ok(None),
        Err(zc::NotDone::Incr(why)) => Err(ClusterReply::new_err(
            match why {
                zc::Refusal::Missing => "MISSING",
                zc::Refusal::NotInt => "NOTINT",
                zc::Refusal::Overflow => "OVERFLOW",
                _ => "ERR",
            }
            .to_owned(),
        )),
    }
}

fn stored(py: Python<'_>, s: Option<zc::Stored>) -> PyResult<Py<PyAny>> {
    let Some(s) = s else { return Ok(py.None()) };
    let (kind, data) = match s.data {
        zc::Held::Encoded(b) => ("P", PyBytes::new(py, &b).into_any()),
        zc::Held::Int(i) => ("I", PyInt::new(py, i).into_any()),
        zc::Held::Counter(i) => ("N", PyInt::new(py, i).into_any()),
    };
    let tags = PyTuple::new(py, s.tags)?;
    Ok((kind, data, s.left_s, tags)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

type ValueWrite<T> =
    fn(&zc::Tier, zc::Host<'_>, &[u8], zc::Data<'_>, f64, &[&str]) -> Result<T, zc::NotDone>;

impl ClusterTier {
    /// `set` or `add` of `value` with the GIL released.
    fn value_write<T: Send>(
        &self,
        py: Python<'_>,
        write: ValueWrite<T>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        tags: Vec<String>,
    ) -> PyResult<Option<T>> {
        let (k, v) = (check_key(key)?, self::value(value)?);
        let t = tags_of(&tags);
        local(py.detach(|| write(&self.tier, self.host(), k, v.data(), ttl, &t)))
    }

    fn host(&self) -> zc::Host<'_> {
        zc::Host { cache: &self.cache }
    }
}

#[pymethods]
impl ClusterTier {
    /// The tier of the cache whose segment is `name`.
    #[new]
    #[allow(clippy::too_many_arguments)] // the tier's settings, one by one
    fn new(
        link: &ClusterLink,
        signer: &ClusterSigner,
        cache: PyRef<'_, CacheCore>,
        name: String,
        stream_length: u64,
        single_flight: bool,
        loader_timeout: f64,
        warn: Py<PyAny>,
    ) -> PyResult<ClusterTier> {
        let loader_timeout = Duration::from_secs_f64(loader_timeout.max(0.001));
        let settings = zc::Settings {
            name,
            stream_length,
            tombstone: zc::tombstone_for(loader_timeout),
            single_flight,
            loader_timeout,
        };
        let name_said = settings.name.clone();
        let say = move |w: zc::Warning| {
            Python::attach(|py| {
                if let Err(e) = warn.call1(py, (w.message(&name_said),)) {
                    e.write_unraisable(py, None);
                }
            })
        };
        Ok(ClusterTier {
            tier: Arc::new(zc::Tier::new(
                link.link.clone(),
                signer.0.clone(),
                settings,
                Box::new(say),
            )),
            cache: cache.cache.clone(),
        })
    }

    /// The value of `key` in Redis, copied into the host's segment:
    /// `(kind, data, seconds left, tags)` with kind "P" (the serializer's
    /// bytes), "I" (an int) or "N" (a counter), or None.
    fn ask(&self, py: Python<'_>, key: &Bound<'_, PyAny>, loading: bool) -> PyResult<Py<PyAny>> {
        let k = check_key(key)?;
        let s = py.detach(|| self.tier.ask(self.host(), k, loading));
        stored(py, s)
    }

    /// How a load ended: `value` (bytes or int; None: a miss or a failure)
    /// is offered to Redis for `ttl` seconds; a held lease is given back.
    fn tell(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        ttl: f64,
        tags: Vec<String>,
    ) -> PyResult<()> {
        let k = check_key(key)?;
        let v = value.map(self::value).transpose()?;
        let t = tags_of(&tags);
        py.detach(|| {
            self.tier
                .tell(self.host(), k, v.as_ref().map(Value::data), ttl, &t)
        });
        Ok(())
    }

    /// `set` in Redis and this host; False: Redis could not take it (write
    /// the host alone).
    fn set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        tags: Vec<String>,
    ) -> PyResult<bool> {
        Ok(self
            .value_write(py, zc::Tier::set, key, value, ttl, tags)?
            .is_some())
    }

    /// `add` across the cluster: whether it stored; None: write the host alone.
    fn add(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        tags: Vec<String>,
    ) -> PyResult<Option<bool>> {
        self.value_write(py, zc::Tier::add, key, value, ttl, tags)
    }

    /// `delete` in Redis: whether Redis held a value (the host's own copy is
    /// the caller's to delete).
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let k = check_key(key)?;
        Ok(py.detach(|| self.tier.delete(self.host(), k)))
    }

    /// `incr` in Redis: the count; None: count on the host alone. Raises
    /// ClusterReply "MISSING", "NOTINT" or "OVERFLOW".
    #[allow(clippy::too_many_arguments)] // the call's own arguments
    fn incr(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        delta: i64,
        default: Option<i64>,
        ttl: f64,
        tags: Vec<String>,
    ) -> PyResult<Option<i64>> {
        let k = check_key(key)?;
        let t = tags_of(&tags);
        local(py.detach(|| self.tier.incr(self.host(), k, delta, default, ttl, &t)))
    }

    /// `touch` in Redis: whether the key held a value; None: touch the host alone.
    fn touch(&self, py: Python<'_>, key: &Bound<'_, PyAny>, ttl: f64) -> PyResult<Option<bool>> {
        let k = check_key(key)?;
        local(py.detach(|| self.tier.touch(self.host(), k, ttl)))
    }

    /// `invalidate_tags` in Redis and this host.
    fn invalidate_tags(&self, py: Python<'_>, tags: Vec<String>) {
        let t = tags_of(&tags);
        py.detach(|| self.tier.invalidate_tags(self.host(), &t));
    }

    /// `clear` in Redis and this host.
    fn clear(&self, py: Python<'_>) {
        py.detach(|| self.tier.clear(self.host()));
    }

    /// A write time for a write made now (µs).
    fn clock(&self) -> u64 {
        self.tier.clock(self.host())
    }

    /// The host learnt of a write made at `w` (µs).
    fn saw(&self, w: u64) {
        self.tier.saw(self.host(), w);
    }

    /// This host's id in events.
    fn host_id(&self) -> String {
        self.host().id()
    }

    /// Counts a value from Redis the serializer could not decode, as one
    /// that failed its check.
    fn count_bad(&self) {
        self.tier
            .counts
            .bad_signatures
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// This process's counters.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.tier.counts.all() {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
}
