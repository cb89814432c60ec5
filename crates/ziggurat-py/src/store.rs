//! Writes: a value (or a counter, for an int) into the main segment and this
//! process's L1, a cached miss into the cached-miss segment, and the writes
//! that read first (`add`, `incr`, `touch`, done by `ziggurat_cache` under the
//! key's shard lock).

use pyo3::exceptions::{PyKeyError, PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt};
use ziggurat_cache::{Kind, Lifetime, Trailer, UpdateError};
use ziggurat_core::KeyHash;

use crate::args::{check_key, key_hash, named, positive_ttl};
use crate::codec::Encoded;
use crate::convert::{err, tags_arg, ttl_arg, ZigguratError};
use crate::core::{CacheCore, CopyMode};
use crate::l1::Entry;

/// The entry's lifetime for `ttl` and `stale` seconds (both already checked).
pub(crate) fn lifetime(ttl: f64, stale: f64) -> Lifetime {
    Lifetime::from_seconds(ttl, stale).unwrap_or(Lifetime {
        ttl_ms: None,
        stale_ms: 0,
    })
}

/// The counter payload of an exact `int` that fits in 64 bits: such values are
/// stored natively, so `incr` can change them in place whatever the serializer.
pub(crate) fn as_counter(value: &Bound<'_, PyAny>) -> Option<i64> {
    if value.is_exact_instance_of::<PyInt>() {
        value.extract::<i64>().ok()
    } else {
        None
    }
}

/// An int argument that fits in 64 bits (not a bool).
pub(crate) fn int64(v: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
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

/// Maps a failed `incr` to the exception Python callers expect.
pub(crate) fn incr_error(key: &Bound<'_, PyAny>, e: UpdateError) -> PyErr {
    let k = key.repr().map(|r| r.to_string()).unwrap_or_default();
    match e {
        UpdateError::Missing => PyKeyError::new_err(key.clone().unbind()),
        UpdateError::NotInteger => PyTypeError::new_err(format!(
            "Cache.incr(): the value of {k} is not an integer; only values stored as an \
             int (or created by incr) can be incremented"
        )),
        UpdateError::Overflow => PyOverflowError::new_err(format!(
            "Cache.incr(): the counter {k} would leave the signed 64-bit range"
        )),
        UpdateError::Segment(e) => err(e),
    }
}

impl CacheCore {
    /// A `ttl` argument checked, or `default` when it is None.
    pub(crate) fn ttl_or_default(
        &self,
        ttl: Option<&Bound<'_, PyAny>>,
        default: f64,
    ) -> PyResult<f64> {
        match ttl_arg(ttl)? {
            None => Ok(default),
            Some(t) => positive_ttl(t, "ttl"),
        }
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

    /// Encodes and writes `value` (arguments already checked), calls `written`
    /// once the segment holds it, then keeps the object in this process's L1.
    /// `kh`: the key as the main segment hashes it, when the caller hashed it
    /// already; such a caller loads what the write touches itself, if at all
    /// (a fetch's load does before its loader runs, so that the loads overlap
    /// it; a background refresh does without).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        kh: Option<KeyHash>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        stale: f64,
        tags: &[Vec<u8>],
        written: impl FnOnce(),
    ) -> PyResult<()> {
        let kh = self.main.as_ref().map(|m| {
            kh.unwrap_or_else(|| {
                let kh = m.hash(kb);
                m.prefetch_write(&kh);
                kh
            })
        });
        let (enc, kind) = self.encode_value(py, value)?;
        let counter = kind == Kind::Counter;
        let Some(main) = self.main.as_ref() else {
            let ttl = self.degraded_ttl.map_or(ttl, |cap| ttl.min(cap));
            let life = lifetime(ttl, stale);
            // Degraded: no segment. Keep a private copy in L1 only: the encoded
            // bytes in decode mode (decoded per get), else a decoded object.
            let obj = match self.mode {
                _ if counter => value.clone().unbind(),
                CopyMode::Decode => enc.to_py(py).into_any().unbind(),
                _ => self.loads(py, enc.to_py(py).as_any())?,
            };
            let t = Trailer::starting_now(kind, life.ttl_ms);
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                obj,
                None,
                false,
                None,
                Box::new([]),
                t.soft,
                t.ttl_ms,
            );
            self.l1_put(key, e);
            return Ok(());
        };
        let life = lifetime(ttl, stale);
        let t = Trailer::starting_now(kind, life.ttl_ms);
        let buf = match enc {
            Encoded::Native(v) => ziggurat_cache::seal(v, &t),
            Encoded::Py(b) => ziggurat_cache::encode(b.as_bytes(), &t),
        };
        let payload = &buf[..buf.len() - ziggurat_cache::TRAILER_LEN];
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        let kh = kh.unwrap_or_else(|| main.hash(kb));
        // No GIL release: the write is a few hundred ns, and a lock wait is
        // bounded by lock_timeout without needing the GIL on the other side.
        let kept = ziggurat_cache::store(
            main,
            kb,
            &kh,
            &buf,
            &life,
            &tag_refs,
            self.l1_enabled,
            written,
        )
        .map_err(err)?;
        if let Some(kept) = kept {
            let (stored, encoded) = match self.mode {
                // Ints are immutable: every mode may keep the object itself.
                _ if counter => (value.clone().unbind(), None),
                CopyMode::Decode => (PyBytes::new(py, payload).into_any().unbind(), None),
                // "copy" promises callers their own objects: keep a private decode, not
                // the caller's object, which the caller may still change.
                CopyMode::Copy => match self.loads(py, PyBytes::new(py, payload).as_any()) {
                    Ok(obj) => (obj, None),
                    Err(_) => {
                        // The write is done; without a private copy, just forget L1's.
                        let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
                        return Ok(());
                    }
                },
                // "shared" hands out the object that was set, as lru_cache does.
                CopyMode::Shared => (
                    value.clone().unbind(),
                    self.debug
                        .then(|| PyBytes::new(py, payload).into_any().unbind()),
                ),
            };
            // Replaces this process's previous entry for the key, if any.
            let e = Entry::new(
                key.clone().unbind(),
                hash,
                stored,
                encoded,
                false,
                Some(kept.watch),
                kept.tags.into_boxed_slice(),
                t.soft,
                t.ttl_ms,
            );
            self.l1_put(key, e);
        } else {
            // Stale now anyway (its stamp moved); drop it to free the slot.
            let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
        }
        Ok(())
    }

    /// Writes a cached miss of `kb` valid while its main stamp is `stamp`.
    pub(crate) fn store_negative(
        &self,
        kb: &[u8],
        ttl: f64,
        stamp: u32,
        tags: &[Vec<u8>],
    ) -> PyResult<()> {
        let Some(neg) = self.neg.as_ref() else {
            return Ok(());
        };
        let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
        ziggurat_cache::store_negative(neg, kb, stamp, &lifetime(ttl, 0.0), &tag_refs).map_err(err)
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
        let ttl = positive_ttl(ttl, "ttl")?;
        let stale = match stale_ttl {
            None => 0.0,
            Some(s) => positive_ttl(s, "stale_ttl")?,
        };
        let kb = check_key(key)?;
        let tags = tags_arg(tags)?;
        let hash = key_hash(key)?;
        self.store(py, key, kb, hash, None, value, ttl, stale, &tags, || ())
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
                let f = &self.cfg;
                let ttl = self.ttl_or_default(ttl, f.ttl)?;
                let stale = f.stale_ttl.unwrap_or(0.0);
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let hash = key_hash(key)?;
                self.store(py, key, kb, hash, None, value, ttl, stale, &tags, || ())
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
                let (main, f) = self.writable()?;
                let ttl = self.ttl_or_default(ttl, f.ttl)?;
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let (enc, kind) = self.encode_value(py, value)?;
                let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
                let life = lifetime(ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::add(main, kb, enc.as_bytes(), kind, &life, &tag_refs).map_err(err)
            })(),
        )
    }

    /// `Cache.incr`: adds `delta` to the counter under `key`, atomically for
    /// every process of the host; a missing key starts from `default` (with the
    /// cache's TTL and `tags`) or raises `KeyError`.
    #[pyo3(signature = (key, delta = None, *, default = None, tags = None))]
    fn incr(
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
                let (main, f) = self.writable()?;
                let kb = check_key(key)?;
                let tags = tags_arg(tags)?;
                let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_slice()).collect();
                let life = lifetime(f.ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::incr(main, kb, delta, default.map(|d| (d, &life, &tag_refs[..])))
                    .map_err(|e| incr_error(key, e))
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
                let (main, f) = self.writable()?;
                let ttl = self.ttl_or_default(ttl, f.ttl)?;
                let kb = check_key(key)?;
                let life = lifetime(ttl, f.stale_ttl.unwrap_or(0.0));
                ziggurat_cache::touch(main, kb, &life).map_err(err)
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
                let _ = self.l1.try_with(key.py(), |l1| l1.discard(key, hash));
                match &self.main {
                    Some(main) => main.delete(kb).map_err(err),
                    None => Ok(false),
                }
            })(),
        )
    }

    /// Voids every entry carrying any of `tags`, in every process.
    fn invalidate_tags(&self, tags: &Bound<'_, PyAny>) -> PyResult<()> {
        let tags_obj = tags;
        let tags = tags_arg(Some(tags))?;
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            for t in &tags {
                seg.invalidate_tag(t).map_err(err)?;
            }
        }
        if self.main.is_none() {
            self.l1_clear(tags_obj.py()); // no tag versions to check against
        }
        Ok(())
    }

    /// Empties every tier on this host.
    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        self.l1_clear(py);
        for seg in [&self.main, &self.neg].into_iter().flatten() {
            py.detach(|| seg.clear()).map_err(err)?;
        }
        Ok(())
    }
}
