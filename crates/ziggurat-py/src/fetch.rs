//! `fetch` and `afetch`: the Cache's one miss path, whose state machine is
//! `ziggurat_cache::Cache`'s (`begin`, then a step at a time). The sync
//! `fetch` drives it here, calling the loader from Rust; `afetch`, background
//! refreshes and loads without a segment get each step as a `Step` object
//! and drive it from Python, where the loader is awaited.

use pyo3::prelude::*;
use ziggurat_cache::{Arg, Error, Handoff, Loaded, Miss, Plan, Step as Next, StepKind, Took};

use crate::args::{check_key, check_ttls, key_bytes, key_hash, named};
use crate::context::{call_loader, said, Said};
use crate::convert::{cache_err, fetch_err, tags_arg, ttl_arg, ZigguratError};
use crate::core::CacheCore;
use crate::read::PyFront;

type PyMiss = Miss<Py<PyAny>>;

/// A step handed to Python (`afetch`, background refreshes, degraded loads).
#[pyclass(module = "ziggurat._native", frozen)]
pub struct Step {
    step: Handoff<Py<PyAny>>,
    key: Py<PyAny>,
    hash: u64,
}

#[pymethods]
impl Step {
    /// The step's kind (`ziggurat.loader.StepKind`).
    #[getter]
    fn kind(&self) -> u8 {
        self.step.kind() as u8
    }

    /// HIT: the value (None for a cached miss).
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.step
            .value()
            .map_or_else(|| py.None(), |v| v.clone_ref(py))
    }

    /// The key of the step.
    #[getter]
    fn key(&self, py: Python<'_>) -> Py<PyAny> {
        self.key.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!("<Step {}>", self.step.label())
    }
}

impl Step {
    fn wrap(
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        next: Next<Py<PyAny>>,
    ) -> PyResult<Py<Step>> {
        Step::of(py, key.clone().unbind(), hash, Handoff::new(next))
    }

    fn of(
        py: Python<'_>,
        key: Py<PyAny>,
        hash: u64,
        step: Handoff<Py<PyAny>>,
    ) -> PyResult<Py<Step>> {
        Py::new(py, Step { step, key, hash })
    }
}

/// A fetch's options as the caller gave them (None: the cache's own).
#[derive(Clone, Copy, Default)]
pub(crate) struct FetchArgs<'a, 'py> {
    pub ttl: Option<&'a Bound<'py, PyAny>>,
    pub tags: Option<&'a Bound<'py, PyAny>>,
    pub neg_ttl: Option<&'a Bound<'py, PyAny>>,
    pub stale_ttl: Option<&'a Bound<'py, PyAny>>,
}

impl CacheCore {
    /// A fetch's options, converted and resolved against the cache's.
    fn plan(&self, args: FetchArgs<'_, '_>) -> PyResult<Plan> {
        self.cache
            .plan(
                ttl_arg(args.ttl)?,
                ttl_arg(args.neg_ttl)?,
                ttl_arg(args.stale_ttl)?,
                tags_arg(args.tags)?,
            )
            .map_err(cache_err)
    }

    /// `Cache.fetch`'s body, for the method and for its quick entry (`quick`).
    /// `l1_absent`: the quick entry just found no L1 entry for the key, so
    /// L1 is not probed again.
    pub(crate) fn fetch_value<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        loader: &Bound<'py, PyAny>,
        args: FetchArgs<'_, 'py>,
        l1_absent: bool,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "Cache.fetch",
            (|| {
                if !l1_absent {
                    if let Some(v) = self.fetch_l1(py, key, loader, args)? {
                        return Ok(v);
                    }
                }
                self.fetch_miss(py, key, loader, args)
            })(),
        )
    }

    /// An L1 hit of `fetch`, answered here; one due for early refresh also
    /// starts the refresh. None: L1 holds nothing valid for the key.
    fn fetch_l1(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        loader: &Bound<'_, PyAny>,
        args: FetchArgs<'_, '_>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let hash = key_hash(key)?;
        let (ttl, neg_ttl, stale_ttl) = (args.ttl, args.neg_ttl, args.stale_ttl);
        if ttl.is_some() || neg_ttl.is_some() || stale_ttl.is_some() {
            check_ttls([
                (ttl, Arg::Ttl),
                (neg_ttl, Arg::NegTtl),
                (stale_ttl, Arg::StaleTtl),
            ])?;
        }
        let Some(e) = self.l1_lookup(py, key, hash)? else {
            return Ok(None);
        };
        let Some(v) = e.value else {
            return Ok(Some(py.None()));
        };
        if self.refresh_ahead != 0.0 && self.cache.refresh_due(e.soft, e.ttl_ms) {
            let kb = check_key(key)?;
            if let Some(r) = self.cache.refresh(kb, self.plan(args)?) {
                self.start_refresh(py, key, hash, r, loader)?;
            }
        }
        Ok(Some(v))
    }

    /// `fetch`, past L1: drives the steps, calling the loader here.
    fn fetch_miss(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        loader: &Bound<'_, PyAny>,
        args: FetchArgs<'_, '_>,
    ) -> PyResult<Py<PyAny>> {
        let hash = key_hash(key)?;
        let kb = check_key(key)?;
        let plan = self.plan(args)?;
        self.cache.counts().l1_misses.bump();
        let mut front = PyFront::new(self, key, hash);
        let mut next = self.cache.begin(kb, plan, &mut front)?;
        loop {
            match next {
                Next::Value(v, refresh) => {
                    if let Some(r) = refresh {
                        self.start_refresh(py, key, hash, r, loader)?;
                    }
                    return Ok(v);
                }
                Next::Negative => return Ok(py.None()),
                Next::Load(miss) => {
                    // Without a tier below joined there is nothing to ask.
                    if self.tier_below.get().is_some() && self.cache.asks_tier_below(&miss) {
                        if let Some(v) = self.ask_tier_below(py, key, true)? {
                            self.cache.give_back(kb, &miss);
                            return Ok(v);
                        }
                    }
                    if !loader.is_callable() {
                        self.cache.give_back(kb, &miss);
                        return Err(pyo3::exceptions::PyTypeError::new_err(
                            "loader must be callable",
                        ));
                    }
                    let (r, took, ctx) = call_loader(loader)?;
                    return self.loaded(py, key, kb, hash, &miss, r, took, Some(&ctx));
                }
                Next::Wait(miss) => {
                    let sleep = self.cache.sleep(kb, &miss).map_err(|e| fetch_err(key, e))?;
                    py.detach(|| sleep.run());
                    next = self.cache.after_wait(kb, miss, &mut front)?;
                }
                Next::NoSegment(miss) => {
                    // No segment: the Python side shares one load among threads.
                    let hook = self
                        .local
                        .as_ref()
                        .ok_or_else(|| ZigguratError::new_err("the cache has no shared segment"))?;
                    let step = Step::wrap(py, key, hash, Next::NoSegment(miss))?;
                    return hook.call1(py, (step, loader));
                }
            }
        }
    }

    /// A load's loader returned `r` after `took`: the value, or the stale one
    /// fail-safe answers a failure with, or the loader's error.
    #[allow(clippy::too_many_arguments)]
    fn loaded(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        miss: &PyMiss,
        r: PyResult<Bound<'_, PyAny>>,
        took: Took,
        ctx: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        match r {
            Ok(v) => match said(ctx)? {
                Said::Nothing => self.done(py, key, kb, hash, miss, v, took),
                Said::Skip => {
                    // Counted as a load; nothing stored, the lease given back.
                    let l = self.cache.land(kb, miss, took, Loaded::Unstored);
                    if l.held {
                        self.cache.give_back(kb, miss);
                    }
                    Ok(v.unbind())
                }
                Said::Override(ttl, tags) => {
                    let mut m = miss.successor(|v| v.clone_ref(py));
                    if let Err(e) = m.override_with(ttl, tags) {
                        self.cache.give_back(kb, miss);
                        return Err(cache_err(e));
                    }
                    self.done(py, key, kb, hash, &m, v, took)
                }
            },
            Err(e) => match self.failed(py, key, kb, miss, took) {
                Some(stale) => {
                    self.write_failed(py, "stale", key, e);
                    Ok(stale)
                }
                None => Err(e),
            },
        }
    }

    /// The loader returned `value`: one call of the cache stores it (a value,
    /// or a cached miss for None) and gives the lease back, L1 keeps it as
    /// after a write, and a tier below is told. A value that cannot be stored
    /// is still returned (logged and counted).
    #[allow(clippy::too_many_arguments)]
    fn done(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        miss: &PyMiss,
        value: Bound<'_, PyAny>,
        took: Took,
    ) -> PyResult<Py<PyAny>> {
        // (whether the lease is still held, whether to tell the tier below)
        let mut landed = None;
        let stored = if value.is_none() {
            let l = self.cache.land(kb, miss, took, Loaded::Null);
            landed = Some((l.held, true));
            l.written.map(|_| ()).map_err(cache_err)
        } else {
            // The write runs inside `store_with`, between the encoding and L1
            // (which it is never asked for without a segment).
            self.store_with(
                py,
                key,
                hash,
                &value,
                || miss.ttl(),
                |body, kind| {
                    let l = self.cache.land(kb, miss, took, Loaded::Value(body, kind));
                    // A result refused for a write during the load is
                    // older than that write: no tier below is told of it.
                    let stored = l
                        .written
                        .as_ref()
                        .is_ok_and(|w| w.as_ref().is_none_or(|w| w.stored));
                    landed = Some((l.held, stored));
                    l.written.and_then(|w| w.ok_or(Error::NoSegment))
                },
            )
        };
        // Not encoded, or no segment: nothing was handed to the cache yet.
        let (held, ok) = match landed {
            Some(l) => l,
            None => {
                let l = self.cache.land(kb, miss, took, Loaded::Unstored);
                (l.held, stored.is_ok())
            }
        };
        if self.cache.has_tier_below() {
            let ttl = if value.is_none() { 0.0 } else { miss.ttl() };
            if ok {
                self.tell_tier_below(py, key, &value, ttl, &miss.plan().tags);
            }
            if held {
                self.cache.give_back(kb, miss);
            }
        }
        if let Err(e) = stored {
            self.not_stored(py, key, e)?;
        }
        Ok(value.unbind())
    }

    /// A load's value that cannot be stored (too large, not serializable, no
    /// lock in time) is still returned, just not cached (reported to the write
    /// error hook); anything else propagates.
    fn not_stored(&self, py: Python<'_>, key: &Bound<'_, PyAny>, e: PyErr) -> PyResult<()> {
        let expected = e.is_instance_of::<ZigguratError>(py)
            || e.is_instance_of::<pyo3::exceptions::PyValueError>(py)
            || e.is_instance_of::<pyo3::exceptions::PyTypeError>(py);
        if !expected {
            return Err(e);
        }
        self.write_failed(py, "store", key, e);
        Ok(())
    }

    /// The loader raised: gives the lease back and tells the tier below; the
    /// stale value to answer with instead, if fail-safe allows one.
    fn failed(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        miss: &PyMiss,
        took: Took,
    ) -> Option<Py<PyAny>> {
        let stale = self.cache.failed(kb, miss, took).map(|v| v.clone_ref(py));
        if miss.holds_lease() {
            self.tell_tier_below(py, key, &py.None().into_bound(py), -1.0, &[]);
        }
        stale
    }

    /// Hands a refresh to the Python side, which runs the loader in the
    /// background and finishes the step.
    fn start_refresh(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        miss: PyMiss,
        loader: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        match self.refresh.as_ref() {
            Some(hook) => {
                let step = Step::wrap(py, key, hash, Next::Load(miss))?;
                hook.call1(py, (step, loader))?;
            }
            None => self.cache.give_back(key_bytes(key)?, &miss),
        }
        Ok(())
    }
}

#[pymethods]
impl CacheCore {
    /// `Cache.fetch`: an L1 hit is answered here, with no Python frame; anything
    /// else (a miss, an entry due for early refresh) goes to the slow path.
    #[pyo3(signature = (key, loader, *, ttl = None, tags = None, neg_ttl = None, stale_ttl = None))]
    #[allow(clippy::too_many_arguments)]
    fn fetch<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        loader: &Bound<'py, PyAny>,
        ttl: Option<&Bound<'py, PyAny>>,
        tags: Option<&Bound<'py, PyAny>>,
        neg_ttl: Option<&Bound<'py, PyAny>>,
        stale_ttl: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let args = FetchArgs {
            ttl,
            tags,
            neg_ttl,
            stale_ttl,
        };
        self.fetch_value(py, key, loader, args, false)
    }

    /// `afetch`'s first step: the L1 hit, or the first step of the miss.
    #[pyo3(signature = (key, *, ttl = None, tags = None, neg_ttl = None, stale_ttl = None))]
    fn fetch_begin(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        ttl: Option<&Bound<'_, PyAny>>,
        tags: Option<&Bound<'_, PyAny>>,
        neg_ttl: Option<&Bound<'_, PyAny>>,
        stale_ttl: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Step>> {
        named(
            py,
            "Cache.afetch",
            (|| {
                let hash = key_hash(key)?;
                let kb = check_key(key)?;
                let plan = self.plan(FetchArgs {
                    ttl,
                    tags,
                    neg_ttl,
                    stale_ttl,
                })?;
                let next = match self.l1_lookup(py, key, hash)? {
                    Some(e) => match e.value {
                        None => Next::Negative,
                        Some(v) => {
                            let due = self.refresh_ahead != 0.0
                                && self.cache.refresh_due(e.soft, e.ttl_ms);
                            self.cache.hit(kb, v, due, || plan)
                        }
                    },
                    None => {
                        self.cache.counts().l1_misses.bump();
                        self.cache
                            .begin(kb, plan, &mut PyFront::new(self, key, hash))?
                    }
                };
                Step::wrap(py, key, hash, next)
            })(),
        )
    }

    /// The refresh a HIT step started (this process took the refresh lease):
    /// run the loader in the background, then `fetch_done` or `fetch_failed`.
    fn fetch_refresh(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Option<Py<Step>>> {
        let s = step.get();
        match s.step.take_refresh(|v| v.clone_ref(py)) {
            Some(r) => Ok(Some(Step::of(py, s.key.clone_ref(py), s.hash, r)?)),
            None => Ok(None),
        }
    }

    /// WAIT: sleeps (without the GIL) until the loader holding the key's lease
    /// finishes or a slice passes; raises `LoadTimeout` past `loader_timeout`.
    fn fetch_wait(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<()> {
        let s = step.get();
        let Some(miss) = s.step.miss_of(StepKind::Wait) else {
            return Ok(());
        };
        let key = s.key.bind(py);
        let sleep = self.cache.sleep(key_bytes(key)?, miss);
        let sleep = sleep.map_err(|e| fetch_err(key, e))?;
        py.detach(|| sleep.run());
        Ok(())
    }

    /// The step after a wait.
    fn fetch_next(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Py<Step>> {
        let s = step.get();
        let key = s.key.bind(py);
        let miss = s
            .step
            .successor(|v| v.clone_ref(py))
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("not a WAIT step"))?;
        let mut front = PyFront::new(self, key, s.hash);
        let next = self.cache.after_wait(key_bytes(key)?, miss, &mut front)?;
        Step::wrap(py, key, s.hash, next)
    }

    /// The loading task was cancelled: gives the lease back, storing nothing.
    fn fetch_abandon(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<()> {
        let s = step.get();
        s.step.give_back(&self.cache, key_bytes(s.key.bind(py))?);
        Ok(())
    }

    /// LOAD, LOCAL or a refresh, from a thread of the Python side: calls the
    /// loader and ends the step as `fetch` does (stored, or the stale value a
    /// failure is answered with, or the loader's error raised).
    fn fetch_run(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        loader: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let s = step.get();
        let Some(miss) = s.step.take_load() else {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the step is not a load, or was ended already",
            ));
        };
        let key = s.key.bind(py);
        let (r, took, ctx) = call_loader(loader)?;
        self.loaded(py, key, key_bytes(key)?, s.hash, miss, r, took, Some(&ctx))
    }

    /// LOAD, LOCAL or a refresh whose loader the Python side awaited: it
    /// returned `value`, or raised `error`, after `seconds`. Ends the step as
    /// `fetch_run` does.
    #[pyo3(signature = (step, value, error, seconds, ctx=None))]
    fn fetch_end(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        value: &Bound<'_, PyAny>,
        error: Option<&Bound<'_, pyo3::exceptions::PyBaseException>>,
        seconds: f64,
        ctx: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let s = step.get();
        let r = match error {
            Some(e) => Err(PyErr::from_value(e.clone().into_any())),
            None => Ok(value.clone()),
        };
        let Some(miss) = s.step.take_load() else {
            return r.map(Bound::unbind);
        };
        let key = s.key.bind(py);
        let took = Took::seconds(seconds);
        self.loaded(py, key, key_bytes(key)?, s.hash, miss, r, took, ctx)
    }

    /// `fetch`'s LOAD step answered from the tier below: `(value,)`, with the
    /// lease given back, or None (run the loader).
    fn fetch_below(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Option<Py<PyAny>>> {
        let s = step.get();
        let Some(miss) = s.step.miss_of(StepKind::Load) else {
            return Ok(None);
        };
        let key = s.key.bind(py);
        if !self.cache.asks_tier_below(miss) {
            return Ok(None);
        }
        let Some(v) = self.ask_tier_below(py, key, true)? else {
            return Ok(None);
        };
        s.step.give_back(&self.cache, key_bytes(key)?);
        Ok(Some(
            pyo3::types::PyTuple::new(py, [v])?.into_any().unbind(),
        ))
    }
}
