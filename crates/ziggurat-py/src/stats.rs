//! Counters of this process's tiers and of the loader, bumped with the GIL
//! held (a plain load and store suffice).

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A counter bumped with the GIL held (a plain load and store suffice).
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn bump(&self) -> u64 {
        self.add(1)
    }

    /// Adds `n`; returns the new count. A plain load and store, not a locked
    /// add: that would wait for the caller's earlier segment writes to drain.
    #[inline]
    pub(crate) fn add(&self, n: u64) -> u64 {
        let v = self.0.load(Ordering::Relaxed) + n;
        self.0.store(v, Ordering::Relaxed);
        v
    }

    /// Raises the count to `n` if it is below.
    fn raise_to(&self, n: u64) {
        if n > self.get() {
            self.0.store(n, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How long a loader took: measured in ticks (`ziggurat_core::ticks`) by the
/// sync `fetch`, or in nanoseconds by the Python side.
#[derive(Clone, Copy)]
pub(crate) enum Took {
    Ticks(u64),
    Ns(u64),
}

/// The most and the sum of some spans.
#[derive(Default)]
struct Spans {
    total: Counter,
    max: Counter,
}

impl Spans {
    fn add(&self, n: u64) {
        self.total.add(n);
        self.max.raise_to(n);
    }
}

/// Loader calls, errors, latency and the miss path's events (bumped with the
/// GIL held).
#[derive(Default)]
pub(crate) struct LoadCounts {
    calls: Counter,
    errors: Counter,
    /// Spans in ticks, converted to ns when read: converting each would read
    /// the clock, the cost the ticks avoid.
    ticks: Spans,
    ns: Spans,
    pub waits: Counter,
    pub takeovers: Counter,
    pub stale_served: Counter,
    pub refreshes: Counter,
}

impl LoadCounts {
    pub(crate) fn record(&self, took: Took, ok: bool) {
        self.calls.bump();
        if !ok {
            self.errors.bump();
        }
        match took {
            Took::Ticks(t) => self.ticks.add(t),
            Took::Ns(n) => self.ns.add(n),
        }
    }

    pub(crate) fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("calls", self.calls.get())?;
        d.set_item("errors", self.errors.get())?;
        let ns = |t: &Counter| ziggurat_core::ticks_to_ns(t.get());
        d.set_item("total_ns", self.ns.total.get() + ns(&self.ticks.total))?;
        d.set_item("max_ns", self.ns.max.get().max(ns(&self.ticks.max)))?;
        d.set_item("waits", self.waits.get())?;
        d.set_item("takeovers", self.takeovers.get())?;
        d.set_item("stale_served", self.stale_served.get())?;
        d.set_item("refreshes", self.refreshes.get())?;
        Ok(d)
    }
}
