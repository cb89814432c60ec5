//! The host's stream reader (`ziggurat.cluster.reader`): ziggurat-cluster's
//! reader, in a thread of its own that runs without the GIL.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use ziggurat_cluster as zc;

use super::tier::ClusterTier;

/// The stream reader of one process for `tier` on `cache` (see the crate):
/// `start` runs it in a thread of its own, `stop` ends it and gives the lease
/// up; a `dedicated` reader (`ziggurat follow`) first `claim`s the host.
#[pyclass(frozen, module = "ziggurat._native")]
pub struct ClusterReader {
    reader: Arc<zc::Reader>,
}

impl Drop for ClusterReader {
    /// A reader dropped without `stop` (its cache collected unclosed) lets its
    /// thread end: the thread holds the segment and a connection.
    fn drop(&mut self) {
        self.reader.halt();
    }
}

#[pymethods]
impl ClusterReader {
    #[new]
    fn new(tier: &ClusterTier, dedicated: bool, block: f64) -> ClusterReader {
        let block = Duration::from_secs_f64(block.clamp(0.01, 60.0));
        ClusterReader {
            reader: zc::Reader::new(tier.tier.clone(), tier.cache.clone(), dedicated, block),
        }
    }

    /// Starts the thread (again, in a child after `fork`).
    fn start(&self) {
        self.reader.start();
    }

    /// Asks the thread to stop after the batch it applies (signal-safe).
    fn halt(&self) {
        self.reader.halt();
    }

    /// Whether `halt` or `stop` was asked for.
    #[getter]
    fn halted(&self) -> bool {
        self.reader.halted()
    }

    /// Stops the thread and gives the lease up (waits for the thread).
    fn stop(&self, py: Python<'_>) {
        py.detach(|| self.reader.stop());
    }

    /// Test hook: the next `n` events this reader applies fail, each to be
    /// read again.
    #[cfg(feature = "failpoints")]
    fn _fail_applies(&self, n: u32) {
        self.reader.fail_applies(n);
    }

    /// Marks this process as the host's dedicated follower: 0, or the pid of
    /// another live one (then nothing changed).
    fn claim(&self) -> u64 {
        self.reader.claim()
    }
}

/// Whether process `pid` lives (the segment's rule for a lease's holder: a
/// process of another user that lives counts).
///
/// >>> import os; cluster_process_alive(os.getpid())
/// True
#[pyfunction]
pub fn cluster_process_alive(pid: u32) -> bool {
    ziggurat_cache::process_alive(pid)
}
