//! The reads of a key: `get` (and `aget`'s two halves), `peek`, and `PyFront`,
//! the `ziggurat_cache::Front` of one call (payloads made as Python bytes,
//! decoded by the cache's serializer, kept in this process's L1 by the copy
//! mode). The rules of the read below L1 are `ziggurat_cache::Cache::read`'s.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use ziggurat_cache::{CopyMode, Error, Found, Front, Kind, Look, Payload, Read};

use crate::args::{check_key, key_hash, named};
use crate::convert::fetch_err;
use crate::core::CacheCore;
use crate::l1::Entry;

/// One call's side of a read or a miss for `key` (Python hash `hash`).
pub(crate) struct PyFront<'a, 'py> {
    core: &'a CacheCore,
    key: &'a Bound<'py, PyAny>,
    hash: u64,
}

impl<'a, 'py> PyFront<'a, 'py> {
    pub(crate) fn new(core: &'a CacheCore, key: &'a Bound<'py, PyAny>, hash: u64) -> Self {
        PyFront { core, key, hash }
    }

    fn py(&self) -> Python<'py> {
        self.key.py()
    }

    /// The object in `payload` (a counter's int, or what the serializer
    /// decodes); None when this process cannot decode it (renamed class,
    /// other serializer): a miss, not a failure of the request, counted and
    /// reported to the cache, which logs it once per key.
    fn decode(&self, kind: Kind, payload: &Bound<'py, PyBytes>) -> Option<Py<PyAny>> {
        let py = self.py();
        if kind == Kind::Counter {
            let b: [u8; 8] = payload.as_bytes().try_into().ok()?;
            return Some(
                i64::from_le_bytes(b)
                    .into_pyobject(py)
                    .ok()?
                    .into_any()
                    .unbind(),
            );
        }
        match self.core.loads(py, payload.as_any()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.core.cache.counts().decode_errors.bump();
                self.core.write_failed(py, "decode", self.key, e);
                None
            }
        }
    }

    /// An L1 entry of `value` (None: a cached miss) as read, watching
    /// `found`'s words (`found.keep` is set).
    fn entry<P>(
        &self,
        value: Option<Py<PyAny>>,
        encoded: Option<Py<PyAny>>,
        found: Found<P>,
    ) -> Entry {
        let watch = found.keep;
        let t = found.trailer;
        let negative = value.is_none();
        Entry::new(
            self.key.clone().unbind(),
            self.hash,
            value.unwrap_or_else(|| self.py().None()),
            encoded,
            negative,
            watch,
            found.tags.into_boxed_slice(),
            t.soft,
            t.ttl_ms,
        )
    }
}

/// Payloads as Python bytes objects: what the serializer decodes. None when
/// the object cannot be made (no memory): that read is a miss, as the cache
/// never fails a call for want of room. (An option, not a result: the read
/// moves its payload several times, and an error makes it eight times larger.)
impl<'py> Payload for PyFront<'_, 'py> {
    type Out = Option<Bound<'py, PyBytes>>;

    fn copied(&mut self, bytes: &[u8]) -> Self::Out {
        Some(PyBytes::new(self.py(), bytes))
    }

    fn written(&mut self, len: usize, write: &dyn Fn(&mut [u8])) -> Self::Out {
        PyBytes::new_with(self.py(), len, |buf| {
            write(buf);
            Ok(())
        })
        .ok()
    }
}

impl<'py> Front for PyFront<'_, 'py> {
    type Value = Py<PyAny>;
    type Error = PyErr;

    fn l1(&mut self) -> PyResult<Option<Option<Py<PyAny>>>> {
        let py = self.py();
        Ok(self
            .core
            .l1_lookup(py, self.key, self.hash)?
            .map(|e| e.value))
    }

    fn fresh(&mut self, found: Found<Self::Out>) -> PyResult<Option<Py<PyAny>>> {
        let py = self.py();
        let core = self.core;
        let kind = found.trailer.kind;
        let Some(payload) = found.payload.as_ref() else {
            return Ok(None);
        };
        let Some(obj) = self.decode(kind, payload) else {
            return Ok(None);
        };
        // A decode no L1 keeps is this call's own object: handed out as is
        // in every copy mode.
        if found.keep.is_none() {
            return Ok(Some(obj));
        }
        let counter = kind == Kind::Counter;
        let (stored, encoded) = match core.mode {
            CopyMode::Decode if !counter => (payload.clone().into_any().unbind(), None),
            _ => (
                obj.clone_ref(py),
                (core.debug && !counter).then(|| payload.clone().into_any().unbind()),
            ),
        };
        core.l1_put(self.key, || self.entry(Some(stored), encoded, found));
        match core.mode {
            // In decode mode L1 keeps the bytes, and in shared mode the same
            // object: `obj` is the caller's.
            CopyMode::Decode | CopyMode::Shared => Ok(Some(obj)),
            CopyMode::Copy => core.out(py, &obj).map(Some),
        }
    }

    fn stale(&mut self, found: Found<Self::Out>) -> Option<Py<PyAny>> {
        let kind = found.trailer.kind;
        found.payload.and_then(|p| self.decode(kind, &p))
    }

    fn negative(&mut self, found: Found<()>) {
        if found.keep.is_some() {
            self.core.l1_put(self.key, || self.entry(None, None, found));
        }
    }

    fn error(&mut self, e: Error) -> PyErr {
        fetch_err(self.key, e)
    }
}

/// What `peek` found (named fields, see `CacheCore::peek`).
#[pyclass(module = "ziggurat._native", frozen, get_all)]
pub struct Peek {
    /// `ziggurat.loader.Found`: 0 miss, 1 hit, 2 cached miss, 3 stale.
    found: u8,
    /// The value (None unless hit or stale).
    value: Py<PyAny>,
    /// Seconds before the entry goes stale; negative: stale for that long.
    seconds_left: f64,
    /// The TTL the entry was written with, in seconds (0: never expires).
    ttl: f64,
}

#[pymethods]
impl CacheCore {
    /// What this process would find for `key` now, without loading: the
    /// kind (`ziggurat.loader.Found`), the value, the seconds left before it
    /// goes stale (negative: stale for that long) and its TTL. Fills L1 like
    /// a read does.
    fn peek(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Peek> {
        named(
            py,
            "Cache.peek",
            (|| {
                let hash = key_hash(key)?;
                let look = match self.l1_lookup(py, key, hash)? {
                    Some(e) => Look::in_l1(e.value, e.soft, e.ttl_ms),
                    None => {
                        let kb = check_key(key)?;
                        self.cache.counts().l1_misses.bump();
                        let mut front = PyFront::new(self, key, hash);
                        Look::read(self.cache.read(kb, None, true, &mut front)?)
                    }
                };
                Ok(Peek {
                    found: look.sight as u8,
                    value: look.value.unwrap_or_else(|| py.None()),
                    seconds_left: look.seconds_left,
                    ttl: look.ttl,
                })
            })(),
        )
    }
}

#[pymethods]
impl CacheCore {
    /// The cached value of `key`, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.get_value(py, key, default)
    }

    /// `Cache.aget`'s first half: the value this process's tiers hold, `default`
    /// for a cached miss or a miss with no tier below, else `missing` (ask
    /// `get_below`, which may wait on the network).
    fn get_local(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Py<PyAny>,
        missing: Py<PyAny>,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "Cache.get",
            (|| {
                Ok(match self.get_here(py, key)? {
                    Here::Value(v) => v,
                    Here::Negative => default,
                    Here::Missing if self.tier_below.get().is_some() => missing,
                    Here::Missing => default,
                })
            })(),
        )
    }

    /// `Cache.aget`'s second half: the tier below's value of `key` (kept here
    /// too), or `default`.
    fn get_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Py<PyAny>,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "Cache.get",
            (|| Ok(self.ask_tier_below(py, key, false)?.unwrap_or(default)))(),
        )
    }
}

/// What [`CacheCore::get_here`] found.
enum Here {
    Value(Py<PyAny>),
    /// A cached miss: the caller's default.
    Negative,
    /// Nothing here: the tier below may hold it.
    Missing,
}

impl CacheCore {
    /// `Cache.get`'s body, for the method and for its quick entry (`quick`).
    pub(crate) fn get_value(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "Cache.get",
            (|| {
                let found = match self.get_here(py, key)? {
                    Here::Value(v) => Some(v),
                    Here::Negative => None,
                    Here::Missing => self.ask_tier_below(py, key, false)?,
                };
                Ok(found.unwrap_or_else(|| default.unwrap_or_else(|| py.None())))
            })(),
        )
    }

    /// What this process's tiers (L1, then L2) hold for `key`, without asking
    /// the tier below. A cached miss in L2 answers as it does from L1.
    fn get_here(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Here> {
        // Only an L1 entry needs the key's Python hash.
        let hash = if self.l1_enabled {
            let hash = key_hash(key)?;
            if let Some(e) = self.l1_lookup(py, key, hash)? {
                return Ok(e.value.map_or(Here::Negative, Here::Value));
            }
            hash
        } else {
            0
        };
        let kb = check_key(key)?;
        self.cache.counts().l1_misses.bump();
        let mut front = PyFront::new(self, key, hash);
        Ok(match self.cache.read(kb, None, false, &mut front)? {
            Read::Fresh(v, _) => Here::Value(v),
            Read::Negative(_) => Here::Negative,
            Read::Stale(..) | Read::Miss(_) => Here::Missing,
        })
    }
}
