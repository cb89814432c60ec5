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
        let n = self.0.load(Ordering::Relaxed) + 1;
        self.0.store(n, Ordering::Relaxed);
        n
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Loader calls, errors, latency and the miss path's events (bumped with the
/// GIL held).
#[derive(Default)]
pub(crate) struct LoadCounts {
    calls: Counter,
    errors: Counter,
    total_ns: Counter,
    max_ns: AtomicU64,
    pub waits: Counter,
    pub takeovers: Counter,
    pub stale_served: Counter,
    pub refreshes: Counter,
}

impl LoadCounts {
    pub(crate) fn record(&self, ns: u64, ok: bool) {
        self.calls.bump();
        if !ok {
            self.errors.bump();
        }
        // Plain loads and stores, like every counter here: a locked add would
        // wait for the miss's segment write to drain, on every load.
        self.total_ns.0.store(self.total_ns.get() + ns, Ordering::Relaxed);
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.store(ns, Ordering::Relaxed);
        }
    }

    pub(crate) fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("calls", self.calls.get())?;
        d.set_item("errors", self.errors.get())?;
        d.set_item("total_ns", self.total_ns.get())?;
        d.set_item("max_ns", self.max_ns.load(Ordering::Relaxed))?;
        d.set_item("waits", self.waits.get())?;
        d.set_item("takeovers", self.takeovers.get())?;
        d.set_item("stale_served", self.stale_served.get())?;
        d.set_item("refreshes", self.refreshes.get())?;
        Ok(d)
    }
}
