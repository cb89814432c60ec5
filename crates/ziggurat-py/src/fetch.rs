//! `fetch` and `afetch`: the Cache's one miss path. A miss is a state machine
//! of steps: HIT (a value, or a cached miss as None), LOAD (this process holds
//! the key's load lease: run the loader, then `done` or `failed`), WAIT
//! (another caller loads: `wait`, then `next`), LOCAL (no segment: the Python
//! side shares one load among the process's threads). The sync `fetch` drives
//! it here, calling the loader from Rust; `afetch` drives the same steps from
//! Python, where the loader is awaited. The lease protocol itself lives in
//! `ziggurat_cache::Flight`.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use ziggurat_cache::{Flight, FlightKey, Next};

use crate::args::{check_key, check_ttls, key_hash, named, positive_ttl, refuse_awaitable};
use crate::convert::{key_bytes, tags_arg, ttl_arg, ZigguratError};
use crate::core::{CacheCore, CopyMode, Quick};
use crate::read::{Below, HIT, NEG, STALE};
use crate::stats::Took;

create_exception!(
    _native,
    LoadTimeout,
    ZigguratError,
    "Another caller's loader for the key did not finish within loader_timeout."
);

/// Step kinds, exported to Python once (`ziggurat.loader.StepKind`).
pub const STEP_HIT: u8 = 1;
pub const STEP_LOAD: u8 = 2;
pub const STEP_WAIT: u8 = 3;
pub const STEP_LOCAL: u8 = 4;

/// The longest single sleep of a waiter: after it, the holder's liveness is
/// checked again (a dead holder is replaced at once).
const SLICE: Duration = Duration::from_millis(250);

/// What a missed fetch stores its result with: the call's options resolved
/// against the cache's.
#[derive(Clone)]
pub(crate) struct Plan {
    pub ttl: f64,
    pub neg_ttl: Option<f64>,
    pub stale_ttl: Option<f64>,
    pub tags: Vec<Vec<u8>>,
}

/// One step of a miss, as Rust drives it.
pub(crate) struct State {
    pub kind: u8,
    pub value: Option<Py<PyAny>>,
    pub key: Py<PyAny>,
    pub hash: u64,
    pub plan: Plan,
    /// LOAD: the key's main stamp before the load (for a cached miss).
    stamp: u32,
    /// WAIT: the lease release counter seen.
    seq: u32,
    /// When waiting must give up (`loader_timeout` after the first wait):
    /// set by the first wait, so an uncontended miss never reads the clock.
    deadline: Option<Instant>,
    /// A stale value the loader's failure may be answered with (fail-safe).
    stale: Option<Py<PyAny>>,
    /// LOAD of an early refresh (its own lease).
    refreshing: bool,
    /// HIT due for early refresh, whose refresh lease this process took.
    refresh: Option<Box<State>>,
    /// The key hashed for both segments, once per miss.
    fk: Option<FlightKey>,
}

impl State {
    /// Whether this LOAD is an early refresh (which reloads from the source).
    pub(crate) fn is_refresh(&self) -> bool {
        self.refreshing
    }

    /// The step to continue from this one (a refresh's own, or the next after a
    /// wait): same key, plan and lease; no value yet.
    fn successor(&self, py: Python<'_>, refreshing: bool) -> State {
        State {
            kind: self.kind,
            value: None,
            key: self.key.clone_ref(py),
            hash: self.hash,
            plan: self.plan.clone(),
            stamp: self.stamp,
            seq: self.seq,
            deadline: self.deadline,
            stale: self.stale.as_ref().map(|v| v.clone_ref(py)),
            refreshing,
            refresh: None,
            fk: self.fk,
        }
    }
}

/// A step handed to Python (`afetch`, background refreshes, degraded loads).
#[pyclass(module = "ziggurat._native", frozen)]
pub struct Step {
    pub(crate) state: State,
    /// The lease is given back exactly once, whoever finishes the step.
    finished: AtomicBool,
}

#[pymethods]
impl Step {
    /// The step's kind (`ziggurat.loader.StepKind`).
    #[getter]
    fn kind(&self) -> u8 {
        self.state.kind
    }

    /// HIT: the value (None for a cached miss).
    #[getter]
    fn value(&self, py: Python<'_>) -> Py<PyAny> {
        self.state
            .value
            .as_ref()
            .map_or_else(|| py.None(), |v| v.clone_ref(py))
    }

    /// The key of the step.
    #[getter]
    fn key(&self, py: Python<'_>) -> Py<PyAny> {
        self.state.key.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        let kind = match self.state.kind {
            STEP_HIT => "HIT",
            STEP_LOAD if self.state.refreshing => "REFRESH",
            STEP_LOAD => "LOAD",
            STEP_WAIT => "WAIT",
            _ => "LOCAL",
        };
        format!("<Step {kind}>")
    }
}

impl Step {
    fn wrap(py: Python<'_>, state: State) -> PyResult<Py<Step>> {
        Py::new(
            py,
            Step {
                state,
                finished: AtomicBool::new(false),
            },
        )
    }

    /// Whether this call is the one that finishes the step.
    pub(crate) fn finish(&self) -> bool {
        !self.finished.swap(true, Ordering::AcqRel)
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
    /// Resolves a fetch's options against the cache's (each checked before any
    /// loader runs).
    pub(crate) fn plan(&self, args: FetchArgs<'_, '_>) -> PyResult<Plan> {
        let FetchArgs {
            ttl,
            tags,
            neg_ttl,
            stale_ttl,
        } = args;
        let f = &self.cfg;
        let opt = |a: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<Option<f64>> {
            ttl_arg(a)?.map(|v| positive_ttl(v, what)).transpose()
        };
        Ok(Plan {
            ttl: opt(ttl, "ttl")?.unwrap_or(f.ttl),
            neg_ttl: match opt(neg_ttl, "neg_ttl")? {
                Some(v) => Some(v),
                None => f.neg_ttl,
            },
            stale_ttl: match opt(stale_ttl, "stale_ttl")? {
                Some(v) => Some(v),
                None => f.stale_ttl,
            },
            tags: tags_arg(tags)?,
        })
    }

    fn flight(&self) -> Option<Flight<'_>> {
        match (self.main.as_ref(), self.neg.as_ref()) {
            (Some(m), Some(n)) => Some(Flight::new(m, n)),
            _ => None,
        }
    }

    fn state(&self, kind: u8, key: &Bound<'_, PyAny>, hash: u64, plan: Plan) -> State {
        State {
            kind,
            value: None,
            key: key.clone().unbind(),
            hash,
            plan,
            stamp: 0,
            seq: 0,
            deadline: None,
            stale: None,
            refreshing: false,
            refresh: None,
            fk: None,
        }
    }

    /// A HIT step for `value`; takes the refresh lease when the hit is due for
    /// early refresh (`soft`/`ttl_ms` of the entry).
    fn hit(
        &self,
        key: &Bound<'_, PyAny>,
        hash: u64,
        plan: Plan,
        value: Option<Py<PyAny>>,
        due: bool,
    ) -> State {
        let mut st = self.state(STEP_HIT, key, hash, plan);
        st.value = value;
        if due {
            if let (Some(fl), Ok(kb)) = (self.flight(), key_bytes(key)) {
                if fl.begin_refresh(kb, self.cfg.loader_timeout) {
                    self.loads_done.refreshes.bump();
                    let mut r = self.state(STEP_LOAD, key, hash, st.plan.clone());
                    r.refreshing = true;
                    let fk = fl.key(kb);
                    r.stamp = fl.main_stamp(&fk);
                    r.fk = Some(fk);
                    st.refresh = Some(Box::new(r));
                }
            }
        }
        st
    }

    /// Whether an entry with this soft deadline and TTL is in the last
    /// `refresh_ahead` part of its life.
    pub(crate) fn due(&self, soft: u64, ttl_ms: u32) -> bool {
        ziggurat_cache::refresh_due(soft, ttl_ms, self.refresh_ahead, ziggurat_core::now_ms())
    }

    /// The first step of a miss (L1 already missed): the lease, then L2 and
    /// the cached misses (see `claimed`); without a segment, the read alone.
    /// The step is built once and changed in place from here on: it is large,
    /// and moving it costs more than most of what it does.
    pub(crate) fn begin(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        plan: Plan,
    ) -> PyResult<State> {
        let Some(fl) = self.flight() else {
            let b = self.read_below_with(py, key, kb, hash, plan.stale_ttl.is_some(), None)?;
            return self.begin_from(py, key, hash, plan, b);
        };
        let fk = fl.key(kb);
        // Start loading the key's lines in both segments (stamps and index; in
        // the main one also what a write touches) before the lease's
        // compare-and-set, which prefetches do not wait for.
        if let (Some(m), Some(n)) = (self.main.as_ref(), self.neg.as_ref()) {
            m.prefetch_write(fk.main());
            n.prefetch_read(fk.neg());
            n.prefetch_stamp(fk.neg());
        }
        self.claimed(py, key, kb, hash, plan, &fl, &fk)
    }

    /// The first step of a miss, from what the read below L1 found.
    fn begin_from(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        plan: Plan,
        b: Below,
    ) -> PyResult<State> {
        match b.kind {
            HIT => {
                let due = self.due(b.soft, b.ttl_ms);
                return Ok(self.hit(key, hash, plan, b.value, due));
            }
            NEG => return Ok(self.hit(key, hash, plan, None, false)),
            _ => {}
        }
        let (stamps, keys) = (b.stamps, b.keys);
        let mut st = self.state(STEP_LOAD, key, hash, plan);
        st.stale = self.usable_stale(&st.plan, b);
        st.fk = keys;
        self.lease(py, &mut st, stamps)?;
        Ok(st)
    }

    /// The stale value a read found, if `plan` lets a failed load answer with it.
    fn usable_stale(&self, plan: &Plan, b: Below) -> Option<Py<PyAny>> {
        if b.kind != STALE {
            return None;
        }
        let since = ziggurat_core::now_ms().saturating_sub(b.soft) as f64 / 1000.0;
        if plan.stale_ttl.is_some_and(|s| since < s) {
            b.value
        } else {
            None
        }
    }

    /// Takes the lease for `st`'s key, or finds who holds it.
    fn lease(&self, py: Python<'_>, st: &mut State, snap: Option<u64>) -> PyResult<()> {
        let Some(fl) = self.flight() else {
            st.kind = STEP_LOCAL;
            return Ok(());
        };
        let fk = match st.fk {
            Some(fk) => fk,
            None => *st.fk.insert(fl.key(key_bytes(st.key.bind(py))?)),
        };
        let next = fl.begin(&fk, snap, self.cfg.loader_timeout);
        self.leased(py, st, &fl, &fk, next, false)
    }

    /// Where `st` stands after `fl` answered `next` for its key. `claimed`: the
    /// lease was asked for before a read of the key that found nothing (see
    /// `claimed`), so a WAIT needs no second look and the lines a write touches
    /// are already on their way.
    fn leased(
        &self,
        py: Python<'_>,
        st: &mut State,
        fl: &Flight<'_>,
        fk: &FlightKey,
        next: Next,
        claimed: bool,
    ) -> PyResult<()> {
        match next {
            Next::Load {
                main_stamp,
                recheck,
                took_over,
            } => {
                if took_over {
                    self.loads_done.takeovers.bump();
                }
                if recheck {
                    if let Some(v) = self.find_now(py, st.key.bind(py), st.hash)? {
                        fl.release(fk);
                        st.kind = STEP_HIT;
                        st.value = Some(v);
                        return Ok(());
                    }
                }
                st.kind = STEP_LOAD;
                st.stamp = main_stamp;
                // The value will be written: start loading what the write touches
                // now, so that overlaps the loader instead of waiting after it.
                if let (false, Some(m)) = (claimed, self.main.as_ref()) {
                    m.prefetch_write(fk.main());
                }
            }
            Next::Wait { seq, .. } => {
                // The holder may have stored the value between our read and now.
                if !claimed {
                    if let Some(v) = self.find_now(py, st.key.bind(py), st.hash)? {
                        st.kind = STEP_HIT;
                        st.value = Some(v);
                        return Ok(());
                    }
                }
                st.kind = STEP_WAIT;
                st.seq = seq;
                if st.deadline.is_none() {
                    let t = Duration::from_secs_f64(self.cfg.loader_timeout);
                    st.deadline = Some(Instant::now() + t);
                }
            }
        }
        Ok(())
    }

    /// WAIT: sleeps (without the GIL) until the holder releases the lease, a
    /// slice passes, or the deadline; raises `LoadTimeout` past the deadline.
    pub(crate) fn wait(&self, py: Python<'_>, st: &State) -> PyResult<()> {
        let deadline = st.deadline.unwrap_or_else(Instant::now);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out(py, st));
        }
        self.loads_done.waits.bump();
        if let Some(fl) = self.flight() {
            let key = st.key.bind(py);
            let fk = st
                .fk
                .unwrap_or_else(|| fl.key(key_bytes(key).unwrap_or_default()));
            let seq = st.seq;
            py.detach(|| fl.wait(&fk, seq, left.min(SLICE)));
        }
        Ok(())
    }

    fn timed_out(&self, py: Python<'_>, st: &State) -> PyErr {
        let k = st
            .key
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        LoadTimeout::new_err(format!(
            "another caller's load of {k} did not finish within loader_timeout ({} s)",
            self.cfg.loader_timeout
        ))
    }

    /// The step after a wait: the value if it landed, else the lease again.
    pub(crate) fn after_wait(&self, py: Python<'_>, st: &mut State) -> PyResult<()> {
        if let Some(v) = self.find_now(py, st.key.bind(py), st.hash)? {
            st.kind = STEP_HIT;
            st.value = Some(v);
            return Ok(());
        }
        if st.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(self.timed_out(py, st));
        }
        self.lease(py, st, None)
    }

    /// Gives back the lease a LOAD step holds.
    pub(crate) fn give_back(&self, py: Python<'_>, st: &State) {
        let Some(fl) = self.flight() else {
            return;
        };
        match (st.refreshing, st.fk) {
            (false, Some(fk)) => fl.release(&fk),
            (refreshing, _) => {
                let Ok(kb) = key_bytes(st.key.bind(py)) else {
                    return;
                };
                if refreshing {
                    fl.end_refresh(kb);
                } else {
                    fl.release(&fl.key(kb));
                }
            }
        }
    }

    /// LOAD or LOCAL, the loader returned `value` after `took`: stores it (a
    /// value, or a cached miss for None), then gives the lease back. A value
    /// that cannot be stored is still returned (logged and counted).
    pub(crate) fn done(
        &self,
        py: Python<'_>,
        st: &State,
        value: Bound<'_, PyAny>,
        took: Took,
    ) -> PyResult<Py<PyAny>> {
        self.loads_done.record(took, true);
        let key = st.key.bind(py);
        let held = st.kind != STEP_LOCAL;
        let released = Cell::new(false);
        let stored = if value.is_none() {
            (|| -> PyResult<()> {
                let kb = key_bytes(key)?;
                self.tell_above(py, key, &value, 0.0, &st.plan.tags);
                match st.plan.neg_ttl {
                    Some(nt) => self.store_negative(kb, nt, st.stamp, &st.plan.tags),
                    None => Ok(()),
                }
            })()
        } else {
            let kh = st.fk.map(|k| *k.main());
            self.store_loaded(py, key, st.hash, &st.plan, kh, &value, || {
                if held {
                    self.give_back(py, st);
                    released.set(true);
                }
            })
        };
        if held && !released.get() {
            self.give_back(py, st);
        }
        self.kept_or_reported(py, key, stored)?;
        Ok(value.unbind())
    }

    /// Stores the value a loader returned (not None) with the TTL of `plan`,
    /// jittered, and tells the tier below. `release` gives the lease back: it
    /// runs as soon as the segment holds the value, since waiters find it there
    /// from then on, before the L1 fill; with a tier below it does not run (the
    /// caller gives the lease back once the tier has been told, as the tier
    /// may count on the lease meanwhile).
    #[allow(clippy::too_many_arguments)]
    fn store_loaded(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
        plan: &Plan,
        kh: Option<ziggurat_core::KeyHash>,
        value: &Bound<'_, PyAny>,
        release: impl FnOnce(),
    ) -> PyResult<()> {
        let kb = key_bytes(key)?;
        let ttl = if plan.ttl.is_finite() {
            plan.ttl * (1.0 - self.cfg.jitter * self.jitter_draw())
        } else {
            plan.ttl
        };
        let stale = plan.stale_ttl.unwrap_or(0.0);
        let tier = self.hooks.above.get().is_some();
        self.store(py, key, kb, hash, kh, value, ttl, stale, &plan.tags, || {
            if !tier {
                release();
            }
        })?;
        self.tell_above(py, key, value, ttl, &plan.tags);
        Ok(())
    }

    /// A load's value that cannot be stored (too large, not serializable, no
    /// lock in time) is still returned, just not cached (reported to the write
    /// error hook); anything else propagates.
    fn kept_or_reported(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        stored: PyResult<()>,
    ) -> PyResult<()> {
        if let Err(e) = stored {
            let expected = e.is_instance_of::<ZigguratError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyValueError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyTypeError>(py);
            if !expected {
                return Err(e);
            }
            self.write_failed(py, "store", key, e);
        }
        Ok(())
    }

    /// LOAD or LOCAL, the loader raised after `ns`: gives the lease back; the
    /// stale value to answer with instead, if fail-safe allows one.
    pub(crate) fn failed(&self, py: Python<'_>, st: &State, took: Took) -> Option<Py<PyAny>> {
        self.loads_done.record(took, false);
        if st.kind != STEP_LOCAL {
            self.give_back(py, st);
            self.tell_above(py, st.key.bind(py), &py.None().into_bound(py), -1.0, &[]);
        }
        let stale = st.stale.as_ref()?.clone_ref(py);
        self.loads_done.stale_served.bump();
        Some(stale)
    }

    /// `fetch`, past an L1 hit: drives the steps, calling the loader here.
    pub(crate) fn fetch_miss(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        loader: &Bound<'_, PyAny>,
        plan: Plan,
    ) -> PyResult<Py<PyAny>> {
        let mut st = self.begin(py, key, kb, hash, plan)?;
        loop {
            match st.kind {
                STEP_HIT => {
                    if let Some(r) = st.refresh.take() {
                        self.start_refresh(py, *r, loader)?;
                    }
                    return Ok(st.value.unwrap_or_else(|| py.None()));
                }
                STEP_LOAD => {
                    if let Some(v) = self.below_load(py, &st)? {
                        return Ok(v);
                    }
                    if !loader.is_callable() {
                        self.give_back(py, &st);
                        return Err(pyo3::exceptions::PyTypeError::new_err(
                            "loader must be callable",
                        ));
                    }
                    let t0 = ziggurat_core::ticks();
                    let r = loader.call0().and_then(refuse_awaitable);
                    let took = Took::Ticks(ziggurat_core::ticks().saturating_sub(t0));
                    return self.finish(py, &st, r, took);
                }
                STEP_WAIT => {
                    self.wait(py, &st)?;
                    self.after_wait(py, &mut st)?;
                }
                _ => {
                    // No segment: the Python side shares one load among threads.
                    let hook = self
                        .local
                        .as_ref()
                        .ok_or_else(|| ZigguratError::new_err("the cache has no shared segment"))?;
                    let step = Step::wrap(py, st)?;
                    return hook.call1(py, (step, loader));
                }
            }
        }
    }

    /// The first step of a miss, taking the lease before reading the key: the
    /// read then needs no second look, and the lease's compare-and-set does
    /// not wait for the read's loads from memory (see `Flight::claim`).
    #[allow(clippy::too_many_arguments)]
    fn claimed(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        hash: u64,
        plan: Plan,
        fl: &Flight<'_>,
        fk: &FlightKey,
    ) -> PyResult<State> {
        let next = fl.claim(fk, self.cfg.loader_timeout);
        let allow_stale = plan.stale_ttl.is_some();
        let read = self.read_below_with(py, key, kb, hash, allow_stale, Some(*fk));
        let b = match read {
            Ok(b) => b,
            Err(e) => {
                if matches!(next, Next::Load { .. }) {
                    fl.release(fk);
                }
                return Err(e);
            }
        };
        if matches!(b.kind, HIT | NEG) {
            if matches!(next, Next::Load { .. }) {
                fl.release(fk);
            }
            return self.begin_from(py, key, hash, plan, b);
        }
        // Nothing fresh: this caller loads, or waits for the one who does
        // (keeping a stale value for a failed load, or a load of its own that
        // may follow the wait).
        let mut st = self.state(STEP_LOAD, key, hash, plan);
        st.stale = self.usable_stale(&st.plan, b);
        st.fk = Some(*fk);
        self.leased(py, &mut st, fl, fk, next, true)?;
        Ok(st)
    }

    /// A LOAD step whose loader returned `r` after `took`: the value, or the
    /// stale one fail-safe answers a failure with, or the loader's error.
    fn finish(
        &self,
        py: Python<'_>,
        st: &State,
        r: PyResult<Bound<'_, PyAny>>,
        took: Took,
    ) -> PyResult<Py<PyAny>> {
        match r {
            Ok(v) => self.done(py, st, v, took),
            Err(e) => match self.failed(py, st, took) {
                Some(stale) => {
                    self.write_failed(py, "stale", st.key.bind(py), e);
                    Ok(stale)
                }
                None => Err(e),
            },
        }
    }

    /// The L1 step of `fetch` and `afetch`: the value (None for a cached miss)
    /// and whether it is due for early refresh, or None on an L1 miss.
    fn l1_fetch(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        hash: u64,
    ) -> PyResult<Option<(Py<PyAny>, bool)>> {
        let Some(e) = self.l1_hit(py, key, hash) else {
            return Ok(None);
        };
        if e.negative {
            return Ok(Some((py.None(), false)));
        }
        if self.debug {
            self.check_mutation(py, key, &e)?;
        }
        let v = self.out(py, &e.value)?;
        Ok(Some((v, self.due(e.deadline, e.ttl_ms))))
    }

    /// Hands a refresh step to the Python side, which runs the loader in the
    /// background and finishes the step.
    fn start_refresh(&self, py: Python<'_>, st: State, loader: &Bound<'_, PyAny>) -> PyResult<()> {
        match self.refresh.as_ref() {
            Some(hook) => {
                let step = Step::wrap(py, st)?;
                hook.call1(py, (step, loader))?;
            }
            None => self.give_back(py, &st),
        }
        Ok(())
    }
}

/// The Python-facing half of the steps (`afetch`, refreshes, degraded loads).
impl CacheCore {
    pub(crate) fn py_begin(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        kb: &[u8],
        plan: Plan,
        l1: Option<(Py<PyAny>, bool)>,
        hash: u64,
    ) -> PyResult<Py<Step>> {
        let st = match l1 {
            Some((v, due)) => {
                let v = if v.is_none(py) { None } else { Some(v) };
                self.hit(key, hash, plan, v, due)
            }
            None => self.begin(py, key, kb, hash, plan)?,
        };
        Step::wrap(py, st)
    }

    pub(crate) fn py_refresh_of(&self, py: Python<'_>, step: &Step) -> PyResult<Option<Py<Step>>> {
        // A refresh step is created at most once per hit; hand it out once.
        if !step.finish() {
            return Ok(None);
        }
        match &step.state.refresh {
            Some(r) => Ok(Some(Step::wrap(py, r.successor(py, true))?)),
            None => Ok(None),
        }
    }

    pub(crate) fn py_wait(&self, py: Python<'_>, step: &Step) -> PyResult<()> {
        self.wait(py, &step.state)
    }

    pub(crate) fn py_next(&self, py: Python<'_>, step: &Step) -> PyResult<Py<Step>> {
        let mut st = step.state.successor(py, false);
        self.after_wait(py, &mut st)?;
        Step::wrap(py, st)
    }

    pub(crate) fn py_done(
        &self,
        py: Python<'_>,
        step: &Step,
        value: Bound<'_, PyAny>,
        seconds: f64,
    ) -> PyResult<Py<PyAny>> {
        if !step.finish() {
            return Ok(value.unbind());
        }
        let took = Took::Ns((seconds.max(0.0) * 1e9) as u64);
        self.done(py, &step.state, value, took)
    }

    pub(crate) fn py_failed(&self, py: Python<'_>, step: &Step, seconds: f64) -> Option<Py<PyAny>> {
        if !step.finish() {
            return None;
        }
        self.failed(py, &step.state, Took::Ns((seconds.max(0.0) * 1e9) as u64))
    }

    pub(crate) fn py_abandon(&self, py: Python<'_>, step: &Step) {
        if step.finish() && step.state.kind == STEP_LOAD {
            self.give_back(py, &step.state);
        }
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
        self.fetch_value(py, key, loader, args)
    }

    /// Counters of the loader and the miss path in this process.
    fn loader_counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.loads_done.as_dict(py)
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
                if let Some(hit) = self.l1_fetch(py, key, hash)? {
                    return self.py_begin(py, key, kb, plan, Some(hit), hash);
                }
                self.l1_misses.bump();
                self.py_begin(py, key, kb, plan, None, hash)
            })(),
        )
    }

    /// The refresh a HIT step started (this process took the refresh lease):
    /// run the loader in the background, then `fetch_done` or `fetch_failed`.
    fn fetch_refresh(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Option<Py<Step>>> {
        self.py_refresh_of(py, step.get())
    }

    /// WAIT: sleeps (without the GIL) until the loader holding the key's lease
    /// finishes or a slice passes; raises `LoadTimeout` past `loader_timeout`.
    fn fetch_wait(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<()> {
        self.py_wait(py, step.get())
    }

    /// The step after a wait.
    fn fetch_next(&self, py: Python<'_>, step: &Bound<'_, Step>) -> PyResult<Py<Step>> {
        self.py_next(py, step.get())
    }

    /// LOAD, LOCAL or a refresh: the loader returned `value` after `seconds`;
    /// stores it and gives the lease back; returns `value`.
    fn fetch_done(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        value: &Bound<'_, PyAny>,
        seconds: f64,
    ) -> PyResult<Py<PyAny>> {
        self.py_done(py, step.get(), value.clone(), seconds)
    }

    /// The loader raised after `seconds`: gives the lease back; returns
    /// `(True, stale value)` when fail-safe answers with one, else `(False, None)`.
    fn fetch_failed(
        &self,
        py: Python<'_>,
        step: &Bound<'_, Step>,
        seconds: f64,
    ) -> (bool, Py<PyAny>) {
        match self.py_failed(py, step.get(), seconds) {
            Some(v) => (true, v),
            None => (false, py.None()),
        }
    }

    /// The loading task was cancelled: gives the lease back, storing nothing.
    fn fetch_abandon(&self, py: Python<'_>, step: &Bound<'_, Step>) {
        self.py_abandon(py, step.get())
    }
}

impl CacheCore {
    /// `Cache.fetch`'s body, for the method and for its quick entry (`quick`).
    pub(crate) fn fetch_value<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        loader: &Bound<'py, PyAny>,
        args: FetchArgs<'_, 'py>,
    ) -> PyResult<Py<PyAny>> {
        named(
            py,
            "Cache.fetch",
            (|| {
                let hash = key_hash(key)?;
                let (ttl, neg_ttl, stale_ttl) = (args.ttl, args.neg_ttl, args.stale_ttl);
                if ttl.is_some() || neg_ttl.is_some() || stale_ttl.is_some() {
                    check_ttls([(ttl, "ttl"), (neg_ttl, "neg_ttl"), (stale_ttl, "stale_ttl")])?;
                }
                // An L1 hit is answered here; one due for early refresh also
                // starts the refresh.
                let due_hit =
                    if self.mode == CopyMode::Shared && !self.debug && self.refresh_ahead == 0.0 {
                        match self.l1_shared(py, key, hash) {
                            Quick::Value(v) => return Ok(v),
                            Quick::Negative => return Ok(py.None()),
                            Quick::Miss => None,
                        }
                    } else {
                        match self.l1_fetch(py, key, hash)? {
                            Some((v, false)) => return Ok(v),
                            Some((v, true)) => Some(v),
                            None => None,
                        }
                    };
                let kb = check_key(key)?;
                let plan = self.plan(args)?;
                if let Some(v) = due_hit {
                    let mut st = self.hit(key, hash, plan, Some(v.clone_ref(py)), true);
                    if let Some(r) = st.refresh.take() {
                        self.start_refresh(py, *r, loader)?;
                    }
                    return Ok(v);
                }
                self.l1_misses.bump();
                self.fetch_miss(py, key, kb, hash, loader, plan)
            })(),
        )
    }
}
