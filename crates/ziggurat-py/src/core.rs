//! `CacheCore`: the native half of `ziggurat.Cache`: the per-process L1 of
//! live objects, the two segments below it, and `get`, whose L1 hit is one
//! call into the extension. Its other methods live with their concept:
//! `read` (below L1), `store` (writes), `fetch` (the miss path); the entry
//! format and the lease protocol live in the `ziggurat-cache` crate, shared
//! with every front end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PySet};
use ziggurat_core::now_ms;
use ziggurat_core::Segment;

use crate::args::{check_key, key_hash, named};
use crate::call::call_one;
use crate::codec::AutoCodec;
use crate::convert::{key_bytes, ZigguratError};
use crate::l1::{Entry, Shared, L1};
use crate::segment::PySegment;
use crate::stats::{Counter, LoadCounts};

create_exception!(
    _native,
    MutationError,
    ZigguratError,
    "A cached object was changed by its caller (raised in debug mode)."
);

/// How `get` hands out cached objects.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyMode {
    Shared,
    Copy,
    Decode,
}

/// (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) as passed from Python.
type FetchDefaults = (f64, Option<f64>, Option<f64>, f64, f64);

/// The cache-wide defaults that writes and loads use.
pub(crate) struct FetchConfig {
    pub ttl: f64,
    pub neg_ttl: Option<f64>,
    pub stale_ttl: Option<f64>,
    pub jitter: f64,
    pub loader_timeout: f64,
}

/// What `CacheCore::l1_shared` found.
pub(crate) enum Quick {
    Miss,
    Negative,
    Value(Py<PyAny>),
}

/// An L1 hit, copied out of the table so no lock is held while Python runs.
pub(crate) struct L1Hit {
    pub(crate) negative: bool,
    pub(crate) value: Py<PyAny>,
    pub(crate) encoded: Option<Py<PyAny>>,
    pub(crate) deadline: u64,
    pub(crate) ttl_ms: u32,
}

// Frozen: every method takes `&self`, so threads of one process never meet a
// "borrowed" error; the L1 is behind a try-lock (see `l1::Shared`).
// Named "Cache" in Python: argument errors that Python itself raises for the
// native methods then read "Cache.set() takes ...", naming the public method.
#[pyclass(name = "Cache", module = "ziggurat._native", frozen, subclass)]
pub struct CacheCore {
    pub(crate) main: Option<Arc<Segment>>,
    pub(crate) neg: Option<Arc<Segment>>,
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
    /// Fraction of the TTL at its end in which a `fetch` hit starts a refresh.
    pub(crate) refresh_ahead: f64,
    /// The cache's defaults.
    pub(crate) cfg: FetchConfig,
    /// Called as `(what, key, exception)` when a write made for `fetch` fails,
    /// or a stored value cannot be decoded (`what` is "decode").
    pub(crate) on_write_error: Option<Py<PyAny>>,
    /// Without a segment, the longest an L1 entry may live (degraded="local"),
    /// which bounds how long a process serves a value another process replaced.
    pub(crate) degraded_ttl: Option<f64>,
    pub(crate) loads_done: LoadCounts,
    pub(crate) rng: AtomicU64,
    pub(crate) l1_misses: Counter,
    pub(crate) l2_hits: Counter,
    pub(crate) l2_misses: Counter,
    pub(crate) l2_stale: Counter,
    pub(crate) neg_hits: Counter,
    pub(crate) decode_errors: Counter,
    /// The tier below the host, when one is joined (see `l3`).
    pub(crate) hooks: Hooks,
}

/// The hooks through which a tier below the host joins the miss path
/// (installed once; see `l3`).
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) below: OnceLock<Py<PyAny>>,
    pub(crate) above: OnceLock<Py<PyAny>>,
}

impl Hooks {
    pub(crate) fn traverse(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        for h in [self.below.get(), self.above.get()].into_iter().flatten() {
            visit.call(h)?;
        }
        Ok(())
    }
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

    pub(crate) fn check_mutation(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        e: &L1Hit,
    ) -> PyResult<()> {
        if let Some(enc) = &e.encoded {
            let now = self.dumps(py, e.value.bind(py))?;
            if !now.eq(enc.bind(py))? {
                return Err(MutationError::new_err(format!(
                    "the cached object for key {} was mutated after it was returned; \
                     copy it before changing it, or use copy='copy' or copy='decode'",
                    key.repr()?
                )));
            }
        }
        Ok(())
    }

    /// L1 probe: `take` reads the key's entry if it is valid; None on a miss,
    /// or when another thread of this process is inside the L1 at this
    /// instant. A stale entry is dropped, unless `keep_stale` (a caller outside
    /// PyO3's entry, where dropping a reference would be deferred: `quick`).
    /// `take` runs inside the guard: it must not run Python code.
    #[inline(always)]
    pub(crate) fn l1_probe<R>(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        keep_stale: bool,
        take: impl FnOnce(&Entry) -> R,
    ) -> Option<R> {
        if !self.l1_enabled {
            return None;
        }
        self.l1
            .try_with(py, |l1| l1.probe(key, hash, now_ms(), keep_stale, take))
            .flatten()
    }

    /// A valid entry's contents, copied out so no guard is held while Python runs.
    #[inline(always)]
    pub(crate) fn l1_hit(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
    ) -> Option<L1Hit> {
        self.l1_probe(py, key, hash, false, |e| L1Hit {
            negative: e.negative,
            value: e.value.clone_ref(py),
            encoded: e.encoded.as_ref().map(|x| x.clone_ref(py)),
            deadline: e.deadline,
            ttl_ms: e.ttl_ms,
        })
    }

    /// The probe of `get` and `fetch` when the object is handed out as is
    /// (shared mode, no debug): only what those need, small enough to come back
    /// in registers, because this is the hot path of the whole cache.
    #[inline(always)]
    pub(crate) fn l1_shared(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> Quick {
        self.l1_quick(py, key, hash, false)
    }

    #[inline(always)]
    fn l1_quick(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64, keep: bool) -> Quick {
        self.l1_probe(py, key, hash, keep, |e| {
            if e.negative {
                Quick::Negative
            } else {
                Quick::Value(e.value.clone_ref(py))
            }
        })
        .unwrap_or(Quick::Miss)
    }

    /// Whether an L1 hit can be answered with the cached object as is (the
    /// case `l1_peek` serves); fixed when the core is made.
    #[inline(always)]
    pub(crate) fn quick_hits(&self) -> bool {
        self.mode == CopyMode::Shared && !self.debug && self.l1_enabled
    }

    /// `l1_shared` for a caller outside PyO3's entry (see `quick`), which
    /// asks only when `quick_hits`: it only answers, leaving an entry no
    /// longer valid in place for the full method to drop, because a reference
    /// dropped from here would be deferred.
    #[inline(always)]
    pub(crate) fn l1_peek(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> Quick {
        self.l1_quick(py, key, hash, true)
    }

    /// Puts an entry in L1 unless another thread is inside it right now.
    #[inline]
    pub(crate) fn l1_put(&self, key: &Bound<'_, PyAny>, e: Entry) {
        if self.l1_enabled {
            // A busy L1 just skips the fill; the entry is dropped after the call.
            let _ = self.l1.try_with(key.py(), |l1| l1.insert(key, e));
        }
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

    /// A number in [0, 1) for TTL jitter (xorshift; races between threads
    /// only mix the state further).
    pub(crate) fn jitter_draw(&self) -> f64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Empties L1; if another thread is inside it, the epoch and stamps still
    /// void its entries, so skipping is safe.
    pub(crate) fn l1_clear(&self, py: Python<'_>) {
        let _ = self.l1.try_with(py, |l1| l1.clear());
    }

    /// The main segment and the cache's defaults, for writes that need both.
    pub(crate) fn writable(&self) -> PyResult<(&Arc<Segment>, &FetchConfig)> {
        match self.main.as_ref() {
            Some(m) => Ok((m, &self.cfg)),
            None => Err(ZigguratError::new_err("the cache has no shared segment")),
        }
    }

    pub(crate) fn main_seg(&self) -> Option<&Arc<Segment>> {
        self.main.as_ref()
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
        let (ttl, neg_ttl, stale_ttl, jitter, loader_timeout) = fetch_defaults;
        let cfg = FetchConfig {
            ttl,
            neg_ttl,
            stale_ttl,
            jitter,
            loader_timeout,
        };
        let seed = now_ms() ^ ((std::process::id() as u64) << 32) | 1;
        let mode = match copy {
            "shared" => CopyMode::Shared,
            "copy" => CopyMode::Copy,
            "decode" => CopyMode::Decode,
            other => {
                return Err(PyValueError::new_err(format!(
                    "copy must be 'shared', 'copy' or 'decode', got {other:?}"
                )))
            }
        };
        Ok(CacheCore {
            main: main.map(|m| m.get().inner.clone()),
            neg: neg.map(|m| m.get().inner.clone()),
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
            cfg,
            on_write_error,
            degraded_ttl,
            loads_done: LoadCounts::default(),
            rng: AtomicU64::new(seed),
            l1_misses: Counter::default(),
            l2_hits: Counter::default(),
            l2_misses: Counter::default(),
            l2_stale: Counter::default(),
            neg_hits: Counter::default(),
            decode_errors: Counter::default(),
            hooks: Hooks::default(),
        })
    }

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

    // The hooks are usually bound methods of the Cache that owns this core: a
    // cycle, which the garbage collector can only see through this.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        visit.call(&self.loads)?;
        visit.call(&self.dumps)?;
        for h in [&self.refresh, &self.local].into_iter().flatten() {
            visit.call(h)?;
        }
        if let Some(h) = &self.on_write_error {
            visit.call(h)?;
        }
        self.hooks.traverse(&visit)
    }

    /// Empties this process's L1 only.
    fn clear_l1(&self, py: Python<'_>) {
        self.l1_clear(py);
    }

    /// The key's current version stamp in the main segment (0 without one).
    fn stamp(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        let kb = key_bytes(key)?;
        Ok(self
            .main_seg()
            .map_or(0, |m| m.stamp_word(&m.hash(kb)).load(Ordering::Acquire)))
    }

    /// Whether the cache runs without a segment (L1 and loader only).
    #[getter]
    fn degraded(&self) -> bool {
        self.main.is_none()
    }

    /// Counters of this process's tiers.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let (s, (items, neg_items)) = self
            .l1
            .try_with(py, |l1| (l1.stats, l1.counts()))
            .unwrap_or_default();
        d.set_item("l1_hits", s.hits)?;
        d.set_item("l1_misses", self.l1_misses.get())?;
        d.set_item("l1_stale_drops", s.stale)?;
        d.set_item("l1_evictions", s.evictions)?;
        d.set_item("l1_fills", s.fills)?;
        d.set_item("l1_items", items)?;
        d.set_item("l1_negative_items", neg_items)?;
        d.set_item("l2_hits", self.l2_hits.get())?;
        d.set_item("l2_misses", self.l2_misses.get())?;
        d.set_item("l2_stale_reads", self.l2_stale.get())?;
        d.set_item("negative_hits", self.neg_hits.get())?;
        d.set_item("decode_errors", self.decode_errors.get())?;
        Ok(d)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.l1.try_with(py, |l1| l1.len()).unwrap_or(0)
    }
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
                    Here::Missing => self.ask_below(py, key, false)?,
                };
                Ok(found.unwrap_or_else(|| default.unwrap_or_else(|| py.None())))
            })(),
        )
    }

    /// What this process's tiers (L1, then L2) hold for `key`, without asking the
    /// tier below.
    fn get_here(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Here> {
        // Only an L1 entry needs the key's Python hash.
        let hash = if self.l1_enabled {
            let hash = key_hash(key)?;
            if let Some(here) = self.here_l1(py, key, hash)? {
                return Ok(here);
            }
            hash
        } else {
            0
        };
        let kb = check_key(key)?;
        self.l1_misses.bump();
        self.here_below(py, key, kb, hash)
    }

    /// What L1 holds for `key` (Python hash `hash`), if anything.
    #[inline(always)]
    fn here_l1(&self, py: Python<'_>, key: &Bound<'_, PyAny>, hash: u64) -> PyResult<Option<Here>> {
        if self.mode == CopyMode::Shared && !self.debug {
            return Ok(match self.l1_shared(py, key, hash) {
                Quick::Value(v) => Some(Here::Value(v)),
                Quick::Negative => Some(Here::Negative),
                Quick::Miss => None,
            });
        }
        let Some(e) = self.l1_hit(py, key, hash) else {
            return Ok(None);
        };
        if e.negative {
            return Ok(Some(Here::Negative));
        }
        if self.debug {
            self.check_mutation(py, key, &e)?;
        }
        self.out(py, &e.value).map(|v| Some(Here::Value(v)))
    }

    /// What L2 holds for `key` (bytes `kb`): a cached miss answers as it does
    /// from L1, without asking the tier below.
    fn here_below(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
    ) -> PyResult<Here> {
        let b = self.read_below_with(py, key, kb, hash, false, None)?;
        if b.negative() {
            return Ok(Here::Negative);
        }
        Ok(b.fresh().map_or(Here::Missing, Here::Value))
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

#[pymethods]
impl CacheCore {
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
                    Here::Missing if self.hooks.below.get().is_some() => missing,
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
            (|| Ok(self.ask_below(py, key, false)?.unwrap_or(default)))(),
        )
    }
}
