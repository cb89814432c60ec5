//! Where a tier below the host joins the miss path: the cluster tier, written
//! in Python over a Redis client, is asked after an L2 miss and before any
//! loader (`ask`), and told how each load ended (`tell`). What it finds is
//! copied into the segment by `fill`, only if nothing voided the key while the
//! value travelled. The words the tier keeps in the segment (its reader's
//! election and stream cursor) are read and swapped here too.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use ziggurat_cache::Kind;

use crate::args::{check_key, positive_ttl};
use crate::codec::Encoded;
use crate::convert::{cache_err, tags_arg};
use crate::core::{CacheCore, TierBelow};

impl CacheCore {
    /// Asks the tier below for `key`: its value, or None on a miss (or when
    /// there is no tier below). `loading`: the caller holds the key's load
    /// lease and will run the loader on a miss (the tier may make the hosts of
    /// the cluster share that load). The tier never makes the caller fail: an
    /// error it raises is reported as a failed read and counts as a miss.
    pub(crate) fn ask_tier_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        loading: bool,
    ) -> PyResult<Option<Py<PyAny>>> {
        let Some(tier) = self.tier_below.get() else {
            return Ok(None);
        };
        match tier.ask.call1(py, (key, loading)) {
            Ok(r) if r.is_none(py) => Ok(None),
            Ok(r) => {
                let t = r.bind(py).cast::<PyTuple>().map_err(|_| {
                    PyTypeError::new_err("the tier below must return None or a 1-tuple")
                })?;
                Ok(Some(t.get_item(0)?.unbind()))
            }
            Err(e) => {
                self.write_failed(py, "l3 read", key, e);
                Ok(None)
            }
        }
    }

    /// Tells the tier below how a load of `key` ended: the value it produced
    /// (None for a cached miss) with its TTL, or, with a negative `ttl`, that the
    /// loader failed.
    pub(crate) fn tell_tier_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        tags: &[Vec<u8>],
    ) {
        let Some(tier) = self.tier_below.get() else {
            return;
        };
        let r = PyList::new(
            py,
            tags.iter().map(|t| String::from_utf8_lossy(t).into_owned()),
        )
        .and_then(|tags| tier.tell.call1(py, (key, value, ttl, tags)));
        if let Err(e) = r {
            self.write_failed(py, "l3 write", key, e);
        }
    }
}

#[pymethods]
impl CacheCore {
    /// Installs the tier below: `ask(key, loading)` returns None or
    /// `(value,)`; `tell(key, value, ttl, tags)` is told how each load ended
    /// (see `tell_tier_below`). Once only.
    fn join_below(&self, ask: Py<PyAny>, tell: Py<PyAny>) -> PyResult<()> {
        let tier = TierBelow { ask, tell };
        if self.tier_below.set(tier).is_err() || !self.cache.join_tier_below() {
            return Err(PyValueError::new_err("a tier below is already joined"));
        }
        Ok(())
    }

    /// What `fill` compares against for `key`: None without a segment or while
    /// a write of the key is in progress (then do not fill).
    fn seen(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<(u32, u64, u64)>> {
        let kb = check_key(key)?;
        Ok(self.cache.seen(kb).map(|s| s.parts()))
    }

    /// Stores `value` under `key` for `ttl` seconds with `tags`, only if the
    /// stamp of `of` (default: `key`), the epoch and, for a value with tags,
    /// the tag invalidations are still what `seen` (from `seen(of)`) says.
    /// Returns whether it stored. `encoded`: the value as this cache's
    /// serializer already encoded it (the tier has those bytes from Redis or
    /// from its own write), so it is not encoded a second time.
    #[pyo3(signature = (key, value, ttl, tags, seen, encoded=None, of=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature's arguments
    fn fill(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: f64,
        tags: Option<&Bound<'_, PyAny>>,
        seen: (u32, u64, u64),
        encoded: Option<Bound<'_, PyBytes>>,
        of: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.cache.writable().map_err(cache_err)?;
        let kb = check_key(key)?;
        let of = match of {
            Some(o) => check_key(o)?,
            None => kb,
        };
        let ttl = positive_ttl(ttl, ziggurat_cache::Arg::Ttl)?;
        let tags = tags_arg(tags)?;
        let (enc, kind) = match encoded {
            Some(b) => (Encoded::Py(b), Kind::Value),
            None => self.encode_value(py, value)?,
        };
        let Some(seen) = self.cache.seen_from(of, seen) else {
            return Ok(false);
        };
        self.cache
            .fill(kb, enc.as_bytes(), kind, ttl, &tags, &seen)
            .map_err(cache_err)
    }

    /// Word `i` of the words the cluster tier keeps in the segment.
    fn app_load(&self, i: usize) -> PyResult<u64> {
        self.cache.app_load(i).map_err(cache_err)
    }

    /// Replaces word `i` with `new` if it holds `old`; returns whether it did.
    fn app_cas(&self, i: usize, old: u64, new: u64) -> PyResult<bool> {
        self.cache.app_cas(i, old, new).map_err(cache_err)
    }
}
