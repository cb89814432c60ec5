//! Writes as this binding takes part in them: the value encoded by the
//! cache's serializer (or as a native counter, for an int), written by
//! `ziggurat_cache::Cache`, then kept in this process's L1 by the copy mode.

use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt};
use ziggurat_cache::{Arg, Body, CopyMode, Error, Kind, Written};

use crate::args::{check_key, key_hash, named, positive_ttl};
use crate::codec::Encoded;
use crate::convert::{cache_err, tags_arg, ttl_arg, ZigguratError};
use crate::core::CacheCore;
use crate::l1::Entry;

/// The counter payload of an exact `int` that fits in 64 bits: such values are
/// stored natively, so `incr` can change them in place whatever the serializer.
fn as_counter(value: &Bound<'_, PyAny>) -> Option<i64> {
    if value.is_exact_instance_of::<PyInt>() {
        value.extract::<i64>().ok()
    } else {
        None
    }
}

/// An int argument that fits in 64 bits (not a bool).
fn int64(v: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    if !v.is_instance_of::<PyInt>() || v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, not {}",
            v.get_type().name()?
        )));
    }
    v.extract::<i64>().map_err(|_| {
        PyOverflowError::new_err(format!("{what} must fit in a signed 64-bit integer"))
    })
}

/// A failed `incr` as the exception Python callers expect (naming the key).
fn incr_err(key: &Bound<'_, PyAny>, e: Error) -> PyErr {
    let k = key.repr().map(|r| r.to_string()).unwrap_or_default();
    match e {
        Error::Missing => PyKeyError::new_err(key.clone().unbind()),
        Error::NotInteger => PyTypeError::new_err(format!(
            "Cache.incr(): the value of {k} is not an integer; only values stored as an \
             int (or created by incr) can be incremented"
        )),
        Error::Overflow => PyOverflowError::new_err(format!(
            "Cache.incr(): {}",
            ziggurat_cache::incr_overflow(&k)
        )),
        e => cache_err(e),
    }
}

impl CacheCore {
    /// A `ttl` argument checked; None: the cache's.
    fn ttl_given(&self, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
        ttl_arg(ttl)?.map(|t| positive_ttl(t, Arg::Ttl)).transpose()
    }

    /// The bytes and kind `value` is stored as: a counter for an exact `int`
    /// in 64 bits, else what the serializer makes of it.
    pub(crate) fn encode_value<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<(Encoded<'py>, Kind)> {
        if let Some(n) = as_counter(value) {
            return Ok((Encoded::Native(n.to_le_bytes().to_vec()), Kind::Counter));
        }
        // Any failure to encode (an unpicklable object) is the caller's bad input.
        let bad = |e: PyErr| {
            let t = PyTypeError::new_err(format!("cannot serialize the value for this cache: {e}"));
            t.set_cause(py, Some(e));
            t
        };
        if let Some(c) = &self.codec {
            return Ok((c.get().encode_native(py, value).map_err(bad)?, Kind::Value));
        }
        let enc = self.dumps(py, value).map_err(bad)?;
        match enc.cast_into::<PyBytes>() {
            Ok(b) => Ok((Encoded::Py(b), Kind::Value)),
            Err(_) => Err(PyTypeError::new_err(
                "the serializer's dumps must return bytes",
            )),
        }
    }

    /// Encodes `value` (arguments already checked), writes it with `write`
    /// (a plain write, or `Cache::land` for a load's value), then keeps the object in this
    /// process's L1 as the copy mode says. Without a segment (degraded), L1
    /// alone keeps a private copy for `ttl()` seconds (capped).
    pub(crate) fn store_with(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        value: &Bound<'_, PyAny>,
        ttl: impl FnOnce() -> f64,
        write: impl FnOnce(Body<'_>, Kind) -> Result<Written, Error>,
    ) -> PyResult<()> {
        let (enc, kind) = self.encode_value(py, value)?;
        let counter = kind == Kind::Counter;
        if self.cache.main().is_none() {
            // The encoded bytes in decode mode (decoded per get), else a decoded object.
            let obj = match self.mode {
                _ if counter => value.clone().unbind(),
                CopyMode::Decode => enc.to_py(py).into_any().unbind(),
                _ => self.loads(py, enc.to_py(py).as_any())?,
            };
            let t = self.cache.degraded_trailer(kind, ttl());
            self.l1_put(key, || {
                let k = key.clone().unbind();
                Entry::new(
                    k,
                    hash,
                    obj,
                    None,
                    false,
                    None,
                    Box::new([]),
                    t.soft,
                    t.ttl_ms,
                )
            });
            return Ok(());
        }
        // The payload is read again below only by modes that keep bytes.
        let keeps_bytes = !counter && !self.mode.as_is(self.debug);
        let kept_enc;
        let body = match enc {
            Encoded::Native(v) if !keeps_bytes => {
                kept_enc = None;
                Body::Owned(v)
            }
            enc => {
                kept_enc = Some(enc);
                Body::Bytes(kept_enc.as_ref().map_or(&[][..], |e| e.as_bytes()))
            }
        };
        // No GIL release: the write is a few hundred ns, and a lock wait is
        // bounded by lock_timeout without needing the GIL on the other side.
        let written = write(body, kind).map_err(cache_err)?;
        let Some(kept) = written.kept else {
            // Stale now anyway (its stamp moved); drop it to free the slot.
            self.l1_discard(key, hash);
            return Ok(());
        };
        let payload = || PyBytes::new(py, kept_enc.as_ref().map_or(&[][..], |b| b.as_bytes()));
        let (stored, encoded) = match self.mode {
            // Ints are immutable: every mode may keep the object itself.
            _ if counter => (value.clone().unbind(), None),
            CopyMode::Decode => (payload().into_any().unbind(), None),
            // "copy" promises callers their own objects: keep a private decode, not
            // the caller's object, which the caller may still change.
            CopyMode::Copy => match self.loads(py, payload().as_any()) {
                Ok(obj) => (obj, None),
                Err(_) => {
                    // The write is done; without a private copy, just forget L1's.
                    self.l1_discard(key, hash);
                    return Ok(());
                }
            },
            // "shared" hands out the object that was set, as lru_cache does.
            CopyMode::Shared => (
                value.clone().unbind(),
                self.debug.then(|| payload().into_any().unbind()),
            ),
        };
        let t = written.trailer;
        // Replaces this process's previous entry for the key, if any.
        self.l1_put(key, || {
            let (k, tags) = (key.clone().unbind(), kept.tags.into_boxed_slice());
            Entry::new(
                k,
                hash,
                stored,
                encoded,
                false,
                Some(kept.watch),
                tags,
                t.soft,
                t.ttl_ms,
            )
        });
        Ok(())
    }

    /// A plain write of `value` for `ttl` seconds, kept `stale` more.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        value: &Bound<'_, PyAny>,
        ttl: f64,
        stale: f64,
        tags: &[Vec<u8>],
    ) -> PyResult<()> {
        let hash = key_hash(key)?;
        self.store_with(
            py,
            key,
            hash,
            value,
            || ttl,
            |body, kind| {
                self.cache
                    .store(kb, None, body, kind, ttl, stale, tags, || ())
            },
        )
    }
}

#[pymethods]
impl CacheCore {
    /// Encodes and stores `value`. `ttl` and `stale_ttl` in seconds.
    #[pyo3(signature = (key, value, ttl, tags = None, stale_ttl = None))]
    fn store_value(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: &Bound<'_, PyAny>,
        tags: Option<&Bound<'_, PyAny>>,
        stale_ttl: Option<f64>,
    ) -> PyResult<()> {
        // Every check comes before any write, so bad input changes nothing.
        let Some(ttl) = ttl_arg(Some(ttl))? else {
            return Err(PyTypeError::new_err("ttl must be a number of seconds"));
        };
        let ttl = positive_ttl(ttl, Arg::Ttl)?;
        let stale = match stale_ttl {
            None => 0.0,
            Some(s) => positive_ttl(s, Arg::StaleTtl)?,
        };
        let kb = check_key(key)?;
        let tags = tags_arg(tags)?;
        self.write(py, key, kb, value, ttl, stale, &tags)
    }

    /// `Cache.set`: `ttl` defaults to the cache's, `stale_ttl` is the cache's.
    /// A failed write (lock timeout, segment error) is reported to the write
    /// error hook (logged and counted) and raised.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        named(
            py,
            "Cache.set",
            (|| {
                let (ttl, stale) = self.cache.write_ttls(self.ttl_given(ttl)?);
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                self.write(py, key, kb, value, ttl, stale, &tags)
                    .inspect_err(|e| {
                        if e.is_instance_of::<ZigguratError>(py) {
                            self.write_failed(py, "set", key, e.clone_ref(py));
                        }
                    })
            })(),
        )
    }

    /// `Cache.add`: stores `value` only if `key` holds no fresh value (one
    /// winner among every process of the host); returns whether it stored.
    #[pyo3(signature = (key, value, *, ttl = None, tags = None))]
    fn add(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        named(
            py,
            "Cache.add",
            (|| {
                self.cache.writable().map_err(cache_err)?;
                let ttl = self.ttl_given(ttl)?;
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let (enc, kind) = self.encode_value(py, value)?;
                self.cache
                    .add(kb, enc.as_bytes(), kind, ttl, &tags)
                    .map_err(cache_err)
            })(),
        )
    }

    /// `Cache.incr`: adds `delta` to the counter under `key`, atomically for
    /// every process of the host; a missing key starts from `default` (with the
    /// cache's TTL and `tags`) or raises `KeyError`.
    #[pyo3(signature = (key, delta = None, *, default = None, tags = None))]
    pub(crate) fn incr(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        delta: Option<&Bound<'_, PyAny>>,
        default: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i64> {
        named(
            py,
            "Cache.incr",
            (|| {
                let delta = match delta {
                    None => 1,
                    Some(d) => int64(d, "delta")?,
                };
                let default = match default {
                    Some(d) if !d.is_none() => Some(int64(d, "default")?),
                    _ => None,
                };
                self.cache.writable().map_err(cache_err)?;
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                self.cache
                    .incr(kb, delta, default, &tags)
                    .map_err(|e| incr_err(key, e))
            })(),
        )
    }

    /// `Cache.touch`: a new lifetime of `ttl` seconds from now for the fresh
    /// value under `key`; whether there was one.
    #[pyo3(signature = (key, ttl = None))]
    fn touch(&self, key: &Bound<'_, PyAny>, ttl: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        named(
            key.py(),
            "Cache.touch",
            (|| {
                self.cache.writable().map_err(cache_err)?;
                let ttl = self.ttl_given(ttl)?;
                let kb = check_key(key)?;
                self.cache.touch(kb, ttl).map_err(cache_err)
            })(),
        )
    }

    /// Removes `key` from every tier; returns whether L2 held it.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        named(
            key.py(),
            "Cache.delete",
            (|| {
                let kb = check_key(key)?;
                let hash = key_hash(key)?;
                self.l1_discard(key, hash);
                self.cache.delete(kb).map_err(cache_err)
            })(),
        )
    }

    /// Voids every entry carrying any of `tags`, in every process.
    fn invalidate_tags(&self, py: Python<'_>, tags: &Bound<'_, PyAny>) -> PyResult<()> {
        let tags = tags_arg(Some(tags))?;
        self.cache.invalidate_tags(&tags).map_err(cache_err)?;
        if self.cache.main().is_none() {
            self.l1_clear(py); // no tag versions to check against
        }
        Ok(())
    }

    /// Empties every tier on this host.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.l1_clear(py);
        py.detach(|| self.cache.clear()).map_err(cache_err)
    }
}
