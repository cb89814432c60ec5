//! `CacheCore`: the native half of `ziggurat.Cache`. What touches Python
//! objects lives here and beside it: the per-process L1 of live objects, the
//! serializers, the hooks into Python; the behaviour (reads below L1,
//! writes, the miss path, counters) is `ziggurat_cache::Cache`'s, which this
//! holds. Its methods live with their concept: `read` (get, peek), `store`
//! (writes), `fetch` (the miss path), `below` (the tier below the host).

use std::sync::{Arc, OnceLock};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PySet};
use ziggurat_cache::{Cache, CopyMode, Peeked};
use ziggurat_core::now_ms;

use crate::args::{key_bytes, named};
use crate::call::call_one;
use crate::codec::AutoCodec;
use crate::convert::{cache_err, fields_dict, MutationError};
use crate::l1::{is_key, Entry, Shared, L1};
use crate::rules::{cache_options, FetchDefaults};
use crate::segment::PySegment;

/// What the quick entries' L1 lookup found (`CacheCore::l1_peek`).
pub(crate) enum Quick {
    /// An entry no longer valid, or an L1 another call is inside: the
    /// method's body looks again.
    Miss,
    /// No entry for the key: the method's body can go below L1 at once.
    Absent,
    Negative,
    Value(Py<PyAny>),
}

/// What L1 holds for a key, as handed out: the value (None for a cached
/// miss) and the entry's soft deadline and TTL (for early refresh).
pub(crate) struct InL1 {
    pub(crate) value: Option<Py<PyAny>>,
    pub(crate) soft: u64,
    pub(crate) ttl_ms: u32,
}

// Frozen: every method takes `&self`, so threads of one process never meet a
// "borrowed" error; the L1 is behind a try-lock (see `l1::Shared`).
// Named "Cache" in Python: argument errors that Python itself raises for the
// native methods then read "Cache.set() takes ...", naming the public method.
#[pyclass(name = "Cache", module = "ziggurat._native", frozen, subclass)]
pub struct CacheCore {
    /// The behaviour: segments, options, counters, the miss path.
    /// Shared with the cluster tier's reader thread (an `Arc`, not the
    /// Python object: no reference cycle the garbage collector cannot see).
    pub(crate) cache: Arc<Cache>,
    pub(crate) l1: Shared,
    pub(crate) l1_enabled: bool,
    pub(crate) loads: Py<PyAny>,
    pub(crate) dumps: Py<PyAny>,
    /// Set when the serializer is the native "auto" codec: called without Python.
    pub(crate) codec: Option<Py<AutoCodec>>,
    pub(crate) mode: CopyMode,
    pub(crate) debug: bool,
    /// Called as `(step, loader)` to run an early refresh in the background.
    pub(crate) refresh: Option<Py<PyAny>>,
    /// Called as `(step, loader)` for a miss without a segment (degraded).
    pub(crate) local: Option<Py<PyAny>>,
    /// The options' `refresh_ahead`, where the quick entries read it.
    pub(crate) refresh_ahead: f64,
    /// Called as `(what, key, exception)` when a write made for `fetch` fails,
    /// or a stored value cannot be decoded (`what` is "decode").
    pub(crate) on_write_error: Option<Py<PyAny>>,
    /// The tier below the host, when one is joined (see `l3`).
    pub(crate) tier_below: OnceLock<TierBelow>,
}

/// The Python hooks of a tier below the host (see `l3`).
pub(crate) struct TierBelow {
    /// `(key, loading)`: None or `(value,)`.
    pub(crate) ask: Py<PyAny>,
    /// `(key, value, ttl, tags)`: how a load ended (ttl < 0: it failed).
    pub(crate) tell: Py<PyAny>,
}

impl CacheCore {
    /// Hands out a cached object according to the copy mode.
    #[inline]
    pub(crate) fn out(&self, py: Python<'_>, v: &Py<PyAny>) -> PyResult<Py<PyAny>> {
        match self.mode {
            CopyMode::Shared => Ok(v.clone_ref(py)),
            CopyMode::Copy => {
                let b = v.bind(py);
                if let Ok(d) = b.cast_exact::<PyDict>() {
                    Ok(d.copy()?.into_any().unbind())
                } else if b.is_exact_instance_of::<PyList>() || b.is_exact_instance_of::<PySet>() {
                    Ok(b.call_method0("copy")?.unbind())
                } else {
                    Ok(v.clone_ref(py))
                }
            }
            // Counters are kept as int objects, which are immutable.
            CopyMode::Decode if v.bind(py).is_exact_instance_of::<PyInt>() => Ok(v.clone_ref(py)),
            CopyMode::Decode => self.loads(py, v.bind(py)),
        }
    }

    /// The value's bytes, by the native codec when the serializer is "auto".
    #[inline]
    pub(crate) fn dumps<'py>(
        &self,
        py: Python<'py>,
        v: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match &self.codec {
            Some(c) => Ok(c.get().encode(py, v)?.into_any()),
            None => Ok(call_one(py, &self.dumps, v)?.into_bound(py)),
        }
    }

    /// The object encoded in `data`, by the native codec when the serializer is "auto".
    #[inline]
    pub(crate) fn loads(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match &self.codec {
            Some(c) => c.get().decode(py, data),
            None => call_one(py, &self.loads, data),
        }
    }

    /// The L1 lookup itself: `take` reads the key's entry if it is valid;
    /// None on a miss, or when another thread of this process is inside the
    /// L1 at this instant. A stale entry is dropped (the quick entries, where
    /// dropping a reference would be deferred, peek instead: `l1_peek`).
    /// `take` runs inside the guard: no Python code.
    #[inline(always)]
    pub(crate) fn l1_probe<R>(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        take: impl FnOnce(&Entry) -> R,
    ) -> Option<R> {
        if !self.l1_enabled {
            return None;
        }
        self.l1
            .try_with(py, |l1| l1.probe(hash, is_key(key), now_ms(), false, take))
            .flatten()
    }

    /// What L1 holds for `key`, handed out by the copy mode (checked for
    /// mutation in debug mode): the lookup of every path but the quick entries.
    #[inline(always)]
    pub(crate) fn l1_lookup(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
    ) -> PyResult<Option<InL1>> {
        let as_is = self.mode.as_is(self.debug);
        let Some((value, encoded, soft, ttl_ms)) = self.l1_probe(py, key, hash, |e| {
            let value = (!e.negative).then(|| e.value.clone_ref(py));
            let encoded = if as_is {
                None
            } else {
                e.encoded.as_ref().map(|x| x.clone_ref(py))
            };
            (value, encoded, e.deadline, e.ttl_ms)
        }) else {
            return Ok(None);
        };
        let value = match value {
            Some(v) if !as_is => {
                if let Some(enc) = encoded {
                    self.check_mutation(py, key, &v, &enc)?;
                }
                Some(self.out(py, &v)?)
            }
            v => v,
        };
        Ok(Some(InL1 {
            value,
            soft,
            ttl_ms,
        }))
    }

    /// The quick entries' lookup (`quick`), asked only when `quick_hits`: it
    /// only answers, leaving an entry no longer valid in place for the full
    /// method to drop, because a reference dropped from there would be deferred.
    #[inline(always)]
    pub(crate) fn l1_peek(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> Quick {
        if !self.l1_enabled {
            return Quick::Miss;
        }
        self.l1
            .try_with(py, |l1| {
                let found = l1.peek(hash, is_key(key), now_ms(), |e| {
                    if e.negative {
                        Quick::Negative
                    } else {
                        Quick::Value(e.value.clone_ref(py))
                    }
                });
                match found {
                    Peeked::Valid(q) => q,
                    Peeked::Invalid => Quick::Miss,
                    Peeked::Absent => Quick::Absent,
                }
            })
            .unwrap_or(Quick::Miss)
    }

    /// Whether an L1 hit can be answered with the cached object as is (the
    /// case `l1_peek` serves); fixed when the core is made.
    #[inline(always)]
    pub(crate) fn quick_hits(&self) -> bool {
        self.mode.as_is(self.debug) && self.l1_enabled
    }

    fn check_mutation(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Py<PyAny>,
        encoded: &Py<PyAny>,
    ) -> PyResult<()> {
        let now = self.dumps(py, value.bind(py))?;
        if !now.eq(encoded.bind(py))? {
            return Err(MutationError::new_err(format!(
                "the cached object for key {} was mutated after it was returned; \
                 copy it before changing it, or use copy='copy' or copy='decode'",
                key.repr()?
            )));
        }
        Ok(())
    }

    /// Puts the entry `make` makes in L1 unless another thread is inside it
    /// right now (made inside, after the key's test, so one L1 operation
    /// enters each file once).
    #[inline]
    pub(crate) fn l1_put(&self, key: &Bound<'_, PyAny>, make: impl FnOnce() -> Entry) {
        if self.l1_enabled {
            // A busy L1 just skips the fill; what `make` holds is dropped after the call.
            let _ = self
                .l1
                .try_with(key.py(), |l1| l1.insert(is_key(key), make()));
        }
    }

    /// Drops `key`'s L1 entry (busy L1: the stamps void it anyway).
    pub(crate) fn l1_discard(&self, key: &Bound<'_, PyAny>, hash: u64) {
        let _ = self
            .l1
            .try_with(key.py(), |l1| l1.discard(hash, is_key(key)));
    }

    /// Reports a failed write to the Python side (logged and counted there).
    pub(crate) fn write_failed(
        &self,
        py: Python<'_>,
        what: &str,
        key: &Bound<'_, PyAny>,
        e: PyErr,
    ) {
        if let Some(hook) = &self.on_write_error {
            if let Err(e2) = hook.call1(py, (what, key, e.value(py))) {
                e2.print(py);
            }
        }
    }

    /// Empties L1; if another thread is inside it, the epoch and stamps still
    /// void its entries, so skipping is safe.
    pub(crate) fn l1_clear(&self, py: Python<'_>) {
        let _ = self.l1.try_with(py, |l1| l1.clear());
    }
}

#[pymethods]
impl CacheCore {
    #[new]
    #[pyo3(signature = (main, neg, l1_items, l1_neg_items, loads, dumps, fetch_defaults, copy = "shared", debug = false, refresh = None, local = None, refresh_ahead = 0.0, on_write_error = None, codec = None, degraded_ttl = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        main: Option<&Bound<'_, PySegment>>,
        neg: Option<&Bound<'_, PySegment>>,
        l1_items: usize,
        l1_neg_items: usize,
        loads: Py<PyAny>,
        dumps: Py<PyAny>,
        fetch_defaults: FetchDefaults,
        copy: &str,
        debug: bool,
        refresh: Option<Py<PyAny>>,
        local: Option<Py<PyAny>>,
        refresh_ahead: f64,
        on_write_error: Option<Py<PyAny>>,
        codec: Option<Py<AutoCodec>>,
        degraded_ttl: Option<f64>,
    ) -> PyResult<Self> {
        let opts = cache_options(fetch_defaults, refresh_ahead, degraded_ttl);
        let mode = CopyMode::parse(copy).map_err(cache_err)?;
        let seg = |s: Option<&Bound<'_, PySegment>>| s.map(|s| Arc::clone(s.get().inner()));
        let cache =
            Arc::new(Cache::new(seg(main), seg(neg), opts, l1_items > 0).map_err(cache_err)?);
        Ok(CacheCore {
            cache,
            l1: Shared::new(L1::new(l1_items, l1_neg_items)),
            l1_enabled: l1_items > 0,
            loads,
            dumps,
            codec,
            mode,
            debug,
            refresh,
            local,
            refresh_ahead,
            on_write_error,
            tier_below: OnceLock::new(),
        })
    }

    // The hooks are usually bound methods of the Cache that owns this core: a
    // cycle, which the garbage collector can only see through this.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.loads)?;
        visit.call(&self.dumps)?;
        for h in [&self.refresh, &self.local, &self.on_write_error]
            .into_iter()
            .flatten()
        {
            visit.call(h)?;
        }
        if let Some(t) = self.tier_below.get() {
            visit.call(&t.ask)?;
            visit.call(&t.tell)?;
        }
        Ok(())
    }

    /// Empties this process's L1 only.
    fn clear_l1(&self, py: Python<'_>) {
        self.l1_clear(py);
    }

    /// The key's current version stamp in the main segment (0 without one).
    fn stamp(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        let r = key_bytes(key).map(|kb| self.cache.stamp(kb));
        named(key.py(), "Cache.stamp", r)
    }

    /// Whether the cache runs without a segment (L1 and loader only).
    #[getter]
    fn degraded(&self) -> bool {
        self.cache.main().is_none()
    }

    /// Counters of this process's tiers.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.l1.try_with(py, |l1| self.cache.stats(Some(l1)));
        fields_dict(
            py,
            &s.unwrap_or_else(|| self.cache.stats::<(), ()>(None))
                .fields(),
        )
    }

    /// Counters of the loader and the miss path in this process.
    fn loader_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        fields_dict(py, &self.cache.loader_stats().fields())
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.l1.try_with(py, |l1| l1.len()).unwrap_or(0)
    }
}
