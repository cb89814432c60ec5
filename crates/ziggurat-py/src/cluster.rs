//! The cluster tier (ziggurat-cluster) for `ziggurat.cluster`: the
//! connection, the tier's reads and writes, the stream reader's thread, and
//! the signer and bodies for tools that look at what Redis holds. Each call
//! that waits on Redis releases the GIL. Python keeps its serializer and the
//! wording of errors and warnings. One file per part.

mod bodies;
mod link;
mod reader;
mod signer;
mod tier;
mod writes;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use ziggurat_cluster as zc;

use bodies::*;
use link::{ClusterDown, ClusterLink, ClusterReply};
use reader::{cluster_process_alive, ClusterReader};
use signer::ClusterSigner;
use tier::ClusterTier;
use writes::*;

/// Adds the class, functions and constants to `_native`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    macro_rules! add {
        ($($f:ident),*) => { $(m.add_function(wrap_pyfunction!($f, m)?)?;)* };
    }
    add!(
        cluster_encode,
        cluster_counter_head,
        cluster_decode,
        cluster_body_start,
        cluster_redacted,
        cluster_scrubbed,
        cluster_refusal,
        cluster_timeout_ok,
        cluster_process_alive
    );
    m.add_class::<ClusterSigner>()?;
    m.add_class::<ClusterReader>()?;
    m.add_class::<ClusterLink>()?;
    m.add_class::<ClusterTier>()?;
    m.add("ClusterDown", m.py().get_type::<ClusterDown>())?;
    m.add("ClusterReply", m.py().get_type::<ClusterReply>())?;
    m.add("CLUSTER_READ", zc::READ)?;
    m.add("CLUSTER_WRITE", zc::WRITE)?;
    m.add("CLUSTER_RELEASE", zc::RELEASE)?;
    m.add("CLUSTER_MAC_LEN", zc::MAC_LEN)?;
    m.add("CLUSTER_MIN_SECRET", zc::MIN_SECRET)?;
    m.add("CLUSTER_MAX_TIMEOUT_S", zc::MAX_TIMEOUT_S)?;
    m.add("CLUSTER_MIN_STREAM_LENGTH", zc::MIN_STREAM_LENGTH)?;
    m.add("CLUSTER_RETRY_AFTER_S", zc::RETRY_AFTER.as_secs_f64())?;
    m.add("CLUSTER_MAX_AGE_US", zc::MAX_AGE_US)?;
    m.add("CLUSTER_MAX_SKEW_US", zc::MAX_SKEW_US)?;
    m.add("CLUSTER_ALL", zc::ALL)?;
    m.add("CLUSTER_EXACT_INT", zc::EXACT_INT)?;
    m.add("CLUSTER_STALE_MS", zc::STALE_MS)?;
    m.add("CLUSTER_SCHEMES", PyTuple::new(m.py(), zc::SCHEMES)?)?;
    m.add("CLUSTER_CHECK_MS", zc::CHECK_MS)?;
    m.add("CLUSTER_OWN_PAUSE_US", zc::OWN_PAUSE.as_micros() as u64)?;
    let words = PyDict::new(m.py());
    for (name, i) in zc::words::ALL_WORDS {
        words.set_item(name, i)?;
    }
    m.add("CLUSTER_WORDS", words)?;
    m.add("CLUSTER_FIGURES", zc::words::FIGURES.to_vec())?;
    Ok(())
}
